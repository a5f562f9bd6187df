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
	"github.com/clankie/clankie/memory/personfiles"
)

// People is the person-fact store in PostgreSQL, a people.Storer: one row
// per person holding people.Person's state, changed only under that row's
// lock by a people.Change the rules of people.Memory decided.
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
	name := personfiles.FileName(subject)
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
		personfiles.FileName(p.Subject), b, len(p.Facts))
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
	err := q.QueryRow(ctx, "SELECT clock_timestamp(), (SELECT state FROM people WHERE name = $1)", personfiles.FileName(subject)).Scan(&now, &state)
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

// Now is the database's clock (dbClock), read before a change: a database
// that does not answer has saved nothing.
func (s *People) Now(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	now, err := dbClock(ctx, s.db.pool)
	if err != nil {
		return time.Time{}, s.db.fail("clock", err)
	}
	return now, nil
}

// Update runs decide on the person's row under its lock, with the
// database's clock read under the lock (so creation order is commit order
// across processes, and eviction keeps the newest), and writes the state
// the change leaves; forgetting a person (an Erase) deletes the row. Both
// ways of committing are one transaction: nothing of what a change removes
// stays in the row.
func (s *People) Update(ctx context.Context, subject api.Subject, _ people.Commit, decide func(*people.Person, time.Time) (*people.Change, error)) error {
	return s.db.write(ctx, "person.update", func(ctx context.Context, tx pgx.Tx) error {
		p, err := lockPerson(ctx, tx, subject)
		if err != nil {
			return err
		}
		now, err := dbClock(ctx, tx)
		if err != nil {
			return err
		}
		ch, err := decide(p, now)
		if err != nil {
			return err
		}
		if ch == nil {
			return errNoChange
		}
		if ch.Erase {
			_, err = tx.Exec(ctx, "DELETE FROM people WHERE name = $1", personfiles.FileName(subject))
			return err
		}
		p.Apply(ch)
		return savePerson(ctx, tx, p)
	})
}

// View runs read on the person's facts as last committed, without a lock,
// with the database's clock as of the read.
func (s *People) View(ctx context.Context, subject api.Subject, read func([]api.Fact, time.Time)) error {
	return s.db.read(ctx, "person.read", func(ctx context.Context) error {
		p, now, err := readPerson(ctx, s.db.pool, subject)
		if err != nil {
			return err
		}
		read(p.Facts, now)
		return nil
	})
}

// List returns one page of people with facts, ordered by their file-store
// name; the cursor is the last name of the previous page.
func (s *People) List(ctx context.Context, cursor string, limit int) (api.PeopleResponse, error) {
	if cursor != "" && !personfiles.IsPersonFile(cursor) {
		return api.PeopleResponse{}, people.ErrUnknownCursor
	}
	resp := api.PeopleResponse{SchemaVersion: api.SchemaVersion, People: []api.PersonSummary{}}
	var names []string
	err := s.db.read(ctx, "person.list", func(ctx context.Context) error {
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

// Each calls fn with every person who has facts, in name order.
func (s *People) Each(ctx context.Context, fn func(*people.Person) error) error {
	rows, err := s.db.pool.Query(ctx, "SELECT guild_id, user_id, state FROM people WHERE facts > 0 ORDER BY name")
	if err != nil {
		return s.db.fail("migrate.read", err)
	}
	var all []*people.Person
	for rows.Next() {
		var subject api.Subject
		var state []byte
		if err := rows.Scan(&subject.GuildID, &subject.UserID, &state); err != nil {
			return s.db.fail("migrate.read", err)
		}
		p, err := people.DecodePerson(subject, state)
		if err != nil {
			return err
		}
		all = append(all, p)
	}
	if err := rows.Err(); err != nil {
		return s.db.fail("migrate.read", err)
	}
	for _, p := range all {
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// Refresh reads the catalog's counts (people with facts, facts), which
// Stats then returns.
func (s *People) Refresh(ctx context.Context) error {
	var st people.Stats
	err := s.db.read(ctx, "catalog", func(ctx context.Context) error {
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

// People is a people.Storer.
var _ people.Storer = (*People)(nil)
