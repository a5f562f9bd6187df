package media

import "fmt"

// Opcode is a voice gateway opcode.
type Opcode int

// Voice gateway opcodes (v8), including the DAVE ones. Opcodes 25–30 travel
// as binary frames; the rest as JSON.
const (
	OpIdentify                    Opcode = 0
	OpSelectProtocol              Opcode = 1
	OpReady                       Opcode = 2
	OpHeartbeat                   Opcode = 3
	OpSessionDescription          Opcode = 4
	OpSpeaking                    Opcode = 5
	OpHeartbeatAck                Opcode = 6
	OpResume                      Opcode = 7
	OpHello                       Opcode = 8
	OpResumed                     Opcode = 9
	OpClientsConnect              Opcode = 11
	OpClientDisconnect            Opcode = 13
	OpDAVEPrepareTransition       Opcode = 21
	OpDAVEExecuteTransition       Opcode = 22
	OpDAVETransitionReady         Opcode = 23
	OpDAVEPrepareEpoch            Opcode = 24
	OpDAVEMLSExternalSender       Opcode = 25
	OpDAVEMLSKeyPackage           Opcode = 26
	OpDAVEMLSProposals            Opcode = 27
	OpDAVEMLSCommitWelcome        Opcode = 28
	OpDAVEMLSAnnounceCommit       Opcode = 29
	OpDAVEMLSWelcome              Opcode = 30
	OpDAVEMLSInvalidCommitWelcome Opcode = 31
)

// IsDAVE reports whether op belongs to the DAVE protocol (21–31), which the
// connection hands to its DAVE session rather than handling itself.
func (o Opcode) IsDAVE() bool {
	return o >= OpDAVEPrepareTransition && o <= OpDAVEMLSInvalidCommitWelcome
}

// IsBinary reports whether op travels as a binary websocket frame.
func (o Opcode) IsBinary() bool { return o >= OpDAVEMLSExternalSender && o <= OpDAVEMLSWelcome }

// CloseAction is what a caller should do after the voice gateway closed.
type CloseAction int

const (
	// Resume: reconnect the websocket and resume the session (op 7). The
	// connection does this itself.
	Resume CloseAction = iota + 1
	// Rejoin: the session is gone; join the channel again through the main
	// gateway (a new VOICE_STATE_UPDATE/VOICE_SERVER_UPDATE) and Dial anew.
	Rejoin
	// Stop: do not reconnect (kicked, channel deleted, bad credentials, or a
	// protocol error of ours that reconnecting would repeat).
	Stop
)

func (a CloseAction) String() string {
	switch a {
	case Resume:
		return "resume"
	case Rejoin:
		return "rejoin"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("CloseAction(%d)", int(a))
}

// Voice gateway close codes, as Discord documents them.
const (
	CloseUnknownOpcode         = 4001
	CloseFailedDecode          = 4002
	CloseNotAuthenticated      = 4003
	CloseAuthenticationFailed  = 4004
	CloseAlreadyAuthenticated  = 4005
	CloseSessionInvalid        = 4006
	CloseSessionTimeout        = 4009
	CloseServerNotFound        = 4011
	CloseUnknownProtocol       = 4012
	CloseDisconnected          = 4014
	CloseServerCrashed         = 4015
	CloseUnknownEncryptionMode = 4016
	CloseE2EERequired          = 4017
	CloseBadRequest            = 4020
	CloseRateLimited           = 4021
	CloseCallTerminated        = 4022
)

// ActionFor returns what to do after the voice gateway closed with code, as
// Discord documents it: 4015 (voice server crashed) and transport-level
// closes (below 4000: a dropped socket, a server restart) resume; 4006
// (session no longer valid), 4009 (session timeout), 4011 (server not found)
// and 4017 (DAVE required) need a fresh session; 4014 (disconnected: kicked,
// moved away, channel deleted), 4022 (call terminated), 4004 (authentication
// failed), 4021 (rate limited) and the protocol errors stop.
func ActionFor(code int) CloseAction {
	switch {
	case code < 4000, code == CloseServerCrashed:
		return Resume
	case code == CloseSessionInvalid, code == CloseSessionTimeout, code == CloseServerNotFound, code == CloseE2EERequired:
		return Rejoin
	default:
		return Stop
	}
}

// CloseError reports that the voice gateway closed the connection and what the
// caller should do about it.
type CloseError struct {
	Code   int
	Action CloseAction
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("voice gateway closed with code %d (%s)", e.Code, e.Action)
}
