// Package episodes is the store of Clankie's own notes: what he remembers
// experiencing, written by himself through each lane's bearer.
//
// One store, two bounds (ADR 0158). Unretained notes form one global ring of
// api.EpisodeRingCapacity (128) across every lane, re-derived chronologically
// on every write, so ambient recall stays small and ages. Retained notes are
// never evicted; at most api.RetainedCapacity (1024) are kept across every
// lane, and that is a ceiling that refuses rather than a ring that un-keeps.
// There is one record per memory: retaining does not copy, so forgetting and
// correcting reach every view at once.
//
// Storage is one JSONL file per lane under <root>/captain-episodes/. Every
// mutation rewrites the lane files whose contents changed with
// durable.WriteFile before it returns, so an acknowledged write survives
// kill -9. All episodes (at most 1152 by the two bounds) are held in memory;
// reads never touch the disk.
//
// Memory content (summaries, rooms) never reaches a log line or an error
// message: errors are fault sentences or I/O failures naming files by lane.
package episodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
)

// Dir is the directory under the data root that holds the lane files.
const Dir = "captain-episodes"

// FileName is where a lane's notes live, relative to the data root.
func FileName(lane api.Lane) string { return path.Join(Dir, string(lane)+".jsonl") }

// RecordInfo tells the HTTP layer what a Record did, for its status code and
// its receipt: Created (a new note was written: 201), Replayed (an identical
// retry answered with the stored note: 200), and Evicted (how many unretained
// notes this write pushed out of the ring, possibly the new note itself).
// A correction applied in place has Created and Replayed both false.
type RecordInfo struct {
	Created  bool
	Evicted  int
	Replayed bool
}

// Stats are the catalog's episode figures, kept up to date on every write so
// GET /v1/memory never reads a file. PerLane always names all four lanes.
type Stats struct {
	Total      int
	Unretained int
	Retained   int
	PerLane    map[api.Lane]int
}

// rec is one stored episode with what every write and search needs cached:
// its JSONL line, its card line and its lowered search text. A rec is never
// mutated; a change installs a new rec under the same id.
type rec struct {
	ep           api.Episode
	line         []byte
	card         string
	summaryLower string
	roomLower    string
}

func newRec(ep api.Episode) (*rec, error) {
	line, err := json.Marshal(ep)
	if err != nil {
		return nil, fmt.Errorf("encode episode: %w", err)
	}
	return &rec{
		ep:           ep,
		line:         append(line, '\n'),
		card:         renderLine(ep),
		summaryLower: strings.ToLower(ep.Summary),
		roomLower:    strings.ToLower(ep.Room),
	}, nil
}

// Store holds every episode in memory and owns the lane files. It is safe
// for concurrent use: writes are serialized (disk included) so no update is
// lost, and reads share a read lock.
type Store struct {
	root  *os.Root
	log   *zap.Logger
	now   func() time.Time
	files durable.Disk // makes its writes durable, timing each sync

	mu    sync.RWMutex
	list  []*rec          // every present episode, compareRec order (oldest first)
	byID  map[string]*rec // the same episodes by id
	asked map[string]bool // retain asked by the request that created an id (this process only)
	disk  map[api.Lane][]byte
	stale map[api.Lane]bool // lanes whose file differs from what memory derives
	stats Stats
}

// Refresh does nothing: the store is the only writer of its files, so what
// it holds is always current (PostgreSQL's store, shared by processes,
// reloads here).
func (s *Store) Refresh() error { return nil }

// Open loads <root>/captain-episodes/<lane>.jsonl for the four lanes. It
// creates the directory 0700 (tightening a wider one) and sweeps temporary
// files a killed writer left behind. Loading never rewrites a file: a torn
// or unparsable line is skipped with a content-free warning (lane and line
// number), records written before retained/correctedAt existed load
// unretained, and if more than 128 unretained notes are on disk (a crash
// between two lane writes) only the newest 128 are presented. The next write
// re-derives any such file. now is the clock for correctedAt; nil means
// time.Now. log may be nil. files makes the store's writes durable and
// times their syncs (the service's fsync histogram).
func Open(root *os.Root, log *zap.Logger, now func() time.Time, files durable.Disk) (*Store, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if now == nil {
		now = time.Now
	}
	if err := durable.MkdirAll(root, Dir); err != nil {
		return nil, err
	}
	swept, err := durable.SweepTemp(root, Dir)
	if err != nil {
		return nil, fmt.Errorf("sweep temporary episode files: %w", err)
	}
	s := &Store{
		root:  root,
		log:   log,
		now:   now,
		files: files,
		byID:  make(map[string]*rec),
		asked: make(map[string]bool),
		disk:  make(map[api.Lane][]byte),
		stale: make(map[api.Lane]bool),
	}
	skipped := 0
	var all []*rec
	for _, lane := range api.AllLanes() {
		data, err := s.readLane(lane)
		if err != nil {
			return nil, err
		}
		s.disk[lane] = data
		recs, bad := s.parseLane(lane, data)
		skipped += bad
		all = append(all, recs...)
	}
	slices.SortFunc(all, compareRec)
	kept, hidden := deriveRing(all)
	clear(s.byID)
	for _, r := range kept {
		s.byID[r.ep.EpisodeID] = r
	}
	s.list = kept
	for lane, data := range laneFiles(kept, allLanes()) {
		if !bytes.Equal(data, s.disk[lane]) {
			s.stale[lane] = true
		}
	}
	s.recount()
	s.log.Info("captain episodes loaded",
		zap.Int("episodes", s.stats.Total),
		zap.Int("unretained", s.stats.Unretained),
		zap.Int("retained", s.stats.Retained),
		zap.Int("skippedLines", skipped),
		zap.Int("overRing", len(hidden)),
		zap.Int("sweptTempFiles", swept))
	return s, nil
}

// FromEpisodes is a store over episodes another store keeps (the PostgreSQL
// store), in memory only: it writes no file, so the caller persists what a
// change leaves (All) and may then drop the Store. Records, Patch, Forget,
// the ring, the ceiling and every read behave exactly as in a store opened
// on files. asked holds what the request that created an id asked to keep,
// where known. The episodes are trusted: they were written by a store.
func FromEpisodes(eps []api.Episode, asked map[string]bool, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	s := &Store{log: zap.NewNop(), now: now, byID: make(map[string]*rec, len(eps)), asked: make(map[string]bool, len(asked)),
		disk: map[api.Lane][]byte{}, stale: map[api.Lane]bool{}}
	all := make([]*rec, 0, len(eps))
	for _, ep := range eps {
		if s.byID[ep.EpisodeID] != nil {
			continue
		}
		r, err := newRec(ep)
		if err != nil {
			return nil, err
		}
		s.byID[ep.EpisodeID] = r
		all = append(all, r)
	}
	slices.SortFunc(all, compareRec)
	kept, _ := deriveRing(all)
	clear(s.byID)
	for _, r := range kept {
		s.byID[r.ep.EpisodeID] = r
	}
	s.list = kept
	for id, a := range asked {
		if s.byID[id] != nil {
			s.asked[id] = a
		}
	}
	s.recount()
	return s, nil
}

// All returns every episode the store holds, oldest first, and for each
// id whose creating request is known, whether it asked to keep the note.
func (s *Store) All() ([]api.Episode, map[string]bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.Episode, len(s.list))
	for i, r := range s.list {
		out[i] = detach(r.ep)
	}
	asked := make(map[string]bool, len(s.asked))
	for id, a := range s.asked {
		asked[id] = a
	}
	return out, asked
}

// readLane reads one lane file, tightening its mode to 0600 if it is wider.
// A missing file is an empty lane.
func (s *Store) readLane(lane api.Lane) ([]byte, error) {
	name := FileName(lane)
	st, err := s.root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if st.Mode().Perm()&^durable.FileMode != 0 {
		if err := s.root.Chmod(name, durable.FileMode); err != nil {
			return nil, fmt.Errorf("tighten %s to 0600: %w", name, err)
		}
	}
	data, err := s.root.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// parseLane decodes one lane file's lines. A line that does not decode, or
// decodes into something this store could not have written (another lane, a
// malformed id, an unknown visibility, no date, an id already loaded), costs
// that line only. Warnings carry the lane, line number and a fixed reason,
// never the line.
func (s *Store) parseLane(lane api.Lane, data []byte) (recs []*rec, skipped int) {
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		reason := ""
		var ep api.Episode
		switch {
		case json.Unmarshal(line, &ep) != nil:
			reason = "unparsable"
		case ep.Lane != lane:
			reason = "lane does not match file"
		case !validID(ep.EpisodeID):
			reason = "malformed episode id"
		case checkVisibility(ep.Visibility, false) != nil:
			reason = "unknown visibility"
		case ep.OccurredAt.IsZero():
			reason = "missing occurredAt"
		case s.byID[ep.EpisodeID] != nil:
			reason = "duplicate episode id"
		case !obeysWriteRules(ep):
			reason = "summary or room breaks the write rules"
		}
		var r *rec
		if reason == "" {
			var err error
			if r, err = newRec(ep); err != nil {
				reason = "unencodable"
			}
		}
		if reason != "" {
			skipped++
			s.log.Warn("skipped an episode line",
				zap.String("lane", string(lane)), zap.Int("line", lineNo), zap.String("reason", reason))
			continue
		}
		s.byID[ep.EpisodeID] = r // duplicate detection across lanes; rebuilt after the ring
		recs = append(recs, r)
	}
	return recs, skipped
}

// obeysWriteRules reports whether a loaded note's summary and room are ones
// Record could have written; a hand-edited or foreign line that is not costs
// that line, like a torn one, rather than reaching a card.
func obeysWriteRules(ep api.Episode) bool {
	summary, err := checkSummary(ep.Summary)
	if err != nil || summary != ep.Summary {
		return false
	}
	room, err := checkRoom(ep.Room)
	return err == nil && room == ep.Room
}

// Record is POST /v1/memory/captain-episodes for a bearer whose lane is
// lane: the bearer decides, and a body naming another lane is Forbidden.
//
// Recording only adds. An episodeId the store holds returns the stored note
// with Replayed when the request is the same memory (lane, room, summary,
// effective visibility, occurredAt, provenance, retain), and is a Conflict
// that changes nothing otherwise; never an upsert. A retry after the note
// was corrected or evicted is therefore a Conflict or a fresh write.
//
// retain asks to keep the note; at the 1024 ceiling the note is still written
// (unretained, into the ring) and the answer says retained:false with the
// reason. The ring is re-derived on every write, so a note dated older than
// the newest 128 unretained is evicted by its own write: the answer still
// describes it, RecordInfo.Evicted counts it, and it is gone.
//
// corrects names a note to replace in place (summary, and visibility if
// given; correctedAt stamped; id, lane, room, occurredAt and provenance
// kept). It is allowed when mayCorrect says so; otherwise the request is
// written as a new memory and returns corrected:false with a content-free
// reason that does not say whether the id exists. On an applied correction
// retain:true also keeps the corrected note, subject to the ceiling, and
// retain:false leaves its kept state alone (only the operator releases); an
// episodeId given with an applied correction is not used.
func (s *Store) Record(lane api.Lane, req api.EpisodeRequest) (api.EpisodeResponse, RecordInfo, error) {
	if !validLane(lane) {
		return api.EpisodeResponse{}, RecordInfo{}, fmt.Errorf("episodes: bearer lane %q is not a lane", lane)
	}
	n, err := validateRequest(lane, req)
	if err != nil {
		return api.EpisodeResponse{}, RecordInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	if n.id != "" {
		if old := s.byID[n.id]; old != nil {
			return s.replay(old, n)
		}
	}
	if n.corrects != "" {
		if target := s.byID[n.corrects]; target != nil && mayCorrect(lane, target.ep) {
			return s.correct(target, n)
		}
	}
	return s.create(n)
}

// replay returns a record landing on an existing id.
func (s *Store) replay(old *rec, n note) (api.EpisodeResponse, RecordInfo, error) {
	asked, ok := s.asked[old.ep.EpisodeID]
	if !ok {
		// What the original request asked to keep lives only in memory. After
		// a restart the stored flag no longer tells (a refused keep is stored
		// unkept, an operator may have kept or released it since), so retain
		// alone cannot make a retry a conflict; the answer reports the
		// stored state.
		asked = n.retain
	}
	if !sameRecord(old.ep, asked, n) {
		// One sentence for every reused id, whoever holds it, and never the
		// id: a lane learns nothing of a note it cannot see.
		return api.EpisodeResponse{}, RecordInfo{}, fault.New(fault.Conflict, "episode_conflict",
			"that episodeId already holds a different memory; recording only adds, so nothing was changed")
	}
	resp := api.EpisodeResponse{Episode: detach(old.ep), Retained: old.ep.Retained}
	if n.retain && !old.ep.Retained {
		resp.RetainReason = "not kept: this episode is not on the retained shelf (the shelf was full when it was recorded, or it has been released since)"
	}
	if n.corrects != "" {
		f := false
		resp.Corrected = &f
		resp.CorrectReason = "nothing was corrected: this request repeats an episode already recorded under its episodeId"
	}
	return resp, RecordInfo{Replayed: true}, nil
}

// correct replaces target's summary (and visibility if given) in place.
func (s *Store) correct(target *rec, n note) (api.EpisodeResponse, RecordInfo, error) {
	ep := target.ep
	ep.Summary = n.summary
	if n.visGiven {
		ep.Visibility = n.visibility
	}
	at := s.now().UTC()
	ep.CorrectedAt = &at
	var reason string
	ep.Retained, reason = decideRetain(n.retain, ep.Retained, s.stats.Retained)
	r, err := newRec(ep)
	if err != nil {
		return api.EpisodeResponse{}, RecordInfo{}, err
	}
	evicted, err := s.commit(s.replaced(target, r), r, "")
	if err != nil {
		return api.EpisodeResponse{}, RecordInfo{}, err
	}
	t := true
	return api.EpisodeResponse{Episode: detach(ep), Retained: ep.Retained, RetainReason: reason, Corrected: &t},
		RecordInfo{Evicted: len(evicted)}, nil
}

// create writes a new note (a plain record or a correction that could not
// reach its target).
func (s *Store) create(n note) (api.EpisodeResponse, RecordInfo, error) {
	id := n.id
	if id == "" {
		id = newID(func(id string) bool { return s.byID[id] != nil })
	}
	retained, reason := decideRetain(n.retain, false, s.stats.Retained)
	ep := api.Episode{
		EpisodeID:  id,
		Lane:       n.lane,
		Room:       n.room,
		Summary:    n.summary,
		Visibility: n.visibility,
		OccurredAt: n.occurredAt,
		Provenance: n.provenance,
		Retained:   retained,
	}
	r, err := newRec(ep)
	if err != nil {
		return api.EpisodeResponse{}, RecordInfo{}, err
	}
	i, _ := slices.BinarySearchFunc(s.list, r, compareRec)
	next := make([]*rec, 0, len(s.list)+1)
	next = append(append(append(next, s.list[:i]...), r), s.list[i:]...)
	evicted, err := s.commit(next, r, "")
	if err != nil {
		return api.EpisodeResponse{}, RecordInfo{}, err
	}
	if !slices.Contains(evicted, r) {
		s.asked[id] = n.retain
	}
	resp := api.EpisodeResponse{Episode: ep, Retained: retained, RetainReason: reason}
	if n.corrects != "" {
		f := false
		resp.Corrected = &f
		resp.CorrectReason = "nothing was corrected: the named episode does not exist or this lane may not correct it; the note was recorded as a new memory"
	}
	return resp, RecordInfo{Created: true, Evicted: len(evicted)}, nil
}

// Patch is the operator's edit (the caller checks the bearer). summary and
// visibility replace the note's and stamp correctedAt when they change it;
// retained true keeps the note (a Conflict naming 1024 at the ceiling, and
// then nothing in the patch is applied); retained false releases it into the
// ring, which is re-derived at once: a released note older than the newest
// 128 unretained is evicted by its own release, and the returned episode
// describes it as it was last. An unknown id is NotFound.
func (s *Store) Patch(id string, p api.EpisodePatch) (api.Episode, error) {
	summary, err := validatePatch(p)
	if err != nil {
		return api.Episode{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.byID[id]
	if old == nil {
		return api.Episode{}, notFound()
	}
	ep := old.ep
	edited := false
	if p.Summary != nil && summary != ep.Summary {
		ep.Summary, edited = summary, true
	}
	if p.Visibility != nil && *p.Visibility != ep.Visibility {
		ep.Visibility, edited = *p.Visibility, true
	}
	if p.Retained != nil && *p.Retained != ep.Retained {
		if *p.Retained && shelfFull(s.stats.Retained) {
			return api.Episode{}, retainConflict()
		}
		ep.Retained = *p.Retained
	} else if !edited {
		return detach(old.ep), nil // nothing changes: no write
	}
	if edited {
		at := s.now().UTC()
		ep.CorrectedAt = &at
	}
	r, err := newRec(ep)
	if err != nil {
		return api.Episode{}, err
	}
	if _, err := s.commit(s.replaced(old, r), r, ""); err != nil {
		return api.Episode{}, err
	}
	return detach(ep), nil
}

// Forget removes a note by id alone, from whichever lane holds it, from the
// recent and kept views at once (operator only; the caller checks). An
// unknown id is NotFound.
func (s *Store) Forget(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.byID[id]
	if old == nil {
		return notFound()
	}
	i := s.index(old)
	next := make([]*rec, 0, len(s.list))
	next = append(append(next, s.list[:i]...), s.list[i+1:]...)
	_, err := s.commit(next, nil, id)
	return err
}

// Get returns one episode record by id. It is for operator surfaces only:
// lane reads get cards, never records, because records carry provenance.
func (s *Store) Get(id string) (api.Episode, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.byID[id]
	if r == nil {
		return api.Episode{}, false
	}
	return detach(r.ep), true
}

// detach copies the one pointer an Episode holds, so no caller can reach
// into a stored record.
func detach(ep api.Episode) api.Episode {
	if ep.CorrectedAt != nil {
		at := *ep.CorrectedAt
		ep.CorrectedAt = &at
	}
	return ep
}

func notFound() error {
	return fault.New(fault.NotFound, "episode_not_found", "no episode has that id")
}

// Card is the ambient card for lane: the newest 8 notes the lane may see.
// An empty card is "" with count 0.
func (s *Store) Card(lane api.Lane) api.Card {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return renderCard(cardHeader, s.newest(lane, nil, api.EpisodeCardSize))
}

// VoiceNotes are the notes of the voice briefing: the newest 8 visible to
// the discord_voice lane (shareable notes of every lane), newest first, as
// records so the briefing can quote each summary and room as data. Empty
// when there are none, so the briefing omits them.
func (s *Store) VoiceNotes() []api.Episode {
	s.mu.RLock()
	defer s.mu.RUnlock()
	recs := s.newest(api.LaneDiscordVoice, nil, api.EpisodeCardSize)
	out := make([]api.Episode, len(recs))
	for i, r := range recs {
		out[i] = detach(r.ep)
	}
	return out
}

// Search is recall past the card: every whitespace-separated term of q must
// appear, case-insensitively, in a note's summary or room; matches come
// newest first under the same visibility filter as the card. limit 0 means
// 8; above 32 (or negative) is Invalid. It returns a card, never records.
// A blank q matches every visible note.
func (s *Store) Search(lane api.Lane, q string, limit int) (api.Card, error) {
	n, err := searchLimit(limit)
	if err != nil {
		return api.Card{}, err
	}
	terms, err := searchTerms(q)
	if err != nil {
		return api.Card{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return renderCard(searchHeader, s.newest(lane, terms, n)), nil
}

// newest walks the store newest first and collects up to n notes visible to
// lane that match terms.
func (s *Store) newest(lane api.Lane, terms []string, n int) []*rec {
	var out []*rec
	for i := len(s.list) - 1; i >= 0 && len(out) < n; i-- {
		r := s.list[i]
		if visibleTo(lane, r.ep) && matches(r, terms) {
			out = append(out, r)
		}
	}
	return out
}

// Stats returns the catalog figures from memory.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := s.stats
	out.PerLane = make(map[api.Lane]int, len(api.AllLanes()))
	for k, v := range s.stats.PerLane {
		out.PerLane[k] = v
	}
	return out
}

// index finds r in s.list by its (occurredAt, id) key.
func (s *Store) index(r *rec) int {
	i, ok := slices.BinarySearchFunc(s.list, r, compareRec)
	if !ok {
		panic("episodes: indexed episode missing from the ordered list")
	}
	return i
}

// replaced is s.list with old swapped for r (same id and occurredAt, so the
// same position).
func (s *Store) replaced(old, r *rec) []*rec {
	next := slices.Clone(s.list)
	next[s.index(old)] = r
	return next
}

// commit re-derives the ring over next, writes every lane file whose
// contents changed (the lanes of put, drop and the evicted notes, plus any
// lane whose file memory disagrees with), and only then installs next in
// memory. On a write failure memory keeps the previous state and every lane
// involved is marked stale, so the next write re-derives it from memory.
func (s *Store) commit(next []*rec, put *rec, drop string) (evicted []*rec, err error) {
	kept, evicted := deriveRing(next)
	dirty := make(map[api.Lane]bool, len(api.AllLanes()))
	for lane := range s.stale {
		dirty[lane] = true
	}
	if put != nil {
		dirty[put.ep.Lane] = true
	}
	if drop != "" {
		dirty[s.byID[drop].ep.Lane] = true
	}
	for _, r := range evicted {
		dirty[r.ep.Lane] = true
	}
	files := map[api.Lane][]byte{}
	if s.root != nil { // a store in memory only (FromEpisodes) writes no file
		files = laneFiles(kept, dirty)
	}
	for _, lane := range writeOrder(put) {
		data, ok := files[lane]
		if !ok || bytes.Equal(data, s.disk[lane]) {
			continue
		}
		if err := s.files.WriteFile(s.root, FileName(lane), data); err != nil {
			for l := range dirty {
				s.stale[l] = true
			}
			return nil, fmt.Errorf("write episodes of lane %s: %w", lane, err)
		}
		s.disk[lane] = data
	}
	for lane := range dirty {
		delete(s.stale, lane)
	}

	s.list = kept
	if drop != "" {
		delete(s.byID, drop)
		delete(s.asked, drop)
	}
	if put != nil {
		s.byID[put.ep.EpisodeID] = put
	}
	for _, r := range evicted {
		delete(s.byID, r.ep.EpisodeID)
		delete(s.asked, r.ep.EpisodeID)
	}
	s.recount()
	return evicted, nil
}

// writeOrder writes the lane that gains a note before the lanes that lose
// one to the ring. A kill -9 between two renames then leaves one note too
// many on disk (load shows the newest 128) rather than one acknowledged
// note too few.
func writeOrder(put *rec) []api.Lane {
	if put == nil {
		return api.AllLanes()
	}
	order := []api.Lane{put.ep.Lane}
	for _, l := range api.AllLanes() {
		if l != put.ep.Lane {
			order = append(order, l)
		}
	}
	return order
}

// recount refreshes the catalog figures from s.list.
func (s *Store) recount() {
	st := Stats{PerLane: make(map[api.Lane]int, len(api.AllLanes()))}
	for _, lane := range api.AllLanes() {
		st.PerLane[lane] = 0
	}
	for _, r := range s.list {
		st.Total++
		if r.ep.Retained {
			st.Retained++
		} else {
			st.Unretained++
		}
		st.PerLane[r.ep.Lane]++
	}
	s.stats = st
}

func allLanes() map[api.Lane]bool {
	m := make(map[api.Lane]bool, len(api.AllLanes()))
	for _, l := range api.AllLanes() {
		m[l] = true
	}
	return m
}

// laneFiles renders the file contents of the lanes in want from list: each
// lane's notes oldest first, one JSON object per line.
func laneFiles(list []*rec, want map[api.Lane]bool) map[api.Lane][]byte {
	size := make(map[api.Lane]int, len(want))
	for _, r := range list {
		if want[r.ep.Lane] {
			size[r.ep.Lane] += len(r.line)
		}
	}
	files := make(map[api.Lane][]byte, len(want))
	for lane := range want {
		files[lane] = make([]byte, 0, size[lane])
	}
	for _, r := range list {
		if want[r.ep.Lane] {
			files[r.ep.Lane] = append(files[r.ep.Lane], r.line...)
		}
	}
	return files
}
