package discordtest_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/discordtest"
)

// endpoint is a hand-written interactions endpoint: it verifies the fake's
// signature unless lax, and returns every command with an ephemeral reply.
func endpoint(t *testing.T, f *discordtest.Fake, lax bool) string {
	key, _ := hex.DecodeString(f.PublicKey())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig, _ := hex.DecodeString(r.Header.Get("X-Signature-Ed25519"))
		ts := r.Header.Get("X-Signature-Timestamp")
		if _, err := strconv.ParseInt(ts, 10, 64); err != nil || r.Header.Get("User-Agent") != discordtest.UserAgentInteractions {
			t.Errorf("request headers %v", r.Header)
		}
		if !lax && !ed25519.Verify(key, append([]byte(ts), body...), sig) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var in struct {
			Type int `json:"type"`
		}
		_ = json.Unmarshal(body, &in)
		w.Header().Set("Content-Type", "application/json")
		if in.Type == 1 {
			_, _ = w.Write([]byte(`{"type":1}`))
			return
		}
		_, _ = w.Write([]byte(`{"type":4,"data":{"content":"hello","flags":64,"allowed_mentions":{"parse":[]}}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestHTTPInteractionIsSignedAndItsResponseIsTheCallback(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	url := endpoint(t, f, false)
	ctx := timeout(t)
	if err := f.PingHTTP(ctx, url); err != nil {
		t.Fatal(err)
	}
	in := f.InteractHTTP(ctx, url, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "voice"})
	m, err := in.WaitReply(ctx)
	if err != nil || m.Content != "hello" || !m.Ephemeral() || m.Via != discordtest.ViaCallback {
		t.Fatalf("reply %+v, %v", m, err)
	}
	if cbs := in.Callbacks(); len(cbs) != 1 || cbs[0].Type != discordgo.InteractionResponseChannelMessageWithSource || !cbs[0].Accepted() {
		t.Fatalf("callbacks %+v", cbs)
	}
}

// An endpoint that accepts a bad signature fails the test: Discord removes
// such an endpoint.
func TestAnEndpointAcceptingBadSignaturesFailsTheTest(t *testing.T) {
	t.Parallel()
	rec := &cleanupTB{TB: t}
	f := discordtest.New(rec, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	url := endpoint(t, f, true)
	ctx := timeout(t)
	if err := f.PingHTTP(ctx, url); err == nil || !strings.Contains(err.Error(), "not 401") {
		t.Fatalf("PingHTTP = %v", err)
	}
	f.InteractHTTP(ctx, url, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "voice"})
	errs := rec.runCleanups()
	if len(errs) != 1 || !strings.Contains(errs[0], "badly signed") {
		t.Fatalf("the fake reported %q", errs)
	}
}

// Sharding: GET /gateway/bot recommends a shard per 1000 servers and
// reports the budget; an unsharded bot with too many servers gets 4011.
func TestGatewayBotRecommendsShards(t *testing.T) {
	t.Parallel()
	gs := make([]discordtest.Guild, 2501)
	for i := range gs {
		gs[i] = discordtest.Guild{ID: strconv.FormatUint(uint64(1000+i)<<22, 10)}
	}
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(gs...),
		discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 7, ResetAfter: time.Hour, MaxConcurrency: 16}))
	s := newSession(t, f)
	gb, err := s.GatewayBot()
	if err != nil {
		t.Fatal(err)
	}
	l := gb.SessionStartLimit
	if gb.Shards != 3 || l.Total != 1000 || l.Remaining != 7 || l.MaxConcurrency != 16 || l.ResetAfter <= 0 || l.ResetAfter > 3600000 {
		t.Fatalf("GET /gateway/bot = %+v", gb)
	}
	if err := s.Open(); err == nil {
		s.Close()
		t.Fatal("an unsharded bot in 2501 servers connected")
	}
	ids := f.Identifies()
	if len(ids) != 1 || ids[0].Accepted || f.SessionStartsRemaining() != 6 {
		t.Fatalf("identifies %+v, remaining %d", ids, f.SessionStartsRemaining())
	}
}
