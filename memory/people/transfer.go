package people

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/clankie/clankie/api"
)

// Each calls fn with a copy of every person who has facts, in name order:
// what a migration to another store copies.
func (s *Store) Each(fn func(*Person) error) error {
	// A page of names at a time, so a migration of 100,000 people holds
	// no list of them all.
	for cursor := ""; ; {
		var names []string
		s.mu.Lock()
		s.idx.each(cursor, func(key []byte, _ int) bool {
			names = append(names, nameOf(key))
			return len(names) < 512
		})
		subjects := make([]api.Subject, len(names))
		for i, n := range names {
			subjects[i] = s.subjectOf(n)
		}
		s.mu.Unlock()
		if len(names) == 0 {
			return nil
		}
		for i, name := range names {
			p, err := s.person(name, subjects[i])
			if err != nil {
				return err
			}
			if p.Len() == 0 {
				continue
			}
			if err := fn(p); err != nil {
				return err
			}
		}
		cursor = names[len(names)-1]
	}
}

func (s *Store) person(name string, subject api.Subject) (*Person, error) {
	s.cp.RLock()
	defer s.cp.RUnlock()
	defer s.lock(name)()
	pf, err := s.read(name, subject)
	if err != nil {
		return nil, err
	}
	return &Person{pf: &personFile{SchemaVersion: pf.SchemaVersion, Subject: pf.Subject, seq: pf.seq,
		Facts: slices.Clone(pf.Facts), Proposals: slices.Clone(pf.Proposals)}}, nil
}

// Put makes a person's whole state p's (a migration from another store),
// durably, and reports whether anything changed; dryRun only reports.
func (s *Store) Put(p *Person, dryRun bool) (bool, error) {
	subject := p.Subject()
	if err := ValidSubject(subject); err != nil {
		return false, err
	}
	name, pf, release, err := s.readExclusive(subject)
	if err != nil {
		return false, err
	}
	defer release()
	if SameState(&Person{pf: pf}, p) {
		return false, nil
	}
	if dryRun {
		return true, nil
	}
	subj := subject
	reset := []logLine{{SchemaVersion: logVersion, Subject: &subj}}
	for i := range p.pf.Facts {
		reset = append(reset, logLine{Fact: &p.pf.Facts[i]})
	}
	for i := range p.pf.Proposals {
		reset = append(reset, logLine{Proposal: &p.pf.Proposals[i]})
	}
	if len(reset) == 1 {
		reset = append(reset, logLine{}) // a reset needs a line after its header
	}
	return true, s.purge(name, pf, &logLine{Seq: max(pf.seq, p.pf.seq) + 1, Reset: reset})
}

// SameState reports whether two people hold the same facts and idempotency
// records (their change counters aside).
func SameState(a, b *Person) bool {
	enc := func(p *Person) []byte {
		facts := p.pf.Facts
		if facts == nil {
			facts = []api.Fact{}
		}
		props := p.pf.Proposals
		if props == nil {
			props = []proposalRecord{}
		}
		out, _ := json.Marshal(personState{Subject: p.pf.Subject, Facts: facts, Proposals: props})
		return out
	}
	return bytes.Equal(enc(a), enc(b))
}
