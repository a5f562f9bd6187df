// Package voiceapi is what the voice bridge's sessions offer their callers
// (the /voice command): the errors a session manager returns and the
// consent-safe status it reports. It is a leaf, so a caller depends on
// these few words and not on the voice machinery (opus, DAVE, the media
// connection, the realtime client) behind them.
package voiceapi

import (
	"errors"

	"github.com/clankie/clankie/config"
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
)

// Status is the consent-safe state of a session: a count of consented
// speakers, never who they are, and where its model connection stands.
type Status struct {
	ChannelID string
	Policy    config.ConsentPolicy
	Consented int
	// Model is one plain sentence about the model connection.
	Model string
	// BriefingsDelivered counts briefings the model's server acknowledged.
	BriefingsDelivered int
	// Encryption is one sentence on whether the call is end-to-end
	// encrypted, "" while the session has no voice connection. Above all
	// it says when a call that was end-to-end encrypted was downgraded,
	// since Clankie's speech then goes out in the clear to Discord.
	Encryption string
}
