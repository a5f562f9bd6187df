package audio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

const botID = "900000000000000001"

// consentSet is a consent function tests can change while audio flows.
type consentSet struct {
	mu sync.Mutex
	ok map[string]bool
}

func newConsentSet(ids ...string) *consentSet {
	c := &consentSet{ok: map[string]bool{}}
	for _, id := range ids {
		c.ok[id] = true
	}
	return c
}

func (c *consentSet) Consented(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok[id]
}

func (c *consentSet) revoke(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, id)
}

// countingDecoders is a DecoderFactory of real pure-Go decoders that counts
// every Decode call per speaker: a frame that was never decoded cannot
// show up here.
type countingDecoders struct {
	mu     sync.Mutex
	counts map[string]*atomic.Int64
	made   map[string]int
}

type countingDecoder struct {
	Decoder
	n *atomic.Int64
}

func (d countingDecoder) Decode(ctx context.Context, packet []byte, out []int16) (int, error) {
	d.n.Add(1)
	return d.Decoder.Decode(ctx, packet, out)
}

func (c *countingDecoders) New(userID string) (Decoder, error) {
	dec, err := GoDecoders(userID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.made == nil {
		c.made = map[string]int{}
	}
	c.made[userID]++
	c.mu.Unlock()
	return countingDecoder{Decoder: dec, n: c.counter(userID)}, nil
}

func (c *countingDecoders) decoders(userID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made[userID]
}

func (c *countingDecoders) counter(userID string) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]*atomic.Int64{}
	}
	if c.counts[userID] == nil {
		c.counts[userID] = new(atomic.Int64)
	}
	return c.counts[userID]
}

func (c *countingDecoders) decodes(userID string) int64 { return c.counter(userID).Load() }

// pcmSink collects what the model would receive.
type pcmSink struct {
	mu     sync.Mutex
	chunks [][]byte
}

func (s *pcmSink) Sink(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, b)
}

func (s *pcmSink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chunks)
}

// samples returns the 24 kHz samples of chunks[from:].
func (s *pcmSink) samples(t *testing.T, from int) []int16 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int16
	for _, c := range s.chunks[from:] {
		if len(c) != 960 {
			t.Errorf("sink chunk of %d bytes, want 960 (20 ms at 24 kHz PCM16)", len(c))
		}
		var err error
		if out, err = pcm.AppendFromLE(out, c); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// inboundRig runs an Inbound on a fake clock.
type inboundRig struct {
	in      *Inbound
	clock   *fakeClock
	consent *consentSet
	decs    *countingDecoders
	sink    *pcmSink
}

func startInbound(t *testing.T, consent *consentSet) *inboundRig {
	t.Helper()
	r := &inboundRig{clock: newFakeClock(), consent: consent, decs: &countingDecoders{}, sink: &pcmSink{}}
	in, err := NewInbound(InboundConfig{BotUserID: botID, Consented: consent.Consented, Sink: r.sink.Sink,
		NewDecoder: r.decs.New, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.in = in
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = in.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// sync waits until the Inbound has handled everything pushed so far.
func (r *inboundRig) sync(t *testing.T) {
	t.Helper()
	b := make(chan struct{})
	select {
	case r.in.in <- inEvent{barrier: b}:
	case <-time.After(5 * time.Second):
		t.Fatal("inbound not accepting events")
	}
	select {
	case <-b:
	case <-time.After(5 * time.Second):
		t.Fatal("inbound did not reach the barrier")
	}
}

// tick advances the clock one frame and waits for the tick to be handled.
func (r *inboundRig) tick(t *testing.T) {
	t.Helper()
	r.sync(t) // frames pushed before the tick are handled before it
	r.clock.waitArmed(t)
	r.clock.Advance(FrameDuration)
	r.clock.waitArmed(t)
	r.sync(t)
}

type talker struct {
	id        string
	freq      float64
	consented bool
}

// The frequencies' amplitudes in the model's audio: a speaker heard is
// near toneAmp (8000), one not heard is codec noise.
const (
	heardAmp  = 3000
	silentAmp = 40
)

func TestInboundHearsOnlyConsentedSpeakers(t *testing.T) {
	rt := newRuntime(t)
	const frames = 50 // one second
	tests := []struct {
		name        string
		talkers     []talker
		wantDomHz   float64 // 0: no single dominant tone asserted
		refusedSelf uint64
	}{
		{name: "one consented speaker", talkers: []talker{{"111", 440, true}}, wantDomHz: 440},
		{name: "two consented speakers both mixed", talkers: []talker{{"111", 440, true}, {"222", 700, true}}},
		{name: "unconsented speaker contributes nothing", talkers: []talker{{"111", 440, true}, {"333", 700, false}}, wantDomHz: 440},
		{name: "the bot's own voice is refused", talkers: []talker{{"111", 440, true}, {botID, 700, true}}, wantDomHz: 440, refusedSelf: frames},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			consent := newConsentSet()
			for _, tk := range tt.talkers {
				if tk.consented {
					consent.ok[tk.id] = true
				}
			}
			r := startInbound(t, consent)
			opusFrames := make([][][]byte, len(tt.talkers))
			for i, tk := range tt.talkers {
				opusFrames[i] = toneOpus(t, rt, tk.freq, frames)
			}
			for f := range frames {
				for i, tk := range tt.talkers {
					r.in.Push(tk.id, opusFrames[i][f])
				}
				r.tick(t)
			}
			// Skip the codec's first 100 ms (its ramp-up).
			got := r.sink.samples(t, 5)
			if len(got) < 24000*8/10 {
				t.Fatalf("model got %d samples, want about %d", len(got), 24000*9/10)
			}
			for _, tk := range tt.talkers {
				amp := pcmtest.Amplitude(got, ModelRate, tk.freq)
				heard := tk.consented && tk.id != botID
				if heard && amp < heardAmp {
					t.Errorf("%g Hz of a consented speaker at amplitude %.0f in the model's audio, want > %d", tk.freq, amp, heardAmp)
				}
				if !heard && amp > silentAmp {
					t.Errorf("%g Hz of a speaker not to be heard at amplitude %.0f, want < %d", tk.freq, amp, silentAmp)
				}
				if n := r.decs.decodes(tk.id); heard && n != frames || !heard && n != 0 {
					t.Errorf("speaker %g Hz: %d frames decoded, want %d", tk.freq, n, map[bool]int{true: frames}[heard])
				}
			}
			if tt.wantDomHz != 0 {
				if dom := pcmtest.DominantFrequency(got, ModelRate, 100, 4000); dom < tt.wantDomHz-3 || dom > tt.wantDomHz+3 {
					t.Errorf("dominant frequency %.1f Hz, want %g ± 3", dom, tt.wantDomHz)
				}
			}
			st := r.in.Stats()
			if st.DroppedSelf != tt.refusedSelf {
				t.Errorf("DroppedSelf = %d, want %d", st.DroppedSelf, tt.refusedSelf)
			}
			var unconsented uint64
			for _, tk := range tt.talkers {
				if !tk.consented {
					unconsented += frames
				}
			}
			if st.DroppedNoConsent != unconsented {
				t.Errorf("DroppedNoConsent = %d, want %d", st.DroppedNoConsent, unconsented)
			}
			if st.SpeechIn < 980*time.Millisecond || st.SpeechIn > time.Second+FrameDuration {
				t.Errorf("SpeechIn = %v, want about 1 s", st.SpeechIn)
			}
			// Counters carry no ids.
			for _, tk := range tt.talkers {
				if s := fmt.Sprintf("%+v", st); strings.Contains(s, tk.id) {
					t.Errorf("stats %q carry user id %s", s, tk.id)
				}
			}
		})
	}
}

// TestInboundOptOutMidUtterance: a speaker whose consent goes mid-sentence
// is cut within one frame, and the frame they had waiting is dropped
// undecoded, whether the next mix step comes from another speaker's frame
// or from the tick.
func TestInboundOptOutMidUtterance(t *testing.T) {
	rt := newRuntime(t)
	const frames, cutAt = 50, 25
	alice, bob := "111", "222"
	aliceOpus := toneOpus(t, rt, 440, frames)
	bobOpus := toneOpus(t, rt, 700, frames)
	tests := []struct {
		name string
		// next makes the mix step after the revocation: Alice's frame, or
		// the tick with Alice quiet.
		aliceTalksOn bool
	}{
		{name: "cut at the next mix step", aliceTalksOn: true},
		{name: "cut at the next tick", aliceTalksOn: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startInbound(t, newConsentSet(alice, bob))
			for f := range cutAt {
				r.in.Push(alice, aliceOpus[f])
				r.in.Push(bob, bobOpus[f])
				r.tick(t)
			}
			// Bob's next frame arrives while Alice's is still due: it waits.
			r.in.Push(bob, bobOpus[cutAt])
			r.sync(t)
			before := r.decs.decodes(bob)
			if before != cutAt {
				t.Fatalf("bob decoded %d frames before the opt-out, want %d", before, cutAt)
			}
			mark := r.sink.len()
			r.consent.revoke(bob)
			if tt.aliceTalksOn {
				for f := cutAt; f < frames; f++ {
					r.in.Push(alice, aliceOpus[f])
					if f > cutAt {
						r.in.Push(bob, bobOpus[f]) // refused at once
					}
					r.tick(t)
				}
			} else {
				r.tick(t)
			}
			if n := r.decs.decodes(bob); n != before {
				t.Errorf("bob's frames decoded after his opt-out: %d, want %d", n, before)
			}
			st := r.in.Stats()
			wantDropped := uint64(1) // the frame he had waiting
			if tt.aliceTalksOn {
				wantDropped += frames - cutAt - 1
			}
			if st.DroppedNoConsent != wantDropped {
				t.Errorf("DroppedNoConsent = %d, want %d", st.DroppedNoConsent, wantDropped)
			}
			// Everything the model got after the opt-out (past the
			// resampler's half-millisecond filter tail) is free of Bob.
			after := r.sink.samples(t, mark)
			if len(after) > 24 {
				after = after[24:]
			}
			if tt.aliceTalksOn {
				if amp := pcmtest.Amplitude(after, ModelRate, 700); amp > silentAmp {
					t.Errorf("bob's 700 Hz at amplitude %.0f after his opt-out, want < %d", amp, silentAmp)
				}
				if amp := pcmtest.Amplitude(after, ModelRate, 440); amp < heardAmp {
					t.Errorf("alice's 440 Hz at amplitude %.0f after bob's opt-out, want > %d", amp, heardAmp)
				}
			} else {
				// Only hangover silence may follow.
				for i, s := range after {
					if s > 64 || s < -64 {
						t.Fatalf("sample %d after the opt-out is %d, want silence", i, s)
					}
				}
			}
		})
	}
}

func TestInboundRefusesWithoutConsentOrSelf(t *testing.T) {
	r := startInbound(t, newConsentSet("111"))
	for _, tc := range []struct {
		id   string
		want bool
	}{{"111", true}, {"222", false}, {botID, false}, {"", false}} {
		if got := r.in.Push(tc.id, []byte{0xF8, 0xFF, 0xFE}); got != tc.want {
			t.Errorf("Push(%q) = %t, want %t", tc.id, got, tc.want)
		}
	}
}

// TestInboundBoundsEachSpeakersQueue: a speaker sending faster than the mix
// keeps at most Jitter frames; older ones are dropped and counted.
func TestInboundBoundsEachSpeakersQueue(t *testing.T) {
	rt := newRuntime(t)
	r := startInbound(t, newConsentSet("111", "222"))
	a := toneOpus(t, rt, 440, 10)
	b := toneOpus(t, rt, 700, 10)
	// Both speak once, so each waits for the other thereafter.
	r.in.Push("111", a[0])
	r.in.Push("222", b[0])
	r.sync(t)
	for f := 1; f < 10; f++ { // Bob floods 9 frames while Alice is due
		r.in.Push("222", b[f])
	}
	r.sync(t)
	if st := r.in.Stats(); st.DroppedOverflow != 7 {
		t.Errorf("DroppedOverflow = %d, want 7 (10 frames waiting, queue of 3)", st.DroppedOverflow)
	}
}

// TestInboundHangover: after the last speech, silence goes on for the
// hangover (so the model's VAD can end the turn), then nothing.
func TestInboundHangover(t *testing.T) {
	rt := newRuntime(t)
	r := startInbound(t, newConsentSet("111"))
	for _, f := range toneOpus(t, rt, 440, 5) {
		r.in.Push("111", f)
		r.tick(t)
	}
	speech := r.sink.len()
	for range 100 { // two seconds of quiet
		r.tick(t)
	}
	silence := r.sink.len() - speech
	if silence < 48 || silence > 50 {
		t.Errorf("%d hangover chunks after speech, want about 50 (1 s)", silence)
	}
	st := r.in.Stats()
	if st.AudioIn-st.SpeechIn != time.Duration(silence)*FrameDuration {
		t.Errorf("AudioIn %v − SpeechIn %v, want %d chunks of silence", st.AudioIn, st.SpeechIn, silence)
	}
}

func TestInboundIdleSpeakerForgotten(t *testing.T) {
	rt := newRuntime(t)
	r := startInbound(t, newConsentSet("111"))
	r.in.Push("111", toneOpus(t, rt, 440, 1)[0])
	r.sync(t)
	for range 10*50 + 2 { // IdleTimeout is 10 s
		r.tick(t)
	}
	r.sync(t)
	// A new decoder is made when they speak again: a second factory call.
	r.in.Push("111", toneOpus(t, rt, 440, 1)[0])
	r.sync(t)
	if n := r.decs.decoders("111"); n != 2 {
		t.Fatalf("decoders made = %d, want 2 (the idle one dropped)", n)
	}
}

func TestNewInboundNeedsSink(t *testing.T) {
	if _, err := NewInbound(InboundConfig{}); err == nil {
		t.Fatal("NewInbound without a sink succeeded")
	}
}

// closingDecoders hands out decoders with a Close, as a decoder holding
// resources (a wasm module instance, say) has, and counts how many were
// made and closed.
type closingDecoders struct {
	made, closed atomic.Int64
}

type closingDecoder struct {
	*opus.GoDecoder
	c *closingDecoders
}

func (d closingDecoder) Close(context.Context) error {
	d.c.closed.Add(1)
	return nil
}

func (c *closingDecoders) New(string) (Decoder, error) {
	dec, err := opus.NewGoDecoder(1)
	if err != nil {
		return nil, err
	}
	c.made.Add(1)
	return closingDecoder{GoDecoder: dec, c: c}, nil
}

// TestInboundReleasesDecoders: a speaker's decoder is closed when their
// consent goes, and every decoder when Run ends.
func TestInboundReleasesDecoders(t *testing.T) {
	rt := newRuntime(t)
	consent := newConsentSet("111", "222")
	decs := &closingDecoders{}
	sink := &pcmSink{}
	clock := newFakeClock()
	in, err := NewInbound(InboundConfig{Consented: consent.Consented, Sink: sink.Sink, NewDecoder: decs.New, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := &inboundRig{in: in, clock: clock, consent: consent, sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = in.Run(ctx) }()
	a, b := toneOpus(t, rt, 440, 3), toneOpus(t, rt, 700, 3)
	for f := range 3 {
		in.Push("111", a[f])
		in.Push("222", b[f])
		r.tick(t)
	}
	if got := pcmtest.DominantFrequency(sink.samples(t, 0), ModelRate, 100, 4000); got < 400 || got > 750 {
		t.Errorf("mix dominated by %.0f Hz, want 440 or 700", got)
	}
	consent.revoke("222")
	r.tick(t)
	if m, c := decs.made.Load(), decs.closed.Load(); m != 2 || c != 1 {
		t.Errorf("after an opt-out: %d decoders made, %d closed; want 2, 1", m, c)
	}
	cancel()
	<-done
	if c := decs.closed.Load(); c != 2 {
		t.Errorf("after Run ended: %d decoders closed, want 2", c)
	}
}

// TestInboundSurvivesBadFrames: a consented speaker's malformed frames are
// counted and skipped; the other speaker is still heard.
func TestInboundSurvivesBadFrames(t *testing.T) {
	rt := newRuntime(t)
	r := startInbound(t, newConsentSet("111", "222"))
	good := toneOpus(t, rt, 440, 25)
	bad := [][]byte{
		{0xFF},                   // code 3 without a frame count byte
		{0xFF, 0x00},             // code 3 with zero frames
		{0xFB, 0xFF, 0xFF, 0xFF}, // 120 ms-plus claims
		make([]byte, opus.MaxPacketBytes+1),
		{0x03, 0x01}, // code 3, one frame, nothing after
	}
	for f := range good {
		r.in.Push("111", good[f])
		r.in.Push("222", bad[f%len(bad)])
		r.tick(t)
	}
	st := r.in.Stats()
	if st.DecodeErrors == 0 {
		t.Error("no decode errors counted for malformed frames")
	}
	got := r.sink.samples(t, 5)
	if dom := pcmtest.DominantFrequency(got, ModelRate, 100, 4000); dom < 437 || dom > 443 {
		t.Errorf("dominant frequency %.1f Hz beside a speaker sending garbage, want 440 ± 3", dom)
	}
}

// panicOnce is a decoder that panics on its first frame, as a parser bug
// on a hostile packet would, then decodes.
type panicOnce struct {
	Decoder
	done *atomic.Bool
}

func (d panicOnce) Decode(ctx context.Context, packet []byte, out []int16) (int, error) {
	if d.done.CompareAndSwap(false, true) {
		_ = packet[len(packet)+1] // index out of range: a parser bug on a hostile frame
	}
	return d.Decoder.Decode(ctx, packet, out)
}

// TestInboundSurvivesADecoderPanic: a decoder that panics on a speaker's
// frame is recovered: the frame is skipped and counted in DecoderPanics,
// the decoder replaced, and the speaker still heard. Before, the panic
// ended the process.
func TestInboundSurvivesADecoderPanic(t *testing.T) {
	rt := newRuntime(t)
	consent := newConsentSet("111")
	sink := &pcmSink{}
	clock := newFakeClock()
	var made atomic.Int32
	var done atomic.Bool
	in, err := NewInbound(InboundConfig{BotUserID: botID, Consented: consent.Consented, Sink: sink.Sink, Clock: clock,
		NewDecoder: func(u string) (Decoder, error) {
			made.Add(1)
			dec, err := GoDecoders(u)
			return panicOnce{Decoder: dec, done: &done}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	r := &inboundRig{in: in, clock: clock, consent: consent, sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = in.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	for _, f := range toneOpus(t, rt, 440, 25) {
		in.Push("111", f)
		r.tick(t)
	}
	st := in.Stats()
	if st.DecoderPanics != 1 || st.DecodeErrors != 1 {
		t.Fatalf("decoder panics %d, decode errors %d; want 1 and 1", st.DecoderPanics, st.DecodeErrors)
	}
	if n := made.Load(); n != 2 {
		t.Fatalf("%d decoders made, want 2 (the one that panicked replaced)", n)
	}
	if dom := pcmtest.DominantFrequency(sink.samples(t, 5), ModelRate, 100, 4000); dom < 437 || dom > 443 {
		t.Errorf("dominant frequency %.1f Hz after the panic, want 440 ± 3", dom)
	}
}
