package voice

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/voiceapi"
)

// Manager routes: it keeps who is in which voice channel (the roster),
// hands each server's gateway events to that server's session, and starts
// and finds sessions for /voice. Each Session owns its own life (joining,
// rejoining, moves, ending), consent, briefings, model and audio; the
// Manager decides nothing about them.
type Manager struct {
	cfg    Config
	log    *zap.Logger
	roster *roster
	budget *budget

	mu       sync.Mutex
	botID    string
	botName  string // the bot's user name: a name Clankie answers to
	sessions map[string]*Session
	// echoes tells the echo of the bot's own op 4 from news, per guild.
	echoes map[string]*echoes
	// last is the server's last ended session, for /voice status.
	last map[string]voiceapi.Status
	// ended holds the figures of sessions and connections gone, links
	// the connections whose audio path runs now (Totals).
	ended ended
	links map[*audioLink]struct{}
	wg    sync.WaitGroup
	// closing: Close runs; no session follows a move any more.
	closing bool
}

// NewManager builds the session manager from its settings.
func NewManager(cfg Config) *Manager {
	cfg = cfg.withDefaults()
	if cfg.Catalog == nil {
		cat, err := lang.Load()
		if err != nil {
			// The catalog is embedded: a broken one is a broken build.
			panic(fmt.Sprintf("voice: %v", err))
		}
		cfg.Catalog = cat
	}
	return &Manager{cfg: cfg, log: cfg.Log, roster: newRoster(), budget: newBudget(cfg.Bounds.DailyBudget),
		sessions: map[string]*Session{}, echoes: map[string]*echoes{}, last: map[string]voiceapi.Status{},
		links: map[*audioLink]struct{}{}, ended: ended{endedBy: map[voiceapi.EndReason]uint64{}}}
}

// JoinTimeout is how long Join may wait for Discord's answer.
func (m *Manager) JoinTimeout() time.Duration { return m.cfg.Bounds.JoinTimeout }

// OnReady records the bot's own user, which never counts as a speaker.
func (m *Manager) OnReady(_ *discordgo.Session, r *discordgo.Ready) {
	defer m.recoverEvent("READY")
	if r.User != nil {
		m.mu.Lock()
		m.botID, m.botName = r.User.ID, r.User.Username
		m.mu.Unlock()
	}
}

// OnGuildCreate replaces a server's voice states (on joining it and after
// every re-identify). Whoever the rebuilt roster no longer places in the
// session's channel has left it; where it places the bot tells the session
// whether its voice state survived the re-identify.
func (m *Manager) OnGuildCreate(_ *discordgo.Session, g *discordgo.GuildCreate) {
	defer m.recoverEvent("GUILD_CREATE")
	if g.Guild == nil {
		return
	}
	moved := m.roster.load(g.ID, g.VoiceStates, g.Members)
	s, botID := m.session(g.ID)
	if s == nil {
		return
	}
	for _, mv := range moved {
		if mv.userID != botID {
			s.departed(mv.userID, mv.from, mv.to)
		}
	}
	bot := event{kind: evGuildCreate}
	for _, vs := range g.VoiceStates {
		if vs != nil && vs.UserID == botID {
			bot.channelID, bot.sessionID = vs.ChannelID, vs.SessionID
		}
	}
	s.send(bot)
	s.send(event{kind: evPresence})
}

// OnVoiceStateUpdate tracks a member joining, leaving or moving, and tells
// the session of the bot's own updates, marked as the echo of an op 4 it
// sent or as news (someone moved or disconnected the bot).
func (m *Manager) OnVoiceStateUpdate(_ *discordgo.Session, u *discordgo.VoiceStateUpdate) {
	defer m.recoverEvent("VOICE_STATE_UPDATE")
	if u.VoiceState == nil {
		return
	}
	before := m.roster.update(u.VoiceState)
	m.mu.Lock()
	s, botID := m.sessions[u.GuildID], m.botID
	echo := u.UserID == botID && m.echoesLocked(u.GuildID).match(u.ChannelID, m.cfg.Now())
	m.mu.Unlock()
	if s == nil {
		return
	}
	if u.UserID == botID {
		s.send(event{kind: evBotState, channelID: u.ChannelID, sessionID: u.SessionID, echo: echo})
		return
	}
	s.departed(u.UserID, before, u.ChannelID)
	s.send(event{kind: evPresence})
}

// OnVoiceServerUpdate hands the session its voice server: an endpoint and
// a token, or (endpoint null) word that the server went away.
func (m *Manager) OnVoiceServerUpdate(_ *discordgo.Session, u *discordgo.VoiceServerUpdate) {
	defer m.recoverEvent("VOICE_SERVER_UPDATE")
	if s, _ := m.session(u.GuildID); s != nil {
		s.send(event{kind: evServer, endpoint: u.Endpoint, token: u.Token})
	}
}

// recoverEvent keeps a gateway event whose handling panicked from taking
// the bridge down: the event is dropped and counted, its content never
// logged.
func (m *Manager) recoverEvent(name string) {
	if r := recover(); r != nil {
		m.mu.Lock()
		m.ended.peers.PeerPanics.Gateway++
		m.mu.Unlock()
		m.log.Error("a gateway event could not be handled; dropped", zap.String("event", name))
	}
}

func (m *Manager) session(guildID string) (*Session, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[guildID], m.botID
}

// Session returns the server's session, or nil.
func (m *Manager) Session(guildID string) *Session {
	s, _ := m.session(guildID)
	return s
}

// Join starts a session in the invoker's voice channel, counts the invoker
// as consented, and waits until Discord has put the bot there: it returns
// the channel, or a *voiceapi.JoinError when Discord never answered within
// the join timeout (the bot's voice state is then left clean). textChannelID
// is where /voice join ran: where Clankie says why he left, later;
// guildLocale is the server's locale, which what the session posts there
// is written in (English when it is not one the catalog translates).
func (m *Manager) Join(ctx context.Context, guildID, userID, textChannelID, guildLocale string) (string, error) {
	channelID := m.roster.channelOf(guildID, userID)
	if channelID == "" {
		return "", voiceapi.ErrNotInVoice
	}
	m.mu.Lock()
	s := m.sessions[guildID]
	if s != nil && s.channelID != channelID {
		m.mu.Unlock()
		return "", voiceapi.ErrOtherChannel
	}
	if s == nil {
		now := m.cfg.Now()
		if m.budget.left(guildID, now) <= 0 {
			m.mu.Unlock()
			st := m.budget.status(guildID, now)
			return "", &voiceapi.BudgetSpentError{Budget: st.Limit, ResetsAt: st.ResetsAt}
		}
		// The invoker counts as consented before the session runs, so its
		// first briefing already holds them (opting in after the start
		// raced that briefing, which then went out without them).
		s = m.startLocked(guildID, channelID, textChannelID, guildLocale, false, userID)
	}
	m.mu.Unlock()
	s.optIn(userID)
	s.send(event{kind: evPresence})
	return channelID, s.waitJoined(ctx)
}

// startLocked makes and starts a session; fresh makes its first move a
// leave and a join (the bot is in a channel already: moved there by
// someone); consented are opted in before it runs. m.mu is held.
func (m *Manager) startLocked(guildID, channelID, textChannelID, guildLocale string, fresh bool, consented ...string) *Session {
	s := newSession(m, guildID, channelID, textChannelID, guildLocale)
	for _, id := range consented {
		s.consent.optIn(id) // no goroutine of the session runs yet
	}
	m.sessions[guildID] = s
	delete(m.last, guildID)
	m.wg.Add(1)
	go s.run(fresh)
	return s
}

// follow starts a session in the channel someone moved the bot to, as a
// new session (no consent carried over, the disclosure posted there), and
// reports whether it did: not when the day's budget is spent, the bridge
// is closing, or another session already started.
func (m *Manager) follow(from *Session, channelID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing || m.sessions[from.guildID] != nil || m.budget.left(from.guildID, m.cfg.Now()) <= 0 {
		return false
	}
	m.startLocked(from.guildID, channelID, from.textChannelID, from.locale, true)
	return true
}

// sessionEnded takes a session out of the routing table, keeps its last
// status for /voice status and counts its end and its time.
func (m *Manager) sessionEnded(s *Session, st voiceapi.Status, lasted time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.guildID] == s {
		delete(m.sessions, s.guildID)
		m.last[s.guildID] = st
	}
	m.ended.endedBy[st.Ended]++
	// Its time moves from the live sum to the ended one at once, so the
	// counter never goes down.
	s.mu.Lock()
	s.started = time.Time{}
	s.mu.Unlock()
	m.ended.sessionTime += lasted
}

func (m *Manager) botUser() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.botID
}

// names are what Clankie answers to: CLANKIE_VOICE_NAMES and the bot's
// user name.
func (m *Manager) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append(slices.Clone(m.cfg.Group.Names), m.botName)
}

func (m *Manager) audioOn() bool { return m.cfg.Audio != nil && m.cfg.Audio.Codec != nil }

// modelEnded keeps a closed model connection's figures in the totals.
func (m *Manager) modelEnded(st realtime.Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended.briefings += st.BriefingsDelivered
	m.ended.model.addModel(st)
}

// moveBot sends the bot's op 4 ("" leaves voice), expecting its echo.
func (m *Manager) moveBot(guildID, channelID string) error {
	m.mu.Lock()
	m.echoesLocked(guildID).expect(channelID, m.cfg.Now().Add(m.cfg.Bounds.JoinTimeout))
	m.mu.Unlock()
	return m.cfg.Gateway.ChannelVoiceJoinManual(guildID, channelID, false, false)
}

func (m *Manager) echoesLocked(guildID string) *echoes {
	e := m.echoes[guildID]
	if e == nil {
		e = &echoes{}
		m.echoes[guildID] = e
	}
	return e
}

// Leave ends the server's session and leaves its channel.
func (m *Manager) Leave(ctx context.Context, guildID string) error {
	s, _ := m.session(guildID)
	if s == nil {
		return voiceapi.ErrNoSession
	}
	s.send(event{kind: evEnd, reason: voiceapi.EndLeave})
	select {
	case <-s.finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Consent records the invoker's own opt-in or opt-out. Only someone in the
// session's channel manages consent there.
func (m *Manager) Consent(ctx context.Context, guildID, userID string, optIn bool) error {
	s, _ := m.session(guildID)
	if s == nil {
		return voiceapi.ErrNoSession
	}
	if m.roster.channelOf(guildID, userID) != s.channelID {
		return voiceapi.ErrNotInSessionChannel
	}
	if optIn {
		s.optIn(userID)
	} else {
		s.optOut(userID)
	}
	s.send(event{kind: evPresence})
	return nil
}

// ConsentInSession is Consent from a disclosure's button: it counts only
// while sessionID is the server's live session, so a button of an ended
// session stays dead even after a new /voice join in the same channel.
func (m *Manager) ConsentInSession(ctx context.Context, guildID, userID, sessionID string, optIn bool) error {
	s, _ := m.session(guildID)
	if s == nil || s.id != sessionID {
		return voiceapi.ErrSessionEnded
	}
	return m.Consent(ctx, guildID, userID, optIn)
}

// Status returns the consent-safe state of the server's session, or of its
// last one when that ended; false when it never had one since the bridge
// started.
func (m *Manager) Status(guildID string) (voiceapi.Status, bool) {
	m.mu.Lock()
	s, last, had := m.sessions[guildID], m.last[guildID], false
	if s == nil {
		_, had = m.last[guildID]
	}
	m.mu.Unlock()
	now := m.cfg.Now()
	if s == nil {
		if had {
			last.Budget = m.budget.status(guildID, now)
		}
		return last, had
	}
	st := s.status()
	st.Budget = m.budget.status(guildID, now)
	return st, true
}

// Close ends every session (on shutdown), leaving each channel, and waits
// for them.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closing = true
	var all []*Session
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		s.send(event{kind: evEnd, reason: voiceapi.EndShutdown})
	}
	m.wg.Wait()
}
