package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

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
// application's key over timestamp+body, within 5 minutes of now, reaches
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
	e := &Endpoint{Router: router, REST: rest, Key: pub, Log: zap.NewNop(), Now: func() time.Time { return now }}
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
		{"4m59s old", signed(t, priv, cmd("3", "old"), now.Add(-299*time.Second), false), 200, "said old"},
		{"a slow command is deferred", signed(t, priv, cmd("4", "slow"), now, false), 200, `{"type":5,`},
		{"tampered body", signed(t, priv, cmd("5", "x"), now, true), 401, ""},
		{"another key", signed(t, otherPriv, cmd("6", "x"), now, false), 401, ""},
		{"5m01s old", signed(t, priv, cmd("7", "x"), now.Add(-301*time.Second), false), 401, ""},
		{"5m01s ahead", signed(t, priv, cmd("8", "x"), now.Add(301*time.Second), false), 401, ""},
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
