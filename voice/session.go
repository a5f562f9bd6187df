package voice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memoryclient"
	"github.com/clankie/clankie/voice/realtime"
)

// Session is one server's voice session: its channel, its consent, its
// briefing loop and its model connection. The Manager guards its fields
// with its own mutex.
type Session struct {
	guildID, channelID string
	consent            *consent
	kick               chan struct{}
	done               chan struct{}
	model              Model
	modelFailed        bool // the model could not be opened (bad settings)
	lastSent           []string
	briefed            bool
}

func newSession(guildID, channelID, policy string) *Session {
	return &Session{guildID: guildID, channelID: channelID, consent: newConsent(policy),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
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
		md, err := m.model(ctx)
		m.mu.Lock()
		if err != nil {
			s.modelFailed = true
			m.log.Warn("realtime session could not be opened", zap.String("errorType", errorType(err)))
		} else {
			s.model = md
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
	present := m.roster.humans(s.guildID, s.channelID, m.botID)
	permitted := s.consent.permitted(present, api.MaxBriefingUsers)
	sorted := slices.Sorted(slices.Values(permitted))
	if s.briefed && slices.Equal(sorted, s.lastSent) {
		m.mu.Unlock()
		return
	}
	refresh := s.briefed
	md := s.model
	m.mu.Unlock()

	start := time.Now()
	corr := newCorrelationID()
	outcome := "sent"
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
		outcome = "memory_" + memoryclient.KindOf(err).String()
	case md == nil:
		outcome = "no_realtime_endpoint"
	default:
		if berr := md.Brief(ctx, resp.Briefing, refresh); errors.Is(berr, realtime.ErrRefused) {
			outcome = "realtime_refused"
		} else if berr != nil {
			outcome = "realtime_error"
		}
	}
	if err == nil {
		m.mu.Lock()
		s.briefed, s.lastSent = true, sorted
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
