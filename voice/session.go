package voice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memoryclient"
	"github.com/clankie/clankie/voice/realtime"
)

// Session is one server's voice session: its channel, its consent, its
// briefing loop and its model connection. The Manager guards its fields
// with its own mutex; the methods here are for the audio path and are safe
// to call from any goroutine.
//
// The audio path attaches to a session rather than owning one: it asks
// Consented for each speaker in each 20 ms frame (a lock-free read of a
// set the Manager replaces whenever presence or consent changes, so a
// leave or an opt-out takes effect on the next frame), sends consented
// audio through Audio, and hears the model through SetOutput.
type Session struct {
	guildID, channelID string
	consent            *consent
	kick               chan struct{}
	done               chan struct{}
	model              Model
	modelFailed        bool // the model could not be opened (bad settings)
	lastSent           []string
	briefed            bool
	// forgets counts the times the consented set shrank and the model was
	// made to forget; a briefing pulled before one is never sent.
	// briefedAt is forgets when the last briefing was handed over: the
	// fresh conversation after a forget needs one, whoever it is for.
	forgets, briefedAt uint64

	// consented is the set of user ids whose audio may leave the bridge,
	// replaced (never mutated) by the Manager.
	consented atomic.Pointer[map[string]struct{}]
	// output hears the model's audio and speech events (nil: discarded).
	output atomic.Pointer[outputBox]
	// audio is the model connection as the audio path sees it, set once
	// the model is open.
	audio atomic.Pointer[audioBox]
	// link is the session's voice connection and audio path, and rejoins
	// the consecutive rejoins that got no connection; both guarded by the
	// Manager's mutex.
	link    *audioLink
	rejoins int
}

type audioBox struct{ a AudioModel }

type outputBox struct{ l realtime.Listener }

func newSession(guildID, channelID string, policy config.ConsentPolicy) *Session {
	s := &Session{guildID: guildID, channelID: channelID, consent: newConsent(policy),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.consented.Store(&map[string]struct{}{})
	return s
}

// GuildID is the session's server.
func (s *Session) GuildID() string { return s.guildID }

// ChannelID is the voice channel the session is in.
func (s *Session) ChannelID() string { return s.channelID }

// Done is closed when the session ends (leave, last human gone, the bot
// moved by someone else, shutdown); the audio path must stop then.
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

// AudioModel is what the audio path may send to the model: consented
// speakers' audio, and the barge-in events. *realtime.Session satisfies it.
type AudioModel interface {
	AppendAudio(pcm []byte) bool
	CancelResponse(responseID string) bool
	Truncate(itemID string, contentIndex, audioEndMs int) bool
}

// Audio returns the session's model connection for audio, or nil while it
// is not open (no endpoint, not opened yet, or it cannot carry audio).
func (s *Session) Audio() AudioModel {
	if b := s.audio.Load(); b != nil {
		return b.a
	}
	return nil
}

// SetOutput routes the model's audio and speech events to l (nil: drop
// them). The session is the model connection's realtime.Listener, so the
// audio path can attach after the session started.
func (s *Session) SetOutput(l realtime.Listener) { s.output.Store(&outputBox{l}) }

func (s *Session) listener() realtime.Listener {
	if b := s.output.Load(); b != nil {
		return b.l
	}
	return nil
}

// OutputAudio forwards the model's audio to the attached output.
func (s *Session) OutputAudio(responseID, itemID string, pcm []byte) {
	if l := s.listener(); l != nil {
		l.OutputAudio(responseID, itemID, pcm)
	}
}

// SpeechStarted forwards the server's speech detection (barge-in cue).
func (s *Session) SpeechStarted(ms int) {
	if l := s.listener(); l != nil {
		l.SpeechStarted(ms)
	}
}

// ModelLost forwards the loss of a model connection that was ready to
// an attached output that cares (audio.Path drops the old answer).
func (s *Session) ModelLost() {
	if l, ok := s.listener().(realtime.ConnectionListener); ok {
		l.ModelLost()
	}
}

// SpeechStopped forwards the end of detected speech.
func (s *Session) SpeechStopped(ms int) {
	if l := s.listener(); l != nil {
		l.SpeechStopped(ms)
	}
}

func (s *Session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// work is a session's briefing loop: the first briefing at once, then a
// debounced refresh whenever the permitted set changes.
func (m *Manager) work(s *Session) {
	defer m.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	if m.model != nil {
		md, err := m.model(ctx, s)
		m.mu.Lock()
		if err != nil {
			s.modelFailed = true
			m.log.Warn("realtime session could not be opened", zap.String("errorType", errorType(err)))
		} else {
			s.model = md
			if a, ok := md.(AudioModel); ok {
				s.audio.Store(&audioBox{a})
			}
		}
		m.mu.Unlock()
	}
	defer func() {
		if s.model != nil {
			_ = s.model.Close()
		}
	}()
	m.brief(ctx, s)
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
				timer = time.NewTimer(m.Debounce)
			} else {
				timer.Reset(m.Debounce)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			m.brief(ctx, s)
		}
	}
}

// brief pulls a briefing for the permitted humans present and hands it to
// the model, writing an egress receipt of counts and lengths only.
func (m *Manager) brief(ctx context.Context, s *Session) {
	m.mu.Lock()
	permitted := m.permittedLocked(s)
	sorted := slices.Sorted(slices.Values(permitted))
	if s.briefed && s.briefedAt == s.forgets && slices.Equal(sorted, s.lastSent) {
		m.mu.Unlock()
		return
	}
	refresh := s.briefed
	md := s.model
	forgets := s.forgets
	m.mu.Unlock()

	start := time.Now()
	corr := newCorrelationID()
	outcome := egressSent
	var resp api.BriefingResponse
	var err error
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err = m.memory.VoiceBriefing(callCtx, api.BriefingRequest{SchemaVersion: api.SchemaVersion, GuildID: s.guildID,
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
		// Under m.mu, so no Forget (permittedLocked) falls between the
		// check and the hand-over: a briefing pulled for a set someone
		// has since left is never given to the model. Brief never blocks.
		m.mu.Lock()
		if s.forgets != forgets {
			outcome = egressSuperseded
		} else if berr := md.Brief(ctx, text, refresh); errors.Is(berr, realtime.ErrRefused) {
			outcome = egressRealtimeRefused
		} else if berr != nil {
			outcome = egressRealtimeError
		}
		m.mu.Unlock()
	}
	if err == nil {
		m.mu.Lock()
		if s.forgets == forgets {
			s.briefed, s.lastSent, s.briefedAt = true, sorted, forgets
		}
		m.mu.Unlock()
	}
	m.log.Info("receipt",
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
