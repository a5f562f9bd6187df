package media_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/media"
)

// TestLogsCarryNoSecretsOrIDs runs a connection through connect, audio
// both ways, a resume and a close with a debug-level observer, and checks
// that no entry carries the token, the session id, a user id or audio.
func TestLogsCarryNoSecretsOrIDs(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	srv := voicetest.New(t, voicetest.Options{})
	const me, other = "812345678901234567", "898765432109876543"
	cfg := config(srv, me, allowAll)
	cfg.Log = zap.New(core)
	a, err := media.Dial(ctxT(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := dial(t, srv, other, allowAll)
	ctx := ctxT(t, 10*time.Second)
	for i := range 5 {
		_ = b.Send(ctx, frame('b', i))
		_ = a.Send(ctx, frame('a', i))
	}
	collect(t, a, 3, 5*time.Second)
	srv.Drop(me)
	waitFor(t, "resume", func() bool { return a.Stats().Resumes == 1 })
	srv.CloseWith(me, media.CloseDisconnected)
	<-a.Done()
	_ = a.Close()
	if logs.Len() == 0 {
		t.Fatal("no log entries: the test would prove nothing")
	}
	for _, e := range logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		for _, secret := range []string{cfg.Token, cfg.SessionID, me, other, "opus:"} {
			if strings.Contains(line, secret) {
				t.Errorf("log entry %q carries %q", line, secret)
			}
		}
	}
}
