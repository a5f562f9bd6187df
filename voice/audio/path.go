package audio

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// Model is the realtime model connection as the audio path uses it:
// consented speakers' audio in, and the barge-in events. voice.AudioModel
// and *realtime.Session satisfy it. Its methods never block.
type Model interface {
	AppendAudio(pcm []byte) bool
	BargeInModel
}

// PathConfig configures a Path: one voice session's audio both ways.
type PathConfig struct {
	// BotUserID is the bot's own user id, never heard.
	BotUserID string
	// Consented is the per-frame consent query (voice.Session.Consented).
	Consented func(userID string) bool
	// Model returns the model connection now, or nil while there is none:
	// while it is nil, or refuses audio because it
	// is reconnecting, input audio is dropped and counted, not buffered,
	// and resumes with the next chunk once it is back. It may be nil: a
	// session that opens the model with the Path as its listener builds
	// the Path first and calls Attach, which then overrides Model.
	Model func() Model
	// Encoder and Send are the Outbound's (Send is the media connection's
	// Play, whose pacer is the outgoing audio's clock).
	Encoder Encoder
	Send    func(ctx context.Context, opusFrame []byte) error
	// NewDecoder is the Inbound's decoder factory; nil is GoDecoders.
	NewDecoder DecoderFactory
	// Clock drives the Inbound's mix; nil is SystemClock.
	Clock Clock
	// Utterances, when set, keeps speakers apart (see
	// InboundConfig.Utterances): the Path then never calls
	// Model.AppendAudio, the session sends each Utterance itself under
	// its speaker's label.
	Utterances func(Utterance)
	// UtteranceSilence ends an utterance (see InboundConfig); 0 is 600 ms.
	UtteranceSilence time.Duration
	// Speaking is the per-speaker barge-in cue (see InboundConfig.Speaking).
	Speaking func(userID string)
}

// PathStats are a Path's counters, for a session's receipt.
type PathStats struct {
	In  InboundStats
	Out OutboundStats
	// ModelDropped counts 20 ms input chunks the model did not take (no
	// connection, or reconnecting): audio paused, not buffered.
	ModelDropped uint64
}

// MarshalLogObject logs the counters with zap.Object.
func (s PathStats) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if err := enc.AddObject("in", s.In); err != nil {
		return err
	}
	if err := enc.AddObject("out", s.Out); err != nil {
		return err
	}
	enc.AddUint64("model_dropped", s.ModelDropped)
	return nil
}

// Path is one voice session's audio: the media connection's frames go to
// Push, the model's events come to its realtime.Listener methods
// (OutputAudio, SpeechStarted, SpeechStopped), and Run drives both
// directions.
type Path struct {
	in           *Inbound
	out          *Outbound
	model        func() Model // PathConfig.Model; nil if none
	attached     atomic.Pointer[attachedModel]
	modelDropped atomic.Uint64
}

// attachedModel is what Attach set, nil Model included.
type attachedModel struct{ m Model }

// NewPath validates cfg and returns a Path; call Run to start it.
func NewPath(cfg PathConfig) (*Path, error) {
	p := &Path{model: cfg.Model}
	icfg := InboundConfig{BotUserID: cfg.BotUserID, Consented: cfg.Consented, NewDecoder: cfg.NewDecoder,
		Clock: cfg.Clock, Utterances: cfg.Utterances, UtteranceSilence: cfg.UtteranceSilence, Speaking: cfg.Speaking}
	if cfg.Utterances == nil {
		icfg.Sink = p.toModel
	}
	var err error
	p.in, err = NewInbound(icfg)
	if err != nil {
		return nil, err
	}
	p.out, err = NewOutbound(OutboundConfig{Encoder: cfg.Encoder, Send: cfg.Send, Model: pathModel{p}})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Attach sets the model connection the Path talks to, replacing any
// earlier one; nil detaches it (input audio is then dropped and counted,
// and barge-ins tell no model). Once called, it overrides
// PathConfig.Model. It may be called from any goroutine, before or while
// Run runs, so a session can open the model with the Path as its
// listener.
func (p *Path) Attach(m Model) { p.attached.Store(&attachedModel{m: m}) }

// current returns the model connection now, or nil.
func (p *Path) current() Model {
	if a := p.attached.Load(); a != nil {
		return a.m
	}
	if p.model != nil {
		return p.model()
	}
	return nil
}

func (p *Path) toModel(pcm []byte) {
	if m := p.current(); m == nil || !m.AppendAudio(pcm) {
		p.modelDropped.Add(1)
	}
}

// pathModel hands barge-in events to whichever model connection is
// current, if any.
type pathModel struct{ p *Path }

func (m pathModel) CancelResponse(responseID string) bool {
	if c := m.p.current(); c != nil {
		return c.CancelResponse(responseID)
	}
	return false
}

func (m pathModel) Truncate(itemID string, contentIndex, audioEndMs int) bool {
	if c := m.p.current(); c != nil {
		return c.Truncate(itemID, contentIndex, audioEndMs)
	}
	return false
}

// Push offers one Opus frame received from userID (see Inbound.Push).
func (p *Path) Push(userID string, frame []byte) bool { return p.in.Push(userID, frame) }

// OutputAudio takes the model's audio (see Outbound.OutputAudio).
func (p *Path) OutputAudio(responseID, itemID string, pcm []byte) {
	p.out.OutputAudio(responseID, itemID, pcm)
}

// SpeechStarted barges in while Clankie talks (see Outbound.SpeechStarted).
func (p *Path) SpeechStarted(audioStartMs int) { p.out.SpeechStarted(audioStartMs) }

// ModelLost drops what the lost model connection said (see
// Outbound.ModelLost); realtime.Session calls it through
// realtime.ConnectionListener.
func (p *Path) ModelLost() { p.out.ModelLost() }

// SpeechStopped is a no-op.
func (p *Path) SpeechStopped(int) {}

// BargeIn stops Clankie without telling the model (see Outbound.BargeIn).
func (p *Path) BargeIn() (Cut, bool) { return p.out.BargeIn() }

// Stats returns both directions' counters.
func (p *Path) Stats() PathStats {
	return PathStats{In: p.in.Stats(), Out: p.out.Stats(), ModelDropped: p.modelDropped.Load()}
}

// Run drives both directions until ctx ends and returns ctx's error.
func (p *Path) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = p.in.Run(ctx) }()
	go func() { defer wg.Done(); _ = p.out.Run(ctx) }()
	wg.Wait()
	return ctx.Err()
}
