package realtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// The fake server echoes every briefing back in four ways (an item echo, an
// error event whose message and param are the briefing, an event whose type
// is the briefing, and a non-JSON frame). This scenario runs every path that
// logs, at debug level, and checks that the lines say what happened without
// any content; TestMain checks the whole suite's lines again.
func TestLogsNameEventsButNeverContent(t *testing.T) {
	noLeaks(t)
	f := newFake(t, realtimetest.Reject503(1), realtimetest.EchoContent())
	s, logs := start(t, testConfig(f.URL()))
	text := secret("Lena (consented) is expecting twins in May; she asked to keep it quiet.")
	if err := s.Brief(context.Background(), text, false); err != nil {
		t.Fatal(err)
	}
	f.WaitFrames(2)
	eventually(t, "echoes logged", func() bool {
		return logs.FilterMessage("realtime event").FilterField(zap.String("type", "unparseable")).Len() > 0
	})
	eventually(t, "the briefing acknowledged", func() bool { return s.Stats().ItemsAcked == 1 })
	f.Drop()
	f.WaitConnFrames(2, 2)
	if err := s.Brief(context.Background(), text+" Update.", true); err != nil {
		t.Fatal(err)
	}
	f.WaitConnFrames(2, 3)
	_ = s.Close()

	for _, want := range []struct {
		msg   string
		field zap.Field
	}{
		{"realtime event", zap.String("type", "session.created")},
		{"realtime event", zap.String("type", "conversation.item.added")},
		{"realtime event", zap.String("type", "unrecognized")},
		{"realtime event", zap.String("type", "unparseable")},
		{"realtime server reported an error", zap.String("code", "echo_test")},
		{"realtime briefing sent", zap.String("kind", "briefing")},
		{"realtime briefing sent", zap.String("kind", "reseed")},
		{"realtime briefing sent", zap.String("kind", "refresh")},
		{"realtime connect failed; retrying", zap.Int("status", 503)},
		{"realtime ready", zap.String("host", f.Host())},
		{"realtime connection lost; reconnecting", zap.String("host", f.Host())},
		{"realtime session closed", zap.Int("connects", 2)},
	} {
		if logs.FilterMessage(want.msg).FilterField(want.field).Len() == 0 {
			t.Errorf("no %q line with %s", want.msg, want.field.Key)
		}
	}
	for _, e := range logs.AllUntimed() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && (strings.Contains(s, "?") || strings.Contains(s, "model=")) {
				t.Errorf("%q field %s = %q looks like a URL query", e.Message, k, s)
			}
		}
	}
	// The per-test and suite-wide checks for the briefing and the key run
	// in newLogger's cleanup and TestMain.
}

// A transport error is logged with its text; redact must strip the key and
// the URL's query should a dialer ever put them there.
func TestRedactStripsKeyAndQuery(t *testing.T) {
	noLeaks(t)
	s, _ := start(t, Config{
		URL: "ws://" + freeAddr(t) + "/v1/realtime?tenant=acme-private-tenant", APIKey: testKey, Model: "m1",
		MinBackoff: time.Hour, MaxBackoff: time.Hour,
	})
	msg := "dial " + s.dialURL + " with Bearer " + testKey + " failed; query " + queryOf(s.dialURL)
	got := s.redact(msg)
	if strings.Contains(got, testKey) || strings.Contains(got, "acme-private-tenant") || strings.Contains(got, "model=m1") {
		t.Errorf("redact left a secret: %q", got)
	}
	if !strings.Contains(got, s.host) {
		t.Errorf("redact dropped the host: %q", got)
	}
}
