package audio

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
)

// sentFrame is one frame the media connection got, and when.
type sentFrame struct {
	at   time.Time
	opus []byte
}

// mediaSink records what the media connection would send and the
// speaking flag.
type mediaSink struct {
	clock    Clock
	mu       sync.Mutex
	frames   []sentFrame
	speaking []bool
	sent     chan struct{}
}

func newMediaSink(clock Clock) *mediaSink {
	return &mediaSink{clock: clock, sent: make(chan struct{}, 10000)}
}

func (m *mediaSink) Send(frame []byte) {
	m.mu.Lock()
	m.frames = append(m.frames, sentFrame{at: m.clock.Now(), opus: frame})
	m.mu.Unlock()
	m.sent <- struct{}{}
}

func (m *mediaSink) Speaking(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.speaking = append(m.speaking, on)
}

func (m *mediaSink) snapshot() ([]sentFrame, []bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sentFrame(nil), m.frames...), append([]bool(nil), m.speaking...)
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
	clock *fakeClock
	media *mediaSink
	model *recordingModel
}

func startOutbound(t *testing.T, rt *opus.Runtime, clock Clock) *outboundRig {
	t.Helper()
	r := &outboundRig{media: newMediaSink(clock), model: &recordingModel{}}
	if fc, ok := clock.(*fakeClock); ok {
		r.clock = fc
	}
	out, err := NewOutbound(OutboundConfig{Encoder: newEncoder(t, rt), Send: r.media.Send, Speaking: r.media.Speaking,
		Model: r.model, Clock: clock})
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

// slot advances the fake clock one frame once the pacer waits for it.
func (r *outboundRig) slot(t *testing.T) {
	t.Helper()
	r.clock.waitArmed(t)
	r.clock.Advance(FrameDuration)
}

// modelTone is d of a freq Hz tone as the model sends it: PCM16 LE mono
// at 24 kHz.
func modelTone(freq float64, d time.Duration) []byte {
	n := int(d * ModelRate / time.Second)
	return pcm.AppendLE(nil, pcm.NewTone(freq, ModelRate, toneAmp).Append(nil, n))
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
func decodeFrames(t *testing.T, frames []sentFrame) []int16 {
	t.Helper()
	dec, err := opus.NewGoDecoder(2)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 2*opus.MaxFrameSamples)
	var mono []int16
	for _, f := range frames {
		n, err := dec.Decode(context.Background(), f.opus, buf)
		if err != nil {
			t.Fatalf("decode a sent frame: %v", err)
		}
		mono = pcm.AppendMono(mono, buf[:2*n])
	}
	return mono
}

// TestOutboundSpeaksPacedOpus: the model's 600 Hz in odd-sized deltas
// leaves as Opus frames, one per 20 ms of the clock, that decode to 600 Hz,
// then exactly five silence frames and the speaking flag off.
func TestOutboundSpeaksPacedOpus(t *testing.T) {
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
			r := startOutbound(t, rt, newFakeClock())
			for _, d := range deltas(modelTone(600, tt.d)) {
				r.out.OutputAudio("resp_1", "item_1", d)
			}
			total := tt.wantFrames + DefaultSilenceFrames
			r.media.waitFrames(t, 1)
			for n := 1; n < total; n++ {
				r.slot(t)
				r.media.waitFrames(t, n+1)
			}
			r.slot(t) // the slot after the last silence frame ends the utterance
			r.clock.Advance(10 * FrameDuration)
			r.media.waitFrames(t, total)
			time.Sleep(10 * time.Millisecond)

			frames, speaking := r.media.snapshot()
			if len(frames) != total {
				t.Fatalf("%d frames sent, want %d audio + %d silence", len(frames), tt.wantFrames, DefaultSilenceFrames)
			}
			for i := 1; i < len(frames); i++ {
				if gap := frames[i].at.Sub(frames[i-1].at); gap != FrameDuration {
					t.Fatalf("frame %d sent %v after the one before, want 20 ms", i, gap)
				}
			}
			audio, silence := frames[:tt.wantFrames], frames[tt.wantFrames:]
			for i, f := range audio {
				if opus.IsSilence(f.opus) {
					t.Fatalf("audio frame %d is a silence frame", i)
				}
			}
			for i, f := range silence {
				if !opus.IsSilence(f.opus) {
					t.Fatalf("frame %d after the audio is %x, want the silence frame f8fffe", i, f.opus)
				}
			}
			mono := decodeFrames(t, audio)
			if len(mono) != tt.wantFrames*opus.FrameSamples {
				t.Fatalf("decoded %d samples, want %d", len(mono), tt.wantFrames*opus.FrameSamples)
			}
			body := mono[5*opus.FrameSamples : len(mono)-2*opus.FrameSamples]
			if dom := pcm.DominantFrequency(body, opus.SampleRate, 100, 4000); dom < 597 || dom > 603 {
				t.Errorf("Clankie's audio decodes to %.1f Hz, want 600 ± 3", dom)
			}
			if amp := pcm.Amplitude(body, opus.SampleRate, 600); amp < 6000 {
				t.Errorf("600 Hz at amplitude %.0f, want about %d", amp, toneAmp)
			}
			if len(speaking) != 2 || !speaking[0] || speaking[1] {
				t.Errorf("speaking flags %v, want [true false]", speaking)
			}
			st := r.out.Stats()
			if st.FramesOut != uint64(tt.wantFrames) || st.SilenceOut != DefaultSilenceFrames || st.AudioOut != time.Duration(tt.wantFrames)*FrameDuration {
				t.Errorf("stats %+v, want %d frames (%v) and 5 silence", st, tt.wantFrames, time.Duration(tt.wantFrames)*FrameDuration)
			}
		})
	}
}

// TestOutboundBargeIn: speech started mid-response drops the queue at
// once, reports the item cut at what was played, refuses the item's late
// deltas and ends with the silence frames; the model is told to cancel
// and truncate.
func TestOutboundBargeIn(t *testing.T) {
	rt := newRuntime(t)
	tests := []struct {
		name   string
		played int // frames played before the barge-in
	}{
		{name: "after the first frame", played: 1},
		{name: "mid response", played: 12},
		{name: "near the end", played: 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startOutbound(t, rt, newFakeClock())
			for _, d := range deltas(modelTone(600, time.Second)) {
				r.out.OutputAudio("resp_7", "item_7", d)
			}
			r.media.waitFrames(t, 1)
			for n := 1; n < tt.played; n++ {
				r.slot(t)
				r.media.waitFrames(t, n+1)
			}
			r.clock.waitArmed(t) // the pacer waits for the next slot
			cutAt, sentAtCut := r.clock.Now(), r.media.count()
			r.out.SpeechStarted(1234)
			// The model keeps sending for a moment before it cancels.
			for _, d := range deltas(modelTone(600, 200*time.Millisecond)) {
				r.out.OutputAudio("resp_7", "item_7", d)
			}
			for range DefaultSilenceFrames + 1 { // five silence frames, then the end
				r.slot(t)
			}
			time.Sleep(10 * time.Millisecond)

			frames, speaking := r.media.snapshot()
			if sentAtCut != tt.played {
				t.Fatalf("%d frames sent before the barge-in, want %d", sentAtCut, tt.played)
			}
			var audioAfter, silenceAfter int
			var lastAudio time.Time
			for i, f := range frames {
				switch {
				case opus.IsSilence(f.opus) && i < sentAtCut:
					t.Errorf("silence frame before the barge-in")
				case opus.IsSilence(f.opus):
					silenceAfter++
				default:
					lastAudio = f.at
					if i >= sentAtCut {
						audioAfter++
					}
				}
			}
			// The clock is stopped while BargeIn runs, so not even a frame
			// in flight can follow it here.
			if audioAfter != 0 {
				t.Errorf("%d audio frames after the barge-in, want 0", audioAfter)
			}
			if stop := lastAudio.Sub(cutAt); stop > 100*time.Millisecond {
				t.Errorf("audio went on %v after the barge-in, want < 100 ms", stop)
			}
			if silenceAfter != DefaultSilenceFrames {
				t.Errorf("%d silence frames after the barge-in, want %d", silenceAfter, DefaultSilenceFrames)
			}
			playedMs := (len(frames) - silenceAfter) * 20
			r.model.mu.Lock()
			cancels, truncates := r.model.cancels, r.model.truncates
			r.model.mu.Unlock()
			if len(cancels) != 1 || cancels[0] != "resp_7" {
				t.Errorf("response.cancel for %q, want one for resp_7", cancels)
			}
			if len(truncates) != 1 || truncates[0].ItemID != "item_7" {
				t.Fatalf("truncates %+v, want one for item_7", truncates)
			}
			if end := truncates[0].AudioEndMs; end < playedMs-20 || end > playedMs+20 {
				t.Errorf("truncated at %d ms, want the %d ms played ± 20", end, playedMs)
			}
			if len(speaking) != 2 || !speaking[0] || speaking[1] {
				t.Errorf("speaking flags %v, want [true false]", speaking)
			}
			st := r.out.Stats()
			if st.BargeIns != 1 || st.DroppedBargeIn != uint64(50-tt.played) || st.DroppedCancelled == 0 || st.Queued != 0 {
				t.Errorf("stats %+v, want 1 barge-in, %d frames dropped, late deltas refused", st, 50-tt.played)
			}
		})
	}
}

// TestOutboundBargeInRealClock runs the barge-in against the real clock
// and the race detector: after BargeIn returns, at most the frame in
// flight is sent.
func TestOutboundBargeInRealClock(t *testing.T) {
	rt := newRuntime(t)
	r := startOutbound(t, rt, SystemClock{})
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
	frames, _ := r.media.snapshot()
	audio := 0
	for _, f := range frames[sentAtCut:] {
		if !opus.IsSilence(f.opus) {
			audio++
		}
	}
	if audio > 1 {
		t.Errorf("%d audio frames after BargeIn returned, want at most 1", audio)
	}
	played := 0
	for _, f := range frames {
		if !opus.IsSilence(f.opus) {
			played++
		}
	}
	if cut.AudioEndMs < (played-1)*20 || cut.AudioEndMs > played*20 {
		t.Errorf("cut at %d ms, %d frames played", cut.AudioEndMs, played)
	}
}

func TestOutboundBargeInWhileQuiet(t *testing.T) {
	rt := newRuntime(t)
	r := startOutbound(t, rt, newFakeClock())
	if cut, ok := r.out.BargeIn(); ok {
		t.Fatalf("BargeIn while quiet = %+v, true", cut)
	}
	r.out.SpeechStarted(0)
	if len(r.model.cancels)+len(r.model.truncates) != 0 {
		t.Error("the model was told to cancel while Clankie was quiet")
	}
	// A new response after a barge-in is heard: only the cut one is refused.
	r.out.OutputAudio("resp_2", "item_2", modelTone(600, 100*time.Millisecond))
	r.media.waitFrames(t, 1)
}

func TestNewOutboundValidates(t *testing.T) {
	if _, err := NewOutbound(OutboundConfig{Send: func([]byte) {}}); err == nil {
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
		o, err := NewOutbound(OutboundConfig{Encoder: newEncoder(t, rt), Send: func([]byte) {}})
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
// lost, its queued frames are dropped at once and counted, its item is
// forgotten (a barge-in afterwards tells the next connection nothing about
// it), and the next connection's answer plays and is cut as usual.
func TestOutboundModelLost(t *testing.T) {
	rt := newRuntime(t)
	r := startOutbound(t, rt, newFakeClock())
	for _, d := range deltas(modelTone(600, time.Second)) {
		r.out.OutputAudio("resp_1", "item_1", d)
	}
	for n := 1; n < 5; n++ {
		r.media.waitFrames(t, n)
		r.slot(t)
	}
	r.media.waitFrames(t, 5)
	r.out.ModelLost()
	lostAt := r.media.count()
	for range DefaultSilenceFrames + 1 { // the silence frames, then the end
		r.slot(t)
	}
	time.Sleep(10 * time.Millisecond)
	frames, _ := r.media.snapshot()
	for _, f := range frames[lostAt:] {
		if !opus.IsSilence(f.opus) {
			t.Fatal("an audio frame of the lost connection's answer was sent after ModelLost")
		}
	}
	if st := r.out.Stats(); st.DroppedModelLost < 40 || st.Queued != 0 {
		t.Errorf("after ModelLost: %+v, want ≥ 40 dropped and none queued", st)
	}
	r.out.SpeechStarted(0)
	r.model.mu.Lock()
	cancels, truncates := len(r.model.cancels), len(r.model.truncates)
	r.model.mu.Unlock()
	if cancels != 0 || truncates != 0 {
		t.Errorf("a barge-in after ModelLost sent %d cancels and %d truncates for the lost item", cancels, truncates)
	}
	// The next connection's answer plays, and a barge-in truncates it.
	sent := r.media.count()
	r.out.OutputAudio("resp_2", "item_2", modelTone(600, 200*time.Millisecond))
	r.media.waitFrames(t, sent+1)
	r.slot(t)
	r.media.waitFrames(t, sent+2)
	r.out.SpeechStarted(0)
	r.model.mu.Lock()
	defer r.model.mu.Unlock()
	if len(r.model.truncates) != 1 || r.model.truncates[0].ItemID != "item_2" || r.model.truncates[0].AudioEndMs != 40 {
		t.Errorf("truncates %+v, want item_2 at 40 ms", r.model.truncates)
	}
}

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
			o, err := NewOutbound(OutboundConfig{Encoder: enc, Send: func([]byte) {}, MaxQueue: tc.maxQueue})
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
