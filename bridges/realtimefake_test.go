package bridges

import (
	"testing"
	"time"

	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// Realtime settings the voice tests use; the fake accepts only these.
const (
	realtimeKey   = "sk-realtime-secret-key-77"
	realtimeModel = "voice-model-1"
)

// fakeRealtime is the GA-like realtime fake (realtimetest): it validates
// every client frame strictly against OpenAI's schemas and acknowledges
// items like the live server.
type fakeRealtime struct{ *realtimetest.Server }

func newFakeRealtime(t testing.TB, opts ...realtimetest.Option) *fakeRealtime {
	base := []realtimetest.Option{realtimetest.WithKey(realtimeKey), realtimetest.WithModels(realtimeModel)}
	return &fakeRealtime{realtimetest.New(t, append(base, opts...)...)}
}

type realtimeEvent struct {
	conn int // 0-based
	typ  string
	text string // the item's text, for conversation.item.create
	raw  string
}

func (f *fakeRealtime) url() string { return f.URL() }

func (f *fakeRealtime) snapshot() (events []realtimeEvent, conns, closed int) {
	for _, fr := range f.AllFrames() {
		events = append(events, realtimeEvent{conn: fr.Conn - 1, typ: fr.Type, text: fr.Text, raw: string(fr.Raw)})
	}
	conns, closed = f.Conns()
	return events, conns, closed
}

// items returns the briefing texts received so far.
func (f *fakeRealtime) items() []string { return f.Items() }

// waitItems waits for at least n briefing items and returns them all.
func (f *fakeRealtime) waitItems(t *testing.T, n int) []string {
	t.Helper()
	waitFor(t, 10*time.Second, "realtime briefing items", func() bool { return len(f.Items()) >= n })
	return f.Items()
}

// drop closes every connection from the server side.
func (f *fakeRealtime) drop() { f.Drop() }
