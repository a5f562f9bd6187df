package voice

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// managerWithModel runs a manager whose sessions open the real realtime
// client against the GA-like fake, and starts a session with ana consented.
func managerWithModel(t *testing.T, f *realtimetest.Server, edit func(*realtime.Config)) (*Manager, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	cfg := realtime.Config{URL: f.URL(), APIKey: realtimetest.DefaultKey, Model: realtimetest.DefaultModel,
		Instructions: "You are Clankie.", MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	opener := func(ctx context.Context, out realtime.Listener) (Model, error) {
		c := cfg
		c.Listener = out
		return realtime.Start(ctx, c, log.Named("realtime"))
	}
	m := startManager(t, Config{Model: opener, Log: log}, nil, guild, voiceStates(lounge, ana)...)
	if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	return m, logs
}

func modelSays(t testing.TB, m *Manager) string {
	t.Helper()
	st, ok := m.Status(guild)
	if !ok {
		t.Fatal("no session")
	}
	return m.cfg.Catalog.English().Render(st.Model) // as /voice status words it in English
}

// /voice status says, in one sentence, where the model connection stands:
// not configured, connecting, ready (with the briefings the server
// acknowledged), reconnecting (attempt n) or refused and why.
func TestStatusSaysWhereTheModelStands(t *testing.T) {
	t.Run("not configured", func(t *testing.T) {
		m, _, _ := newTestManager(t, config.ConsentExplicit, voiceStates(lounge, ana)...)
		if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
			t.Fatal(err)
		}
		if got := modelSays(t, m); got != "Realtime voice model: not configured (CLANKIE_REALTIME_URL is empty), so briefings are prepared but not sent." {
			t.Errorf("status %q", got)
		}
	})
	t.Run("connecting", func(t *testing.T) {
		f := realtimetest.New(t, realtimetest.HoldSessionUpdated())
		m, _ := managerWithModel(t, f, nil)
		f.WaitFrames(1)
		if got := modelSays(t, m); got != "Realtime voice model: connecting." {
			t.Errorf("status %q", got)
		}
	})
	t.Run("ready, briefing acknowledged", func(t *testing.T) {
		f := realtimetest.New(t)
		m, _ := managerWithModel(t, f, nil)
		// The session briefs as it starts and again when ana's consent
		// lands; depending on which reaches the model first, that is one
		// briefing or two, each acknowledged.
		eventually(t, "a briefing acknowledged", func() bool { st, _ := m.Status(guild); return st.BriefingsDelivered >= 1 })
		if got := modelSays(t, m); got != "Realtime voice model: ready." {
			t.Errorf("status %q", got)
		}
	})
	t.Run("not acknowledged is not delivered", func(t *testing.T) {
		f := realtimetest.New(t, realtimetest.NoAck())
		m, _ := managerWithModel(t, f, nil)
		f.WaitItems(1)
		time.Sleep(30 * time.Millisecond)
		if st, _ := m.Status(guild); st.BriefingsDelivered != 0 {
			t.Errorf("%d briefings delivered without an acknowledgement", st.BriefingsDelivered)
		}
	})
	t.Run("reconnecting", func(t *testing.T) {
		f := realtimetest.New(t)
		m, _ := managerWithModel(t, f, nil)
		eventually(t, "ready", func() bool { return modelSays(t, m) == "Realtime voice model: ready." })
		f.Close() // the endpoint goes away: every attempt now fails
		eventually(t, "reconnecting, second retry", func() bool {
			return strings.HasPrefix(modelSays(t, m), "Realtime voice model: reconnecting (attempt ") && !strings.Contains(modelSays(t, m), "(attempt 2)")
		})
		if got := modelSays(t, m); !strings.HasSuffix(got, ").") {
			t.Errorf("status %q", got)
		}
	})
	for _, tc := range []struct {
		name string
		opts []realtimetest.Option
		edit func(*realtime.Config)
		want string
	}{
		{"wrong key", nil, func(c *realtime.Config) { c.APIKey = "sk-wrong" },
			"Realtime voice model: refused: the endpoint rejected the API key (invalid_api_key); check CLANKIE_REALTIME_API_KEY and CLANKIE_REALTIME_AUTH. It will not retry; fix the setting, then start a new session."},
		{"wrong model", nil, func(c *realtime.Config) { c.Model = "gpt-nope" },
			"Realtime voice model: refused: the endpoint does not offer the model (model_not_found); check CLANKIE_REALTIME_MODEL. It will not retry; fix the setting, then start a new session."},
		{"not a WebSocket", []realtimetest.Option{realtimetest.NotWebSocket()}, nil,
			"Realtime voice model: refused: CLANKIE_REALTIME_URL does not answer as a Realtime WebSocket (http_200). It will not retry; fix the setting, then start a new session."},
		{"garbage", []realtimetest.Option{realtimetest.Garbage()}, nil,
			"Realtime voice model: refused: CLANKIE_REALTIME_URL does not answer as a Realtime WebSocket (not_realtime). It will not retry; fix the setting, then start a new session."},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			f := realtimetest.New(t, tc.opts...)
			m, logs := managerWithModel(t, f, tc.edit)
			eventually(t, "refused", func() bool { return strings.Contains(modelSays(t, m), "refused") })
			if got := modelSays(t, m); got != tc.want {
				t.Errorf("status\n%q\nwant\n%q", got, tc.want)
			}
			time.Sleep(50 * time.Millisecond) // the briefing loop's receipt
			if n := logs.FilterMessage("realtime endpoint refused the session; not reconnecting").Len(); n != 1 {
				t.Errorf("%d refusal log lines, want 1", n)
			}
		})
	}
}
