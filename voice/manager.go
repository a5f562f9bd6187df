package voice

import (
	"context"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/voiceapi"
)

// Briefer pulls a voice briefing; *memoryclient.Client satisfies it.
type Briefer interface {
	VoiceBriefing(ctx context.Context, req api.BriefingRequest) (api.BriefingResponse, error)
}

// Gateway moves the bot into and out of voice channels with the gateway
// voice state update; *discordgo.Session satisfies it.
type Gateway interface {
	ChannelVoiceJoinManual(gID, cID string, mute, deaf bool) error
}

// Model is one session's connection to the realtime voice model;
// *realtime.Session satisfies it.
type Model interface {
	Brief(ctx context.Context, text string, refresh bool) error
	// Forget takes everything the model was given out of its context (a
	// fresh conversation); it never blocks, and the next Brief seeds the
	// fresh conversation.
	Forget()
	State() realtime.State
	Stats() realtime.Stats
	Close() error
}

// ModelOpener opens a session's model connection, whose audio and speech
// events go to out (the session, which forwards them to the audio path
// once one is attached). Nil when no endpoint is configured: sessions
// still run and still pull briefings.
type ModelOpener func(ctx context.Context, out realtime.Listener) (Model, error)

// Manager owns the voice sessions of one bridge, at most one per server: it
// follows gateway events into the roster, tells the bot's own moves from
// moves by others, and starts and ends sessions.
type Manager struct {
	policy config.ConsentPolicy
	memory Briefer
	gw     Gateway
	model  ModelOpener
	log    *zap.Logger
	// Debounce delays a refresh after the permitted set changes, so a burst
	// of joins costs one briefing.
	Debounce time.Duration

	roster   *roster
	mu       sync.Mutex
	botID    string
	sessions map[string]*Session
	// pendingMoves counts, per guild, the bot's voice state updates whose
	// echo has not arrived yet.
	pendingMoves map[string]int
	wg           sync.WaitGroup

	// Audio, when set before the first event, gives each session its voice
	// connection and audio both ways (audiolink.go). Nil: no audio.
	Audio *AudioConfig
	// voiceServers and botSessions are what the voice connection needs
	// from the main gateway, per guild: VOICE_SERVER_UPDATE's endpoint
	// and token, and the bot's own VOICE_STATE_UPDATE session id.
	voiceServers map[string]voiceServer
	botSessions  map[string]string
	// ended holds the figures of sessions and connections gone, links
	// the connections whose audio path runs now (Totals).
	ended ended
	links map[*audioLink]struct{}
}

// NewManager builds the session manager. model may be nil.
func NewManager(policy config.ConsentPolicy, memory Briefer, gw Gateway, model ModelOpener, log *zap.Logger) *Manager {
	if log == nil {
		log = zap.NewNop()
	}
	return &Manager{policy: policy, memory: memory, gw: gw, model: model, log: log,
		Debounce: 250 * time.Millisecond, roster: newRoster(), sessions: map[string]*Session{}, pendingMoves: map[string]int{}}
}

// OnReady records the bot's own user, which never counts as a speaker.
func (m *Manager) OnReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User != nil {
		m.mu.Lock()
		m.botID = r.User.ID
		m.mu.Unlock()
	}
}

// OnGuildCreate replaces a server's voice states (on joining it and after
// every re-identify). Whoever the rebuilt roster no longer places in the
// session's channel has left it, and loses their consent like any leave.
func (m *Manager) OnGuildCreate(_ *discordgo.Session, g *discordgo.GuildCreate) {
	if g.Guild == nil {
		return
	}
	moved := m.roster.load(g.ID, g.VoiceStates, g.Members)
	m.mu.Lock()
	for _, mv := range moved {
		if mv.userID != m.botID {
			m.departedLocked(g.ID, mv.userID, mv.from, mv.to)
		}
	}
	m.mu.Unlock()
	m.reconcile(g.ID)
}

// OnVoiceStateUpdate tracks a member joining, leaving or moving.
func (m *Manager) OnVoiceStateUpdate(_ *discordgo.Session, u *discordgo.VoiceStateUpdate) {
	if u.VoiceState == nil {
		return
	}
	before := m.roster.update(u.VoiceState)
	m.mu.Lock()
	if u.UserID == m.botID {
		m.botMovedLocked(u.GuildID, u.ChannelID)
		m.botVoiceStateLocked(u)
		m.mu.Unlock()
		return
	}
	m.departedLocked(u.GuildID, u.UserID, before, u.ChannelID)
	m.mu.Unlock()
	m.reconcile(u.GuildID)
}

// departedLocked is the one rule for a person who stops being in a
// session's channel, however we learn it (a leave or a move in a
// VOICE_STATE_UPDATE, a roster rebuilt from GUILD_CREATE): their opt-in is
// dropped, so coming back counts as consented only after a new opt-in. An
// opt-out stays. m.mu is held.
func (m *Manager) departedLocked(guildID, userID, from, to string) {
	if s := m.sessions[guildID]; s != nil && from == s.channelID && to != s.channelID {
		s.consent.left(userID)
		m.permittedLocked(s)
	}
}

// botMovedLocked handles a voice state update for the bot itself. Discord
// echoes each voice state update the bot sends, in order. While some of
// ours are still unanswered, an update is the echo of one of them (perhaps
// of a leave sent before the latest join), not news. Only an update nobody
// asked for is a move or a disconnect by someone else, and that ends the
// session. m.mu is held.
func (m *Manager) botMovedLocked(guildID, channelID string) {
	if m.pendingMoves[guildID] > 0 {
		m.pendingMoves[guildID]--
	} else if s := m.sessions[guildID]; s != nil && channelID != s.channelID {
		m.endLocked(s)
	}
}

// reconcile closes a session whose channel has no human left, and otherwise
// asks for a (debounced) refresh; the worker sends one only when the
// permitted set really changed.
func (m *Manager) reconcile(guildID string) {
	m.mu.Lock()
	s := m.sessions[guildID]
	if s == nil {
		m.mu.Unlock()
		return
	}
	if len(m.roster.humans(guildID, s.channelID, m.botID)) == 0 {
		m.endLocked(s)
		m.mu.Unlock()
		_ = m.moveBot(guildID, "")
		return
	}
	m.permittedLocked(s)
	m.mu.Unlock()
	s.poke()
}

// permittedLocked is the one answer to who counts as consented in a
// session now: the humans present (never the bot, never another bot),
// under the policy, at most 25. It also publishes the answer to the
// session's Consented snapshot, so the audio path sees every change as
// soon as it is made, and when someone dropped out of the set (an
// opt-out, a leave, a move, a new arrival pushing them past the cap) it
// has the model forget the whole conversation: it holds their facts, the
// mixed audio of their turns and answers that may repeat either. When no
// human is left the session ends instead (reconcile, right after), which
// closes the model's connection and so its conversation: a fresh
// connection dialled only to be closed would cost a model session for
// nothing. m.mu is held.
func (m *Manager) permittedLocked(s *Session) []string {
	present := m.roster.humans(s.guildID, s.channelID, m.botID)
	permitted := s.consent.permitted(present, api.MaxBriefingUsers)
	if s.setConsented(permitted) && len(present) > 0 {
		m.forgetLocked(s)
	}
	return permitted
}

// forgetLocked ends what the model heard and was told in s, after the
// consented set shrank. The model's Forget returns at once, and is called
// under m.mu, the lock brief sends a briefing under: a briefing pulled for
// the old set and not yet handed over is never sent after it (brief sees
// forgets changed and drops it). The next briefing is pulled for the new
// set even if it equals the one last sent (the fresh conversation has
// none). m.mu is held.
func (m *Manager) forgetLocked(s *Session) {
	s.forgets++
	if s.model != nil {
		s.model.Forget()
	}
	s.poke()
}

// Session returns the server's live session, or nil: the audio path
// attaches to it.
func (m *Manager) Session(guildID string) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[guildID]
}

// Join starts the session in the invoker's voice channel and counts the
// invoker as consented. It returns the channel joined.
func (m *Manager) Join(ctx context.Context, guildID, userID string) (string, error) {
	channelID := m.roster.channelOf(guildID, userID)
	if channelID == "" {
		return "", voiceapi.ErrNotInVoice
	}
	m.mu.Lock()
	if s := m.sessions[guildID]; s != nil {
		if s.channelID != channelID {
			m.mu.Unlock()
			return "", voiceapi.ErrOtherChannel
		}
		s.consent.optIn(userID)
		m.permittedLocked(s)
		m.mu.Unlock()
		s.poke()
		return channelID, nil
	}
	m.mu.Unlock()
	if err := m.moveBot(guildID, channelID); err != nil {
		return "", err
	}
	s := newSession(guildID, channelID, m.policy)
	s.consent.optIn(userID)
	m.mu.Lock()
	if old := m.sessions[guildID]; old != nil { // a concurrent join won
		m.mu.Unlock()
		return old.channelID, nil
	}
	m.sessions[guildID] = s
	m.permittedLocked(s)
	m.linkAudioLocked(s) // the gateway may have answered the move already
	m.mu.Unlock()
	m.wg.Add(1)
	go m.work(s)
	return channelID, nil
}

// moveBot asks Discord to move the bot into channelID ("" leaves voice),
// counting the echo it will send back. m.mu must not be held.
func (m *Manager) moveBot(guildID, channelID string) error {
	m.mu.Lock()
	m.pendingMoves[guildID]++
	m.mu.Unlock()
	err := m.gw.ChannelVoiceJoinManual(guildID, channelID, false, false)
	if err != nil {
		m.mu.Lock()
		m.pendingMoves[guildID]--
		m.mu.Unlock()
	}
	return err
}

// Leave closes the server's session and leaves its channel.
func (m *Manager) Leave(ctx context.Context, guildID string) error {
	m.mu.Lock()
	s := m.sessions[guildID]
	if s == nil {
		m.mu.Unlock()
		return voiceapi.ErrNoSession
	}
	m.endLocked(s)
	m.mu.Unlock()
	return m.moveBot(guildID, "")
}

// Consent records the invoker's own opt-in or opt-out. Only someone in the
// session's channel manages consent there.
func (m *Manager) Consent(ctx context.Context, guildID, userID string, optIn bool) error {
	m.mu.Lock()
	s := m.sessions[guildID]
	if s == nil {
		m.mu.Unlock()
		return voiceapi.ErrNoSession
	}
	if m.roster.channelOf(guildID, userID) != s.channelID {
		m.mu.Unlock()
		return voiceapi.ErrNotInSessionChannel
	}
	if optIn {
		s.consent.optIn(userID)
	} else {
		s.consent.optOut(userID)
	}
	m.permittedLocked(s)
	m.mu.Unlock()
	s.poke()
	return nil
}

// Status returns the consent-safe state of the server's session.
func (m *Manager) Status(guildID string) (voiceapi.Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[guildID]
	if s == nil {
		return voiceapi.Status{}, false
	}
	st := voiceapi.Status{ChannelID: s.channelID, Policy: m.policy, Consented: len(m.permittedLocked(s))}
	var state realtime.State // Connecting until the worker has opened the model
	if s.model != nil {
		state = s.model.State()
		st.BriefingsDelivered = s.model.Stats().BriefingsDelivered
	}
	st.Model = modelSentence(m.model != nil, s.modelFailed, state)
	st.Encryption = encryptionSentence(s.link)
	return st, true
}

// Close ends every session (on shutdown) and waits for their workers.
func (m *Manager) Close() {
	m.mu.Lock()
	var guilds []string
	for g, s := range m.sessions {
		m.endLocked(s)
		guilds = append(guilds, g)
	}
	m.mu.Unlock()
	for _, g := range guilds {
		_ = m.moveBot(g, "")
	}
	m.wg.Wait()
}

// endLocked drops a session; its consent goes with it, and the audio path
// hears nobody from the next frame on. m.mu is held.
func (m *Manager) endLocked(s *Session) {
	delete(m.sessions, s.guildID)
	if s.model != nil {
		st := s.model.Stats()
		m.ended.briefings += st.BriefingsDelivered
		m.ended.model.addModel(st)
	}
	s.setConsented(nil)
	m.stopAudioLocked(s)
	close(s.done)
}
