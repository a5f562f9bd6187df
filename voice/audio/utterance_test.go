package audio

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

// gotUtterance is an Utterance as a test saw it, with the fake clock's
// time when it was handed over.
type gotUtterance struct {
	Utterance
	at time.Time
}

// spoke is one Speaking call.
type spoke struct {
	id string
	at time.Time
}

// uttRig runs an Inbound in the utterance mode (or, mixed, with a sink) on
// a fake clock and records what it hands over and every Speaking cue.
type uttRig struct {
	*inboundRig
	t0    time.Time
	mu    sync.Mutex
	got   []gotUtterance
	cues  []spoke
	mixed bool
}

func startUtterances(t *testing.T, consent *consentSet, mixed bool) *uttRig {
	t.Helper()
	r := &uttRig{inboundRig: &inboundRig{clock: newFakeClock(), consent: consent, decs: &countingDecoders{},
		sink: &pcmSink{}}, mixed: mixed}
	r.t0 = r.clock.Now()
	cfg := InboundConfig{BotUserID: botID, Consented: consent.Consented, NewDecoder: r.decs.New, Clock: r.clock,
		Speaking: func(id string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cues = append(r.cues, spoke{id, r.clock.Now()})
		}}
	if mixed {
		cfg.Sink = r.sink.Sink
	} else {
		cfg.Utterances = func(u Utterance) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.got = append(r.got, gotUtterance{u, r.clock.Now()})
		}
	}
	in, err := NewInbound(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.in = in
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = in.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func (r *uttRig) utterances() []gotUtterance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *uttRig) speaking() []spoke {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cues)
}

// slot is the fake clock's time at frame slot n of a script.
func (r *uttRig) slot(n int) time.Time { return r.t0.Add(time.Duration(n) * FrameDuration) }

// part is one speaker sending frames in the slots [from, to) of a
// script, cycling through frames.
type part struct {
	id       string
	from, to int
	frames   [][]byte
}

// play runs a script of slots frame slots on the fake clock: at each
// slot, first the event set for it (if any), then every part covering
// it pushes its frame, then the clock advances one frame.
func (r *uttRig) play(t *testing.T, slots int, events map[int]func(), parts ...part) {
	t.Helper()
	for n := range slots {
		if ev := events[n]; ev != nil {
			ev()
		}
		for _, p := range parts {
			if n >= p.from && n < p.to {
				r.in.Push(p.id, p.frames[(n-p.from)%len(p.frames)])
			}
		}
		r.tick(t)
	}
}

// silenceFrames is what a Discord client sends at the end of speech.
var silenceFrames = [][]byte{[]byte(opus.SilenceFrame)}

func samplesOf(t *testing.T, b []byte) []int16 {
	t.Helper()
	s, err := pcm.AppendFromLE(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const frameBytes = 960 // 20 ms of 24 kHz mono PCM16

// TestUtterancesKeepSpeakersApart: each speaker's speech is handed over
// on its own, with only their voice in it, when their silence window
// ends, and in the order the utterances started: one that ends first
// waits for an earlier one still going.
func TestUtterancesKeepSpeakersApart(t *testing.T) {
	rt := newRuntime(t)
	const alice, bob = "111", "222"
	freq := map[string]float64{alice: 440, bob: 700}
	tone := func(id string) [][]byte { return toneOpus(t, rt, freq[id], 50) }
	type want struct {
		id       string
		from, to int // the speaker's slots
		emitted  int // the slot at whose clock it is handed over
	}
	tests := []struct {
		name  string
		parts []part
		want  []want
	}{
		{name: "one after the other",
			parts: []part{{alice, 0, 50, tone(alice)}, {bob, 80, 130, tone(bob)}},
			want:  []want{{alice, 0, 50, 49 + 30}, {bob, 80, 130, 129 + 30}}},
		{name: "overlapping, the later one ends first and waits",
			parts: []part{{alice, 0, 150, tone(alice)}, {bob, 25, 75, tone(bob)}},
			want:  []want{{alice, 0, 150, 149 + 30}, {bob, 25, 75, 149 + 30}}},
		{name: "overlapping, the earlier one ends first and goes",
			parts: []part{{alice, 0, 75, tone(alice)}, {bob, 25, 150, tone(bob)}},
			want:  []want{{alice, 0, 75, 74 + 30}, {bob, 25, 150, 149 + 30}}},
		{name: "from the same frame, first heard first",
			parts: []part{{alice, 0, 50, tone(alice)}, {bob, 0, 60, tone(bob)}},
			want:  []want{{alice, 0, 50, 49 + 30}, {bob, 0, 60, 59 + 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startUtterances(t, newConsentSet(alice, bob), false)
			r.play(t, 200, nil, tt.parts...)
			got := r.utterances()
			if len(got) != len(tt.want) {
				t.Fatalf("%d utterances, want %d", len(got), len(tt.want))
			}
			for i, w := range tt.want {
				u := got[i]
				if u.UserID != w.id {
					t.Errorf("utterance %d from %s, want %s", i, u.UserID, w.id)
				}
				if !u.Start.Equal(r.slot(w.from)) {
					t.Errorf("utterance %d starts at %v, want slot %d (%v)", i, u.Start, w.from, r.slot(w.from))
				}
				if !u.at.Equal(r.slot(w.emitted)) {
					t.Errorf("utterance %d handed over at %v, want slot %d (%v)", i, u.at, w.emitted, r.slot(w.emitted))
				}
				if n := (w.to - w.from) * frameBytes; len(u.PCM) != n {
					t.Errorf("utterance %d holds %d bytes, want %d (%d frames)", i, len(u.PCM), n, w.to-w.from)
				}
				s := samplesOf(t, u.PCM)
				// Half a second past the codec's ramp-up is enough to
				// name the tone, and keeps the scan quick.
				if dom := pcmtest.DominantFrequency(s[2400:14400], ModelRate, 100, 4000); dom < freq[w.id]-3 || dom > freq[w.id]+3 {
					t.Errorf("utterance %d dominated by %.1f Hz, want %g ± 3", i, dom, freq[w.id])
				}
				for id, f := range freq {
					amp := pcmtest.Amplitude(s, ModelRate, f)
					if id == w.id && amp < heardAmp {
						t.Errorf("utterance %d: its speaker's %g Hz at amplitude %.0f, want > %d", i, f, amp, heardAmp)
					}
					if id != w.id && amp > silentAmp {
						t.Errorf("utterance %d: the other speaker's %g Hz at amplitude %.0f, want < %d (no mixing)", i, f, amp, silentAmp)
					}
				}
			}
			for i := 1; i < len(got); i++ {
				if got[i].Start.Before(got[i-1].Start) {
					t.Errorf("utterance %d starts before utterance %d", i, i-1)
				}
			}
			if st := r.in.Stats(); st.UtterancesEmitted != uint64(len(tt.want)) || st.UtterancesDropped != 0 {
				t.Errorf("stats: %d emitted, %d dropped; want %d, 0", st.UtterancesEmitted, st.UtterancesDropped, len(tt.want))
			}
			if n := r.sink.len(); n != 0 {
				t.Errorf("%d mixed chunks in the utterance mode", n)
			}
		})
	}
}

// rotate returns frames starting at frame k: a speaker's encoder stream
// carrying on where an earlier part of it stopped.
func rotate(frames [][]byte, k int) [][]byte {
	return append(slices.Clone(frames[k:]), frames[:k]...)
}

// segment is a stretch of a 440 Hz tone at one amplitude.
type segment struct {
	amp    int16
	frames int
}

// encodeSegments encodes segments back to back through one encoder, as
// one client's stream: the codec carries each into the next.
func encodeSegments(t *testing.T, rt *opus.Runtime, segs ...segment) [][]byte {
	t.Helper()
	enc := newEncoder(t, rt)
	out := make([]byte, opus.MaxPacketBytes)
	var frames [][]byte
	for _, seg := range segs {
		gen := pcmtest.NewTone(440, opus.SampleRate, seg.amp)
		for range seg.frames {
			k, err := enc.Encode(context.Background(), pcmtest.AppendStereo(nil, gen.Append(nil, opus.FrameSamples)), out)
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, slices.Clone(out[:k]))
		}
	}
	return frames
}

// TestUtteranceSilenceWindow: a pause shorter than the 600 ms window
// (from the last voiced frame to the next) keeps one utterance, with the
// pause in it as silence; a pause of 600 ms or more splits it, whether
// the client sends nothing, Opus silence frames or a hum below the voice
// floor. At most 100 ms of silence is kept around speech.
//
// With a filler the codec moves the edges of the speech by up to a frame
// (the first silence or hum frame still carries the tone's tail, the first
// tone frame after silence frames is a ramp under the floor), so those
// cases keep a frame's margin from the window and allow a frame either way.
func TestUtteranceSilenceWindow(t *testing.T) {
	rt := newRuntime(t)
	const alice = "111"
	speech := toneOpus(t, rt, 440, 50)
	const (
		quiet = iota // the client sends nothing
		silence
		hum // a 440 Hz hum at amplitude 150 (RMS about 106) in the same stream
	)
	tests := []struct {
		name   string
		gap    time.Duration // from the last tone frame of the first half to the first of the second
		filler int
		want   []int // frames in each utterance
		tol    int   // frames either way
	}{
		{name: "client quiet 400 ms", gap: 400 * time.Millisecond, want: []int{25 + 19 + 25}},
		{name: "client quiet 580 ms", gap: 580 * time.Millisecond, want: []int{25 + 28 + 25}},
		{name: "client quiet 600 ms", gap: 600 * time.Millisecond, want: []int{25, 25}},
		{name: "client quiet 2 s", gap: 2 * time.Second, want: []int{25, 25}},
		{name: "silence frames 560 ms", gap: 560 * time.Millisecond, filler: silence, want: []int{25 + 27 + 25}, tol: 1},
		{name: "silence frames 640 ms", gap: 640 * time.Millisecond, filler: silence, want: []int{25 + 5, 2 + 25}, tol: 1},
		{name: "silence frames 2 s", gap: 2 * time.Second, filler: silence, want: []int{25 + 5, 5 + 24}, tol: 1},
		{name: "hum under the floor 560 ms", gap: 560 * time.Millisecond, filler: hum, want: []int{25 + 27 + 25}, tol: 1},
		{name: "hum under the floor 640 ms", gap: 640 * time.Millisecond, filler: hum, want: []int{25 + 1 + 5, 1 + 25}, tol: 1},
		{name: "hum under the floor 2 s", gap: 2 * time.Second, filler: hum, want: []int{25 + 1 + 5, 5 + 25}, tol: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startUtterances(t, newConsentSet(alice), false)
			missing := int(tt.gap/FrameDuration) - 1
			second := 25 + missing
			var parts []part
			switch tt.filler {
			case quiet:
				parts = []part{{alice, 0, 25, speech}, {alice, second, second + 25, rotate(speech, 25)}}
			case silence:
				parts = []part{{alice, 0, 25, speech}, {alice, 25, second, silenceFrames},
					{alice, second, second + 25, rotate(speech, 25)}}
			case hum:
				parts = []part{{alice, 0, second + 25,
					encodeSegments(t, rt, segment{toneAmp, 25}, segment{150, missing}, segment{toneAmp, 25})}}
			}
			r.play(t, second+25+40, nil, parts...)
			got := r.utterances()
			if len(got) != len(tt.want) {
				t.Fatalf("%d utterances, want %d", len(got), len(tt.want))
			}
			near := func(got, want int) bool { return got >= want-tt.tol && got <= want+tt.tol }
			for i, frames := range tt.want {
				if n := len(got[i].PCM) / frameBytes; !near(n, frames) || len(got[i].PCM)%frameBytes != 0 {
					t.Errorf("utterance %d: %d bytes, want %d frames ± %d", i, len(got[i].PCM), frames, tt.tol)
				}
			}
			if !got[0].Start.Equal(r.slot(0)) {
				t.Errorf("first utterance starts at %v, want %v", got[0].Start, r.slot(0))
			}
			if len(got) == 2 {
				lead := tt.want[1] - 25
				if slot := int(got[1].Start.Sub(r.t0) / FrameDuration); !near(slot, second-lead) {
					t.Errorf("second utterance starts at slot %d, want %d ± %d", slot, second-lead, tt.tol)
				}
				return
			}
			// One utterance: the pause is in it, quiet, at its place.
			s := samplesOf(t, got[0].PCM)
			var peak int16
			for _, v := range s[26*480 : second*480] {
				peak = max(peak, v, -v)
			}
			if peak > 600 {
				t.Errorf("the pause inside the utterance peaks at %d, want quiet", peak)
			}
			if amp := pcmtest.Amplitude(s[second*480+2400:], ModelRate, 440); amp < heardAmp {
				t.Errorf("speech after the pause at amplitude %.0f, want > %d", amp, heardAmp)
			}
		})
	}
}

// TestUtteranceMaxLength: a 35 s monologue is handed over as 30 s when it
// reaches 30 s and 5 s when it ends, each its own utterance.
func TestUtteranceMaxLength(t *testing.T) {
	rt := newRuntime(t)
	const alice = "111"
	r := startUtterances(t, newConsentSet(alice), false)
	r.play(t, 1750+40, nil, part{alice, 0, 1750, toneOpus(t, rt, 440, 50)})
	got := r.utterances()
	if len(got) != 2 {
		t.Fatalf("%d utterances, want 2", len(got))
	}
	want := []struct {
		frames, start, emitted int
	}{{1500, 0, 1500}, {250, 1500, 1749 + 30}}
	for i, w := range want {
		u := got[i]
		if u.UserID != alice || len(u.PCM) != w.frames*frameBytes {
			t.Errorf("utterance %d: %s, %v; want %s, %v", i, u.UserID, pcmDuration(len(u.PCM)), alice,
				time.Duration(w.frames)*FrameDuration)
		}
		if !u.Start.Equal(r.slot(w.start)) || !u.at.Equal(r.slot(w.emitted)) {
			t.Errorf("utterance %d starts %v, handed over %v; want slots %d and %d", i,
				u.Start.Sub(r.t0), u.at.Sub(r.t0), w.start, w.emitted)
		}
	}
	if st := r.in.Stats(); st.UtterancesEmitted != 2 || st.AudioIn != 35*time.Second || st.SpeechIn != 35*time.Second {
		t.Errorf("stats: %d emitted, audio %v, speech %v; want 2, 35 s, 35 s", st.UtterancesEmitted, st.AudioIn, st.SpeechIn)
	}
	// Each piece is an utterance of its own, cued once.
	if cues := r.speaking(); len(cues) != 2 {
		t.Errorf("Speaking called %d times, want 2 (once per piece)", len(cues))
	}
}

// TestUtteranceWaitingBound: three people talking at once for 25 s take
// the audio waiting past 60 s; the utterance whose frame did is dropped
// whole, with the rest of it until its speaker falls silent, and counted.
// The others are handed over, and so is that speaker's next utterance.
func TestUtteranceWaitingBound(t *testing.T) {
	rt := newRuntime(t)
	const alice, bob, carol = "111", "222", "333"
	r := startUtterances(t, newConsentSet(alice, bob, carol), false)
	r.play(t, 1400, nil,
		part{alice, 0, 1250, toneOpus(t, rt, 440, 50)},
		part{bob, 1, 1250, toneOpus(t, rt, 700, 50)},
		// Carol's frame at slot 1000 takes the waiting audio to 3001
		// frames (1001 + 1000 + 1000): her utterance goes.
		part{carol, 1, 1250, toneOpus(t, rt, 300, 50)},
		part{carol, 1300, 1325, toneOpus(t, rt, 300, 50)})
	got := r.utterances()
	var ids []string
	var lens []int
	for _, u := range got {
		ids = append(ids, u.UserID)
		lens = append(lens, len(u.PCM)/frameBytes)
	}
	if !slices.Equal(ids, []string{alice, bob, carol}) || !slices.Equal(lens, []int{1250, 1249, 25}) {
		t.Errorf("utterances %v of %v frames, want [alice bob carol] of [1250 1249 25]", ids, lens)
	}
	st := r.in.Stats()
	if st.UtterancesDropped != 1 || st.UtterancesDroppedNoConsent != 0 || st.UtterancesEmitted != 3 {
		t.Errorf("stats: %d dropped (%d for consent), %d emitted; want 1 (0), 3",
			st.UtterancesDropped, st.UtterancesDroppedNoConsent, st.UtterancesEmitted)
	}
	if want := 1249 * FrameDuration; st.UtteranceAudioDropped != want {
		t.Errorf("UtteranceAudioDropped = %v, want %v (her whole utterance)", st.UtteranceAudioDropped, want)
	}
	if st.SpeakersPeak != 3 {
		t.Errorf("SpeakersPeak = %d, want 3", st.SpeakersPeak)
	}
}

// TestUtteranceConsent: a speaker whose consent goes has what they were
// saying, or had said and is waiting its turn, dropped at once and
// counted, never handed over; an unconsented speaker is never decoded.
func TestUtteranceConsent(t *testing.T) {
	rt := newRuntime(t)
	const alice, bob = "111", "222"
	a, b := toneOpus(t, rt, 440, 50), toneOpus(t, rt, 700, 50)
	tests := []struct {
		name      string
		consented []string
		revokeAt  int // slot at which alice's consent goes; 0: never
		parts     []part
		decoded   int64 // alice's frames decoded
		refused   uint64
		dropped   uint64 // utterances dropped for consent
	}{
		{name: "lost mid-utterance, talking on", consented: []string{alice, bob}, revokeAt: 50,
			parts:   []part{{alice, 0, 100, a}, {bob, 0, 100, b}},
			decoded: 50, refused: 50, dropped: 1},
		{name: "lost mid-utterance, then quiet", consented: []string{alice, bob}, revokeAt: 50,
			parts:   []part{{alice, 0, 50, a}, {bob, 0, 100, b}},
			decoded: 50, dropped: 1},
		{name: "lost while the utterance waits its turn", consented: []string{alice, bob}, revokeAt: 100,
			parts:   []part{{bob, 0, 150, b}, {alice, 10, 40, a}},
			decoded: 30, dropped: 1},
		{name: "never consented", consented: []string{bob},
			parts:   []part{{alice, 0, 50, a}, {bob, 0, 50, b}},
			decoded: 0, refused: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startUtterances(t, newConsentSet(tt.consented...), false)
			events := map[int]func(){}
			if tt.revokeAt > 0 {
				events[tt.revokeAt] = func() { r.consent.revoke(alice) }
			}
			r.play(t, 220, events, tt.parts...)
			for _, u := range r.utterances() {
				if u.UserID != bob {
					t.Errorf("utterance from %s handed over", u.UserID)
				}
			}
			if n := len(r.utterances()); n != 1 {
				t.Errorf("%d utterances, want bob's alone", n)
			}
			if n := r.decs.decodes(alice); n != tt.decoded {
				t.Errorf("alice's frames decoded: %d, want %d", n, tt.decoded)
			}
			st := r.in.Stats()
			if st.DroppedNoConsent != tt.refused {
				t.Errorf("DroppedNoConsent = %d, want %d", st.DroppedNoConsent, tt.refused)
			}
			if st.UtterancesDroppedNoConsent != tt.dropped || st.UtterancesDropped != tt.dropped {
				t.Errorf("utterances dropped %d, for consent %d; want %d", st.UtterancesDropped,
					st.UtterancesDroppedNoConsent, tt.dropped)
			}
		})
	}
}

// TestUtteranceSpeakingCue: Speaking is called once per utterance, at its
// 300th ms of voiced audio; not for 200 ms, silence frames or a hum under
// the floor. The same in the mixed mode when set.
func TestUtteranceSpeakingCue(t *testing.T) {
	rt := newRuntime(t)
	const alice, bob = "111", "222"
	a, b := toneOpus(t, rt, 440, 50), toneOpus(t, rt, 700, 50)
	hum := encodeToneAt(t, rt, 440, 150, 50)
	type cue struct {
		id   string
		slot int
	}
	tests := []struct {
		name  string
		parts []part
		want  []cue
	}{
		{name: "200 ms of speech", parts: []part{{alice, 0, 10, a}}},
		{name: "300 ms of speech", parts: []part{{alice, 0, 15, a}}, want: []cue{{alice, 14}}},
		{name: "2 s of speech", parts: []part{{alice, 0, 100, a}}, want: []cue{{alice, 14}}},
		{name: "2 s of silence frames", parts: []part{{alice, 0, 100, silenceFrames}}},
		{name: "2 s of hum under the floor", parts: []part{{alice, 0, 100, hum}}},
		// After silence frames the first tone frame is a ramp under the
		// floor: 10 + 5 voiced frames end at slot 25.
		{name: "silence frames between 200 ms and 100 ms", parts: []part{
			{alice, 0, 10, a}, {alice, 10, 20, silenceFrames}, {alice, 20, 26, rotate(a, 10)}}, want: []cue{{alice, 25}}},
		{name: "200 ms, 300 ms pause, 200 ms", parts: []part{{alice, 0, 10, a}, {alice, 25, 35, rotate(a, 10)}},
			want: []cue{{alice, 29}}},
		{name: "200 ms, 700 ms pause, 200 ms", parts: []part{{alice, 0, 10, a}, {alice, 45, 55, rotate(a, 10)}}},
		{name: "again after the window", parts: []part{{alice, 0, 20, a}, {alice, 60, 80, rotate(a, 20)}},
			want: []cue{{alice, 14}, {alice, 74}}},
		{name: "two speakers", parts: []part{{alice, 0, 20, a}, {bob, 5, 25, b}},
			want: []cue{{alice, 14}, {bob, 19}}},
	}
	for _, mixed := range []bool{false, true} {
		mode := "utterances"
		if mixed {
			mode = "mixed"
		}
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				r := startUtterances(t, newConsentSet(alice, bob), mixed)
				r.play(t, 120, nil, tt.parts...)
				var got []cue
				for _, c := range r.speaking() {
					got = append(got, cue{c.id, int(c.at.Sub(r.t0) / FrameDuration)})
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("Speaking calls %v, want %v", got, tt.want)
				}
			})
		}
	}
}
