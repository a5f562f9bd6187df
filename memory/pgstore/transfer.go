package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
)

// The migration's side of the stores: every episode out, and a set of
// episodes in, by the same rules as the file store's Merge. (People go
// through people.Memory's Each and Put, over People's Storer.)

// All returns every episode, oldest first, current as of now.
func (e *Episodes) All(ctx context.Context) ([]api.Episode, error) {
	if err := e.Refresh(ctx); err != nil {
		return nil, err
	}
	eps, _ := e.current().All()
	return eps, nil
}

// Merge puts eps into the store (episodes.MergeEpisodes) under the clock's
// lock, re-derives the ring and returns how many notes changed; dryRun
// writes nothing.
func (e *Episodes) Merge(ctx context.Context, eps []api.Episode, dryRun bool) (int, error) {
	n := 0
	err := e.db.write(ctx, "migrate.episodes", func(ctx context.Context, tx pgx.Tx) error {
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
