package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

// People is the person-fact store in PostgreSQL: one row per person holding
// people.Person's state, changed only under that row's lock by the rules of
// memory/people. It returns exactly what people.Store returns.
type People struct {
	db *DB

	mu    sync.Mutex
	stats people.Stats // as of the last Refresh
}

// People returns the person-fact store.
func (db *DB) People() *People { return &People{db: db} }

// lockPerson loads a person's state and holds their row's lock until the
// transaction ends, creating the row when the person is new (a concurrent
// creator waits on the same lock). A transaction that writes nothing rolls
// the new row back with it.
func lockPerson(ctx context.Context, tx pgx.Tx, subject api.Subject) (*people.Person, error) {
	name := people.FileName(subject)
	var state []byte
	err := tx.QueryRow(ctx, "SELECT state FROM people WHERE name = $1 FOR UPDATE", name).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err = tx.Exec(ctx, `INSERT INTO people (name, guild_id, user_id, facts, state) VALUES ($1, $2, $3, 0, '{}')
			ON CONFLICT (name) DO NOTHING`, name, subject.GuildID, subject.UserID); err != nil {
			return nil, err
		}
		err = tx.QueryRow(ctx, "SELECT state FROM people WHERE name = $1 FOR UPDATE", name).Scan(&state)
	}
	if err != nil {
		return nil, err
	}
	if string(state) == "{}" {
		state = nil
	}
	return people.DecodePerson(subject, state)
}

// savePerson writes a changed person back; one with no facts left keeps its
// row (its idempotency records still answer retries) but is not counted.
func savePerson(ctx context.Context, tx pgx.Tx, p *people.Person) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE people SET state = $2, facts = $3, updated_at = now() WHERE name = $1",
		people.FileName(p.Subject()), b, p.Len())
	return err
}

// queryRower is a pool or a transaction.
type queryRower interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// dbClock reads the database's clock. Every time a person's facts are
// ordered or expired by comes from it, never from the host's: two services
// on one database with skewed clocks then agree on which fact is older and
// which has expired. clock_timestamp(), not now(): now() is when the
// transaction began, and read under a person's lock the clock must follow
// commit order.
func dbClock(ctx context.Context, q queryRower) (time.Time, error) {
	var t time.Time
	if err := q.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// readPerson returns a person's facts without a lock (a read sees the last
// committed state) and the database's clock as of the read, which decides
// what has expired.
func readPerson(ctx context.Context, q queryRower, subject api.Subject) (*people.Person, time.Time, error) {
	var state []byte
	var now time.Time
	err := q.QueryRow(ctx, "SELECT clock_timestamp(), (SELECT state FROM people WHERE name = $1)", people.FileName(subject)).Scan(&now, &state)
	if err != nil {
		return nil, time.Time{}, err
	}
	now = now.UTC()
	if state == nil || string(state) == "{}" {
		return people.NewPerson(subject), now, nil
	}
	p, err := people.DecodePerson(subject, state)
	return p, now, err
}

// Propose applies a proposal on arrival (see people.Store.Propose).
func (s *People) Propose(who api.Principal, req api.ProposalRequest) (api.ProposalResponse, people.ProposeInfo, error) {
	var resp api.ProposalResponse
	var info people.ProposeInfo
	err := s.db.write("person_fact.propose", func(ctx context.Context, tx pgx.Tx) error {
		// An expiry is checked by the database's clock, the time every
		// reader expires facts by, before anything is locked or created.
		now, err := dbClock(ctx, tx)
		if err != nil {
			return err
		}
		digest, err := people.PrepareProposal(who, &req, now)
		if err != nil {
			return err
		}
		p, err := lockPerson(ctx, tx, req.Fact.Subject)
		if err != nil {
			return err
		}
		// The clock is read again under the lock, so creation order is
		// commit order across processes and eviction keeps the newest.
		if now, err = dbClock(ctx, tx); err != nil {
			return err
		}
		var changed bool
		resp, info, changed, err = p.Propose(who, req, digest, now)
		if err != nil {
			return err
		}
		if !changed {
			return errNoChange
		}
		return savePerson(ctx, tx, p)
	})
	if err != nil {
		return api.ProposalResponse{}, people.ProposeInfo{}, err
	}
	return resp, info, nil
}

// Recall returns the facts visible in the read's room (see
// people.Store.Recall).
func (s *People) Recall(subject api.Subject, q people.RecallQuery) (api.RecallResponse, error) {
	if err := people.PrepareRecall(subject, &q); err != nil {
		return api.RecallResponse{}, err
	}
	var p *people.Person
	var now time.Time
	err := s.db.read("person_fact.recall", func(ctx context.Context) (err error) {
		p, now, err = readPerson(ctx, s.db.pool, subject)
		return err
	})
	if err != nil {
		return api.RecallResponse{}, err
	}
	return people.RecallView(subject, p.Facts(), q, now), nil
}

// Mine is the subject's own view (see people.Store.Mine).
func (s *People) Mine(subject api.Subject, requesterUserID string) (api.RecallResponse, error) {
	if err := people.PrepareMine(subject, requesterUserID); err != nil {
		return api.RecallResponse{}, err
	}
	facts, now, err := s.facts(subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	return people.MineView(subject, facts, now), nil
}

// Export is the operator's view (see people.Store.Export).
func (s *People) Export(subject api.Subject) (api.RecallResponse, error) {
	if err := people.ValidSubject(subject); err != nil {
		return api.RecallResponse{}, err
	}
	facts, now, err := s.facts(subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	return people.ExportView(subject, facts, now), nil
}

// facts returns a person's facts and the database's clock as of the read.
func (s *People) facts(subject api.Subject) ([]api.Fact, time.Time, error) {
	var p *people.Person
	var now time.Time
	err := s.db.read("person_fact.read", func(ctx context.Context) (err error) {
		p, now, err = readPerson(ctx, s.db.pool, subject)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return p.Facts(), now, nil
}

// Forget removes one fact (see people.Store.Forget).
func (s *People) Forget(who api.Principal, subject api.Subject, factID, requesterUserID string) (api.Fact, error) {
	if err := people.PrepareForget(who, subject, factID, requesterUserID); err != nil {
		return api.Fact{}, err
	}
	var f api.Fact
	err := s.db.write("person_fact.forget", func(ctx context.Context, tx pgx.Tx) error {
		p, err := lockPerson(ctx, tx, subject)
		if err != nil {
			return err
		}
		if f, err = p.Forget(who, factID, requesterUserID); err != nil {
			return err
		}
		return savePerson(ctx, tx, p)
	})
	return f, err
}

// Edit is the operator's change of one fact (see people.Store.Edit).
func (s *People) Edit(subject api.Subject, factID string, patch api.FactPatch) (api.Fact, error) {
	var f api.Fact
	err := s.db.write("person_fact.edit", func(ctx context.Context, tx pgx.Tx) error {
		now, err := dbClock(ctx, tx) // see Propose
		if err != nil {
			return err
		}
		if err := people.PrepareEdit(subject, factID, &patch, now); err != nil {
			return err
		}
		p, err := lockPerson(ctx, tx, subject)
		if err != nil {
			return err
		}
		if now, err = dbClock(ctx, tx); err != nil {
			return err
		}
		if f, err = p.Edit(factID, patch, now); err != nil {
			return err
		}
		return savePerson(ctx, tx, p)
	})
	return f, err
}

// ForgetPerson removes everything kept about a person, the idempotency
// records included, and returns the ids of the facts removed.
func (s *People) ForgetPerson(subject api.Subject) ([]string, error) {
	if err := people.ValidSubject(subject); err != nil {
		return nil, err
	}
	var ids []string
	err := s.db.write("person.forget", func(ctx context.Context, tx pgx.Tx) error {
		p, err := lockPerson(ctx, tx, subject)
		if err != nil {
			return err
		}
		ids = make([]string, 0, p.Len())
		for _, f := range p.Facts() {
			ids = append(ids, f.FactID)
		}
		_, err = tx.Exec(ctx, "DELETE FROM people WHERE name = $1", people.FileName(subject))
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// List returns one page of people with facts, ordered by their file-store
// name; the cursor is the last name of the previous page.
func (s *People) List(cursor string, limit int) (api.PeopleResponse, error) {
	if err := people.PrepareList(&limit); err != nil {
		return api.PeopleResponse{}, err
	}
	resp := api.PeopleResponse{SchemaVersion: api.SchemaVersion, People: []api.PersonSummary{}}
	var names []string
	err := s.db.read("person.list", func(ctx context.Context) error {
		if err := s.db.pool.QueryRow(ctx, "SELECT count(*) FROM people WHERE facts > 0").Scan(&resp.Total); err != nil {
			return err
		}
		rows, err := s.db.pool.Query(ctx, `SELECT name, guild_id, user_id, facts FROM people
			WHERE facts > 0 AND name > $1 ORDER BY name LIMIT $2`, cursor, limit+1)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			var ps api.PersonSummary
			if err := rows.Scan(&name, &ps.Subject.GuildID, &ps.Subject.UserID, &ps.Facts); err != nil {
				return err
			}
			names = append(names, name)
			resp.People = append(resp.People, ps)
		}
		return rows.Err()
	})
	if err != nil {
		return api.PeopleResponse{}, err
	}
	if len(resp.People) > limit {
		resp.People = resp.People[:limit]
		resp.NextCursor = names[limit-1]
	}
	return resp, nil
}

// Briefing composes the voice briefing (see people.Store.Briefing).
func (s *People) Briefing(req api.BriefingRequest, notes []api.Episode) (string, api.BriefingCounts, error) {
	var out string
	var counts api.BriefingCounts
	var ruleErr error
	err := s.db.read("voice.briefing", func(ctx context.Context) error {
		now, err := dbClock(ctx, s.db.pool) // what has expired, by the database's time
		if err != nil {
			return err
		}
		var dbErr error
		out, counts, ruleErr = people.ComposeBriefing(req, notes, now, func(subject api.Subject) ([]api.Fact, error) {
			p, _, err := readPerson(ctx, s.db.pool, subject)
			if err != nil {
				dbErr = err
				return nil, err
			}
			return p.Facts(), nil
		})
		return dbErr
	})
	if err != nil {
		return "", api.BriefingCounts{}, err
	}
	return out, counts, ruleErr
}

// Refresh reads the catalog's counts (people with facts, facts), which
// Stats then returns.
func (s *People) Refresh() error {
	var st people.Stats
	err := s.db.read("catalog", func(ctx context.Context) error {
		return s.db.pool.QueryRow(ctx, "SELECT count(*), coalesce(sum(facts), 0) FROM people WHERE facts > 0").Scan(&st.People, &st.Facts)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.stats = st
	s.mu.Unlock()
	return nil
}

// Stats returns the counts as of the last Refresh.
func (s *People) Stats() people.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Store = api.StorePostgres
	return st
}

// Metrics returns the counts as of the last Refresh; the file store's
// journal and cache counters do not apply and stay zero.
func (s *People) Metrics() people.Metrics {
	st := s.Stats()
	return people.Metrics{People: st.People, Facts: st.Facts}
}

// Ready reports whether the database answers, for /readyz.
func (s *People) Ready(ctx context.Context) error {
	if s.db.Ping(ctx) != nil {
		return fault.New(fault.Unavailable, "not_ready", "The memory database does not answer.")
	}
	return nil
}
