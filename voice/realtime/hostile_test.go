package realtime

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/clankie/clankie/voice/audio"
)

// countingEncoder counts the Opus encodes the speaking path asks for.
type countingEncoder struct{ n atomic.Int64 }

func (e *countingEncoder) Encode(_ context.Context, _ []int16, out []byte) (int, error) {
	e.n.Add(1)
	out[0] = 0xFC
	return 1, nil
}

// TestHostileAudioDeltasCostBoundedEncodes: an endpoint that answers with
// one 12 MiB response.output_audio.delta (13,107 frames of audio) made the
// bridge decode and encode all of it on the read goroutine. Now an event
// over 1 MiB is refused unread (close 1009, counted, the session
// reconnects), and a delta under that but over 2 s of audio is cut at 2 s
// (counted): the speaking path encodes at most 100 frames per delta.
func TestHostileAudioDeltasCostBoundedEncodes(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	enc := &countingEncoder{}
	out, err := audio.NewOutbound(audio.OutboundConfig{Encoder: enc, Send: func(context.Context, []byte) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(f.URL())
	cfg.Listener = out
	s, _ := start(t, cfg)
	eventually(t, "connected", func() bool { return s.Stats().Connected })

	// One event of 12 MiB (9 MiB of PCM as base64, 9830 frames): refused
	// from its header.
	f.EmitAudio(1, "resp_1", "item_1", make([]byte, 9<<20), 9<<20)
	eventually(t, "the event refused or heard", func() bool {
		st := s.Stats()
		return st.OversizedEvents > 0 || st.AudioBytesReceived > 0
	})
	if s.Stats().AudioBytesReceived > 0 { // it was read: let its encodes finish
		eventually(t, "the encodes settle", func() bool {
			n := enc.n.Load()
			time.Sleep(200 * time.Millisecond)
			return n > 0 && enc.n.Load() == n
		})
	}
	if n := enc.n.Load(); n != 0 {
		t.Errorf("%d encodes for a 12 MiB event, want 0 (refused unread)", n)
	}
	c1 := f.Conn(1)
	select {
	case <-c1.Ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection that sent a 12 MiB event was kept")
	}
	if code := f.CloseCode(c1); code != websocket.CloseMessageTooBig {
		t.Errorf("close code %d for the oversized event, want 1009", code)
	}
	eventually(t, "reconnected", func() bool { return s.Stats().Connects == 2 && s.Stats().Connected })
	if st := s.Stats(); st.OversizedEvents != 1 || st.AudioBytesReceived != 0 {
		t.Errorf("Stats = %+v, want 1 oversized event and no audio received", st)
	}

	// One delta of 7 s of PCM, under the event limit: 2 s of it is kept.
	const long = 7 * SampleRate * 2
	f.EmitAudio(2, "resp_2", "item_2", make([]byte, long), long)
	eventually(t, "the delta encoded", func() bool { return enc.n.Load() >= 100 })
	f.EmitAudio(2, "resp_2", "item_2", make([]byte, 960), 960) // a marker: the read loop is past the long delta
	eventually(t, "the marker heard", func() bool { return s.Stats().AudioBytesReceived == maxDeltaBytes+960 })
	if n := enc.n.Load(); n != 101 {
		t.Errorf("%d encodes for a 7 s delta and a 20 ms one, want 101 (2 s + 20 ms)", n)
	}
	st := s.Stats()
	if st.AudioBytesReceived != maxDeltaBytes+960 || st.AudioBytesCut != long-maxDeltaBytes {
		t.Errorf("Stats = %+v, want %d bytes kept and %d cut", st, maxDeltaBytes, long-maxDeltaBytes)
	}
	if !st.Connected || st.Connects != 2 {
		t.Errorf("Stats = %+v, want the second connection still up", st)
	}
}

// panickingListener panics on the model's audio, standing in for any bug a
// server's event could reach on the read goroutine.
type panickingListener struct{}

func (panickingListener) OutputAudio(string, string, []byte) {
	var frames []int
	_ = frames[len(frames)+1] // index out of range, as a malformed event might cause
}
func (panickingListener) SpeechStarted(int) {}
func (panickingListener) SpeechStopped(int) {}

// TestAPanicOnAServerEventReplacesTheConnection: the model's server is a
// network peer, and a panic while handling one of its events must not end
// the process. It is recovered, counted, logged without its value, and the
// connection is replaced (the latest briefing re-seeded).
func TestAPanicOnAServerEventReplacesTheConnection(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	cfg := testConfig(f.URL())
	cfg.Listener = panickingListener{}
	s, logs := start(t, cfg)
	eventually(t, "connected", func() bool { return s.Stats().Connected })

	f.EmitAudio(1, "resp_1", "item_1", []byte("SECRET-AUDIO-0123456789"), 1<<10)
	eventually(t, "the panic recovered and the connection replaced", func() bool {
		st := s.Stats()
		return st.Panics == 1 && st.Reconnects == 1 && st.Connected
	})
	if n := logs.FilterMessage("realtime server event panicked our handling; connection replaced").Len(); n != 1 {
		t.Fatalf("%d log lines about the panic, want 1", n)
	}
	for _, e := range logs.AllUntimed() {
		for k, v := range e.ContextMap() {
			if s := fmt.Sprint(v); strings.Contains(s, "index out of range") || strings.Contains(s, "SECRET") {
				t.Errorf("log %q field %s holds the panic or the content: %s", e.Message, k, s)
			}
		}
	}
}
