package realtime

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// lostListener counts what a ConnectionListener hears.
type lostListener struct {
	lost, audio atomic.Int64
}

func (l *lostListener) OutputAudio(_, _ string, pcm []byte) { l.audio.Add(int64(len(pcm))) }
func (l *lostListener) SpeechStarted(int)                   {}
func (l *lostListener) SpeechStopped(int)                   {}
func (l *lostListener) ModelLost()                          { l.lost.Add(1) }

// forgetWatch records, for every audio append and briefing the fake
// receives once armed, anything the fake still holds that must have been
// forgotten by then: an item or pending input audio carrying the marker
// text or the marker byte.
type forgetWatch struct {
	fake   atomic.Pointer[realtimetest.Server]
	armed  atomic.Bool
	text   string
	marker byte
	mu     sync.Mutex
	bad    []string
	// seen counts the frames checked.
	seen atomic.Int64
}

func (w *forgetWatch) onFrame(fr realtimetest.Frame) {
	f := w.fake.Load()
	if !w.armed.Load() || f == nil || (fr.Type != "input_audio_buffer.append" && fr.Type != "conversation.item.create") {
		return
	}
	defer w.seen.Add(1)
	items, pending := f.Live()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		if strings.Contains(it.Text, w.text) || bytes.IndexByte(it.Audio, w.marker) >= 0 {
			w.bad = append(w.bad, fr.Type+" arrived while the fake held "+it.Role+" item "+it.ID+" of connection "+strconv.Itoa(it.Conn))
		}
	}
	for _, p := range pending {
		if bytes.IndexByte(p, w.marker) >= 0 {
			w.bad = append(w.bad, fr.Type+" arrived while the fake held their audio uncommitted")
		}
	}
}

func (w *forgetWatch) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bad...)
}

func chunkOf(b byte) []byte { return bytes.Repeat([]byte{b}, 960) }

// TestForgetEndsTheConversationBeforeAnythingElse: when the consented set
// shrinks the model must lose everything that may carry the person — the
// briefing with their facts, every audio turn (the mix holds their voice),
// audio not committed yet, and the answers that may repeat either — before
// it is sent anything more. Forget replaces the conversation: every audio
// append and briefing the fake receives after it arrives when no live
// conversation holds any of that, and the new conversation starts with the
// new briefing.
func TestForgetEndsTheConversationBeforeAnythingElse(t *testing.T) {
	noLeaks(t)
	w := &forgetWatch{text: "Jo", marker: 0x11} // in the briefing and the answer
	f := newFake(t, realtimetest.OnFrame(w.onFrame))
	w.fake.Store(f)
	l := &lostListener{}
	cfg := testConfig(f.URL())
	cfg.Listener = l
	s, logs := start(t, cfg)
	jo := secret("Jo (consented) is allergic to bees; she calls her bike Marigold.")
	if err := s.Brief(context.Background(), jo, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "briefed", func() bool { return s.Stats().ItemsAcked == 1 })
	for range 3 {
		if !s.AppendAudio(chunkOf(0x11)) {
			t.Fatal("AppendAudio refused while ready")
		}
	}
	eventually(t, "audio received", func() bool { return len(f.Audio(1)) == 3*960 })
	if f.Commit(1) == "" {
		t.Fatal("nothing committed")
	}
	f.Respond(1, "Jo, how is Marigold?")
	s.AppendAudio(chunkOf(0x11)) // a turn under way, not committed
	eventually(t, "audio received", func() bool { return len(f.Audio(1)) == 4*960 })
	if items, _ := f.Live(); len(items) != 3 {
		t.Fatalf("the fake holds %d items, want the briefing, the turn and the answer", len(items))
	}

	w.armed.Store(true)
	s.Forget()
	kai := secret("Kai (consented) collects stamps.")
	if err := s.Brief(context.Background(), kai, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a briefing and audio sent after Forget", func() bool {
		s.AppendAudio(chunkOf(0x22))
		return w.seen.Load() >= 2
	})
	for _, v := range w.violations() {
		t.Error(v)
	}
	eventually(t, "audio flows to a new connection", func() bool {
		s.AppendAudio(chunkOf(0x22))
		return len(f.Audio(2)) > 0
	})
	c1 := f.Conn(1)
	<-c1.Ended
	if code := f.CloseCode(c1); code != websocket.CloseNormalClosure {
		t.Errorf("the forgotten connection closed with %d, want 1000", code)
	}
	for _, fr := range f.WaitConnFrames(2, 3) {
		if fr.Type == "conversation.item.create" && fr.Text != RefreshPrefix+kai {
			t.Errorf("the new conversation was briefed with %q, want only the new briefing", fr.Text)
		}
	}
	if got := f.WaitConnFrames(2, 3); got[0].Type != "session.update" || got[1].Type != "conversation.item.create" {
		t.Errorf("the new connection's first frames are %s, %s; want session.update, the new briefing", got[0].Type, got[1].Type)
	}
	items, _ := f.Live()
	for _, it := range items {
		if it.Conn != 2 || strings.Contains(it.Text, "Jo") {
			t.Errorf("still live after Forget: %s item %s of connection %d", it.Role, it.ID, it.Conn)
		}
	}
	if b := f.Audio(2); bytes.IndexByte(b, 0x11) >= 0 {
		t.Error("audio appended before Forget reached the new conversation")
	}
	st := s.Stats()
	if st.ConversationsReplaced != 1 || st.Reconnects != 0 || st.Connects != 2 {
		t.Errorf("Stats = %+v, want one conversation replaced and no reconnect", st)
	}
	if l.lost.Load() == 0 {
		t.Error("the audio path was not told to drop the forgotten conversation's answer")
	}
	if logs.FilterMessage("realtime connection lost; reconnecting").Len() != 0 {
		t.Error("a forgotten conversation was logged as a lost connection")
	}
}

// TestForgetBeforeAnythingWasSentKeepsTheConnection: a connection that
// carried no briefing and no audio holds nothing to forget; it stays, and
// the briefing given after Forget is its first.
func TestForgetBeforeAnythingWasSentKeepsTheConnection(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	s, _ := start(t, testConfig(f.URL()))
	eventually(t, "connected", func() bool { return s.Stats().Connected })
	s.Forget()
	text := secret("Lee (consented) sings in a choir.")
	if err := s.Brief(context.Background(), text, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "briefed", func() bool { return s.Stats().ItemsAcked == 1 })
	eventually(t, "audio flows", func() bool { return s.AppendAudio(chunkOf(0x22)) })
	if st := s.Stats(); st.ConversationsReplaced != 0 || st.Connects != 1 {
		t.Errorf("Stats = %+v, want the one connection kept", st)
	}
}
