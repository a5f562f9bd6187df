package audio

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

// fakeModel is the model connection as the audio path sees it: it keeps
// the input audio it takes and the barge-in events, and can be "down".
type fakeModel struct {
	recordingModel
	amu    sync.Mutex
	chunks [][]byte
}

func (m *fakeModel) AppendAudio(b []byte) bool {
	m.amu.Lock()
	defer m.amu.Unlock()
	m.chunks = append(m.chunks, b)
	return true
}

func (m *fakeModel) received() [][]byte {
	m.amu.Lock()
	defer m.amu.Unlock()
	return append([][]byte(nil), m.chunks...)
}

// TestPathBothWays runs a session's audio through a Path on the real
// clock: a consented speaker's tone reaches the model, the model's tone
// reaches the media connection, speech_started barges in and the model is
// told where to truncate, and while the model is reconnecting input audio
// is dropped (not buffered) and resumes after.
func TestPathBothWays(t *testing.T) {
	rt := newRuntime(t)
	model := &fakeModel{}
	var up atomic.Bool
	up.Store(true)
	media := newPacedSink(t)
	consent := newConsentSet("111")
	p, err := NewPath(PathConfig{BotUserID: botID, Consented: consent.Consented,
		Model: func() Model {
			if up.Load() {
				return model
			}
			return nil
		},
		Encoder: newEncoder(t, rt), Send: media.Send})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// In: 440 Hz from a consented speaker, 700 Hz from the bot itself.
	alice, self := toneOpus(t, rt, 440, 25), toneOpus(t, rt, 700, 25)
	for f := range alice {
		p.Push("111", alice[f])
		p.Push(botID, self[f])
	}
	waitFor("25 chunks at the model", func() bool { return p.Stats().In.SpeechIn >= 500*time.Millisecond })
	var heard []int16
	for _, c := range model.received()[5:] {
		heard, _ = pcm.AppendFromLE(heard, c)
	}
	if dom := pcmtest.DominantFrequency(heard, ModelRate, 100, 4000); dom < 437 || dom > 443 {
		t.Errorf("model hears %.1f Hz, want 440 ± 3", dom)
	}

	// Out: the model answers at 600 Hz; people speak up after 5 frames.
	for _, d := range deltas(modelTone(600, time.Second)) {
		p.OutputAudio("resp_1", "item_1", d)
	}
	media.waitFrames(t, 5)
	p.SpeechStarted(100)
	played := media.count()
	time.Sleep(200 * time.Millisecond)
	frames := media.snapshot()
	audio := 0
	for _, f := range frames {
		if !opus.IsSilence(f) {
			audio++
		}
	}
	if audio > played+1 {
		t.Errorf("%d audio frames sent, %d when speech started: more than the one in flight", audio, played)
	}
	model.mu.Lock()
	cancels, truncates := model.cancels, model.truncates
	model.mu.Unlock()
	if len(cancels) != 1 || len(truncates) != 1 || truncates[0].ItemID != "item_1" || truncates[0].AudioEndMs != audio*20 {
		t.Errorf("model told cancel %q, truncate %+v; want resp_1, item_1 at %d ms", cancels, truncates, audio*20)
	}

	// The model reconnects: audio is dropped meanwhile, then flows again.
	up.Store(false)
	before := len(model.received())
	droppedBefore := p.Stats().ModelDropped
	for _, f := range alice[:10] {
		p.Push("111", f)
	}
	waitFor("chunks dropped while the model is away", func() bool { return p.Stats().ModelDropped >= droppedBefore+10 })
	if n := len(model.received()); n != before {
		t.Errorf("model got %d chunks while away", n-before)
	}
	up.Store(true)
	for _, f := range alice[10:] {
		p.Push("111", f)
	}
	waitFor("audio to resume", func() bool { return len(model.received()) >= before+15 })
}

// TestPathAttach: a Path built without a model drops input audio until
// Attach gives it one; a later Attach replaces it, Attach(nil) detaches
// it, and Attach overrides PathConfig.Model. Barge-ins go to the model
// attached.
func TestPathAttach(t *testing.T) {
	rt := newRuntime(t)
	frames := toneOpus(t, rt, 440, 5)
	tests := []struct {
		name       string
		configured bool // PathConfig.Model is set too
	}{
		{name: "built without a model"},
		{name: "attach overrides the configured model", configured: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fromConfig fakeModel
			cfg := PathConfig{BotUserID: botID, Consented: newConsentSet("111").Consented,
				Encoder: newEncoder(t, rt), Send: discard, Clock: newFakeClock()}
			if tt.configured {
				cfg.Model = func() Model { return &fromConfig }
			}
			p, err := NewPath(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = p.Run(ctx) }()
			defer func() { cancel(); <-done }()
			r := &inboundRig{in: p.in}
			// A lone speaker's frame is mixed as it arrives: five pushed,
			// five chunks to whichever model is current.
			speak := func() {
				t.Helper()
				for _, f := range frames {
					p.Push("111", f)
				}
				r.sync(t)
			}

			speak()
			wantDropped, wantConfig := uint64(5), 0
			if tt.configured {
				wantDropped, wantConfig = 0, 5
			}
			if d := p.Stats().ModelDropped; d != wantDropped {
				t.Errorf("before Attach: %d chunks dropped, want %d", d, wantDropped)
			}
			first, second := &fakeModel{}, &fakeModel{}
			p.Attach(first)
			speak()
			p.Attach(second)
			speak()
			pathModel{p}.CancelResponse("resp_1")
			p.Attach(nil)
			speak()
			if n := len(first.received()); n != 5 {
				t.Errorf("first model attached got %d chunks, want 5", n)
			}
			if n := len(second.received()); n != 5 {
				t.Errorf("second model attached got %d chunks, want 5", n)
			}
			if n := len(fromConfig.received()); n != wantConfig {
				t.Errorf("configured model got %d chunks, want %d (Attach wins)", n, wantConfig)
			}
			if d := p.Stats().ModelDropped; d != wantDropped+5 {
				t.Errorf("after Attach(nil): %d chunks dropped, want %d", d, wantDropped+5)
			}
			second.mu.Lock()
			cancels := second.cancels
			second.mu.Unlock()
			if !slices.Equal(cancels, []string{"resp_1"}) {
				t.Errorf("barge-in told the attached model %q, want [resp_1]", cancels)
			}
		})
	}
}

// TestPathUtterances: in the utterance mode the Path hands each speaker's
// utterance to the callback and never appends audio to the model, which
// the session sends itself.
func TestPathUtterances(t *testing.T) {
	rt := newRuntime(t)
	clock := newFakeClock()
	model := &fakeModel{}
	var mu sync.Mutex
	var got []Utterance
	p, err := NewPath(PathConfig{BotUserID: botID, Consented: newConsentSet("111").Consented,
		Encoder: newEncoder(t, rt), Send: discard, Clock: clock,
		Utterances: func(u Utterance) { mu.Lock(); defer mu.Unlock(); got = append(got, u) }})
	if err != nil {
		t.Fatal(err)
	}
	p.Attach(model)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	r := &inboundRig{in: p.in, clock: clock}
	for _, f := range toneOpus(t, rt, 440, 25) {
		p.Push("111", f)
		r.tick(t)
	}
	for range 40 {
		r.tick(t)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].UserID != "111" || len(got[0].PCM) != 25*frameBytes {
		t.Errorf("utterances %d, want one of 500 ms from 111", len(got))
	}
	if n := len(model.received()); n != 0 {
		t.Errorf("model appended %d chunks in the utterance mode, want 0", n)
	}
	if st := p.Stats(); st.ModelDropped != 0 || st.In.UtterancesEmitted != 1 {
		t.Errorf("stats: %d dropped, %d utterances; want 0, 1", st.ModelDropped, st.In.UtterancesEmitted)
	}
}
