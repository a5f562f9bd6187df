package bot

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/internal/discordtest"
)

// Servers of the click tests: the router serves served, not unserved.
const (
	servedGuild   = "910000000000000001"
	unservedGuild = "910000000000000002"
)

// mapClaims claims each interaction id once, as the memory service does.
type mapClaims struct {
	mu sync.Mutex
	ok map[string]bool
}

func (c *mapClaims) ClaimInteraction(_ context.Context, id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok[id] {
		return false, nil
	}
	c.ok[id] = true
	return true, nil
}

// TestClicksOverTheGatewayAndHTTP: a click the fake Discord sends reaches
// the handler its custom_id's prefix names, through the commands'
// middleware, over the gateway and over HTTP alike; every answer is a new
// ephemeral message mentioning nobody, and a redelivered click is
// answered once.
func TestClicksOverTheGatewayAndHTTP(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordtest.NewSpec()), discordtest.WithGuilds(
		discordtest.Guild{ID: servedGuild, Name: "served"}, discordtest.Guild{ID: unservedGuild, Name: "unserved"}))
	var runs atomic.Int32
	var mu sync.Mutex
	var seen []interaction.Invocation
	core, logs := observer.New(zap.DebugLevel)
	router := NewRouter(zap.New(core), Config{Guilds: []string{servedGuild}, DeferAfter: 300 * time.Millisecond},
		demo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			runs.Add(1)
			mu.Lock()
			seen = append(seen, inv)
			mu.Unlock()
			switch inv.CustomID {
			case "demo:panic":
				panic("a click's handler")
			case "demo:slow":
				time.Sleep(800 * time.Millisecond)
				return interaction.Reply{Content: "late <@1>"}, nil
			}
			return interaction.Reply{Content: "clicked " + inv.CustomID + " @everyone"}, nil
		}))
	endpoint := serveOnBoth(t, fake, router)

	for _, transport := range []struct {
		name  string
		click func(context.Context, discordtest.ClickSpec) *discordtest.Interaction
	}{
		{"gateway", fake.Click},
		{"http", func(ctx context.Context, spec discordtest.ClickSpec) *discordtest.Interaction {
			return fake.ClickHTTP(ctx, endpoint, spec)
		}},
	} {
		for _, tc := range []struct {
			name     string
			guild    string
			customID string
			want     string
			runs     int32
			deferred bool
		}{
			{"a click reaches its prefix's handler", servedGuild, "demo:abc", "clicked demo:abc @everyone", 1, false},
			{"an unknown prefix is stale", servedGuild, "other:abc", interaction.StaleSentence, 0, false},
			{"a 101-character custom_id is stale", servedGuild, "demo:" + strings.Repeat("a", 96), interaction.StaleSentence, 0, false},
			{"a panic is the failure sentence", servedGuild, "demo:panic", genericFailure, 1, false},
			{"a slow click is deferred", servedGuild, "demo:slow", "late <@1>", 1, true},
			{"a server off the allow-list is refused", unservedGuild, "demo:abc", interaction.NotServedSentence, 0, false},
		} {
			t.Run(transport.name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				before := runs.Load()
				in := transport.click(ctx, discordtest.ClickSpec{GuildID: tc.guild, UserID: "800000000000000009", MessageID: "700000000000000001", CustomID: tc.customID})
				m, err := in.WaitReply(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Content != tc.want || !m.Ephemeral() || m.AllowedMentions == nil || len(m.AllowedMentions.Parse) != 0 {
					t.Fatalf("reply %+v, want %q, ephemeral, mentioning nobody", m, tc.want)
				}
				cbs := in.Callbacks()
				wantType := discordgo.InteractionResponseChannelMessageWithSource
				if tc.deferred {
					wantType = discordgo.InteractionResponseDeferredChannelMessageWithSource
				}
				if len(cbs) != 1 || cbs[0].Type != wantType || !cbs[0].Ephemeral() {
					t.Fatalf("callbacks %+v, want one of type %d", cbs, wantType)
				}
				if n := runs.Load() - before; n != tc.runs {
					t.Fatalf("handler ran %d times, want %d", n, tc.runs)
				}
				if tc.runs == 1 {
					mu.Lock()
					inv := seen[len(seen)-1]
					mu.Unlock()
					if inv.CustomID != tc.customID || inv.User.ID != "800000000000000009" || inv.GuildID != tc.guild || inv.ID != in.ID {
						t.Fatalf("the handler saw %+v", inv)
					}
				}
			})
		}
	}

	t.Run("gateway/a redelivered click is answered once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		before := runs.Load()
		in := fake.Click(ctx, discordtest.ClickSpec{GuildID: servedGuild, UserID: "800000000000000009", CustomID: "demo:again"})
		if _, err := in.WaitReply(ctx); err != nil {
			t.Fatal(err)
		}
		in.Redeliver()
		// The router logs the redelivery it drops (Wait cannot be used
		// while the gateway may still deliver).
		for logs.FilterMessage("interaction already answered").Len() == 0 {
			if ctx.Err() != nil {
				t.Fatal("the redelivery never reached the router")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := runs.Load() - before; n != 1 || len(in.Callbacks()) != 1 {
			t.Fatalf("handler ran %d times; callbacks %+v", n, in.Callbacks())
		}
	})
	t.Run("http/a redelivered click is refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		before := runs.Load()
		in := fake.ClickHTTP(ctx, endpoint, discordtest.ClickSpec{GuildID: servedGuild, UserID: "800000000000000009", CustomID: "demo:again"})
		if _, err := in.WaitReply(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := fake.PostSigned(ctx, endpoint, discordtest.SignedPost{Body: in.Payload()})
		if err != nil || res.Status != http.StatusConflict {
			t.Fatalf("the same click again answered %+v, %v; want 409", res, err)
		}
		if n := runs.Load() - before; n != 1 {
			t.Fatalf("handler ran %d times", n)
		}
	})
}

// serveOnBoth serves router to fake over the gateway (a session opened on
// it) and over HTTP interactions (an Endpoint, whose URL it returns), as
// a bridge does with one or the other, and stops both when the test ends.
func serveOnBoth(t *testing.T, fake *discordtest.Fake, router *Router) (endpoint string) {
	t.Helper()
	t.Cleanup(router.Wait)
	gw, err := NewSession(fake.Token(), fake.APIURL(), discordgo.IntentsGuilds)
	if err != nil {
		t.Fatal(err)
	}
	gw.AddHandler(router.Handle)
	if err := gw.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = fake.WaitHeartbeat(ctx)
		_ = gw.Close()
	})
	rest, err := NewSession(fake.Token(), fake.APIURL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := hex.DecodeString(fake.PublicKey())
	srv := httptest.NewServer(&Endpoint{Router: router, REST: rest, Key: ed25519.PublicKey(key),
		Claims: &mapClaims{ok: map[string]bool{}}, Log: zap.NewNop()})
	t.Cleanup(srv.Close)
	return srv.URL
}
