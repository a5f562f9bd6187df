package personfiles

import (
	"context"
	"errors"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// The file engine's side of people.Storer: a person's state under the
// person's lock, a change made durable by the journal and the person's log,
// reads from the cache. It knows no rule; people.Memory decides every
// change.

// Update runs decide on subject's person under the person's lock and
// commits its change: Append by the journal and an append to the person's
// log (change), Purge by a rewrite of the log and a blanking of the
// person's older journal records (purge), an Erase by removing the
// person's files (erase).
func (s *Store) Update(_ context.Context, subject api.Subject, way people.Commit, decide func(*people.Person, time.Time) (*people.Change, error)) error {
	if way == people.Purge {
		return s.updateExclusive(subject, decide)
	}
	if err := s.checkpointIfFull(); err != nil {
		return err
	}
	name := FileName(subject)
	s.cp.RLock()
	defer s.cp.RUnlock()
	defer s.lock(name)()
	pf, err := s.load(name, subject, taken)
	if err != nil {
		return err
	}
	ch, err := decide(&pf.Person, s.now().UTC())
	if err != nil || ch == nil {
		if pf.size > 0 {
			s.keep(name, pf) // unchanged
		}
		return err
	}
	if ch.Erase {
		s.keep(name, pf)
		return errEraseNeedsPurge
	}
	return s.change(name, pf, ch)
}

// errEraseNeedsPurge is a caller's mistake: forgetting a person must leave
// nothing on disk.
var errEraseNeedsPurge = errors.New("people: an erase is committed only by Purge")

// updateExclusive is Update for a change that rewrites the person's log and
// then blanks their journal records: it holds the checkpoint lock, then the
// person's own lock, the one order every such change takes them in.
func (s *Store) updateExclusive(subject api.Subject, decide func(*people.Person, time.Time) (*people.Change, error)) error {
	name := FileName(subject)
	s.cp.Lock()
	defer s.cp.Unlock()
	defer s.lock(name)()
	pf, err := s.load(name, subject, copied)
	if err != nil {
		return err
	}
	ch, err := decide(&pf.Person, s.now().UTC())
	if err != nil || ch == nil {
		return err
	}
	if ch.Erase {
		return s.erase(name, subject)
	}
	return s.purge(name, pf, ch)
}

// View runs read on the person's facts in place: the cached state under
// the person's lock, or their log read.
func (s *Store) View(_ context.Context, subject api.Subject, read func([]api.Fact, time.Time)) error {
	now := s.now()
	name := FileName(subject)
	s.cp.RLock()
	defer s.cp.RUnlock()
	defer s.lock(name)()
	pf, err := s.load(name, subject, viewed)
	if err != nil {
		return err
	}
	read(pf.Facts, now)
	return nil
}

// purge applies a change that must leave nothing of what it removes or
// replaces on disk (a forget, an edit): after the journal line, the person's
// log is rewritten durably from the new state, and the person's older
// journal records, which still hold the old content, are blanked. No
// checkpoint: its catalog write grows with the number of people. pf is the
// caller's own copy of the state (load copied), which purge changes and
// the cache then owns. The caller holds cp (write) and the person's lock.
func (s *Store) purge(name string, pf *personFile, ch *people.Change) error {
	pf.apply(ch)
	line, err := encodeChange(ch)
	if err != nil {
		return err
	}
	if err := s.commit(name, pf, line); err != nil {
		s.cache.drop(name)
		return err
	}
	if err := s.rewrite(name, pf); err != nil {
		s.cache.drop(name)
		return err
	}
	s.markDirty(name, false)
	s.setCount(name, pf.Subject, len(pf.Facts))
	if pf.size > 0 {
		s.keep(name, pf)
	} else {
		s.cache.drop(name)
	}
	return s.redact(name)
}

// erase removes everything kept about a person, the idempotency records
// included. The journal line comes first, so a crash before the files are
// gone finishes the forgetting at the next start; once they are gone,
// every older journal record of the person is blanked. The caller holds cp
// (write) and the person's lock.
func (s *Store) erase(name string, subject api.Subject) error {
	line, err := encodeJournal(journalLine{Person: name, Subject: subject, ForgetPerson: true})
	if err != nil {
		return err
	}
	if err := s.j.Append(line); err != nil {
		return err
	}
	if err := s.removePersonFiles(name, subject); err != nil {
		return err
	}
	s.setCount(name, subject, 0)
	s.mu.Lock()
	delete(s.dirty, name)
	s.mu.Unlock()
	return s.redact(name)
}

// redact blanks a person's journal records but the newest, and what an
// older generation left where the current one ends (see journal.Blank),
// once their log is durable without the content those records hold. The
// newest record stays: it holds no forgotten content, and it brings the
// catalog's count level at a replay. Blanking rather than checkpointing
// leaves nothing of a forgotten body in the journal without a catalog
// write (which grows with the number of people). The caller holds cp
// (write) and the person's lock.
func (s *Store) redact(name string) error {
	_, err := s.j.Blank(personRecords(name), true)
	return err
}

// CheckCursor refuses a List cursor that is not a person's file name, the
// key both stores page by: people.ErrUnknownCursor.
func CheckCursor(cursor string) error {
	if cursor != "" && !IsPersonFile(cursor) {
		return people.ErrUnknownCursor
	}
	return nil
}

// List returns one page of people with their fact counts, ordered by file
// name; the cursor is the last name of the previous page.
func (s *Store) List(_ context.Context, cursor string, limit int) (api.PeopleResponse, error) {
	if err := CheckCursor(cursor); err != nil {
		return api.PeopleResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := api.PeopleResponse{SchemaVersion: api.SchemaVersion, Total: s.idx.len(), People: []api.PersonSummary{}}
	last := ""
	s.idx.each(cursor, func(key []byte, count int) bool {
		if len(resp.People) == limit {
			resp.NextCursor = last
			return false
		}
		last = nameOf(key)
		resp.People = append(resp.People, api.PersonSummary{Subject: s.subjectOf(last), Facts: count})
		return true
	})
	return resp, nil
}
