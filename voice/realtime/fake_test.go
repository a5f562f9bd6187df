package realtime

import (
	"net"
	"testing"

	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// testModel is the model every scenario asks for; the fake offers it.
const testModel = "gpt-realtime-test"

// newFake starts the GA-like fake (realtimetest) accepting testKey and
// testModel; every client frame is validated strictly against OpenAI's
// schemas, and an invalid one fails the test.
func newFake(t *testing.T, opts ...realtimetest.Option) *realtimetest.Server {
	return newFakeOn(t, nil, opts...)
}

// newFakeOn starts the fake on ln (nil: a fresh loopback port).
func newFakeOn(t *testing.T, ln net.Listener, opts ...realtimetest.Option) *realtimetest.Server {
	t.Helper()
	return realtimetest.NewOn(t, ln, append([]realtimetest.Option{realtimetest.WithKey(testKey), realtimetest.WithModels(testModel)}, opts...)...)
}

// instructions is a session.update frame's instructions.
func instructions(f realtimetest.Frame) string {
	s, _ := f.Session["instructions"].(string)
	return s
}

// eventually polls cond until it holds, failing the test after 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	realtimetest.Eventually(t, what, cond)
}
