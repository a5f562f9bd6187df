// Package memory is the memory service: it owns Clankie's two durable
// memories (person facts and episodes) and serves them over HTTP, where the
// bearer, never the body, decides who is asking. It knows nothing of
// Discord's client; the bridges and the CLI reach it over HTTP.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

// EpisodeStore is what the routes need of the episode store: the files
// (FileEpisodes) or PostgreSQL (pgstore.Episodes). The calls that may
// reach a database take the request's context.
type EpisodeStore interface {
	Stats() episodes.Stats
	Record(ctx context.Context, lane api.Lane, req api.EpisodeRequest) (api.EpisodeResponse, episodes.RecordInfo, error)
	Card(lane api.Lane) api.Card
	Search(lane api.Lane, q string, limit int) (api.Card, error)
	Records(lane api.Lane, q string, limit int) ([]api.Episode, error)
	Patch(ctx context.Context, id string, p api.EpisodePatch) (api.Episode, error)
	Forget(ctx context.Context, id string) error
	VoiceNotes() []api.Episode
	// Refresh brings a store shared with other processes (PostgreSQL) up
	// to date before Stats, Card and VoiceNotes.
	Refresh(ctx context.Context) error
}

// FileEpisodes is the episode files (episodes.Store) as an EpisodeStore.
// A file write is not cut short by a client that hangs up, and the files
// need no refresh, so the context is not used.
type FileEpisodes struct{ *episodes.Store }

func (f FileEpisodes) Record(_ context.Context, lane api.Lane, req api.EpisodeRequest) (api.EpisodeResponse, episodes.RecordInfo, error) {
	return f.Store.Record(lane, req)
}

func (f FileEpisodes) Patch(_ context.Context, id string, p api.EpisodePatch) (api.Episode, error) {
	return f.Store.Patch(id, p)
}

func (f FileEpisodes) Forget(_ context.Context, id string) error { return f.Store.Forget(id) }

func (f FileEpisodes) Refresh(context.Context) error { return nil }

// Service is the HTTP face of the stores.
type Service struct {
	root     *os.Root
	rootPath string
	bearers  *Bearers
	people   *people.Memory
	episodes EpisodeStore
	claims   ClaimStore
	log      *zap.Logger
	now      func() time.Time
	metrics  *metrics
	facts    *factMemo
}

// recallMemoBytes bounds the JSON the fact memo keeps: a few hundred
// people's recall answers.
const recallMemoBytes = 4 << 20

// NewService wires the stores behind the routes. fsync is the histogram
// the file stores' Disk times its syncs in (newFsyncMetric, made before
// they were opened), exported with the service's other metrics; nil makes
// an empty one (PostgreSQL makes no syncs of its own).
func NewService(root *os.Root, rootPath string, b *Bearers, p people.Storer, e EpisodeStore, c ClaimStore, log *zap.Logger,
	now func() time.Time, fsync prometheus.Histogram) *Service {
	if now == nil {
		now = time.Now
	}
	if fsync == nil {
		fsync = newFsyncMetric()
	}
	s := &Service{root: root, rootPath: rootPath, bearers: b, people: people.New(p), episodes: e, claims: c, log: log, now: now,
		facts: newFactMemo(recallMemoBytes)}
	s.metrics = newMetrics(s, fsync)
	return s
}

// Handler serves every route of the contract: the probes, /metrics and the
// route table.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range s.probes() {
		mux.Handle(pattern, h)
	}
	for _, b := range s.routes() {
		mux.Handle(b.Pattern(), s.serve(b))
	}
	return s.metrics.instrument(limitBody(jsonErrors(mux)))
}

// probes returns the routes outside the table, by pattern: the health and
// readiness probes (no bearer) and /metrics (operator bearer).
func (s *Service) probes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /healthz": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		}),
		"GET /readyz":  http.HandlerFunc(s.readyz),
		"GET /metrics": s.metricsRoute(),
	}
}

// limitBody caps every request body at 64 KiB; decode turns the overflow
// into a 413.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > api.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "The request body is larger than 64 KiB.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// readyz answers whether the person store can serve (people.Storer.Ready).
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.people.Ready(r.Context()); err != nil {
		s.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// correlationID takes the caller's X-Correlation-Id when it is a short token,
// else mints one, so a receipt can be matched with the bridge's own.
func correlationID(r *http.Request) string {
	if c := r.Header.Get("X-Correlation-Id"); c != "" && len(c) <= 64 && isToken(c) {
		return c
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func isToken(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

func subjectOf(r *request) api.Subject {
	return api.Subject{GuildID: r.PathValue("guildId"), UserID: r.PathValue("userId")}
}

func intParam(r *request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fault.New(fault.Invalid, "invalid_parameter", "%s must be a positive whole number.", name)
	}
	return n, nil
}
