package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/interaction"
)

// signed builds a request as Discord signs it, at ts, over body (tamper
// changes the body after signing).
func signed(t *testing.T, priv ed25519.PrivateKey, body string, ts time.Time, tamper bool) *http.Request {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	sig := ed25519.Sign(priv, []byte(stamp+body))
	if tamper {
		body += " "
	}
	r := httptest.NewRequest(http.MethodPost, "/interactions", strings.NewReader(body))
	r.Header.Set("X-Signature-Ed25519", hex.EncodeToString(sig))
	r.Header.Set("X-Signature-Timestamp", stamp)
	return r
}

// TestEndpointVerifiesBeforeRouting: only a request signed with the
// application's key over timestamp+body, within 60 seconds of now, reaches
// the router; its first answer is the HTTP response and a later edit goes
// over REST.
func TestEndpointVerifiesBeforeRouting(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	rest := &recorder{start: time.Now()}
	router := NewRouter(zap.NewNop(), Config{DeferAfter: 30 * time.Millisecond}, echo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		s, _ := inv.Options.String("text")
		if s == "slow" {
			time.Sleep(80 * time.Millisecond)
		}
		return interaction.Reply{Content: "said " + s}, nil
	}, nil))
	e := &Endpoint{Router: router, REST: rest, Key: pub, Claims: newClaims(), Log: zap.NewNop(), Now: func() time.Time { return now }}
	cmd := func(id, text string) string {
		in := echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: text})
		in.ID, in.Token, in.AppID = id, "tok"+id, "app"
		b, _ := json.Marshal(in)
		return string(b)
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		want int
		body string
	}{
		{"PING", signed(t, priv, `{"id":"p","token":"t","type":1}`, now, false), 200, `{"type":1}`},
		{"a command", signed(t, priv, cmd("2", "hi"), now, false), 200, `"content":"said hi"`},
		{"60s old", signed(t, priv, cmd("3", "old"), now.Add(-60*time.Second), false), 200, "said old"},
		{"a slow command is deferred", signed(t, priv, cmd("4", "slow"), now, false), 200, `{"type":5,`},
		{"tampered body", signed(t, priv, cmd("5", "x"), now, true), 401, ""},
		{"another key", signed(t, otherPriv, cmd("6", "x"), now, false), 401, ""},
		{"61s old", signed(t, priv, cmd("7", "x"), now.Add(-61*time.Second), false), 401, ""},
		{"61s ahead", signed(t, priv, cmd("8", "x"), now.Add(61*time.Second), false), 401, ""},
		{"no headers", httptest.NewRequest(http.MethodPost, "/", strings.NewReader(cmd("9", "x"))), 401, ""},
		{"too big", signed(t, priv, strings.Repeat(" ", MaxInteractionBody+1), now, false), 413, ""},
		{"GET", httptest.NewRequest(http.MethodGet, "/", nil), 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			e.ServeHTTP(w, tc.req)
			if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("answered %d %q, want %d with %q", w.Code, w.Body.String(), tc.want, tc.body)
			}
			if tc.want == 200 && w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("content type %q", w.Header().Get("Content-Type"))
			}
		})
	}
	router.Wait()
	rest.mu.Lock()
	defer rest.mu.Unlock()
	if len(rest.responses) != 0 || len(rest.edits) != 1 || rest.edits[0] != "said slow" {
		t.Fatalf("over REST: %d callbacks, edits %q; want only the slow reply's edit", len(rest.responses), rest.edits)
	}
}

// claims is a Claimer shared by endpoints, as the memory service is shared
// by replicas; down makes it unreachable.
type claims struct {
	mu      sync.Mutex
	claimed map[string]bool
	down    bool
	delay   time.Duration
}

func newClaims() *claims { return &claims{claimed: map[string]bool{}} }

func (c *claims) ClaimInteraction(_ context.Context, id string) (bool, error) {
	c.mu.Lock()
	d := c.delay
	c.mu.Unlock()
	time.Sleep(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return false, errors.New("connection refused")
	}
	if c.claimed[id] {
		return false, nil
	}
	c.claimed[id] = true
	return true, nil
}

// endpointFixture is an endpoint (a replica) over its own router whose
// echo handler counts its runs, with its metrics.
type endpointFixture struct {
	e       *Endpoint
	metrics *Metrics
	runs    *atomic.Int32
}

func newEndpoint(t *testing.T, pub ed25519.PublicKey, c Claimer, log *zap.Logger, now func() time.Time) endpointFixture {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry(), "text")
	runs := new(atomic.Int32)
	router := NewRouter(log, Config{Metrics: m}, echo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		runs.Add(1)
		s, _ := inv.Options.String("text")
		return interaction.Reply{Content: "said " + s}, nil
	}, func(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
		runs.Add(1)
		return []interaction.Choice{{Name: "a", Value: "a"}}, nil
	}))
	t.Cleanup(router.Wait)
	return endpointFixture{e: &Endpoint{Router: router, REST: &recorder{start: time.Now()}, Key: pub, Claims: c, Log: log, Now: now}, metrics: m, runs: runs}
}

func (f endpointFixture) refused(reason Refusal) float64 {
	var m dto.Metric
	if err := f.metrics.refused.WithLabelValues(string(reason)).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func commandBody(id, text string, autocomplete bool) string {
	in := echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: text, Focused: autocomplete})
	in.ID, in.Token, in.AppID = id, "tok"+id, "app"
	if autocomplete {
		in.Type = discordgo.InteractionApplicationCommandAutocomplete
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// TestEndpointAnswersAnInteractionOnceAcrossReplicas: the same signed
// interaction POSTed to two replicas sharing one claims store, and to a
// replica restarted (a new router: its in-process memory is gone), is
// served once; the others answer 409 without content and run nothing.
func TestEndpointAnswersAnInteractionOnceAcrossReplicas(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	shared := newClaims()
	a, b := newEndpoint(t, pub, shared, zap.NewNop(), clock), newEndpoint(t, pub, shared, zap.NewNop(), clock)
	body := commandBody("1100", "mine, private", false)
	post := func(f endpointFixture) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		f.e.ServeHTTP(w, signed(t, priv, body, now, false))
		return w
	}
	if w := post(a); w.Code != 200 || !strings.Contains(w.Body.String(), "said mine, private") {
		t.Fatalf("first delivery: %d %q", w.Code, w.Body.String())
	}
	restarted := newEndpoint(t, pub, shared, zap.NewNop(), clock)
	for name, f := range map[string]endpointFixture{"another replica": b, "the replica restarted": restarted, "the same replica": a} {
		w := post(f)
		if w.Code != http.StatusConflict || strings.Contains(w.Body.String(), "said") || strings.Contains(w.Body.String(), "private") {
			t.Errorf("%s: %d %q, want 409 without content", name, w.Code, w.Body.String())
		}
	}
	if n := a.runs.Load() + b.runs.Load() + restarted.runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
	if got := b.refused(RefusedReplayed) + restarted.refused(RefusedReplayed); got != 2 {
		t.Fatalf("replayed refusals counted %v", got)
	}
}

// TestEndpointFailsClosedWhenClaimsAreUnreachable: with the claims store
// unreachable no handler runs; a command hears the ephemeral sentence, an
// autocomplete gets no choices, and a PING is still answered (Discord's
// endpoint check).
func TestEndpointFailsClosedWhenClaimsAreUnreachable(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	c := newClaims()
	c.down = true
	f := newEndpoint(t, pub, c, zap.NewNop(), func() time.Time { return now })
	for _, tc := range []struct {
		name, body string
		typ        discordgo.InteractionResponseType
		content    string
	}{
		{"command", commandBody("2001", "x", false), discordgo.InteractionResponseChannelMessageWithSource, memoryUnreachable},
		{"autocomplete", commandBody("2002", "x", true), discordgo.InteractionApplicationCommandAutocompleteResult, ""},
		{"PING", `{"id":"2003","token":"t","type":1}`, discordgo.InteractionResponsePong, ""},
	} {
		w := httptest.NewRecorder()
		f.e.ServeHTTP(w, signed(t, priv, tc.body, now, false))
		var got discordgo.InteractionResponse
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 || got.Type != tc.typ {
			t.Errorf("%s: %d %s, want 200 of type %d", tc.name, w.Code, w.Body.String(), tc.typ)
			continue
		}
		if tc.content != "" && (got.Data.Content != tc.content || got.Data.Flags != discordgo.MessageFlagsEphemeral) {
			t.Errorf("%s: %s, want the ephemeral sentence", tc.name, w.Body.String())
		}
		if got.Data != nil && len(got.Data.Choices) != 0 {
			t.Errorf("%s: choices %v", tc.name, got.Data.Choices)
		}
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("a handler ran %d times without a claim", n)
	}
	// No Claims at all fails closed the same way.
	f.e.Claims = nil
	w := httptest.NewRecorder()
	f.e.ServeHTTP(w, signed(t, priv, commandBody("2004", "x", false), now, false))
	if !strings.Contains(w.Body.String(), memoryUnreachable) || f.runs.Load() != 0 {
		t.Fatalf("without Claims: %d %s", w.Code, w.Body.String())
	}
}

// unreadBody fails the test if the endpoint reads it.
type unreadBody struct{ t *testing.T }

func (b unreadBody) Read([]byte) (int, error) {
	b.t.Error("the body was read")
	return 0, io.EOF
}

// TestEndpointRefusesBadHeadersBeforeReadingTheBody: missing or malformed
// signature headers, a stale timestamp and a declared oversize body are
// refused without reading the body, each counted under its reason.
func TestEndpointRefusesBadHeadersBeforeReadingTheBody(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	f := newEndpoint(t, pub, newClaims(), zap.NewNop(), func() time.Time { return now })
	sig := strings.Repeat("ab", 64)
	fresh := strconv.FormatInt(now.Unix(), 10)
	for _, tc := range []struct {
		name, sig, stamp string
		length           int64
		want             int
		reason           Refusal
	}{
		{"no headers", "", "", 10, 401, RefusedMissingSignature},
		{"no signature", "", fresh, 10, 401, RefusedMissingSignature},
		{"no timestamp", sig, "", 10, 401, RefusedMissingSignature},
		{"127 hex digits", sig[:127], fresh, 10, 401, RefusedMalformedSignature},
		{"130 hex digits", sig + "ab", fresh, 10, 401, RefusedMalformedSignature},
		{"not hex", strings.Repeat("zz", 64), fresh, 10, 401, RefusedMalformedSignature},
		{"a timestamp with letters", sig, fresh + "x", 10, 401, RefusedMalformedSignature},
		{"a negative timestamp", sig, "-" + fresh, 10, 401, RefusedMalformedSignature},
		{"a 20-digit timestamp", sig, strings.Repeat("9", 20), 10, 401, RefusedMalformedSignature},
		{"61 s old", sig, strconv.FormatInt(now.Unix()-61, 10), 10, 401, RefusedStaleTimestamp},
		{"61 s ahead", sig, strconv.FormatInt(now.Unix()+61, 10), 10, 401, RefusedStaleTimestamp},
		{"declared too large", sig, fresh, MaxInteractionBody + 1, 413, RefusedTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.refused(tc.reason)
			r := httptest.NewRequest(http.MethodPost, "/interactions", unreadBody{t})
			r.ContentLength = tc.length
			if tc.sig != "" {
				r.Header.Set("X-Signature-Ed25519", tc.sig)
			}
			if tc.stamp != "" {
				r.Header.Set("X-Signature-Timestamp", tc.stamp)
			}
			w := httptest.NewRecorder()
			f.e.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("answered %d, want %d", w.Code, tc.want)
			}
			if got := f.refused(tc.reason) - before; got != 1 {
				t.Errorf("%s counted %v times", tc.reason, got)
			}
		})
	}
}

// TestEndpointRefusalsLogOncePerMinute: 1000 unsigned requests write one
// info line (saying how many), and the next one a minute later another;
// every refusal is counted.
func TestEndpointRefusalsLogOncePerMinute(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	core, logs := observer.New(zap.InfoLevel)
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newEndpoint(t, pub, newClaims(), zap.New(core), clock)
	for i := range 1000 {
		var r *http.Request
		if i%2 == 0 {
			r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		} else {
			r = signed(t, priv, "{}", now, true) // a bad signature
		}
		f.e.ServeHTTP(httptest.NewRecorder(), r)
	}
	if n := logs.Len(); n > 2 {
		t.Fatalf("1000 refusals wrote %d info lines", n)
	}
	mu.Lock()
	now = now.Add(refusalLogEvery)
	mu.Unlock()
	f.e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	lines := logs.FilterMessage("interactions refused").All()
	if len(lines) != 2 || logs.Len() != 2 {
		t.Fatalf("%d info lines (%d about refusals), want 2", logs.Len(), len(lines))
	}
	last := lines[1].ContextMap()
	if last["refused"] != int64(1000) || last[string(RefusedMissingSignature)] != int64(500) || last[string(RefusedBadSignature)] != int64(500) {
		t.Fatalf("the minute's line says %v; want 1000 refused since the first line, 500 of each", last)
	}
	if got := f.refused(RefusedMissingSignature) + f.refused(RefusedBadSignature); got != 1001 {
		t.Fatalf("counted %v refusals", got)
	}
}

// TestEndpointDefersWhileASlowClaimIsMade: a claim slower than 1 s defers
// the command (ephemeral, no content) and the reply follows as the edit
// once claimed; a slow claim that finds a replay, or fails, sends nothing
// more (the deferred reply may be someone else's).
func TestEndpointDefersWhileASlowClaimIsMade(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	c := newClaims()
	c.delay = claimDeferAfter + 200*time.Millisecond
	f := newEndpoint(t, pub, c, zap.NewNop(), func() time.Time { return now })
	rest := f.e.REST.(*recorder)
	post := func(body string) string {
		w := httptest.NewRecorder()
		f.e.ServeHTTP(w, signed(t, priv, body, now, false))
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"type":5`) || !strings.Contains(w.Body.String(), `"flags":64`) {
			t.Fatalf("a slow claim answered %d %s, want an ephemeral defer", w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	post(commandBody("3001", "slow", false))
	f.e.Router.Wait()
	rest.mu.Lock()
	if len(rest.responses) != 0 || len(rest.edits) != 1 || rest.edits[0] != "said slow" {
		t.Fatalf("after the slow claim: %d callbacks, edits %q; want the reply as the edit", len(rest.responses), rest.edits)
	}
	rest.mu.Unlock()
	if body := post(commandBody("3001", "slow", false)); strings.Contains(body, "said") {
		t.Fatalf("a replay was answered %s", body)
	}
	f.e.Router.Wait()
	c.mu.Lock()
	c.down = true
	c.mu.Unlock()
	post(commandBody("3002", "down", false))
	f.e.Router.Wait()
	rest.mu.Lock()
	defer rest.mu.Unlock()
	if len(rest.responses) != 0 || len(rest.edits) != 1 || f.runs.Load() != 1 {
		t.Fatalf("a replay or a failed claim sent %d callbacks, edits %q, ran %d handlers", len(rest.responses), rest.edits, f.runs.Load())
	}
	if got := f.refused(RefusedReplayed); got != 1 {
		t.Fatalf("replayed counted %v", got)
	}
}
