package voice

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/voiceapi"
)

// A session's life, as Discord really behaves (its voice connection
// documentation, the close codes, and what discord.js and disgo do):
//
//   - joining: op 4 sent; Discord answers with the bot's VOICE_STATE_UPDATE
//     and a VOICE_SERVER_UPDATE, or (a full channel, one the bot may not
//     connect to) with nothing. Unanswered within the join timeout, the
//     session ends and the bot's voice state is cleared.
//   - live: in the channel, the voice connection up.
//   - reconnecting: the connection was lost. A close Discord documents as
//     "disconnected" (4014, 4021, 4022) first waits RecheckAfter for the
//     gateway to say where the bot is (a disconnect or a move by someone
//     ends the session); any other loss rejoins after a backoff. A rejoin
//     sends op 4 again; if no voice server answers within the join timeout
//     it leaves (op 4, no channel) and joins again, at most maxRejoins
//     times in all, then ends. The voice server going away (endpoint null)
//     closes the connection and waits for the next one, with the same
//     timeout. Nothing of a previous server (endpoint, token) is reused.
//   - ended: with a reason, said once in the channel /voice join ran in.
//
// Protocol errors of our own (4001–4005, 4012, 4016) end the session at
// once: retrying would repeat them.

// maxRejoins bounds the rejoins in a row that never got a voice
// connection up.
const maxRejoins = 3

type eventKind int

const (
	evBotState    eventKind = iota // the bot's VOICE_STATE_UPDATE
	evServer                       // VOICE_SERVER_UPDATE
	evGuildCreate                  // GUILD_CREATE: where it places the bot
	evPresence                     // someone came, went, opted in or out
	evLinkUp                       // the voice connection is ready
	evLinkDown                     // the voice connection ended
	evEnd                          // /voice leave, shutdown
)

// event is one thing the lifecycle loop hears.
type event struct {
	kind                 eventKind
	channelID, sessionID string
	echo                 bool // evBotState: the answer to our own op 4
	endpoint, token      string
	link                 *audioLink
	err                  error
	reason               voiceapi.EndReason
}

// send hands the loop an event; after the session ended it is dropped.
func (s *Session) send(ev event) {
	select {
	case s.events <- ev:
	case <-s.done:
	}
}

// waiting is what the loop's one timer is for.
type waiting int

const (
	waitNothing waiting = iota
	waitAnswer          // Discord's answer to a join or rejoin, or a new voice server
	waitRecheck         // the gateway's word after a "disconnected" close
	waitBackoff         // the pause before a rejoin
)

// life is the lifecycle loop's own state, touched by no other goroutine.
type life struct {
	botChannel, botSession string
	endpoint, token        string
	answered               bool      // Discord put the bot in the channel at least once
	attempts               int       // rejoins since the connection last stayed up
	upAt                   time.Time // when the current connection came up
	wait                   waiting
	timer                  *time.Timer
	idle, maxLife, budget  *time.Timer
	idleOn                 bool // the idle clock runs: nobody consented is here
	link                   *audioLink
	cancelWork             context.CancelFunc
	followTo               string
	over                   bool
}

func stopped() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// run is the session's lifecycle loop; fresh makes the first move a leave
// and a join (someone moved the bot here: its voice connection belongs to
// the old channel).
func (s *Session) run(fresh bool) {
	defer s.m.wg.Done()
	l := &life{timer: stopped(), idle: stopped(), maxLife: stopped(), budget: stopped()}
	defer func() {
		for _, t := range []*time.Timer{l.timer, l.idle, l.maxLife, l.budget} {
			t.Stop()
		}
	}()
	s.move(l, fresh)
	s.arm(l, waitAnswer, s.m.cfg.Bounds.JoinTimeout)
	s.presence(l)
	for !l.over {
		select {
		case ev := <-s.events:
			s.handle(l, ev)
		case <-l.timer.C:
			s.timeout(l)
		case <-l.idle.C:
			s.end(l, voiceapi.EndIdle, 0)
		case <-l.maxLife.C:
			s.end(l, voiceapi.EndMaxSession, 0)
		case <-l.budget.C:
			if left := s.m.budget.left(s.guildID, s.m.cfg.Now()); left > 0 {
				l.budget.Reset(left) // a new UTC day began
			} else {
				s.end(l, voiceapi.EndBudget, 0)
			}
		}
	}
}

func (s *Session) arm(l *life, w waiting, d time.Duration) {
	l.timer.Stop()
	l.wait = w
	l.timer.Reset(d)
}

func (s *Session) disarm(l *life) {
	l.timer.Stop()
	l.wait = waitNothing
}

func (s *Session) setState(st voiceapi.State) {
	s.mu.Lock()
	if s.state != voiceapi.StateEnded {
		s.state = st
	}
	s.mu.Unlock()
}

// move sends the op 4 that puts the bot in the channel; leaveFirst sends
// a leave before it, for a voice session Discord no longer answers.
func (s *Session) move(l *life, leaveFirst bool) {
	l.endpoint, l.token = "", "" // never reuse a server's token
	if leaveFirst {
		if err := s.m.moveBot(s.guildID, ""); err != nil {
			s.m.log.Warn("voice leave not sent", zap.String("errorType", "gateway"))
		}
	}
	if err := s.m.moveBot(s.guildID, s.channelID); err != nil {
		s.m.log.Warn("voice join not sent", zap.String("errorType", "gateway"))
	}
}

func (s *Session) handle(l *life, ev event) {
	switch ev.kind {
	case evBotState:
		s.botState(l, ev.channelID, ev.sessionID, ev.echo)
	case evGuildCreate:
		s.guildCreate(l, ev.channelID, ev.sessionID)
	case evServer:
		s.server(l, ev.endpoint, ev.token)
	case evPresence:
		s.presence(l)
	case evLinkUp:
		if ev.link == l.link {
			l.upAt = time.Now()
			s.disarm(l)
			s.setState(voiceapi.StateLive)
			s.disclose(ev.link)
		}
	case evLinkDown:
		if ev.link == l.link {
			l.link = nil
			s.linkDown(l, ev.err)
		}
	case evEnd:
		s.end(l, ev.reason, 0)
	}
}

// botState is the bot's own VOICE_STATE_UPDATE. In the channel: part of
// Discord's answer. Elsewhere, and not the echo of our own op 4: someone
// disconnected the bot (ends) or moved it (this session ends and one
// starts there).
func (s *Session) botState(l *life, channelID, sessionID string, echo bool) {
	switch {
	case channelID == s.channelID:
		l.botChannel, l.botSession = channelID, sessionID
		s.connect(l)
	case echo:
		l.botChannel = channelID
	case channelID == "":
		s.end(l, voiceapi.EndDisconnected, 0)
	default:
		l.followTo = channelID
		s.end(l, voiceapi.EndMoved, 0)
	}
}

// guildCreate follows a main-gateway re-identify: a bot still in the
// channel carries on (under its new gateway session id); a bot no longer
// in voice rejoins (Discord dropped its voice state with the old gateway
// session); a bot elsewhere was moved.
func (s *Session) guildCreate(l *life, channelID, sessionID string) {
	switch {
	case channelID == s.channelID:
		l.botChannel, l.botSession = channelID, sessionID
	case channelID == "":
		if !l.answered {
			return // our join is still on its way
		}
		l.botChannel = ""
		s.dropLink(l)
		s.rejoin(l)
	default:
		l.followTo = channelID
		s.end(l, voiceapi.EndMoved, 0)
	}
}

// server is VOICE_SERVER_UPDATE: a new endpoint and token to connect to,
// or none (the server went away): close and wait for the next.
func (s *Session) server(l *life, endpoint, token string) {
	if endpoint == "" {
		s.dropLink(l)
		l.endpoint, l.token = "", ""
		if l.answered {
			s.setState(voiceapi.StateReconnecting)
			s.arm(l, waitAnswer, s.m.cfg.Bounds.JoinTimeout)
		}
		return
	}
	if endpoint != l.endpoint || token != l.token {
		s.dropLink(l) // a new server or session: a new connection
	}
	l.endpoint, l.token = endpoint, token
	s.connect(l)
}

// connect acts on Discord's answer once it is whole (the bot in the
// channel with a session id, and a voice server): the first time, the
// join succeeded and the session's work starts; then the voice connection
// is dialled.
func (s *Session) connect(l *life) {
	if l.botChannel != s.channelID || l.botSession == "" || l.endpoint == "" || l.link != nil {
		return
	}
	if !l.answered {
		l.answered = true
		s.begin(l)
	}
	if !s.m.audioOn() {
		s.disarm(l)
		l.attempts = 0
		s.setState(voiceapi.StateLive)
		s.disclose(nil)
		return
	}
	// The connection's outcome decides what follows now: a pending
	// backoff or recheck would only tear it down.
	s.disarm(l)
	l.link = s.startLink(voiceServer{endpoint: l.endpoint, token: l.token}, l.botSession)
}

// begin starts what a session does once it is in the channel: the
// briefing loop and model, and the clocks of its life and budget.
func (s *Session) begin(l *life) {
	now := s.m.cfg.Now()
	s.m.budget.start(s.guildID, now)
	l.maxLife.Reset(s.m.cfg.Bounds.MaxSession)
	if s.m.cfg.Bounds.DailyBudget > 0 {
		l.budget.Reset(s.m.budget.left(s.guildID, now))
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancelWork = cancel
	s.m.wg.Add(1)
	go s.work(ctx)
	s.mu.Lock()
	s.started = now
	s.mu.Unlock()
	close(s.joined)
}

// presence ends a session nobody is in, and starts (or stops) the idle
// clock as someone consented is there or not.
func (s *Session) presence(l *life) {
	s.mu.Lock()
	present := s.present()
	permitted := s.permittedLocked()
	s.mu.Unlock()
	if len(present) == 0 {
		s.end(l, voiceapi.EndEmpty, 0)
		return
	}
	if len(permitted) > 0 {
		l.idle.Stop()
		l.idleOn = false
	} else if !l.idleOn {
		l.idle.Reset(s.m.cfg.Bounds.IdleLeave)
		l.idleOn = true
	}
}

// linkDown decides what a lost voice connection means, by its close code.
// A connection that stayed up a join timeout's length counts as a
// success: the rejoins start counting again. One that a server closes as
// soon as it is up does not, so a server refusing every session cannot
// keep the bot rejoining forever.
func (s *Session) linkDown(l *life, err error) {
	if !l.upAt.IsZero() && time.Since(l.upAt) >= s.m.cfg.Bounds.JoinTimeout {
		l.attempts = 0
	}
	l.upAt = time.Time{}
	var ce *media.CloseError
	code := 0
	if errors.As(err, &ce) {
		code = ce.Code
	}
	switch {
	case errors.Is(err, errAudioUnavailable):
		s.setState(voiceapi.StateLive) // in the channel, without audio
	case code == media.CloseDisconnected || code == media.CloseRateLimited || code == media.CloseCallTerminated:
		s.setState(voiceapi.StateReconnecting)
		s.arm(l, waitRecheck, s.m.cfg.RecheckAfter)
	case ownProtocolError(code):
		s.m.log.Warn("the voice server refused our protocol; the session ends", zap.Int("closeCode", code))
		s.end(l, voiceapi.EndProtocol, code)
	default:
		s.rejoin(l)
	}
}

// ownProtocolError: codes that mean we spoke the protocol wrong; a retry
// would say the same thing.
func ownProtocolError(code int) bool {
	switch code {
	case media.CloseUnknownOpcode, media.CloseFailedDecode, media.CloseNotAuthenticated, media.CloseAuthenticationFailed,
		media.CloseAlreadyAuthenticated, media.CloseUnknownProtocol, media.CloseUnknownEncryptionMode:
		return true
	}
	return false
}

// rejoin schedules the next rejoin after a backoff, or ends the session
// when maxRejoins in a row got no connection up.
func (s *Session) rejoin(l *life) {
	s.setState(voiceapi.StateReconnecting)
	if l.attempts >= maxRejoins {
		s.end(l, voiceapi.EndRejoinFailed, 0)
		return
	}
	s.arm(l, waitBackoff, s.m.cfg.RejoinBackoff<<l.attempts)
}

// timeout is the loop's timer firing: Discord did not answer, the gateway
// said nothing after a "disconnected" close, or a backoff passed.
func (s *Session) timeout(l *life) {
	switch w := l.wait; {
	case w == waitAnswer && !l.answered:
		s.end(l, voiceapi.EndJoinTimeout, 0)
	case w == waitAnswer && l.attempts >= maxRejoins:
		s.end(l, voiceapi.EndRejoinFailed, 0)
	case w == waitAnswer || w == waitRecheck:
		s.rejoin(l)
	case w == waitBackoff:
		l.attempts++
		s.dropLink(l)
		// The first rejoin asks again; a later one leaves and joins, for
		// Discord need not answer an op 4 for the channel the bot is in.
		s.move(l, l.attempts > 1)
		s.arm(l, waitAnswer, s.m.cfg.Bounds.JoinTimeout)
	}
}

func (s *Session) dropLink(l *life) {
	if l.link != nil {
		l.link.cancel()
		l.link = nil
		s.mu.Lock()
		s.link = nil
		s.mu.Unlock()
	}
}

// end ends the session once: consent, the model and the voice connection
// go; the bot leaves the channel (or the session that follows a move
// rejoins it there); the reason is counted, kept for /voice status and,
// when Clankie left on his own, said in the channel /voice join ran in.
func (s *Session) end(l *life, why voiceapi.EndReason, code int) {
	if l.over {
		return
	}
	l.over = true
	s.disarm(l)
	s.mu.Lock()
	s.state, s.endReason, s.closeCode = voiceapi.StateEnded, why, code
	s.setConsented(nil)
	st := s.statusLocked()
	s.mu.Unlock()
	close(s.done)
	s.dropLink(l)
	if l.cancelWork != nil {
		l.cancelWork()
	}
	var lasted time.Duration
	if l.answered {
		lasted = s.m.budget.stop(s.guildID, s.m.cfg.Now())
	}
	s.m.sessionEnded(s, st, lasted)
	s.m.log.Info("voice session ended", zap.String("reason", string(why)), zap.Duration("lasted", lasted))
	followed := why == voiceapi.EndMoved && s.m.follow(s, l.followTo)
	switch {
	case followed: // the next session leaves and joins there itself
	case why == voiceapi.EndDisconnected: // out of voice already
	default:
		if err := s.m.moveBot(s.guildID, ""); err != nil {
			s.m.log.Warn("voice leave not sent", zap.String("errorType", "gateway"))
		}
	}
	s.sayEnded(why, code, followed, l.followTo)
	close(s.finished)
}
