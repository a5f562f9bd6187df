package people

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// mapStore is the smallest Storer: people in a map, each change applied
// with Person.Apply. That it fits here, and that Memory keeps every rule
// over it, is the claim that a store only persists.
type mapStore struct {
	mu      sync.Mutex
	now     time.Time
	people  map[api.Subject]*Person
	commits []Commit // how each committed change was asked to be made durable
	decided int      // decide calls
}

func newMapStore() *mapStore {
	return &mapStore{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), people: map[api.Subject]*Person{}}
}

func (s *mapStore) Update(_ context.Context, subject api.Subject, way Commit, decide func(*Person, time.Time) (*Change, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.people[subject]
	if !ok {
		p = NewPerson(subject)
	}
	before := p.Clone()
	s.decided++
	ch, err := decide(p, s.now)
	if err != nil || ch == nil {
		return err
	}
	if !SameState(p, before) {
		return errors.New("decide changed the person it was given")
	}
	p = p.Clone()
	p.Apply(ch)
	if ch.Erase {
		delete(s.people, subject)
	} else {
		s.people[subject] = p
	}
	s.commits = append(s.commits, way)
	return nil
}

func (s *mapStore) View(_ context.Context, subject api.Subject, read func([]api.Fact, time.Time)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var facts []api.Fact
	if p, ok := s.people[subject]; ok {
		facts = p.Facts
	}
	read(facts, s.now)
	return nil
}

func (s *mapStore) List(context.Context, string, int) (api.PeopleResponse, error) {
	return api.PeopleResponse{}, nil
}
func (s *mapStore) Each(context.Context, func(*Person) error) error { return nil }
func (s *mapStore) Refresh(context.Context) error                   { return nil }
func (s *mapStore) Stats() Stats                                    { return Stats{} }
func (s *mapStore) Metrics() Metrics                                { return Metrics{} }
func (s *mapStore) Ready(context.Context) error                     { return nil }

var (
	member = api.Principal{Lane: api.LaneDiscordPresence}
	ana    = api.Subject{GuildID: "100", UserID: "200"}
)

func proposal(id, proposer, body string) api.ProposalRequest {
	return api.ProposalRequest{SchemaVersion: 1, ProposalID: id, Fact: api.FactInput{
		Subject: ana, Kind: api.KindPersonFact, Body: body,
		Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9,
		Provenance: api.Provenance{SourceEventID: id, ProposerUserID: proposer, ChannelID: "300"},
	}}
}

// Every operation runs its rule once, under one Update, committed the way
// its content demands: a proposal appends, a forget, an edit and forgetting
// a person purge. Refusals commit nothing.
func TestMemoryOrchestratesEachOperationOnceOverAStorer(t *testing.T) {
	ctx := context.Background()
	st := newMapStore()
	m := New(st)
	room := RecallQuery{Who: member, RecallQuery: api.RecallQuery{ChannelID: "300"}}

	type step struct {
		name    string
		do      func() error
		commits []Commit // what the step commits
		decided int      // rule runs it costs
		facts   int      // what a recall in the room shows after
	}
	var first api.Fact
	steps := []step{
		{"propose", func() error {
			r, _, err := m.Propose(ctx, member, proposal("p1", "200", "plays bass"))
			first = *r.Fact
			return err
		}, []Commit{Append}, 1, 1},
		{"the same proposal again is a replay", func() error {
			r, _, err := m.Propose(ctx, member, proposal("p1", "200", "plays bass"))
			if err == nil && !r.Replayed {
				return errors.New("not a replay")
			}
			return err
		}, nil, 1, 1},
		{"its id for another fact is a conflict", func() error {
			_, _, err := m.Propose(ctx, member, proposal("p1", "200", "plays drums"))
			if f, ok := fault.As(err); !ok || f.Kind != fault.Conflict {
				return errors.New("no conflict")
			}
			return nil
		}, nil, 1, 1},
		{"an invalid proposal never reaches the store", func() error {
			if _, _, err := m.Propose(ctx, member, proposal("p2", "200", "   ")); err == nil {
				return errors.New("an empty body was accepted")
			}
			return nil
		}, nil, 0, 1},
		{"an edit purges", func() error {
			body := "plays double bass"
			_, err := m.Edit(ctx, ana, first.FactID, api.FactPatch{Body: &body})
			return err
		}, []Commit{Purge}, 1, 1},
		{"a stranger may not forget it", func() error {
			_, err := m.Forget(ctx, member, ana, first.FactID, "999")
			if f, ok := fault.As(err); !ok || f.Kind != fault.Forbidden {
				return errors.New("a stranger's forget was not refused")
			}
			return nil
		}, nil, 1, 1},
		{"the subject forgets it, which purges", func() error {
			_, err := m.Forget(ctx, member, ana, first.FactID, "200")
			return err
		}, []Commit{Purge}, 1, 0},
		{"forgetting the person purges and erases", func() error {
			_, _, err := m.Propose(ctx, member, proposal("p3", "200", "likes tea"))
			if err != nil {
				return err
			}
			ids, err := m.ForgetPerson(ctx, ana)
			if err == nil && len(ids) != 1 {
				return errors.New("forget-person named the wrong facts")
			}
			return err
		}, []Commit{Append, Purge}, 2, 0},
	}
	for _, s := range steps {
		commits, decided := len(st.commits), st.decided
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := st.commits[commits:]; !slices.Equal(got, s.commits) {
			t.Errorf("%s: committed %v, want %v", s.name, got, s.commits)
		}
		if got := st.decided - decided; got != s.decided {
			t.Errorf("%s: the rule ran %d times, want %d", s.name, got, s.decided)
		}
		r, err := m.Recall(ctx, ana, room)
		if err != nil || r.Total != s.facts {
			t.Errorf("%s: recall shows %d facts (%v), want %d", s.name, r.Total, err, s.facts)
		}
	}
	if _, ok := st.people[ana]; ok {
		t.Error("the person is still kept after forget-person")
	}
}
