package personfiles

import (
	"context"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// Each calls fn with a copy of every person who has facts, in name order:
// what a migration to another store copies.
func (s *Store) Each(_ context.Context, fn func(*people.Person) error) error {
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
			if len(p.Facts) == 0 {
				continue
			}
			if err := fn(p); err != nil {
				return err
			}
		}
		cursor = names[len(names)-1]
	}
}

// person returns a copy of a person's state, read under their lock.
func (s *Store) person(name string, subject api.Subject) (*people.Person, error) {
	s.cp.RLock()
	defer s.cp.RUnlock()
	defer s.lock(name)()
	pf, err := s.load(name, subject, borrowed)
	if err != nil {
		return nil, err
	}
	return pf.Person.Clone(), nil
}
