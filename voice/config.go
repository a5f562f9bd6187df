package voice

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/realtime"
)

// Briefer pulls a voice briefing; *memoryclient.Client satisfies it.
type Briefer interface {
	VoiceBriefing(ctx context.Context, req api.BriefingRequest) (api.BriefingResponse, error)
}

// Gateway moves the bot into and out of voice channels with the gateway
// voice state update (op 4); *bot.Shards satisfies it (on the guild's
// shard).
type Gateway interface {
	ChannelVoiceJoinManual(gID, cID string, mute, deaf bool) error
}

// Poster posts a channel message: the disclosure when a session starts and
// the one sentence when Clankie leaves on his own. *discordgo.Session
// satisfies it.
type Poster interface {
	ChannelMessageSendComplex(channelID string, data *discordgo.MessageSend, options ...discordgo.RequestOption) (*discordgo.Message, error)
}

// Model is one session's connection to the realtime voice model;
// *realtime.Session satisfies it.
type Model interface {
	Brief(ctx context.Context, text string, refresh bool) error
	// Utterance sends one speaker's utterance as its own labelled turn;
	// CreateResponse asks for an answer (the floor decides when);
	// FunctionOutput answers a tool call and continues the answer. None
	// blocks; false when the connection is not ready.
	Utterance(label string, pcm []byte) (seq uint64, ok bool)
	CreateResponse() bool
	FunctionOutput(callID, output string) bool
	// Forget takes everything the model was given out of its context (a
	// fresh conversation); it never blocks, and the next Brief seeds the
	// fresh conversation.
	Forget()
	State() realtime.State
	Stats() realtime.Stats
	Close() error
}

// ModelOpener opens a session's model connection, whose events go to out:
// audio and barge-in to the session's audio path, transcripts and tool
// calls to its floor and tools (out is a realtime.TurnListener too). Nil
// when no endpoint is configured: sessions still run and still pull
// briefings.
type ModelOpener func(ctx context.Context, out realtime.Listener) (Model, error)

// Config is everything a Manager works with, given once at construction:
// its collaborators, the consent policy and the bounds on each session's
// life. Nothing is set on a Manager afterwards.
type Config struct {
	Policy config.ConsentPolicy
	// Bounds: join timeout, idle leave, longest session, daily budget.
	Bounds config.VoiceSessions

	Memory  Briefer
	Gateway Gateway
	// Notices posts the disclosure and the leave sentences; nil posts
	// nothing.
	Notices Poster
	// Model opens each session's model connection; nil: no model.
	Model ModelOpener
	// Catalog words what a session posts to its channel (the disclosure,
	// its buttons, why Clankie left) in the server's locale, which every
	// reader of the channel shares; the embedded catalog when nil.
	Catalog *lang.Catalog
	// ModelHost names who hears consented speakers in the disclosure: the
	// host of CLANKIE_REALTIME_URL.
	ModelHost string
	// Audio, when not nil, gives each session its voice connection and
	// audio both ways (audiolink.go).
	Audio *AudioConfig
	// Tools answers the voice model's tool calls (recall_person,
	// recall_episodes, remember_episode); nil: every call is refused.
	Tools ToolMemory
	// Group is how Clankie takes turns in a group call.
	Group config.VoiceGroup

	// Debounce delays a refresh after the permitted set changes, so a
	// burst of joins costs one briefing (250 ms when zero).
	Debounce time.Duration
	// RecheckAfter is how long a session whose voice connection Discord
	// closed as "disconnected" (4014, 4021, 4022) waits for the gateway
	// to say where the bot went before it rejoins (2 s when zero).
	RecheckAfter time.Duration
	// RejoinBackoff is the first pause before a rejoin, doubled for each
	// further attempt (1 s when zero).
	RejoinBackoff time.Duration
	// Now is the clock of the daily budget (time.Now when nil).
	Now func() time.Time
	Log *zap.Logger
}

func (c Config) withDefaults() Config {
	if c.Debounce <= 0 {
		c.Debounce = 250 * time.Millisecond
	}
	if c.RecheckAfter <= 0 {
		c.RecheckAfter = 2 * time.Second
	}
	if c.RejoinBackoff <= 0 {
		c.RejoinBackoff = time.Second
	}
	if c.Bounds.JoinTimeout <= 0 {
		c.Bounds.JoinTimeout = 10 * time.Second
	}
	if c.Bounds.IdleLeave <= 0 {
		c.Bounds.IdleLeave = 2 * time.Minute
	}
	if c.Bounds.MaxSession <= 0 {
		c.Bounds.MaxSession = 2 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.Group.Followup <= 0 {
		c.Group.Followup = 8 * time.Second
	}
	if c.Group.UtteranceSilence <= 0 {
		c.Group.UtteranceSilence = 600 * time.Millisecond
	}
	if len(c.Group.Names) == 0 {
		c.Group.Names = []string{"clankie"}
	}
	if c.Policy == "" {
		c.Policy = config.ConsentExplicit
	}
	return c
}
