package voice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/memoryclient"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/voiceapi"
)

// Session is one server's voice session, from /voice join (or a move by
// someone) to its end. It owns its life: the lifecycle loop (lifecycle.go)
// joins, waits for Discord's answer within the join timeout, rejoins,
// follows moves, leaves when idle or out of time; and it owns its consent,
// its briefing loop, its model connection and its voice connection.
//
// The audio path asks Consented for each speaker in each 20 ms frame (a
// lock-free read of a set replaced whenever presence or consent changes,
// so a leave or an opt-out takes effect on the next frame).
type Session struct {
	m                                 *Manager
	guildID, channelID, textChannelID string
	// locale is the server's, as /voice join's interaction gave it; say
	// words what the session posts to the channel in it.
	locale string
	say    *lang.Printer
	events chan event
	kick   chan struct{}
	// joined closes when Discord has put the bot in the channel; done when
	// the session ends (every loop and connection stops then); finished
	// once it has ended and left.
	joined, done, finished chan struct{}

	// mu guards what the gateway handlers, /voice and the briefing loop
	// share; the lifecycle fields are written by the lifecycle loop only.
	mu          sync.Mutex
	consent     *consent
	model       Model
	modelFailed bool // the model could not be opened (bad settings)
	lastSent    []string
	briefed     bool
	// forgets counts the times the consented set shrank and the model was
	// made to forget; a briefing pulled before one is never sent.
	// briefedAt is forgets when the last briefing was handed over: the
	// fresh conversation after a forget needs one, whoever it is for.
	forgets, briefedAt uint64
	state              voiceapi.State
	started            time.Time // when Discord put the bot in the channel; zero before

	endReason voiceapi.EndReason
	closeCode int
	disclosed bool // the disclosure went out (once, when first live)
	// link is the session's voice connection and audio path.
	link *audioLink

	// consented is the set of user ids whose audio may leave the bridge,
	// replaced (never mutated).
	consented atomic.Pointer[map[string]struct{}]
	// speech is the conversation with the model (audio path, floor,
	// tools), set by the briefing loop once built; ready closes then.
	speech *speech
	ready  chan struct{}
	// id names the session in its episodes' provenance.
	id string
}

func newSession(m *Manager, guildID, channelID, textChannelID, locale string) *Session {
	s := &Session{m: m, guildID: guildID, channelID: channelID, textChannelID: textChannelID,
		locale: locale, say: m.cfg.Catalog.Printer(locale),
		consent: newConsent(m.cfg.Policy), events: make(chan event, 64), kick: make(chan struct{}, 1),
		joined: make(chan struct{}), done: make(chan struct{}), finished: make(chan struct{}), ready: make(chan struct{}),
		state: voiceapi.StateJoining, id: randomID("vs-")}
	s.consented.Store(&map[string]struct{}{})
	return s
}

// GuildID is the session's server.
func (s *Session) GuildID() string { return s.guildID }

// ChannelID is the voice channel the session is in.
func (s *Session) ChannelID() string { return s.channelID }

// Done is closed when the session ends (leave, nobody left, idle, out of
// time, the bot moved or disconnected, shutdown); the audio path must stop
// then.
func (s *Session) Done() <-chan struct{} { return s.done }

// Consented reports whether userID's audio may leave the bridge now: they
// are a human in the session's channel who counts as consented under the
// policy, within the 25-person cap. It is a map lookup on an immutable
// snapshot, cheap enough for every speaker of every 20 ms frame, and it
// returns false once the session has ended.
func (s *Session) Consented(userID string) bool {
	_, ok := (*s.consented.Load())[userID]
	return ok
}

// setConsented replaces the snapshot Consented reads, and reports whether
// someone in the old snapshot is not in the new one.
func (s *Session) setConsented(ids []string) (shrank bool) {
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	old := s.consented.Swap(&m)
	for id := range *old {
		if _, ok := m[id]; !ok {
			return true
		}
	}
	return false
}

// optIn and optOut record a person's own choice.
func (s *Session) optIn(userID string) {
	s.mu.Lock()
	s.consent.optIn(userID)
	s.permittedLocked()
	s.mu.Unlock()
	s.poke()
}

func (s *Session) optOut(userID string) {
	s.mu.Lock()
	s.consent.optOut(userID)
	s.permittedLocked()
	s.mu.Unlock()
	s.poke()
}

// departed is the one rule for a person who stops being in the session's
// channel, however we learn it (a leave or a move in a VOICE_STATE_UPDATE,
// a roster rebuilt from GUILD_CREATE): their opt-in is dropped, so coming
// back counts as consented only after a new opt-in. An opt-out stays.
func (s *Session) departed(userID, from, to string) {
	s.mu.Lock()
	if from == s.channelID && to != s.channelID {
		s.consent.left(userID)
	}
	s.permittedLocked()
	s.mu.Unlock()
	s.poke()
}

// present is the humans in the session's channel now, never the bot.
func (s *Session) present() []string {
	return s.m.roster.humans(s.guildID, s.channelID, s.m.botUser())
}

// permittedLocked is the one answer to who counts as consented in the
// session now: the humans present (never the bot, never another bot),
// under the policy, at most 25. It also publishes the answer to the
// Consented snapshot, so the audio path sees every change as soon as it
// is made, and when someone dropped out of the set (an opt-out, a leave, a
// move, a new arrival pushing them past the cap) it has the model forget
// the whole conversation: it holds their facts, the mixed audio of their
// turns and answers that may repeat either. When no human is left the
// session ends instead (the lifecycle loop, right after), which closes the
// model's connection and so its conversation: a fresh connection dialled
// only to be closed would cost a model session for nothing. An ended
// session permits nobody. s.mu is held.
func (s *Session) permittedLocked() []string {
	if s.state == voiceapi.StateEnded {
		s.setConsented(nil)
		return nil
	}
	present := s.present()
	permitted := s.consent.permitted(present, api.MaxBriefingUsers)
	if s.setConsented(permitted) && len(present) > 0 {
		s.forgetLocked()
	}
	return permitted
}

// forgetLocked ends what the model heard and was told, after the consented
// set shrank. The model's Forget returns at once, and is called under
// s.mu, the lock brief hands a briefing over under: a briefing pulled for
// the old set and not yet handed over is never sent after it (brief sees
// forgets changed and drops it). The next briefing is pulled for the new
// set even if it equals the one last sent (the fresh conversation has
// none). s.mu is held.
func (s *Session) forgetLocked() {
	s.forgets++
	if s.model != nil {
		s.model.Forget()
	}
	s.poke()
}

func (s *Session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// work is a session's conversation, from the moment Discord put the bot in
// the channel: it builds the speech (the audio path first, when audio is
// on: the model's listener is the path itself), opens the model, briefs
// it at once, then refreshes (debounced) whenever the permitted set
// changes.
func (s *Session) work(ctx context.Context) {
	defer s.m.wg.Done()
	sp, _ := newSpeech(ctx, s)
	if s.m.cfg.Model != nil {
		md, err := s.m.cfg.Model(ctx, modelEvents{sp})
		s.mu.Lock()
		if err != nil {
			s.modelFailed = true
			s.m.log.Warn("realtime session could not be opened", zap.String("errorType", errorType(err)))
		} else {
			s.model = md
			sp.attach(md)
		}
		s.mu.Unlock()
	}
	// The path runs once the model is attached: a speaker's utterance
	// goes straight to it.
	if sp.path != nil {
		s.m.wg.Add(1)
		go func() { defer s.m.wg.Done(); _ = sp.path.Run(ctx) }()
	}
	s.mu.Lock()
	s.speech = sp
	s.mu.Unlock()
	close(s.ready)
	defer func() {
		s.mu.Lock()
		md := s.model
		s.mu.Unlock()
		if md != nil {
			st := md.Stats()
			_ = md.Close()
			s.m.modelEnded(st)
		}
		s.m.speechEnded(sp)
		if sp.path != nil {
			answered, silent := sp.floor.counts()
			s.m.log.Info("receipt", zap.String("receipt", "voice.speech"), zap.Object("audio", sp.path.Stats()),
				zap.Uint64("turnsAnswered", answered), zap.Uint64("turnsSilent", silent))
		}
	}()
	s.brief(ctx)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			timer.Reset(s.m.cfg.Debounce)
		case <-timer.C:
			s.brief(ctx)
		}
	}
}

// brief pulls a briefing for the permitted humans present and hands it to
// the model, writing an egress receipt of counts and lengths only.
func (s *Session) brief(ctx context.Context) {
	s.mu.Lock()
	permitted := s.permittedLocked()
	sorted := slices.Sorted(slices.Values(permitted))
	if s.briefed && s.briefedAt == s.forgets && slices.Equal(sorted, s.lastSent) {
		s.mu.Unlock()
		return
	}
	refresh := s.briefed
	md := s.model
	forgets := s.forgets
	s.mu.Unlock()

	start := time.Now()
	corr := randomID("vb-")
	outcome := egressSent
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := s.m.cfg.Memory.VoiceBriefing(callCtx, api.BriefingRequest{SchemaVersion: api.SchemaVersion, GuildID: s.guildID,
		ChannelID: s.channelID, ConsentedUserIDs: permitted, CorrelationID: corr})
	cancel()
	switch {
	case err != nil && ctx.Err() != nil:
		return // the session ended meanwhile
	case err != nil:
		outcome = egressMemoryPrefix + egressOutcome(memoryclient.KindOf(err).String())
	case md == nil:
		outcome = egressNoRealtimeEndpoint
	default:
		text, cut := boundBriefing(resp.Briefing)
		if cut {
			outcome = egressSentCut
		}
		// Under s.mu, so no Forget (permittedLocked) falls between the
		// check and the hand-over: a briefing pulled for a set someone
		// has since left is never given to the model. Brief never blocks.
		s.mu.Lock()
		if s.forgets != forgets {
			outcome = egressSuperseded
		} else if berr := md.Brief(ctx, text, refresh); errors.Is(berr, realtime.ErrRefused) {
			outcome = egressRealtimeRefused
		} else if berr != nil {
			outcome = egressRealtimeError
		}
		s.mu.Unlock()
	}
	if err == nil {
		s.mu.Lock()
		if s.forgets == forgets {
			s.briefed, s.lastSent, s.briefedAt = true, sorted, forgets
		}
		s.mu.Unlock()
	}
	s.m.log.Info("receipt",
		zap.String("receipt", "voice.briefing.egress"),
		zap.String("correlationId", corr),
		zap.Bool("refresh", refresh),
		zap.Int("consentedSpeakers", len(permitted)),
		zap.Int("speakersWithFacts", resp.Counts.UsersWithFacts),
		zap.Int("facts", resp.Counts.Facts),
		zap.Int("episodes", resp.Counts.Episodes),
		zap.Int("briefingLength", len(resp.Briefing)),
		zap.Duration("latency", time.Since(start)),
		zap.String("outcome", string(outcome)))
}

// egressOutcome is what a voice.briefing.egress receipt says a briefing came
// to: sent (whole or cut to the bound), not sent for want of a realtime
// endpoint, refused or failed at the model, or a memory failure (the
// prefix and the failure's kind, e.g. memory_unavailable).
type egressOutcome string

// The outcomes of a briefing's egress.
const (
	egressSent               egressOutcome = "sent"
	egressSentCut            egressOutcome = "sent_cut"
	egressNoRealtimeEndpoint egressOutcome = "no_realtime_endpoint"
	egressRealtimeRefused    egressOutcome = "realtime_refused"
	egressRealtimeError      egressOutcome = "realtime_error"
	// egressSuperseded: someone left the consented set while the briefing
	// was pulled; it was not sent, and one for the new set follows.
	egressSuperseded   egressOutcome = "superseded"
	egressMemoryPrefix egressOutcome = "memory_"
)

// boundBriefing is the 8000-character rule at the edge to the model: the
// memory service composes briefings within it (25 people, 8 facts each,
// 8000 characters), and a briefing that somehow exceeds it is cut at the
// last line break that fits rather than sent whole. It reports whether it
// cut.
func boundBriefing(text string) (string, bool) {
	if utf8.RuneCountInString(text) <= api.MaxBriefingChars {
		return text, false
	}
	runes := []rune(text)[:api.MaxBriefingChars]
	cut := string(runes)
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return cut, true
}

// randomID is prefix and 16 random hex digits: a session's id ("vs-", the
// shape commands checks on a consent button) or a briefing's correlation
// id ("vb-").
func randomID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func errorType(err error) string {
	if k := memoryclient.KindOf(err); k != memoryclient.KindUnknown {
		return k.String()
	}
	return "error"
}
