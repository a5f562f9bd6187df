package voice

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/audio"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/realtime"
)

// speech is a session's conversation with the model in a group call, wired
// directly: one audio path for the session's whole life is the model's
// listener and sends it each consented speaker's utterances, labelled; the
// floor decides when Clankie answers and who may cut him off; the tools
// answer the model's calls. The voice connection under it changes with
// every reconnect (conn); the path and the model do not.
type speech struct {
	s     *Session
	path  *audio.Path // nil without audio
	floor *floor
	tools *tools
	// conn is the current voice connection, where the path's frames go.
	conn atomic.Pointer[media.Conn]

	mu           sync.Mutex
	model        Model // set once it is open; read through md
	callInFlight bool  // the response that ends next called a tool: the answer goes on
	toolCalls    map[toolCall]uint64
}

type toolCall struct {
	tool    string
	outcome toolOutcome
}

// errNoAudio: the session could not build its audio path.
var errNoAudio = errors.New("voice: no audio path")

// newSpeech builds the session's audio path (when audio is on) before the
// model opens: the model's listener is the path itself.
func newSpeech(ctx context.Context, s *Session) (*speech, error) {
	m := s.m
	sp := &speech{s: s, toolCalls: map[toolCall]uint64{},
		floor: newFloor(m.names(), m.cfg.Group.Followup, m.cfg.Now)}
	if m.cfg.Tools != nil {
		sp.tools = &tools{mem: m.cfg.Tools, guildID: s.guildID, channelID: s.channelID, session: s.id,
			consented: s.Consented, now: m.cfg.Now, log: m.log}
	}
	if !m.audioOn() {
		return sp, nil
	}
	codec, err := m.cfg.Audio.Codec(ctx)
	if err != nil {
		m.log.Warn("opus codec could not be compiled", zap.Error(err))
		return sp, errNoAudio
	}
	enc, err := codec.NewEncoder(ctx, opus.DefaultEncoderConfig())
	if err != nil {
		m.log.Warn("opus encoder could not be made", zap.Error(err))
		return sp, errNoAudio
	}
	context.AfterFunc(ctx, func() { enc.Close(context.Background()) })
	path, err := audio.NewPath(audio.PathConfig{
		BotUserID:        m.botUser(),
		Consented:        s.Consented,
		Encoder:          enc,
		Send:             sp.play,
		Utterances:       sp.utterance,
		UtteranceSilence: m.cfg.Group.UtteranceSilence,
		Speaking:         sp.speaking,
	})
	if err != nil {
		m.log.Warn("audio path could not be made", zap.Error(err))
		return sp, errNoAudio
	}
	sp.path = path
	return sp, nil
}

// play hands one frame to the current connection's pacer, which returns as
// it takes the frame for its slot. Without a connection (reconnecting) the
// frame is dropped: Clankie's answer does not wait for a new connection.
func (sp *speech) play(ctx context.Context, frame []byte) error {
	c := sp.conn.Load()
	if c == nil {
		return ctx.Err()
	}
	if err := c.Play(ctx, frame); err != nil && ctx.Err() == nil {
		return nil // that connection ended; the next frame goes to the next one
	}
	return ctx.Err()
}

// attach makes the model the path's and the floor's.
func (sp *speech) attach(md Model) {
	sp.mu.Lock()
	sp.model = md
	sp.mu.Unlock()
	if sp.path != nil {
		if a, ok := md.(audio.Model); ok {
			sp.path.Attach(a)
		}
	}
}

// utterance sends one consented speaker's utterance to the model as its
// own labelled turn. Consent is asked again: it may have been withdrawn
// since the utterance ended.
// md is the model connection, or nil before it is open.
func (sp *speech) md() Model {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.model
}

func (sp *speech) utterance(u audio.Utterance) {
	md := sp.md()
	if md == nil || !sp.s.Consented(u.UserID) {
		return
	}
	seq, ok := md.Utterance("<@"+u.UserID+">", u.PCM)
	if !ok {
		return // refused (not ready): the model client counts it
	}
	if sp.floor.utterance(seq, u.UserID) {
		md.CreateResponse()
	}
}

// speaking is the path's cue that userID has talked for a while: the
// person Clankie answers cuts him off; anyone else is heard as their own
// turn, and the answer goes on.
func (sp *speech) speaking(userID string) {
	if sp.path != nil && sp.floor.mayBargeIn(userID) {
		sp.path.SpeechStarted(0)
	}
}

// Transcript is the model's transcription of an utterance: the floor
// decides whether Clankie answers. The text goes nowhere else.
func (sp *speech) Transcript(seq uint64, text string, ok bool) {
	if md := sp.md(); sp.floor.transcript(seq, text, ok, len(sp.s.present())) && md != nil {
		md.CreateResponse()
	}
}

// FunctionCall runs a tool call off the model's goroutine and hands the
// output back, which continues the answer.
func (sp *speech) FunctionCall(callID, name, arguments string) {
	sp.mu.Lock()
	sp.callInFlight = true
	md := sp.model
	sp.mu.Unlock()
	if md == nil {
		return
	}
	sp.s.m.wg.Add(1)
	go func() {
		defer sp.s.m.wg.Done()
		out, outcome := "Clankie's memory is not available in this call.", toolMemoryError
		if sp.tools != nil {
			out, outcome = sp.tools.call(context.Background(), name, arguments)
		}
		sp.mu.Lock()
		sp.toolCalls[toolCall{knownTool(name), outcome}]++
		sp.mu.Unlock()
		md.FunctionOutput(callID, out)
	}()
}

// ResponseDone ends an answer, unless it ended in a tool call (the answer
// goes on once the output is in); whoever addressed Clankie meanwhile is
// answered next.
func (sp *speech) ResponseDone(_, _ string) {
	sp.mu.Lock()
	inCall := sp.callInFlight
	sp.callInFlight = false
	sp.mu.Unlock()
	if inCall {
		return
	}
	if md := sp.md(); sp.floor.responseDone() && md != nil {
		md.CreateResponse()
	}
}

// knownTool is a tool name as a metric label: one of the three, or
// "unknown".
func knownTool(name string) string {
	switch name {
	case toolRecallPerson, toolRecallEpisodes, toolRememberEpisode:
		return name
	}
	return "unknown"
}

// modelEvents is what the model's connection talks to: the audio path for
// audio and barge-in, the speech for turns and tool calls.
type modelEvents struct {
	*speech
}

// OutputAudio, SpeechStarted, SpeechStopped and ModelLost go to the path.
func (e modelEvents) OutputAudio(responseID, itemID string, pcm []byte) {
	if e.path != nil {
		e.path.OutputAudio(responseID, itemID, pcm)
	}
}

func (e modelEvents) SpeechStarted(ms int) {
	if e.path != nil {
		e.path.SpeechStarted(ms)
	}
}

func (e modelEvents) SpeechStopped(int) {}

func (e modelEvents) ModelLost() {
	e.floor.lost()
	e.mu.Lock()
	e.callInFlight = false
	e.mu.Unlock()
	if e.path != nil {
		e.path.ModelLost()
	}
}

var (
	_ realtime.Listener           = modelEvents{}
	_ realtime.ConnectionListener = modelEvents{}
	_ realtime.TurnListener       = modelEvents{}
)
