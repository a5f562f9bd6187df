package audio

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
)

// ModelRate is the realtime model's audio sample rate.
const ModelRate = 24000

// Decoder turns one speaker's Opus packets into interleaved PCM16 at 48 kHz.
// *opus.GoDecoder satisfies it. A decoder that also has Close(ctx) error
// is closed when its speaker is dropped and when Run ends.
type Decoder interface {
	Decode(ctx context.Context, packet []byte, pcm []int16) (int, error)
	// Channels reports how many interleaved channels Decode writes (1 or 2).
	Channels() int
}

// DecoderFactory makes the decoder for one speaker. The user id is for the
// factory's own bookkeeping (tests count decodes per speaker with it); it
// must not log it.
type DecoderFactory func(userID string) (Decoder, error)

// GoDecoders is the default DecoderFactory: pure-Go pion/opus decoding
// straight to mono (the mix is mono, so the decoder's own downmix saves a
// pass).
func GoDecoders(string) (Decoder, error) { return opus.NewGoDecoder(1) }

// InboundConfig configures an Inbound.
type InboundConfig struct {
	// BotUserID is the bot's own user id: its frames are refused, so the
	// bot never hears itself.
	BotUserID string
	// Consented reports whether a user's audio may leave the bridge now
	// (voice.Session.Consented). It is asked for every frame pushed, for
	// every speaker at every mix step and at every tick, and for every
	// utterance as it is handed over, so it must be cheap and must not
	// call back into the Inbound. Nil consents nobody.
	Consented func(userID string) bool
	// Sink receives each mixed 20 ms chunk as PCM16 little-endian mono at
	// 24 kHz (960 bytes): the model's input_audio_buffer.append
	// (realtime.Session.AppendAudio). It runs on the Inbound's goroutine
	// and must not block; it owns the slice. It is nil in the utterance
	// mode (Utterances).
	Sink func(pcm []byte)
	// NewDecoder makes a speaker's decoder when they first speak; nil is
	// GoDecoders.
	NewDecoder DecoderFactory
	// Jitter is how many frames each speaker may have waiting (default 3,
	// 60 ms); a frame arriving at a full queue pushes out the oldest, which
	// is counted as an overflow. It bounds the latency a fast sender adds.
	Jitter int
	// Hangover is how long silence keeps being sent after the last speech
	// (default 1 s). Discord clients stop sending when quiet, and the
	// model's server VAD only ends a turn after hearing silence (500 ms by
	// default), so without it nobody's turn would end. Negative: none.
	Hangover time.Duration
	// IdleTimeout drops a consented speaker's decoder after this long
	// without a frame (default 10 s), so memory follows who is talking.
	IdleTimeout time.Duration
	// Clock drives the 20 ms tick; nil is SystemClock.
	Clock Clock

	// Utterances, when set, keeps speakers apart instead of mixing them,
	// for group calls where the model must know who said what (issue 27):
	// each consented speaker's audio is buffered on its own and handed
	// over as one Utterance once they have been silent for
	// UtteranceSilence, in the order the utterances started (see
	// Utterance). Sink must then be nil: nothing is mixed and no hangover
	// silence is made. It runs on the Inbound's goroutine and must not
	// block; it owns the Utterance's PCM.
	Utterances func(Utterance)
	// UtteranceSilence is how long a speaker must be silent (no frames, or
	// frames below the voice floor) for their utterance to end (default
	// 600 ms): long enough to span the pauses within a sentence, short
	// enough for a reply to feel prompt. It also ends a speaker's
	// "current utterance" for Speaking in the mixed mode.
	UtteranceSilence time.Duration
	// Speaking, when set, is called with a speaker's user id once per
	// utterance, when their voiced audio in it reaches BargeInSpeech: the
	// cue to stop Clankie talking over them, sooner than the end of the
	// utterance and never for a cough or a click. It is called in both
	// modes, on the Inbound's goroutine, so it must be cheap and must not
	// block.
	Speaking func(userID string)
}

// InboundStats are the listening path's counters. None is per user.
type InboundStats struct {
	// AudioIn is the audio handed to the sink (speech and hangover
	// silence), in model time: what the session "heard".
	AudioIn time.Duration
	// SpeechIn is the part of AudioIn mixed from at least one speaker.
	SpeechIn time.Duration
	// FramesIn counts frames accepted into a speaker's queue.
	FramesIn uint64
	// Decoded counts Opus decodes (each of a consented speaker's frame).
	Decoded uint64
	// DroppedNoConsent counts frames dropped, undecoded, because their
	// speaker was not (or no longer) consented, at push or from the queue.
	DroppedNoConsent uint64
	// DroppedSelf counts frames refused because they were the bot's own.
	DroppedSelf uint64
	// DroppedOverflow counts frames pushed out of a full speaker queue or
	// refused because the Inbound was behind.
	DroppedOverflow uint64
	// DecodeErrors counts frames that did not decode (skipped).
	DecodeErrors uint64
	// DecoderPanics counts the part of DecodeErrors on which the decoder
	// panicked (pion/opus is a pre-1.0 parser of a peer's packets): each
	// recovered, the frame skipped and the speaker's decoder replaced.
	DecoderPanics uint64
	// SpeakersActive is how many speakers the last mix step carried;
	// SpeakersPeak the most any step carried. In the utterance mode: how
	// many speakers have an utterance under way, now and at most.
	SpeakersActive, SpeakersPeak int
	// UtterancesEmitted counts utterances handed to Utterances; AudioIn
	// and SpeechIn then count their audio and its voiced part.
	UtterancesEmitted uint64
	// UtterancesDropped counts utterances never handed over: overflowing
	// the MaxUtteranceWaiting bound, or their speaker's consent gone
	// before they could be (UtterancesDroppedNoConsent, a part of it).
	UtterancesDropped, UtterancesDroppedNoConsent uint64
	// UtteranceAudioDropped is the audio those utterances held, plus what
	// an overflowed speaker said after, until they next fell silent.
	UtteranceAudioDropped time.Duration
}

type inboundCounters struct {
	audioIn, speechIn                                          atomic.Int64 // samples at 24 kHz
	framesIn, decoded, noConsent, self, overflow, decodeErrors atomic.Uint64
	decoderPanics                                              atomic.Uint64
	active, peak                                               atomic.Int64
	uttEmitted, uttDropped, uttNoConsent                       atomic.Uint64
	uttAudioDropped                                            atomic.Int64 // samples at 24 kHz
}

// inEvent is what Push and the test barrier hand the Inbound's goroutine.
type inEvent struct {
	userID  string
	frame   []byte
	arrived time.Time
	revoke  bool          // userID is no longer consented: drop their queue
	barrier chan struct{} // closed once everything before it is handled
}

// Inbound mixes consented speakers' Opus frames into the model's input
// audio, or, in the utterance mode, gathers each speaker's into utterances
// of their own. Push may be called from any goroutine; Run does the work on
// one.
//
// A mix step takes one frame from each speaker who has one. It runs as
// soon as every speaker heard in the last two frames has a frame waiting
// (a lone speaker's frame is mixed the moment it arrives), or at the
// 20 ms tick once a waiting frame is half a frame old, so a late or
// silent speaker delays the others by at most about a frame.
type Inbound struct {
	cfg   InboundConfig
	in    chan inEvent
	stats inboundCounters
}

// NewInbound validates cfg and returns an Inbound; call Run to start it.
func NewInbound(cfg InboundConfig) (*Inbound, error) {
	if cfg.Sink == nil && cfg.Utterances == nil {
		return nil, errors.New("audio: inbound needs a sink or an utterance callback")
	}
	if cfg.Sink != nil && cfg.Utterances != nil {
		return nil, errors.New("audio: inbound takes a sink (mixed) or an utterance callback (per speaker), not both")
	}
	if cfg.UtteranceSilence <= 0 {
		cfg.UtteranceSilence = 600 * time.Millisecond
	}
	if cfg.Consented == nil {
		cfg.Consented = func(string) bool { return false }
	}
	if cfg.NewDecoder == nil {
		cfg.NewDecoder = GoDecoders
	}
	if cfg.Jitter <= 0 {
		cfg.Jitter = 3
	}
	if cfg.Hangover == 0 {
		cfg.Hangover = time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	// Room for every one of 25 speakers' jitter queues to fill between two
	// wake-ups of the goroutine; beyond that the goroutine is behind and
	// frames are dropped rather than blocking the connection.
	return &Inbound{cfg: cfg, in: make(chan inEvent, 25*cfg.Jitter+25)}, nil
}

// Push offers one Opus frame from userID. It never blocks and reports
// whether the frame was queued: the bot's own frames and those of anyone
// not consented are dropped here, undecoded and counted. The frame is
// copied.
func (in *Inbound) Push(userID string, frame []byte) bool {
	if userID == in.cfg.BotUserID || userID == "" {
		in.stats.self.Add(1)
		return false
	}
	if !in.cfg.Consented(userID) {
		in.stats.noConsent.Add(1)
		// Their buffered frames go too, now rather than at the next tick.
		select {
		case in.in <- inEvent{userID: userID, revoke: true}:
		default:
		}
		return false
	}
	ev := inEvent{userID: userID, frame: append([]byte(nil), frame...), arrived: in.cfg.Clock.Now()}
	select {
	case in.in <- ev:
		return true
	default:
		in.stats.overflow.Add(1)
		return false
	}
}

// Stats returns the counters so far.
func (in *Inbound) Stats() InboundStats {
	s := &in.stats
	return InboundStats{
		AudioIn:          samplesToDuration(s.audioIn.Load(), ModelRate),
		SpeechIn:         samplesToDuration(s.speechIn.Load(), ModelRate),
		FramesIn:         s.framesIn.Load(),
		Decoded:          s.decoded.Load(),
		DroppedNoConsent: s.noConsent.Load(),
		DroppedSelf:      s.self.Load(),
		DroppedOverflow:  s.overflow.Load(),
		DecodeErrors:     s.decodeErrors.Load(),
		DecoderPanics:    s.decoderPanics.Load(),
		SpeakersActive:   int(s.active.Load()),
		SpeakersPeak:     int(s.peak.Load()),

		UtterancesEmitted:          s.uttEmitted.Load(),
		UtterancesDropped:          s.uttDropped.Load(),
		UtterancesDroppedNoConsent: s.uttNoConsent.Load(),
		UtteranceAudioDropped:      samplesToDuration(s.uttAudioDropped.Load(), ModelRate),
	}
}

// MarshalLogObject lets a receipt log the counters with zap.Object; they
// hold counts and durations only.
func (s InboundStats) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddDuration("audio_in", s.AudioIn)
	enc.AddDuration("speech_in", s.SpeechIn)
	enc.AddUint64("frames_in", s.FramesIn)
	enc.AddUint64("decoded", s.Decoded)
	enc.AddUint64("dropped_no_consent", s.DroppedNoConsent)
	enc.AddUint64("dropped_self", s.DroppedSelf)
	enc.AddUint64("dropped_overflow", s.DroppedOverflow)
	enc.AddUint64("decode_errors", s.DecodeErrors)
	enc.AddUint64("decoder_panics", s.DecoderPanics)
	enc.AddInt("speakers_active", s.SpeakersActive)
	enc.AddInt("speakers_peak", s.SpeakersPeak)
	enc.AddUint64("utterances_emitted", s.UtterancesEmitted)
	enc.AddUint64("utterances_dropped", s.UtterancesDropped)
	enc.AddUint64("utterances_dropped_no_consent", s.UtterancesDroppedNoConsent)
	enc.AddDuration("utterance_audio_dropped", s.UtteranceAudioDropped)
	return nil
}

func samplesToDuration(n int64, rate int) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(rate)
}

// Run mixes (or gathers utterances) until ctx ends, then drops every
// speaker's state, utterances not yet handed over included, and returns
// ctx's error.
//
// The timer wakes on the 20 ms grid and, in the utterance mode, also at
// the moment a speaker's silence window ends, so an utterance is handed
// over then rather than at the next tick.
func (in *Inbound) Run(ctx context.Context) error {
	m := newMixer(ctx, in)
	defer m.close()
	timer := in.cfg.Clock.NewTimer()
	defer timer.Stop()
	next := in.cfg.Clock.Now().Add(FrameDuration)
	timer.Reset(FrameDuration)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-in.in:
			m.handle(ev)
		case <-timer.C():
			now := in.cfg.Clock.Now()
			if now.Before(next) {
				m.expireAll(now) // woken for a silence window, between ticks
			} else {
				m.tick(now)
				next = next.Add(FrameDuration)
				if now.Sub(next) > 3*FrameDuration {
					next = now.Add(FrameDuration) // stalled: restart the grid rather than catch up
				}
			}
			wake := next
			if d, ok := m.deadline(); ok && d.Before(wake) {
				wake = d
			}
			timer.Reset(wake.Sub(now))
		}
	}
}

// speaker is one consented speaker's queue and decoder.
type speaker struct {
	id      string
	queue   [][]byte
	arrived []time.Time
	dec     Decoder
	heard   time.Time // when their last frame was mixed or queued
	mono    []int16   // decoded mono 48 kHz of the current step

	// Voice, for Speaking and the utterance mode.
	lastVoiced time.Time // when their last frame above the voice floor came
	talk       int       // voiced samples at 48 kHz in the current utterance
	cued       bool      // Speaking was called for the current utterance

	// The utterance mode's state (utterance.go).
	down    *pcm.Downsampler // their own 48 → 24 kHz stream
	utt     *utterance       // the utterance (or lead context) being gathered
	cursor  time.Time        // where utt's audio ends on the arrival clock
	discard bool             // an overflowed utterance: drop until silent
}

// mixer is the Inbound's state, owned by its Run goroutine (benchmarks
// drive it directly).
type mixer struct {
	ctx       context.Context
	in        *Inbound
	speakers  map[string]*speaker
	order     []*speaker // speakers in a stable order for the mix
	decodeBuf []int16
	sources   [][]int16
	mixed     []int16
	down      *pcm.Downsampler
	out       []int16
	zeros     []int16
	lastStep  time.Time // when the last chunk went to the sink
	lastVoice time.Time // when the last chunk with a speaker went
	hangover  bool      // silence is being sent after speech

	// The utterance mode's state (utterance.go).
	done    []*utterance // ended, waiting for an earlier one to end
	waiting int          // PCM bytes gathered and not yet handed over
	seq     uint64       // utterances started, to order equal starts
}

func newMixer(ctx context.Context, in *Inbound) *mixer {
	return &mixer{ctx: ctx, in: in, speakers: map[string]*speaker{},
		decodeBuf: make([]int16, 2*opus.MaxFrameSamples), down: pcm.NewDownsampler(),
		zeros: make([]int16, opus.FrameSamples)}
}

func (m *mixer) handle(ev inEvent) {
	switch {
	case ev.barrier != nil:
		close(ev.barrier)
	case ev.revoke:
		if s := m.speakers[ev.userID]; s != nil {
			m.drop(s)
		}
		if m.in.cfg.Utterances != nil {
			// Their ended utterances go too, and any held back behind
			// the one just dropped go out.
			m.purge(ev.userID)
			m.flush()
			m.countActive()
		}
	case m.in.cfg.Utterances != nil:
		m.hear(ev)
	default:
		m.enqueue(ev)
		if m.complete(ev.arrived) {
			m.step(ev.arrived)
		}
	}
}

// enqueue adds a frame to its speaker's queue, pushing out the oldest when
// the queue is full.
func (m *mixer) enqueue(ev inEvent) {
	s := m.speakers[ev.userID]
	if s == nil {
		s = &speaker{id: ev.userID}
		m.speakers[ev.userID] = s
		m.order = append(m.order, s)
	}
	if len(s.queue) >= m.in.cfg.Jitter {
		s.queue[0] = nil
		s.queue, s.arrived = s.queue[1:], s.arrived[1:]
		m.in.stats.overflow.Add(1)
	}
	s.queue = append(s.queue, ev.frame)
	s.arrived = append(s.arrived, ev.arrived)
	s.heard = ev.arrived
	m.in.stats.framesIn.Add(1)
}

// complete reports whether every speaker heard within the last two frames
// has a frame waiting, so a mix step need not wait for anyone.
func (m *mixer) complete(now time.Time) bool {
	waiting := false
	for _, s := range m.order {
		if len(s.queue) > 0 {
			waiting = true
			continue
		}
		if now.Sub(s.heard) < 2*FrameDuration {
			return false
		}
	}
	return waiting
}

// tick is the 20 ms clock: consent and idleness are checked for everyone,
// a frame waiting half a frame is mixed without the late, and a quiet
// session gets hangover silence.
func (m *mixer) tick(now time.Time) {
	if m.in.cfg.Utterances != nil {
		m.tickUtterances(now)
		return
	}
	for i := len(m.order) - 1; i >= 0; i-- { // backwards: drop and forget remove from m.order
		s := m.order[i]
		switch {
		case !m.in.cfg.Consented(s.id):
			m.drop(s)
		case len(s.queue) == 0 && now.Sub(s.heard) > m.in.cfg.IdleTimeout:
			m.forget(s)
		}
	}
	for _, s := range m.order {
		if len(s.queue) > 0 && now.Sub(s.arrived[0]) >= FrameDuration/2 {
			m.step(now)
			return
		}
	}
	if now.Sub(m.lastVoice) >= 2*FrameDuration {
		m.in.stats.active.Store(0) // nobody is talking
	}
	// Hangover: silence once no chunk went for a frame and a half (a
	// speaker's next frame is due within a frame, give or take jitter),
	// then one per tick until speech resumes or the hangover is over.
	quiet := m.hangover || now.Sub(m.lastStep) >= 3*FrameDuration/2
	if quiet && !m.lastVoice.IsZero() && now.Sub(m.lastVoice) < m.in.cfg.Hangover {
		m.hangover = true
		m.emit(now, m.zeros, false)
	} else {
		m.hangover = false
	}
}

// step mixes one frame from each consented speaker who has one and hands
// the result to the sink. A speaker found unconsented is dropped, frames
// undecoded.
func (m *mixer) step(now time.Time) {
	m.sources = m.sources[:0]
	for i := len(m.order) - 1; i >= 0; i-- { // backwards: drop removes from m.order
		s := m.order[i]
		if len(s.queue) == 0 {
			continue
		}
		if !m.in.cfg.Consented(s.id) {
			m.drop(s)
			continue
		}
		frame := s.queue[0]
		s.queue[0] = nil
		s.queue, s.arrived = s.queue[1:], s.arrived[1:]
		s.heard = now
		if mono, ok := m.decode(s, frame); ok {
			m.sources = append(m.sources, mono)
			if m.in.cfg.Speaking != nil && voiced(frame, mono) {
				m.voice(s, len(mono), now)
			}
		}
	}
	active := int64(len(m.sources))
	m.in.stats.active.Store(active)
	if active > m.in.stats.peak.Load() {
		m.in.stats.peak.Store(active)
	}
	if active == 0 {
		return
	}
	m.mixed = pcm.Mix(m.mixed, m.sources...)
	m.emit(now, m.mixed, true)
}

// decode decodes one frame of s to mono 48 kHz, creating s's decoder on
// first use.
func (m *mixer) decode(s *speaker, frame []byte) ([]int16, bool) {
	if s.dec == nil {
		dec, err := m.in.cfg.NewDecoder(s.id)
		if err != nil {
			m.in.stats.decodeErrors.Add(1)
			return nil, false
		}
		s.dec = dec
	}
	m.in.stats.decoded.Add(1)
	n, err := m.decodeSafely(s, frame)
	if err != nil {
		m.in.stats.decodeErrors.Add(1)
		if errors.Is(err, opus.ErrDecoderPanicked) {
			m.in.stats.decoderPanics.Add(1)
		}
		return nil, false
	}
	if s.dec.Channels() == 2 {
		s.mono = pcm.AppendMono(s.mono[:0], m.decodeBuf[:2*n])
	} else {
		s.mono = append(s.mono[:0], m.decodeBuf[:n]...)
	}
	return s.mono, true
}

// decodeSafely decodes frame with s's decoder behind recover, whatever the
// decoder: one that panics (on a packet a peer chose) is closed and
// dropped, the next frame gets a fresh one, and the panic is reported as
// opus.ErrDecoderPanicked.
func (m *mixer) decodeSafely(s *speaker, frame []byte) (n int, err error) {
	defer func() {
		if recover() != nil {
			closeDecoder(m.ctx, s.dec)
			s.dec = nil
			n, err = 0, opus.ErrDecoderPanicked
		}
	}()
	return s.dec.Decode(m.ctx, frame, m.decodeBuf)
}

// emit resamples mono 48 kHz samples to 24 kHz and hands them to the sink.
func (m *mixer) emit(now time.Time, mono []int16, voice bool) {
	m.out = m.down.Append(m.out[:0], mono)
	if len(m.out) == 0 {
		return
	}
	b := pcm.AppendLE(make([]byte, 0, 2*len(m.out)), m.out)
	m.lastStep = now
	m.in.stats.audioIn.Add(int64(len(m.out)))
	if voice {
		m.hangover = false
		m.lastVoice = now
		m.in.stats.speechIn.Add(int64(len(m.out)))
	}
	m.in.cfg.Sink(b)
}

// drop discards a no-longer-consented speaker: frames undecoded and
// counted, the utterance they were making dropped unsent and counted,
// decoder released.
func (m *mixer) drop(s *speaker) {
	m.in.stats.noConsent.Add(uint64(len(s.queue)))
	if u := s.utt; u != nil {
		s.utt = nil
		m.waiting -= len(u.pcm)
		if u.started() {
			m.dropUtterance(u, true)
		}
	}
	m.forget(s)
}

// forget releases a speaker's state (in the utterance mode, only lead
// context or nothing is left to lose).
func (m *mixer) forget(s *speaker) {
	clear(s.queue)
	s.queue, s.arrived = nil, nil
	if s.utt != nil {
		m.waiting -= len(s.utt.pcm)
		s.utt = nil
	}
	closeDecoder(m.ctx, s.dec)
	s.dec = nil
	delete(m.speakers, s.id)
	for i, o := range m.order {
		if o == s {
			m.order = append(m.order[:i], m.order[i+1:]...)
			break
		}
	}
}

func (m *mixer) close() {
	for len(m.order) > 0 {
		m.forget(m.order[0])
	}
	clear(m.done)
	m.done, m.waiting = nil, 0
	m.in.stats.active.Store(0)
}

// closeDecoder closes decoders that hold resources (libopus instances).
func closeDecoder(ctx context.Context, d Decoder) {
	if c, ok := d.(interface{ Close(context.Context) error }); ok {
		_ = c.Close(context.WithoutCancel(ctx))
	}
}
