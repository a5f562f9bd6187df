package episodes

import (
	"encoding/json"
	"slices"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// MergeEpisodes is a migration's rule: the notes of have, with every note
// of add put in (a note with the same id replaced by add's). It refuses a
// merge that would keep more than the retained ceiling.
func MergeEpisodes(have, add []api.Episode) ([]api.Episode, error) {
	byID := make(map[string]int, len(have)+len(add))
	out := slices.Clone(have)
	for i, ep := range out {
		byID[ep.EpisodeID] = i
	}
	for _, ep := range add {
		if i, ok := byID[ep.EpisodeID]; ok {
			out[i] = ep
			continue
		}
		byID[ep.EpisodeID] = len(out)
		out = append(out, ep)
	}
	kept := 0
	for _, ep := range out {
		if ep.Retained {
			kept++
		}
	}
	if kept > api.RetainedCapacity {
		return nil, fault.New(fault.Conflict, "retained_at_capacity", "the merged store would keep %d retained episodes, over the ceiling of %d; release some first", kept, api.RetainedCapacity)
	}
	return out, nil
}

// Changed counts the notes of after that are new or differ from before,
// and those of before that after no longer holds.
func Changed(before, after []api.Episode) int {
	old := make(map[string][]byte, len(before))
	for _, ep := range before {
		b, _ := json.Marshal(ep)
		old[ep.EpisodeID] = b
	}
	n := 0
	for _, ep := range after {
		b, _ := json.Marshal(ep)
		if prev, ok := old[ep.EpisodeID]; !ok || string(prev) != string(b) {
			n++
		}
		delete(old, ep.EpisodeID)
	}
	return n + len(old)
}

// Merge puts eps into the store (see MergeEpisodes), re-derives the ring
// and writes every lane file that changed; it returns how many notes
// changed (Changed). dryRun writes nothing.
func (s *Store) Merge(eps []api.Episode, dryRun bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := make([]api.Episode, len(s.list))
	for i, r := range s.list {
		before[i] = r.ep
	}
	merged, err := MergeEpisodes(before, eps)
	if err != nil {
		return 0, err
	}
	next := make([]*rec, 0, len(merged))
	for _, ep := range merged {
		r, err := newRec(ep)
		if err != nil {
			return 0, err
		}
		next = append(next, r)
	}
	slices.SortFunc(next, compareRec)
	kept, _ := deriveRing(next)
	after := make([]api.Episode, len(kept))
	for i, r := range kept {
		after[i] = r.ep
	}
	n := Changed(before, after)
	if n == 0 || dryRun {
		return n, nil
	}
	for _, lane := range api.AllLanes() {
		s.stale[lane] = true // rewrite every lane that differs
	}
	if _, err := s.commit(next, nil, ""); err != nil {
		return 0, err
	}
	clear(s.byID)
	for _, r := range s.list {
		s.byID[r.ep.EpisodeID] = r
	}
	return n, nil
}
