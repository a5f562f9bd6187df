package voice

import "errors"

// Errors a Manager returns to /voice; they are voice's own, and package
// commands turns them into sentences.
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
