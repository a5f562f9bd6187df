package realtime

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// testKey is the API key every scenario uses; no log line may hold it.
const testKey = "sk-test-realtime-KEY-9d8c7b6a5f4e3d2c"

// suite gathers every log entry of every scenario at debug level, and every
// briefing text used, so TestMain can check the whole run for leaks.
var suite struct {
	core    zapcore.Core
	logs    *observer.ObservedLogs
	mu      sync.Mutex
	secrets []string
}

func TestMain(m *testing.M) {
	suite.core, suite.logs = observer.New(zapcore.DebugLevel)
	suite.secrets = []string{testKey}
	code := m.Run()
	if code == 0 {
		if leaks := leakedSecrets(suite.logs.AllUntimed(), allSecrets()); len(leaks) > 0 {
			fmt.Fprintln(os.Stderr, "suite-wide log check: secrets in log lines:")
			for _, l := range leaks {
				fmt.Fprintln(os.Stderr, "  ", l)
			}
			code = 1
		}
		// Only meaningful when a scenario ran (a run filtered with -run to
		// a pure unit test registers no briefing and logs nothing).
		if len(allSecrets()) > 1 && suite.logs.Len() == 0 {
			fmt.Fprintln(os.Stderr, "suite-wide log check: no log entries were captured; the check proves nothing")
			code = 1
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// secret registers a briefing text as private and returns it.
func secret(text string) string {
	suite.mu.Lock()
	defer suite.mu.Unlock()
	suite.secrets = append(suite.secrets, text)
	return text
}

func allSecrets() []string {
	suite.mu.Lock()
	defer suite.mu.Unlock()
	return append([]string(nil), suite.secrets...)
}

// newLogger returns a debug-level logger feeding both this test's observer
// and the suite's. At the end of the test, this test's lines are checked for
// every secret registered so far.
func newLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	t.Cleanup(func() {
		for _, l := range leakedSecrets(logs.AllUntimed(), allSecrets()) {
			t.Errorf("log line holds a secret: %s", l)
		}
	})
	return zap.New(zapcore.NewTee(core, suite.core)), logs
}

// leakedSecrets returns the rendered log lines that hold any secret, or a
// long enough piece of one (a key cut in half is still a leak).
func leakedSecrets(entries []observer.LoggedEntry, secrets []string) []string {
	var out []string
	for _, e := range entries {
		line := fmt.Sprintf("%s %s %v %s", e.LoggerName, e.Message, e.ContextMap(), e.Stack)
		for _, s := range secrets {
			if leaks(line, s) {
				out = append(out, fmt.Sprintf("%s %v", e.Message, e.ContextMap()))
				break
			}
		}
	}
	return out
}

// leaks reports whether text holds s or any 16-byte piece of it.
func leaks(text, s string) bool {
	const piece = 16
	if len(s) <= piece {
		return strings.Contains(text, s)
	}
	for i := 0; i+piece <= len(s); i++ {
		if strings.Contains(text, s[i:i+piece]) {
			return true
		}
	}
	return false
}

// testConfig is a fast-retrying configuration for url.
func testConfig(url string) Config {
	return Config{
		URL:          url,
		APIKey:       testKey,
		Model:        "gpt-realtime-test",
		Instructions: "You are Clankie, a friendly voice in this channel.",
		MinBackoff:   10 * time.Millisecond,
		MaxBackoff:   50 * time.Millisecond,
	}
}

// start starts a session closed at the end of the test, with goroutines
// checked for leaks after everything else has been cleaned up.
func start(t *testing.T, cfg Config) (*Session, *observer.ObservedLogs) {
	t.Helper()
	log, logs := newLogger(t)
	s, err := Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

// noLeaks registers a goleak check that runs after every later cleanup
// (cleanups run last-registered first), so call it first in a test.
func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}
