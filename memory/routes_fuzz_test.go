package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
)

// fuzzNow is the fixture's clock: fixed, so a seed that is valid today
// (an expiresAt in 2027) stays valid, and a failure replays the same way.
var fuzzNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// fuzzSubject is the person whose fact the fact PATCH route edits;
// fuzzEpisodeID is the (kept) episode the episode PATCH route edits.
var fuzzSubject = api.Subject{GuildID: "100", UserID: "200"}

const fuzzEpisodeID = "ep-fuzz-target"

// routeFixture is the real service over a temp root, built once per fuzz
// worker (the fuzz function's setup runs once per process; f.Fuzz then
// loops over inputs), and answered in process through httptest.Recorder.
type routeFixture struct {
	handler  http.Handler
	people   *people.Memory
	episodes interface {
		EpisodeStore
		Get(id string) (api.Episode, bool)
	}
	factID  string
	reseeds int
}

func newRouteFixture(tb testing.TB, dir string) *routeFixture {
	tb.Helper()
	svc := newTestService(tb, filepath.Join(dir, "memory"), testTokens, zap.NewNop(), func() time.Time { return fuzzNow })
	fx := &routeFixture{handler: svc.handler, people: svc.people, episodes: svc.episodes}
	fx.reseed(tb)
	return fx
}

// stats returns both stores' counts, current (the PostgreSQL store's are
// as of a refresh).
func (fx *routeFixture) stats(tb testing.TB) (people.Stats, episodes.Stats) {
	tb.Helper()
	if err := fx.people.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
	if err := fx.episodes.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return fx.people.Stats(), fx.episodes.Stats()
}

// reseed puts back the PATCH targets when a fuzzed request removed them (a
// supersede, a release followed by eviction), so every input reaches the
// edit code rather than a 404.
func (fx *routeFixture) reseed(tb testing.TB) {
	tb.Helper()
	exp, err := fx.people.Export(context.Background(), fuzzSubject)
	if err != nil {
		tb.Fatalf("export the fuzz subject: %v", err)
	}
	found := false
	for _, f := range exp.Facts {
		found = found || f.FactID == fx.factID
	}
	if !found {
		fx.reseeds++
		resp, _, err := fx.people.Propose(context.Background(), api.Principal{Lane: api.LaneOperator}, api.ProposalRequest{
			SchemaVersion: api.SchemaVersion, ProposalID: fmt.Sprintf("fuzz-seed-%d", fx.reseeds),
			Fact: api.FactInput{
				Subject: fuzzSubject, Kind: api.KindPersonFact, Body: "likes green tea",
				Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9,
				Provenance: api.Provenance{ProposerUserID: fuzzSubject.UserID, ChannelID: "300"},
			},
		})
		if err != nil || resp.Fact == nil {
			tb.Fatalf("seed the fuzz fact: %v", err)
		}
		fx.factID = resp.Fact.FactID
	}
	if _, ok := fx.episodes.Get(fuzzEpisodeID); !ok {
		_, _, err := fx.episodes.Record(context.Background(), api.LaneOperator, api.EpisodeRequest{
			SchemaVersion: api.SchemaVersion, EpisodeID: fuzzEpisodeID, Lane: api.LaneOperator,
			Room: "the console", Summary: "the fuzz target", Visibility: api.EpisodeShareable,
			Retain: true, OccurredAt: fuzzNow.Add(-time.Hour),
			Provenance: api.EpisodeProvenance{CharacterID: "captain", SelfAuthored: true},
		})
		if err != nil {
			tb.Fatalf("seed the fuzz episode: %v", err)
		}
	}
}

// fuzzRoute is one write route and the bearer that may use it.
type fuzzRoute struct {
	name, method, token string
	path                func(fx *routeFixture) string
}

var fuzzRoutes = []fuzzRoute{
	{"proposal (text bridge)", "POST", txt, func(*routeFixture) string { return "/v1/memory/discord-people/proposals" }},
	{"proposal (operator)", "POST", op, func(*routeFixture) string { return "/v1/memory/discord-people/proposals" }},
	{"episode record (text bridge)", "POST", txt, func(*routeFixture) string { return "/v1/memory/captain-episodes" }},
	{"episode record (operator)", "POST", op, func(*routeFixture) string { return "/v1/memory/captain-episodes" }},
	{"voice briefing", "POST", voice, func(*routeFixture) string { return "/v1/discord/voice-briefing" }},
	{"fact PATCH", "PATCH", op, func(fx *routeFixture) string {
		return "/v1/memory/discord-people/" + fuzzSubject.GuildID + "/" + fuzzSubject.UserID + "/" + fx.factID
	}},
	{"episode PATCH", "PATCH", op, func(*routeFixture) string { return "/v1/memory/captain-episodes/" + fuzzEpisodeID }},
}

var errorCode = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// FuzzWriteRoutes sends one fuzzed body to every write route with the
// bearer that may use it, through the real handler: never a 5xx, never a
// panic, every non-2xx a JSON {"error","message"} with a snake_case code and
// a sentence, every 2xx JSON, and a refused request changes no count. The
// corpus is in testdata/fuzz/FuzzWriteRoutes.
func FuzzWriteRoutes(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add(append(append([]byte(`{"schemaVersion":1,"proposalId":"p","fact":{"body":"`), bytes.Repeat([]byte("x"), api.MaxBodyBytes)...), `"}}`...))
	fx := newRouteFixture(f, f.TempDir())
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rt := range fuzzRoutes {
			peopleBefore, episodesBefore := fx.stats(t)
			path := rt.path(fx)
			req := httptest.NewRequest(rt.method, path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+rt.token)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			fx.handler.ServeHTTP(rec, req)
			status, out := rec.Code, rec.Body.Bytes()
			if status >= 500 {
				t.Fatalf("%s: %s %s answered %d: %s", rt.name, rt.method, path, status, out)
			}
			if status == http.StatusNoContent {
				continue
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("%s: answered %d with Content-Type %q", rt.name, status, ct)
			}
			if status < 300 {
				if !json.Valid(out) {
					t.Fatalf("%s: answered %d with invalid JSON: %q", rt.name, status, out)
				}
				continue
			}
			var e map[string]any
			dec := json.NewDecoder(bytes.NewReader(out))
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("%s: answered %d without a JSON error: %q", rt.name, status, out)
			}
			code, _ := e["error"].(string)
			msg, _ := e["message"].(string)
			if len(e) != 2 || !errorCode.MatchString(code) || strings.TrimSpace(msg) == "" {
				t.Fatalf("%s: answered %d with %q; want exactly {\"error\":snake_case,\"message\":sentence}", rt.name, status, out)
			}
			if pa, ea := fx.stats(t); pa.People != peopleBefore.People || pa.Facts != peopleBefore.Facts ||
				ea.Total != episodesBefore.Total || ea.Retained != episodesBefore.Retained || ea.Unretained != episodesBefore.Unretained {
				t.Fatalf("%s: refused with %d (%s) yet the counts changed: people %+v → %+v, episodes %+v → %+v",
					rt.name, status, code, peopleBefore, pa, episodesBefore, ea)
			}
		}
		fx.reseed(t)
	})
}
