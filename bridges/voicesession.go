package bridges

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/commands"
	"github.com/clankie/clankie/memoryclient"
)

// Briefer pulls a voice briefing; *memoryclient.Client satisfies it.
type Briefer interface {
	VoiceBriefing(ctx context.Context, req api.BriefingRequest) (api.BriefingResponse, error)
}

// VoiceGateway moves the bot into and out of voice channels with the gateway
// voice state update; *discordgo.Session satisfies it. The bridge owns the
// session, not the audio: discordgo v0.29 cannot carry today's encrypted
// voice media.
type VoiceGateway interface {
	ChannelVoiceJoinManual(gID, cID string, mute, deaf bool) error
}

// Realtime is one realtime voice-model session.
type Realtime interface {
	Brief(ctx context.Context, text string, refresh bool) error
	Close() error
}

// RealtimeOpener opens a realtime session for a voice session. Nil when no
// endpoint is configured: sessions still run and still pull briefings.
type RealtimeOpener func(ctx context.Context) (Realtime, error)

// Voice owns the voice sessions of one bridge: at most one per server.
type Voice struct {
	policy   string
	memory   Briefer
	gateway  VoiceGateway
	realtime RealtimeOpener
	log      *zap.Logger
	// Debounce delays a refresh after the permitted set changes, so a burst
	// of joins costs one briefing.
	Debounce time.Duration

	roster   *roster
	mu       sync.Mutex
	botID    string
	sessions map[string]*voiceSession
	// pendingMoves counts, per guild, the bot's voice state updates whose
	// echo has not arrived yet.
	pendingMoves map[string]int
	wg           sync.WaitGroup
}

// NewVoice builds the session manager.
func NewVoice(policy string, memory Briefer, gateway VoiceGateway, realtime RealtimeOpener, log *zap.Logger) *Voice {
	return &Voice{policy: policy, memory: memory, gateway: gateway, realtime: realtime, log: log,
		Debounce: 250 * time.Millisecond, roster: newRoster(), sessions: map[string]*voiceSession{}, pendingMoves: map[string]int{}}
}

type voiceSession struct {
	guildID, channelID string
	consent            *consent
	kick               chan struct{}
	done               chan struct{}
	rt                 Realtime
	rtState            string
	lastSent           []string
	briefed            bool
}

// OnReady records the bot's own user, which never counts as a speaker.
func (v *Voice) OnReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User != nil {
		v.mu.Lock()
		v.botID = r.User.ID
		v.mu.Unlock()
	}
}

// OnGuildCreate loads a server's voice states.
func (v *Voice) OnGuildCreate(_ *discordgo.Session, g *discordgo.GuildCreate) {
	if g.Guild == nil {
		return
	}
	v.roster.load(g.ID, g.VoiceStates, g.Members)
	v.reconcile(g.ID)
}

// OnVoiceStateUpdate tracks a member joining, leaving or moving.
func (v *Voice) OnVoiceStateUpdate(_ *discordgo.Session, u *discordgo.VoiceStateUpdate) {
	if u.VoiceState == nil {
		return
	}
	before := v.roster.update(u.VoiceState)
	v.mu.Lock()
	if u.UserID == v.botID {
		// Discord echoes each voice state update the bot sends, in order.
		// While some of ours are still unanswered, an update is the echo
		// of one of them (perhaps of a leave sent before the latest join),
		// not news. Only an update nobody asked for is a move or a
		// disconnect by someone else, and that ends the session.
		if v.pendingMoves[u.GuildID] > 0 {
			v.pendingMoves[u.GuildID]--
		} else if s := v.sessions[u.GuildID]; s != nil && u.ChannelID != s.channelID {
			v.endLocked(s)
		}
		v.mu.Unlock()
		return
	}
	if s := v.sessions[u.GuildID]; s != nil && before == s.channelID && u.ChannelID != s.channelID {
		s.consent.left(u.UserID) // leaving or moving drops their opt-in
	}
	v.mu.Unlock()
	v.reconcile(u.GuildID)
}

// reconcile closes a session whose channel has no human left, and otherwise
// asks for a (debounced) refresh; the worker sends one only when the
// permitted set really changed.
func (v *Voice) reconcile(guildID string) {
	v.mu.Lock()
	s := v.sessions[guildID]
	if s == nil {
		v.mu.Unlock()
		return
	}
	if len(v.roster.humans(guildID, s.channelID, v.botID)) == 0 {
		v.endLocked(s)
		v.mu.Unlock()
		_ = v.moveBot(guildID, "")
		return
	}
	v.mu.Unlock()
	s.poke()
}

// Join starts the session in the invoker's voice channel and counts the
// invoker as consented. It answers the channel joined.
func (v *Voice) Join(ctx context.Context, guildID, userID string) (string, error) {
	channelID := v.roster.channelOf(guildID, userID)
	if channelID == "" {
		return "", commands.ErrVoiceNotInVoice
	}
	v.mu.Lock()
	if s := v.sessions[guildID]; s != nil {
		if s.channelID != channelID {
			v.mu.Unlock()
			return "", commands.ErrVoiceOtherChannel
		}
		s.consent.optIn(userID)
		v.mu.Unlock()
		s.poke()
		return channelID, nil
	}
	v.mu.Unlock()
	if err := v.moveBot(guildID, channelID); err != nil {
		return "", err
	}
	s := &voiceSession{guildID: guildID, channelID: channelID, consent: newConsent(v.policy),
		kick: make(chan struct{}, 1), done: make(chan struct{}), rtState: "not configured"}
	s.consent.optIn(userID)
	v.mu.Lock()
	if old := v.sessions[guildID]; old != nil { // a concurrent join won
		v.mu.Unlock()
		return old.channelID, nil
	}
	v.sessions[guildID] = s
	v.mu.Unlock()
	v.wg.Add(1)
	go v.work(s)
	return channelID, nil
}

// moveBot asks Discord to move the bot into channelID ("" leaves voice),
// counting the echo it will send back. v.mu must not be held.
func (v *Voice) moveBot(guildID, channelID string) error {
	v.mu.Lock()
	v.pendingMoves[guildID]++
	v.mu.Unlock()
	err := v.gateway.ChannelVoiceJoinManual(guildID, channelID, false, false)
	if err != nil {
		v.mu.Lock()
		v.pendingMoves[guildID]--
		v.mu.Unlock()
	}
	return err
}

// Leave closes the server's session and leaves its channel.
func (v *Voice) Leave(ctx context.Context, guildID string) error {
	v.mu.Lock()
	s := v.sessions[guildID]
	if s == nil {
		v.mu.Unlock()
		return commands.ErrVoiceNoSession
	}
	v.endLocked(s)
	v.mu.Unlock()
	return v.moveBot(guildID, "")
}

// Consent records the invoker's own opt-in or opt-out. Only someone in the
// session's channel manages consent there.
func (v *Voice) Consent(ctx context.Context, guildID, userID string, optIn bool) error {
	v.mu.Lock()
	s := v.sessions[guildID]
	if s == nil {
		v.mu.Unlock()
		return commands.ErrVoiceNoSession
	}
	if v.roster.channelOf(guildID, userID) != s.channelID {
		v.mu.Unlock()
		return commands.ErrVoiceNotInSessionRoom
	}
	if optIn {
		s.consent.optIn(userID)
	} else {
		s.consent.optOut(userID)
	}
	v.mu.Unlock()
	s.poke()
	return nil
}

// Status answers the consent-safe state of the server's session.
func (v *Voice) Status(guildID string) (commands.VoiceSessionStatus, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.sessions[guildID]
	if s == nil {
		return commands.VoiceSessionStatus{}, false
	}
	present := v.roster.humans(guildID, s.channelID, v.botID)
	return commands.VoiceSessionStatus{ChannelID: s.channelID, Policy: v.policy,
		Consented: len(s.consent.permitted(present, api.MaxBriefingUsers)), Realtime: s.rtState}, true
}

// Close ends every session (on shutdown) and waits for their workers.
func (v *Voice) Close() {
	v.mu.Lock()
	var guilds []string
	for g, s := range v.sessions {
		v.endLocked(s)
		guilds = append(guilds, g)
	}
	v.mu.Unlock()
	for _, g := range guilds {
		_ = v.moveBot(g, "")
	}
	v.wg.Wait()
}

// endLocked drops a session; its consent goes with it. v.mu is held.
func (v *Voice) endLocked(s *voiceSession) {
	delete(v.sessions, s.guildID)
	close(s.done)
}

func (s *voiceSession) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// work is a session's briefing loop: the first briefing at once, then a
// debounced refresh whenever the permitted set changes.
func (v *Voice) work(s *voiceSession) {
	defer v.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	if v.realtime != nil {
		rt, err := v.realtime(ctx)
		v.mu.Lock()
		if err != nil {
			s.rtState = "unavailable"
			v.log.Warn("realtime session could not be opened", zap.String("errorType", errorType(err)))
		} else {
			s.rt, s.rtState = rt, "connected"
		}
		v.mu.Unlock()
	}
	defer func() {
		if s.rt != nil {
			_ = s.rt.Close()
		}
	}()
	v.brief(ctx, s)
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-s.done:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-s.kick:
			if timer == nil {
				timer = time.NewTimer(v.Debounce)
			} else {
				timer.Reset(v.Debounce)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			v.brief(ctx, s)
		}
	}
}

// brief pulls a briefing for the permitted humans present and hands it to
// the realtime session, writing an egress receipt of counts and lengths only.
func (v *Voice) brief(ctx context.Context, s *voiceSession) {
	v.mu.Lock()
	present := v.roster.humans(s.guildID, s.channelID, v.botID)
	permitted := s.consent.permitted(present, api.MaxBriefingUsers)
	sorted := slices.Sorted(slices.Values(permitted))
	if s.briefed && slices.Equal(sorted, s.lastSent) {
		v.mu.Unlock()
		return
	}
	refresh := s.briefed
	rt := s.rt
	v.mu.Unlock()

	start := time.Now()
	corr := newCorrelationID()
	outcome := "sent"
	var resp api.BriefingResponse
	var err error
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err = v.memory.VoiceBriefing(callCtx, api.BriefingRequest{SchemaVersion: api.SchemaVersion, GuildID: s.guildID,
		ChannelID: s.channelID, ConsentedUserIDs: permitted, CorrelationID: corr})
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		return // the session ended meanwhile
	case err != nil:
		outcome = "memory_" + memoryclient.KindOf(err).String()
	case rt == nil:
		outcome = "no_realtime_endpoint"
	default:
		if berr := rt.Brief(ctx, resp.Briefing, refresh); berr != nil {
			outcome = "realtime_error"
		}
	}
	if err == nil {
		v.mu.Lock()
		s.briefed, s.lastSent = true, sorted
		v.mu.Unlock()
	}
	v.log.Info("receipt",
		zap.String("receipt", "voice.briefing.egress"),
		zap.String("correlationId", corr),
		zap.Bool("refresh", refresh),
		zap.Int("consentedSpeakers", len(permitted)),
		zap.Int("speakersWithFacts", resp.Counts.UsersWithFacts),
		zap.Int("facts", resp.Counts.Facts),
		zap.Int("episodes", resp.Counts.Episodes),
		zap.Int("briefingLength", len(resp.Briefing)),
		zap.Duration("latency", time.Since(start)),
		zap.String("outcome", outcome))
}

func newCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "vb-" + hex.EncodeToString(b[:])
}

func errorType(err error) string {
	if k := memoryclient.KindOf(err); k != memoryclient.KindUnknown {
		return k.String()
	}
	return "error"
}
