// Package voiceapi is what the voice bridge's sessions offer their callers
// (the /voice command): the errors a session manager returns and the
// consent-safe status it reports. It is a leaf, so a caller depends on
// these few words and not on the voice machinery (opus, DAVE, the media
// connection, the realtime client) behind them.
package voiceapi

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/lang"
)

// Errors a session manager returns to /voice; package commands turns them
// into sentences.
var (
	// ErrNotInVoice: the invoker is in no voice channel of the server.
	ErrNotInVoice = errors.New("voice: not in a voice channel")
	// ErrNoSession: the server has no voice session.
	ErrNoSession = errors.New("voice: no session")
	// ErrNotInSessionChannel: the invoker is not in the session's channel.
	ErrNotInSessionChannel = errors.New("voice: not in the session's channel")
	// ErrOtherChannel: the server's session is in another channel.
	ErrOtherChannel = errors.New("voice: the session is in another channel")
	// ErrSessionEnded: a consent button of a session that has ended (a new
	// session in the same channel does not bring it back).
	ErrSessionEnded = errors.New("voice: that session has ended")
)

// JoinError: the bot could not get into the channel: Discord never
// answered the move within the join timeout (a full channel, or one the
// bot may not connect to, is answered by silence), or it was disconnected
// while joining.
type JoinError struct {
	ChannelID string
	// Why is the session's end, e.g. EndJoinTimeout.
	Why EndReason
}

func (e *JoinError) Error() string { return "voice: could not join the channel: " + string(e.Why) }

// BudgetSpentError: the server's daily voice time is used up; a session
// may start again at ResetsAt (the next UTC midnight).
type BudgetSpentError struct {
	Budget   time.Duration
	ResetsAt time.Time
}

func (e *BudgetSpentError) Error() string { return "voice: the daily voice budget is spent" }

// State is where a voice session stands, one of four words /voice status
// shows as they are.
type State string

// The states of a session. No state waits forever: joining and
// reconnecting end within the join timeout (a few times over, for
// reconnecting), and ended is final.
const (
	// StateJoining: the bot asked to join and waits for Discord's answer
	// and the voice connection.
	StateJoining State = "joining"
	// StateLive: in the channel with a working voice connection (or, with
	// no voice model configured, in the channel).
	StateLive State = "live"
	// StateReconnecting: the voice connection was lost and is being
	// re-established.
	StateReconnecting State = "reconnecting"
	// StateEnded: the session is over; EndReason says why.
	StateEnded State = "ended"
)

// EndReason is why a session ended, a small fixed set: the label of
// clankie_voice_sessions_ended_total and the reason /voice status names.
type EndReason string

// The reasons a session ends.
const (
	EndLeave        EndReason = "leave"          // /voice leave
	EndEmpty        EndReason = "empty"          // no human left in the channel
	EndIdle         EndReason = "idle"           // no consented person for the idle time
	EndMaxSession   EndReason = "max_session"    // the session lasted its maximum
	EndBudget       EndReason = "budget"         // the server's daily voice time is spent
	EndJoinTimeout  EndReason = "join_timeout"   // Discord never answered the join
	EndRejoinFailed EndReason = "rejoin_failed"  // the voice connection could not be re-established
	EndDisconnected EndReason = "disconnected"   // someone disconnected the bot, or the channel went away
	EndMoved        EndReason = "moved"          // someone moved the bot to another channel
	EndProtocol     EndReason = "protocol_error" // the voice server refused our protocol
	EndShutdown     EndReason = "shutdown"       // the bridge stopped
)

// EndReasons lists every reason, in a fixed order (metrics, docs).
func EndReasons() []EndReason {
	return []EndReason{EndLeave, EndEmpty, EndIdle, EndMaxSession, EndBudget, EndJoinTimeout,
		EndRejoinFailed, EndDisconnected, EndMoved, EndProtocol, EndShutdown}
}

// Turns are a session's turns Clankie answered and those he let pass.
type Turns struct{ Answered, Silent uint64 }

// Budget is a server's voice time today (UTC): Limit zero means none.
type Budget struct {
	Limit, Used time.Duration
	ResetsAt    time.Time
}

// Status is the consent-safe state of a session: a count of consented
// speakers, never who they are, and where its model connection stands.
type Status struct {
	ChannelID string
	State     State
	// Ended says why, when State is StateEnded (the server's last
	// session); CloseCode is the voice server's close code behind an
	// EndProtocol.
	Ended     EndReason
	CloseCode int
	// Elapsed is the session's time in the channel so far; MaxSession its
	// longest life.
	Elapsed    time.Duration
	MaxSession time.Duration
	Budget     Budget
	Policy     config.ConsentPolicy
	Consented  int
	// Model is one plain sentence about the model connection, as a
	// message the reader's language renders.
	Model lang.Msg
	// BriefingsDelivered counts briefings the model's server acknowledged.
	BriefingsDelivered int
	// Turns counts this session's group-call turns, once the model is
	// open: answered, and let pass (not addressed to Clankie). Nil before.
	Turns *Turns
	// Encryption is one sentence on whether the call is end-to-end
	// encrypted (a message, as Model), none (a zero ID) while the session
	// has no voice connection. Above all
	// it says when a call that was end-to-end encrypted was downgraded,
	// since Clankie's speech then goes out in the clear to Discord.
	Encryption lang.Msg
}

// Human writes a duration as people read it: 90s, 2m, 1h30m.
func Human(d time.Duration) string {
	d = d.Round(time.Second)
	if d <= 0 {
		return "0s"
	}
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if sec > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", sec)
	}
	return b.String()
}

// ConsentButtonPrefix begins the custom_id of the consent buttons a
// session's disclosure carries: "voice-consent:<session id>:in" or ":out".
// The session id is the only thing in it: nothing else is trusted.
const ConsentButtonPrefix = "voice-consent"
