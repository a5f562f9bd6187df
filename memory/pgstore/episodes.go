package pgstore

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
)

// Episodes is the episode store in PostgreSQL. The ring of 128 and the
// retained ceiling of 1024 are properties of every episode at once, so a
// write locks the one episode_clock row, runs the change on an
// episodes.Store in memory over every stored episode (at most 1152), and
// writes back what changed, all in one transaction: one writer at a time
// across every process, by the file store's own rules. Reads use a copy
// that is current as long as the clock's version has not moved.
type Episodes struct {
	db *DB

	mu      sync.Mutex
	cur     *episodes.Store // as of version; read-only once installed
	version int64           // -1: no copy
}

// Episodes returns the episode store.
func (db *DB) Episodes() *Episodes {
	e := &Episodes{db: db, version: -1}
	e.cur, _ = episodes.FromEpisodes(nil, nil, db.now)
	return e
}

// load reads every episode and the clock's version in one statement (one
// snapshot).
func load(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (eps []api.Episode, asked map[string]bool, version int64, err error) {
	version = -1
	rows, err := q.Query(ctx, `SELECT c.version, e.record, e.asked_retain FROM episode_clock c
		LEFT JOIN episodes e ON true WHERE c.id = 1`)
	if err != nil {
		return nil, nil, 0, err
	}
	asked = map[string]bool{}
	for rows.Next() {
		var rec []byte
		var a *bool
		if err := rows.Scan(&version, &rec, &a); err != nil {
			return nil, nil, 0, err
		}
		if rec == nil {
			continue
		}
		var ep api.Episode
		if err := json.Unmarshal(rec, &ep); err != nil {
			return nil, nil, 0, err
		}
		eps = append(eps, ep)
		if a != nil {
			asked[ep.EpisodeID] = *a
		}
	}
	return eps, asked, version, rows.Err()
}

// Refresh brings the read copy up to date when another writer (this
// process or another) moved the clock. It runs under ctx (the request's),
// bounded like every read.
func (e *Episodes) Refresh(ctx context.Context) error {
	return e.db.read(ctx, "episodes.read", func(ctx context.Context) error {
		var v int64
		if err := e.db.pool.QueryRow(ctx, "SELECT version FROM episode_clock WHERE id = 1").Scan(&v); err != nil {
			return err
		}
		e.mu.Lock()
		same := v == e.version
		e.mu.Unlock()
		if same {
			return nil
		}
		eps, asked, v, err := load(ctx, e.db.pool)
		if err != nil {
			return err
		}
		st, err := episodes.FromEpisodes(eps, asked, e.db.now)
		if err != nil {
			return err
		}
		e.install(st, v)
		return nil
	})
}

func (e *Episodes) install(st *episodes.Store, v int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v >= e.version {
		e.cur, e.version = st, v
	}
}

func (e *Episodes) current() *episodes.Store {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

// change runs op on the current episodes under the clock's lock and writes
// what it changed. op's error (a rule's refusal) writes nothing. Like
// every write it keeps ctx's values but not its cancellation: a client
// that hangs up does not cut a commit short (DB.write).
func (e *Episodes) change(ctx context.Context, op string, fn func(st *episodes.Store) error) error {
	var next *episodes.Store
	var nextVersion int64
	err := e.db.write(ctx, op, func(ctx context.Context, tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, "SELECT version FROM episode_clock WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
			return err
		}
		var before []api.Episode
		var asked map[string]bool
		e.mu.Lock()
		cur, cv := e.cur, e.version
		e.mu.Unlock()
		if cv == v {
			before, asked = cur.All()
		} else {
			var err error
			if before, asked, _, err = load(ctx, tx); err != nil {
				return err
			}
		}
		st, err := episodes.FromEpisodes(before, asked, e.db.now)
		if err != nil {
			return err
		}
		if err := fn(st); err != nil {
			return err
		}
		after, afterAsked := st.All()
		if err := writeDiff(ctx, tx, before, asked, after, afterAsked); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE episode_clock SET version = $1 WHERE id = 1", v+1); err != nil {
			return err
		}
		next, nextVersion = st, v+1
		return nil
	})
	if err == nil && next != nil {
		e.install(next, nextVersion)
	}
	return err
}

// writeDiff deletes the episodes gone from before and upserts those that
// are new or changed.
func writeDiff(ctx context.Context, tx pgx.Tx, before []api.Episode, beforeAsked map[string]bool, after []api.Episode, afterAsked map[string]bool) error {
	old := make(map[string][]byte, len(before))
	for _, ep := range before {
		b, err := json.Marshal(ep)
		if err != nil {
			return err
		}
		old[ep.EpisodeID] = b
	}
	var batch pgx.Batch
	for _, ep := range after {
		b, err := json.Marshal(ep)
		if err != nil {
			return err
		}
		prev, had := old[ep.EpisodeID]
		delete(old, ep.EpisodeID)
		a, known := afterAsked[ep.EpisodeID]
		pa, pknown := beforeAsked[ep.EpisodeID]
		if had && string(prev) == string(b) && a == pa && known == pknown {
			continue
		}
		var asked *bool
		if known {
			asked = &a
		}
		batch.Queue(`INSERT INTO episodes (episode_id, lane, retained, asked_retain, record) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (episode_id) DO UPDATE SET lane = $2, retained = $3, asked_retain = $4, record = $5`,
			ep.EpisodeID, ep.Lane, ep.Retained, asked, b)
	}
	if len(old) > 0 {
		gone := make([]string, 0, len(old))
		for id := range old {
			gone = append(gone, id)
		}
		batch.Queue("DELETE FROM episodes WHERE episode_id = ANY($1)", gone)
	}
	if batch.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, &batch).Close()
}

// Record is POST /v1/memory/captain-episodes (see episodes.Store.Record).
func (e *Episodes) Record(ctx context.Context, lane api.Lane, req api.EpisodeRequest) (api.EpisodeResponse, episodes.RecordInfo, error) {
	var resp api.EpisodeResponse
	var info episodes.RecordInfo
	err := e.change(ctx, "episode.record", func(st *episodes.Store) error {
		var err error
		resp, info, err = st.Record(lane, req)
		if err == nil && info.Replayed {
			return errNoChange
		}
		return err
	})
	if err != nil {
		return api.EpisodeResponse{}, episodes.RecordInfo{}, err
	}
	return resp, info, nil
}

// Patch is the operator's edit (see episodes.Store.Patch).
func (e *Episodes) Patch(ctx context.Context, id string, p api.EpisodePatch) (api.Episode, error) {
	var ep api.Episode
	err := e.change(ctx, "episode.edit", func(st *episodes.Store) error {
		var err error
		ep, err = st.Patch(id, p)
		return err
	})
	return ep, err
}

// Forget removes a note by id (see episodes.Store.Forget).
func (e *Episodes) Forget(ctx context.Context, id string) error {
	return e.change(ctx, "episode.forget", func(st *episodes.Store) error { return st.Forget(id) })
}

// The reads return from the copy Refresh made current.

// Card is the ambient card for lane.
func (e *Episodes) Card(lane api.Lane) api.Card { return e.current().Card(lane) }

// VoiceNotes are the notes of the voice briefing.
func (e *Episodes) VoiceNotes() []api.Episode { return e.current().VoiceNotes() }

// Search is recall past the card.
func (e *Episodes) Search(lane api.Lane, q string, limit int) (api.Card, error) {
	return e.current().Search(lane, q, limit)
}

// Records returns the episodes behind a card or a search.
func (e *Episodes) Records(lane api.Lane, q string, limit int) ([]api.Episode, error) {
	return e.current().Records(lane, q, limit)
}

// Stats returns the catalog figures.
func (e *Episodes) Stats() episodes.Stats { return e.current().Stats() }

// Get returns one episode by id.
func (e *Episodes) Get(id string) (api.Episode, bool) { return e.current().Get(id) }
