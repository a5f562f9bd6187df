package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
)

// The migration's side of the stores: every person and every episode out,
// and a whole person or a set of episodes in, by the same rules as the
// file stores' Each, Put and Merge.

// Each calls fn with every person who has facts, in name order.
func (s *People) Each(fn func(*people.Person) error) error {
	ctx := context.Background()
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

// Put makes a person's whole state p's and reports whether anything
// changed; dryRun only reports.
func (s *People) Put(p *people.Person, dryRun bool) (bool, error) {
	changed := false
	err := s.db.write("migrate.person", func(ctx context.Context, tx pgx.Tx) error {
		have, err := lockPerson(ctx, tx, p.Subject())
		if err != nil {
			return err
		}
		if people.SameState(have, p) {
			return errNoChange
		}
		changed = true
		if dryRun {
			return errNoChange
		}
		return savePerson(ctx, tx, p)
	})
	return changed, err
}

// All returns every episode, oldest first, current as of now.
func (e *Episodes) All() ([]api.Episode, error) {
	if err := e.Refresh(); err != nil {
		return nil, err
	}
	eps, _ := e.current().All()
	return eps, nil
}

// Merge puts eps into the store (episodes.MergeEpisodes) under the clock's
// lock, re-derives the ring and returns how many notes changed; dryRun
// writes nothing.
func (e *Episodes) Merge(eps []api.Episode, dryRun bool) (int, error) {
	n := 0
	err := e.db.write("migrate.episodes", func(ctx context.Context, tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, "SELECT version FROM episode_clock WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
			return err
		}
		raw, asked, _, err := load(ctx, tx)
		if err != nil {
			return err
		}
		// The store's own order and ring, so Changed compares like with like.
		cur, err := episodes.FromEpisodes(raw, asked, e.db.now)
		if err != nil {
			return err
		}
		before, _ := cur.All()
		merged, err := episodes.MergeEpisodes(before, eps)
		if err != nil {
			return err
		}
		st, err := episodes.FromEpisodes(merged, asked, e.db.now)
		if err != nil {
			return err
		}
		after, afterAsked := st.All()
		if n = episodes.Changed(before, after); n == 0 || dryRun {
			return errNoChange
		}
		if err := writeDiff(ctx, tx, raw, asked, after, afterAsked); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE episode_clock SET version = $1 WHERE id = 1", v+1)
		return err
	})
	return n, err
}
