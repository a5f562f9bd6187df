package media

import (
	"encoding/json"
	"errors"
)

// Signal sends DAVE messages to the voice gateway on the session's behalf.
type Signal interface {
	// SendJSON sends a JSON opcode (23 transition ready, 31 invalid commit or
	// welcome) with data d.
	SendJSON(op Opcode, d any) error
	// SendBinary sends a binary opcode (26 key package, 28 commit/welcome):
	// one opcode byte then payload; clients send no sequence number.
	SendBinary(op Opcode, payload []byte) error
}

// DAVE is the end-to-end encryption session a Conn drives; voice/dave
// implements it, Passthrough is protocol version 0. A Conn calls the
// handlers from its gateway reader goroutine, and Encrypt/Decrypt from its
// send and receive goroutines, so an implementation must be safe for that.
type DAVE interface {
	// MaxProtocolVersion is sent in identify as max_dave_protocol_version.
	MaxProtocolVersion() int
	// Start is called once, when the session description (op 4) names the
	// protocol version; an error ends the dial. A resume does not call it
	// again: the session carries on. sig stays valid for the connection's
	// life (it follows resumed websockets).
	Start(version int, self string, sig Signal) error
	// HandleJSON receives JSON opcodes 21, 22, 24 and 31 with their data.
	HandleJSON(op Opcode, data json.RawMessage) error
	// HandleBinary receives binary opcodes 25, 27, 29 and 30: seq is the
	// 2-byte sequence number that framed the message, payload what follows
	// the opcode byte.
	HandleBinary(op Opcode, seq uint16, payload []byte) error
	// UsersConnected and UserDisconnected mirror ops 11 and 13.
	UsersConnected(userIDs []string)
	UserDisconnected(userID string)
	// CanEncrypt reports whether frames may be sent now: true under protocol
	// version 0, and under DAVE only once our sender key is established. A
	// Conn never sends a frame while it reports false.
	CanEncrypt() bool
	// Encrypt appends frame's end-to-end encryption to dst.
	Encrypt(dst, frame []byte) ([]byte, error)
	// Decrypt appends userID's frame decrypted to dst.
	Decrypt(dst []byte, userID string, frame []byte) ([]byte, error)
}

// Passthrough is DAVE protocol version 0: frames pass unchanged. It refuses
// to start at any other version, so a call that turns end-to-end encrypted
// never silently carries clear frames.
type Passthrough struct{}

// ErrDAVEUnsupported reports that the voice server asked for a DAVE protocol
// version the session does not speak.
var ErrDAVEUnsupported = errors.New("voice server requires a DAVE protocol version this session does not support")

// MaxProtocolVersion reports 0: no DAVE.
func (Passthrough) MaxProtocolVersion() int { return 0 }

// Start accepts protocol version 0 only.
func (Passthrough) Start(version int, _ string, _ Signal) error {
	if version != 0 {
		return ErrDAVEUnsupported
	}
	return nil
}

// HandleJSON ignores DAVE messages: version 0 has none to act on.
func (Passthrough) HandleJSON(Opcode, json.RawMessage) error { return nil }

// HandleBinary ignores DAVE messages.
func (Passthrough) HandleBinary(Opcode, uint16, []byte) error { return nil }

// UsersConnected has no group to update.
func (Passthrough) UsersConnected([]string) {}

// UserDisconnected has no group to update.
func (Passthrough) UserDisconnected(string) {}

// CanEncrypt reports true: version 0 sends frames as they are.
func (Passthrough) CanEncrypt() bool { return true }

// Encrypt appends frame unchanged.
func (Passthrough) Encrypt(dst, frame []byte) ([]byte, error) { return append(dst, frame...), nil }

// Decrypt appends frame unchanged.
func (Passthrough) Decrypt(dst []byte, _ string, frame []byte) ([]byte, error) {
	return append(dst, frame...), nil
}
