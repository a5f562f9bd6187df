package audio

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

// mediaSink stands in for the media connection's Play: Send blocks until
// the connection takes the frame for its slot. With slots nil every frame
// is taken at once; otherwise each value sent on slots (by a test's slot,
// or a ticker standing in for the pacer) takes exactly one.
type mediaSink struct {
	slots  chan struct{}
	mu     sync.Mutex
	frames [][]byte
	sent   chan struct{}
}

func newMediaSink(gated bool) *mediaSink {
	m := &mediaSink{sent: make(chan struct{}, 10000)}
	if gated {
		m.slots = make(chan struct{})
	}
	return m
}

// newPacedSink is a gated sink whose slots come every 20 ms of the real
// clock, as the media connection's pacer takes frames; a slot that finds
// no frame waiting is lost, as the pacer then sends silence.
func newPacedSink(t *testing.T) *mediaSink {
	m := newMediaSink(true)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(FrameDuration)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			select {
			case m.slots <- struct{}{}:
			default:
			}
		}
	}()
	return m
}

func (m *mediaSink) Send(ctx context.Context, frame []byte) error {
	if m.slots != nil {
		select {
		case <-m.slots:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	m.frames = append(m.frames, frame)
	m.mu.Unlock()
	m.sent <- struct{}{}
	return nil
}

func (m *mediaSink) snapshot() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.frames...)
}

func (m *mediaSink) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.frames)
}

// waitFrames waits until n frames in all were sent.
func (m *mediaSink) waitFrames(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for m.count() < n {
		select {
		case <-m.sent:
		case <-deadline:
			t.Fatalf("%d frames sent, want %d", m.count(), n)
		}
	}
}

// recordingModel records the barge-in events the model would get.
type recordingModel struct {
	mu        sync.Mutex
	cancels   []string
	truncates []Cut
}

func (r *recordingModel) CancelResponse(responseID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancels = append(r.cancels, responseID)
	return true
}

func (r *recordingModel) Truncate(itemID string, contentIndex, audioEndMs int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truncates = append(r.truncates, Cut{ItemID: itemID, AudioEndMs: audioEndMs})
	return true
}

type outboundRig struct {
	out   *Outbound
	media *mediaSink
	model *recordingModel
}

// startOutbound runs an Outbound whose Send is a gated mediaSink: a test
// lets each frame through with slot.
func startOutbound(t *testing.T, rt *opus.Runtime) *outboundRig {
	t.Helper()
	return runOutbound(t, rt, newMediaSink(true))
}

func runOutbound(t *testing.T, rt *opus.Runtime, media *mediaSink) *outboundRig {
	t.Helper()
	r := &outboundRig{media: media, model: &recordingModel{}}
	out, err := NewOutbound(OutboundConfig{Encoder: newEncoder(t, rt), Send: r.media.Send, Model: r.model})
	if err != nil {
		t.Fatal(err)
	}
	r.out = out
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = out.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// slot lets one frame through, once the Outbound waits in Send with it.
func (r *outboundRig) slot(t *testing.T) {
	t.Helper()
	select {
	case r.media.slots <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("the Outbound handed no frame over within 5 s")
	}
}

// idle reports whether the Outbound has no frame to hand over: nothing
// takes a slot for a while.
func (r *outboundRig) idle() bool {
	select {
	case r.media.slots <- struct{}{}:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

// modelTone is d of a freq Hz tone as the model sends it: PCM16 LE mono
// at 24 kHz.
func modelTone(freq float64, d time.Duration) []byte {
	n := int(d * ModelRate / time.Second)
	return pcm.AppendLE(nil, pcmtest.NewTone(freq, ModelRate, toneAmp).Append(nil, n))
}

// deltas splits b into odd-sized pieces, as a model's deltas may come.
func deltas(b []byte) [][]byte {
	sizes := []int{1, 7, 333, 1001, 4801, 2, 9999, 55}
	var out [][]byte
	for i := 0; len(b) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// decodeFrames decodes Opus frames with voice/opus and returns mono 48 kHz.
func decodeFrames(t *testing.T, frames [][]byte) []int16 {
	t.Helper()
	dec, err := opus.NewGoDecoder(2)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 2*opus.MaxFrameSamples)
	var mono []int16
	for _, f := range frames {
		n, err := dec.Decode(context.Background(), f, buf)
		if err != nil {
			t.Fatalf("decode a sent frame: %v", err)
		}
		mono = pcm.AppendMono(mono, buf[:2*n])
	}
	return mono
}

// TestOutboundSpeaksOpus: the model's 600 Hz in odd-sized deltas leaves
// as Opus frames that decode to 600 Hz, one per slot the media connection
// grants and never one ahead of it (the Outbound has no clock of its own),
// the last partial frame padded; then nothing more: the silence frames
// and the speaking flag are the media connection's.
func TestOutboundSpeaksOpus(t *testing.T) {
	rt := newRuntime(t)
	tests := []struct {
		name       string
		d          time.Duration
		wantFrames int
	}{
		{name: "whole frames", d: time.Second, wantFrames: 50},
		{name: "last frame padded", d: time.Second + 10*time.Millisecond, wantFrames: 51},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startOutbound(t, rt)
			for _, d := range deltas(modelTone(600, tt.d)) {
				r.out.OutputAudio("resp_1", "item_1", d)
			}
			for n := range tt.wantFrames {
				r.slot(t)
				r.media.waitFrames(t, n+1)
				if got := r.media.count(); got != n+1 {
					t.Fatalf("%d frames handed over for %d slots", got, n+1)
				}
			}
			if !r.idle() {
				t.Fatal("the Outbound handed over a frame after the audio")
			}

			frames := r.media.snapshot()
			if len(frames) != tt.wantFrames {
				t.Fatalf("%d frames sent, want %d", len(frames), tt.wantFrames)
			}
			for i, f := range frames {
				if opus.IsSilence(f) {
					t.Fatalf("frame %d is a silence frame", i)
				}
			}
			mono := decodeFrames(t, frames)
			if len(mono) != tt.wantFrames*opus.FrameSamples {
				t.Fatalf("decoded %d samples, want %d", len(mono), tt.wantFrames*opus.FrameSamples)
			}
			body := mono[5*opus.FrameSamples : len(mono)-2*opus.FrameSamples]
			if dom := pcmtest.DominantFrequency(body, opus.SampleRate, 100, 4000); dom < 597 || dom > 603 {
				t.Errorf("Clankie's audio decodes to %.1f Hz, want 600 ± 3", dom)
			}
			if amp := pcmtest.Amplitude(body, opus.SampleRate, 600); amp < 6000 {
				t.Errorf("600 Hz at amplitude %.0f, want about %d", amp, toneAmp)
			}
			st := r.out.Stats()
			if st.FramesOut != uint64(tt.wantFrames) || st.AudioOut != time.Duration(tt.wantFrames)*FrameDuration || st.Queued != 0 {
				t.Errorf("stats %+v, want %d frames (%v), none queued", st, tt.wantFrames, time.Duration(tt.wantFrames)*FrameDuration)
			}
		})
	}
}

// TestOutboundBargeIn: speech started mid-response drops the queue at
// once, reports the item cut at what was handed over (the frame waiting in
// Send included: the media connection sends it), refuses the item's late
// deltas, and hands over nothing after that frame; the model is told to
// cancel and truncate.
func TestOutboundBargeIn(t *testing.T) {
	rt := newRuntime(t)
	tests := []struct {
		name   string
		played int // frames sent before the barge-in
	}{
		{name: "after the first frame", played: 1},
		{name: "mid response", played: 12},
		{name: "near the end", played: 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startOutbound(t, rt)
			for _, d := range deltas(modelTone(600, time.Second)) {
				r.out.OutputAudio("resp_7", "item_7", d)
			}
			for n := range tt.played {
				r.slot(t)
				r.media.waitFrames(t, n+1)
			}
			waitQueued(t, r.out, 50-tt.played-1) // the next frame waits in Send
			r.out.SpeechStarted(1234)
			// The model keeps sending for a moment before it cancels.
			for _, d := range deltas(modelTone(600, 200*time.Millisecond)) {
				r.out.OutputAudio("resp_7", "item_7", d)
			}
			r.slot(t) // the frame already handed over
			if !r.idle() {
				t.Error("the Outbound handed over audio after the barge-in")
			}

			frames := r.media.snapshot()
			if len(frames) != tt.played+1 {
				t.Errorf("%d frames sent, want the %d before the barge-in and the one in Send", len(frames), tt.played)
			}
			r.model.mu.Lock()
			cancels, truncates := r.model.cancels, r.model.truncates
			r.model.mu.Unlock()
			if len(cancels) != 1 || cancels[0] != "resp_7" {
				t.Errorf("response.cancel for %q, want one for resp_7", cancels)
			}
			if len(truncates) != 1 || truncates[0].ItemID != "item_7" {
				t.Fatalf("truncates %+v, want one for item_7", truncates)
			}
			if end, want := truncates[0].AudioEndMs, len(frames)*20; end != want {
				t.Errorf("truncated at %d ms, want the %d ms sent", end, want)
			}
			st := r.out.Stats()
			if st.BargeIns != 1 || st.DroppedBargeIn != uint64(50-tt.played-1) || st.DroppedCancelled == 0 || st.Queued != 0 {
				t.Errorf("stats %+v, want 1 barge-in, %d frames dropped, late deltas refused", st, 50-tt.played-1)
			}
		})
	}
}

// waitQueued waits until n frames are queued.
func waitQueued(t *testing.T, o *Outbound, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for o.Stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames queued, want %d", o.Stats().Queued, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestOutboundBargeInRealClock runs the barge-in against slots on the real
// clock and the race detector: after BargeIn returns, at most the frame
// already in Send is sent.
func TestOutboundBargeInRealClock(t *testing.T) {
	rt := newRuntime(t)
	r := runOutbound(t, rt, newPacedSink(t))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for _, d := range deltas(modelTone(600, 2*time.Second)) {
			r.out.OutputAudio("resp_1", "item_1", d)
		}
	}()
	defer func() { <-wrote }()
	r.media.waitFrames(t, 5)
	cut, ok := r.out.BargeIn()
	sentAtCut := r.media.count()
	if !ok || cut.ItemID != "item_1" || cut.ResponseID != "resp_1" {
		t.Fatalf("BargeIn = %+v, %t; want item_1 of resp_1", cut, ok)
	}
	time.Sleep(300 * time.Millisecond)
	sent := r.media.count()
	if sent > sentAtCut+1 {
		t.Errorf("%d frames sent after BargeIn returned, want at most 1", sent-sentAtCut)
	}
	if cut.AudioEndMs < (sent-1)*20 || cut.AudioEndMs > sent*20 {
		t.Errorf("cut at %d ms, %d frames sent", cut.AudioEndMs, sent)
	}
}

func TestOutboundBargeInWhileQuiet(t *testing.T) {
	rt := newRuntime(t)
	r := startOutbound(t, rt)
	if cut, ok := r.out.BargeIn(); ok {
		t.Fatalf("BargeIn while quiet = %+v, true", cut)
	}
	r.out.SpeechStarted(0)
	if len(r.model.cancels)+len(r.model.truncates) != 0 {
		t.Error("the model was told to cancel while Clankie was quiet")
	}
	// A new response after a barge-in is heard: only the cut one is refused.
	r.out.OutputAudio("resp_2", "item_2", modelTone(600, 100*time.Millisecond))
	r.slot(t)
	r.media.waitFrames(t, 1)
}

func TestNewOutboundValidates(t *testing.T) {
	if _, err := NewOutbound(OutboundConfig{Send: discard}); err == nil {
		t.Error("NewOutbound without an encoder succeeded")
	}
	rt := newRuntime(t)
	if _, err := NewOutbound(OutboundConfig{Encoder: newEncoder(t, rt)}); err == nil {
		t.Error("NewOutbound without a send function succeeded")
	}
}

// TestOutboundDeltaSplitInvariant: however the model splits its audio
// (odd byte counts included), the same Opus frames come out.
func TestOutboundDeltaSplitInvariant(t *testing.T) {
	rt := newRuntime(t)
	speech := modelTone(600, 500*time.Millisecond)
	encode := func(split func([]byte) [][]byte) [][]byte {
		o, err := NewOutbound(OutboundConfig{Encoder: newEncoder(t, rt), Send: discard})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range split(speech) {
			o.OutputAudio("r", "i", d)
		}
		var frames [][]byte
		for _, f := range o.queue {
			frames = append(frames, f.opus)
		}
		return frames
	}
	whole := encode(func(b []byte) [][]byte { return [][]byte{b} })
	bytewise := encode(func(b []byte) [][]byte {
		out := make([][]byte, len(b))
		for i := range b {
			out[i] = b[i : i+1]
		}
		return out
	})
	odd := encode(deltas)
	if len(whole) != 25 {
		t.Fatalf("%d frames from 500 ms, want 25", len(whole))
	}
	for name, got := range map[string][][]byte{"byte by byte": bytewise, "odd sizes": odd} {
		if len(got) != len(whole) {
			t.Fatalf("%s: %d frames, want %d", name, len(got), len(whole))
		}
		for i := range got {
			if string(got[i]) != string(whole[i]) {
				t.Fatalf("%s: frame %d differs from the one encoded from a single delta", name, i)
			}
		}
	}
}

// TestOutboundModelLost: when the model connection that was speaking is
// lost, its queued frames are dropped at once and counted (only the frame
// already in Send goes on), its item is forgotten (a barge-in afterwards
// tells the next connection nothing about it), and the next connection's
// answer plays and is cut as usual.
func TestOutboundModelLost(t *testing.T) {
	rt := newRuntime(t)
	r := startOutbound(t, rt)
	for _, d := range deltas(modelTone(600, time.Second)) {
		r.out.OutputAudio("resp_1", "item_1", d)
	}
	for n := range 5 {
		r.slot(t)
		r.media.waitFrames(t, n+1)
	}
	waitQueued(t, r.out, 50-6)
	r.out.ModelLost()
	r.slot(t) // the frame already handed over
	if !r.idle() {
		t.Fatal("an audio frame of the lost connection's answer was handed over after ModelLost")
	}
	if st := r.out.Stats(); st.DroppedModelLost != 50-6 || st.Queued != 0 {
		t.Errorf("after ModelLost: %+v, want %d dropped and none queued", st, 50-6)
	}
	r.out.SpeechStarted(0)
	r.model.mu.Lock()
	cancels, truncates := len(r.model.cancels), len(r.model.truncates)
	r.model.mu.Unlock()
	if cancels != 0 || truncates != 0 {
		t.Errorf("a barge-in after ModelLost sent %d cancels and %d truncates for the lost item", cancels, truncates)
	}
	// The next connection's answer plays, and a barge-in truncates it at
	// what was handed over: two frames sent, the third waiting in Send.
	sent := r.media.count()
	r.out.OutputAudio("resp_2", "item_2", modelTone(600, 200*time.Millisecond))
	r.slot(t)
	r.slot(t)
	r.media.waitFrames(t, sent+2)
	waitQueued(t, r.out, 10-3)
	r.out.SpeechStarted(0)
	r.model.mu.Lock()
	defer r.model.mu.Unlock()
	if len(r.model.truncates) != 1 || r.model.truncates[0].ItemID != "item_2" || r.model.truncates[0].AudioEndMs != 60 {
		t.Errorf("truncates %+v, want item_2 at 60 ms", r.model.truncates)
	}
}

// discard is a Send that takes every frame at once.
func discard(context.Context, []byte) error { return nil }

// countingEncoder stands in for Opus where only the number of encodes
// matters.
type countingEncoder struct{ n int }

func (e *countingEncoder) Encode(_ context.Context, _ []int16, out []byte) (int, error) {
	e.n++
	out[0] = 0xFC
	return 1, nil
}

// TestOutboundDropsWhatCannotQueueBeforeEncoding: a model that sends audio
// far faster than it plays (here 2 s at once into a queue of 10 frames)
// costs only the encodes the queue can take; the rest is dropped unencoded
// and counted as overflow.
func TestOutboundDropsWhatCannotQueueBeforeEncoding(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxQueue int
		audio    time.Duration
		encoded  int
	}{
		{"fits", 200, 2 * time.Second, 100},
		{"overflows", 10, 2 * time.Second, 10},
		{"overflows across deltas", 10, 400 * time.Millisecond, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := &countingEncoder{}
			o, err := NewOutbound(OutboundConfig{Encoder: enc, Send: discard, MaxQueue: tc.maxQueue})
			if err != nil {
				t.Fatal(err)
			}
			pcmBytes := int(tc.audio/FrameDuration) * 960 // 20 ms of PCM16 at 24 kHz
			o.OutputAudio("resp_1", "item_1", make([]byte, pcmBytes/2))
			o.OutputAudio("resp_1", "item_1", make([]byte, pcmBytes-pcmBytes/2))
			frames := int(tc.audio / FrameDuration)
			st := o.Stats()
			if enc.n != tc.encoded || st.Encoded != uint64(tc.encoded) {
				t.Errorf("%d encodes (Encoded %d), want %d", enc.n, st.Encoded, tc.encoded)
			}
			if want := uint64(frames - tc.encoded); st.DroppedOverflow != want {
				t.Errorf("DroppedOverflow = %d, want %d", st.DroppedOverflow, want)
			}
			if st.Queued != tc.encoded {
				t.Errorf("Queued = %d, want %d", st.Queued, tc.encoded)
			}
		})
	}
}
