package bridges

import (
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// The transcripts the realtime fake gives each tone the tests' people
// speak: 440 Hz addresses Clankie, 550 Hz is a follow-up without his name,
// 700 Hz and 1000 Hz talk to each other.
func toneTranscripts(pcmLE []byte) (string, bool) {
	samples, _ := pcm.AppendFromLE(nil, pcmLE)
	if len(samples) < 2400 {
		return "", false
	}
	f := pcmtest.DominantFrequency(samples, realtime.SampleRate, 100, 4000)
	switch {
	case f > 430 && f < 450:
		return "Clankie, what do you know about me?", true
	case f > 540 && f < 560:
		return "and what else?", true
	case f > 690 && f < 710:
		return "did you see the match last night", true
	case f > 990 && f < 1010:
		return "hello everyone", true
	}
	return "", true
}

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

// items returns the briefing texts received so far: the user items that
// are not an utterance's label.
func (f *fakeRealtime) items() []string {
	var out []string
	for _, it := range f.Items() {
		if !isLabel(it) {
			out = append(out, it)
		}
	}
	return out
}

// isLabel reports whether an item's text is an utterance's label, <@id>.
func isLabel(text string) bool {
	id, ok := strings.CutPrefix(text, "<@")
	id, ok2 := strings.CutSuffix(id, ">")
	return ok && ok2 && api.ValidSnowflake(id)
}

// waitItems waits for at least n briefing items and returns them all.
func (f *fakeRealtime) waitItems(t *testing.T, n int) []string {
	t.Helper()
	waitFor(t, 10*time.Second, "realtime briefing items", func() bool { return len(f.items()) >= n })
	return f.items()
}

// drop closes every connection from the server side.
func (f *fakeRealtime) drop() { f.Drop() }
