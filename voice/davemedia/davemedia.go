// Package davemedia plugs a voice/dave Session into a voice/media connection:
// it implements media.DAVE on top of dave.Session.
//
// It is its own small package so that neither side depends on the other:
// voice/dave stays the protocol and its cryptography with no
// voice-connection types, and voice/media stays the connection with no
// MLS. Whoever builds a voice session imports this
// one and both.
package davemedia

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/media"
)

// Config describes the session to create.
type Config struct {
	// UserID is the bot's user id and ChannelID the voice channel's (the
	// MLS group id), both decimal snowflakes as Discord's JSON carries them.
	UserID    string
	ChannelID string
	// Allow reports whether a speaker has consented to be heard. media.Conn
	// asks the same question before transport decryption, so Decrypt is
	// never called for a refused speaker; the session asks again before
	// any DAVE work, so a consent withdrawn between the two still costs no
	// decryption. Nil allows nobody.
	Allow func(userID string) bool
	// Now is the session's clock (tests move it); nil is time.Now.
	Now func() time.Time
	// Log receives one line per recovery from sustained decryption
	// failures: counts, the transition and the sender's user id, never
	// frames or keys. Nil logs nothing.
	Log *zap.Logger
}

// Session is a DAVE protocol version 1 member serving one media.Conn. Safe
// for the concurrent use media.Conn makes of it.
type Session struct {
	s    *dave.Session
	self dave.UserID
	log  *zap.Logger

	mu  sync.Mutex
	sig media.Signal
	// order is held from a session call to the end of sending its
	// replies, so that a recovery started by the receive goroutine and a
	// handler on the gateway goroutine never interleave their messages
	// (op 31 must precede its key package, and both any reply from the
	// state the recovery discarded).
	order sync.Mutex
}

var _ media.DAVE = (*Session)(nil)

// New returns a session for media.Config.DAVE.
func New(cfg Config) (*Session, error) {
	self, err := dave.ParseUserID(cfg.UserID)
	if err != nil {
		return nil, fmt.Errorf("davemedia: our user id: %w", err)
	}
	channel, err := strconv.ParseUint(cfg.ChannelID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("davemedia: channel id %q is not a snowflake", cfg.ChannelID)
	}
	allow := cfg.Allow
	if allow == nil {
		allow = func(string) bool { return false }
	}
	s, err := dave.New(dave.Options{
		UserID: self, ChannelID: channel, Now: cfg.Now,
		Allow: func(u dave.UserID) bool { return allow(u.String()) },
	})
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Session{s: s, self: self, log: log}, nil
}

// DAVE returns the underlying session, for its Stats, Epoch and Members.
func (d *Session) DAVE() *dave.Session { return d.s }

// Close forgets every key. The connection must be closed first.
func (d *Session) Close() { d.s.Close() }

// MaxProtocolVersion reports dave.MaxProtocolVersion.
func (d *Session) MaxProtocolVersion() int { return dave.MaxProtocolVersion }

// ErrWrongUser reports a connection identified as another user than the
// session was created for: our key package would name the wrong identity.
var ErrWrongUser = errors.New("davemedia: the connection's user is not the session's")

// Start begins the protocol version the session description chose: for
// version 1 it sends our key package (op 26); version 0 is passthrough.
func (d *Session) Start(version int, self string, sig media.Signal) error {
	if self != d.self.String() {
		return ErrWrongUser
	}
	if version < 0 || version > dave.MaxProtocolVersion {
		return media.ErrDAVEUnsupported
	}
	d.mu.Lock()
	d.sig = sig
	d.mu.Unlock()
	d.order.Lock()
	defer d.order.Unlock()
	return d.send(d.s.OnSelectProtocolAck(uint16(version)))
}

// HandleJSON hands opcodes 21, 22 and 24 to the session and sends what it
// answers (23, or 26 on a new group).
func (d *Session) HandleJSON(op media.Opcode, data json.RawMessage) error {
	switch op {
	case media.OpDAVEPrepareTransition, media.OpDAVEExecuteTransition, media.OpDAVEPrepareEpoch:
		d.order.Lock()
		defer d.order.Unlock()
		return d.send(d.s.HandleJSON(dave.Opcode(op), data))
	}
	return nil
}

// HandleBinary hands opcodes 25, 27, 29 and 30 to the session and sends
// what it answers: 28 (our commit and welcome), 23, or on a commit or
// welcome it cannot use 31 and a fresh 26.
func (d *Session) HandleBinary(op media.Opcode, seq uint16, payload []byte) error {
	msg := make([]byte, 0, 3+len(payload))
	msg = binary.BigEndian.AppendUint16(msg, seq)
	msg = append(append(msg, byte(op)), payload...)
	d.order.Lock()
	defer d.order.Unlock()
	_, out, err := d.s.HandleBinary(msg)
	return d.send(out, err)
}

// UsersConnected records op 11, so add proposals for these users are
// accepted. Ids that are not snowflakes are ignored: no proposal can name
// them.
func (d *Session) UsersConnected(userIDs []string) {
	for _, id := range userIDs {
		if u, err := dave.ParseUserID(id); err == nil {
			d.s.AddUser(u)
		}
	}
}

// UserDisconnected records op 13.
func (d *Session) UserDisconnected(userID string) {
	if u, err := dave.ParseUserID(userID); err == nil {
		d.s.RemoveUser(u)
	}
}

// CanEncrypt reports whether our sender key exists (or the call is
// protocol version 0); until then media.Conn holds our frames back.
func (d *Session) CanEncrypt() bool { return d.s.Ready() }

// Encrypt appends the DAVE frame of an Opus frame of ours to dst.
func (d *Session) Encrypt(dst, frame []byte) ([]byte, error) { return d.s.Encrypt(dst, frame) }

// Decrypt appends userID's frame, decrypted, to dst. When this frame's
// failure is the dave.DecryptFailureTolerance-th in a row from userID, the
// session recovers as discord.js does before the error is returned: op 31
// for the current transition and a fresh key package go to the gateway.
func (d *Session) Decrypt(dst []byte, userID string, frame []byte) ([]byte, error) {
	u, err := dave.ParseUserID(userID)
	if err != nil {
		return dst, err
	}
	out, err := d.s.Decrypt(u, dst, frame)
	if errors.Is(err, dave.ErrRecoveryDue) {
		d.recoverDecryption()
	}
	return out, err
}

// recoverDecryption re-initialises the session after sustained decryption
// failures from one sender and sends op 31 and the new key package. It runs on the
// receive goroutine, at most once per broken group: the session refuses
// a second recovery until a group is established again.
func (d *Session) recoverDecryption() {
	d.order.Lock()
	defer d.order.Unlock()
	out, err := d.s.RecoverDecryption()
	if len(out) == 0 && err == nil {
		return // another sender's failures already started it
	}
	fields := []zap.Field{zap.Int("consecutive_failures", dave.DecryptFailureTolerance)}
	if len(out) > 0 {
		fields = append(fields, zap.Uint16("transition_id", out[0].TransitionID))
	}
	d.log.Warn("DAVE decryption keeps failing for a sender; re-initialising and asking to be re-added", fields...)
	if err := d.send(out, err); err != nil {
		d.log.Warn("DAVE recovery could not be sent", zap.String("errorType", "gateway"))
	}
}

// send delivers the session's replies through the connection's Signal, in
// order, and reports the session's error joined with any send failure.
func (d *Session) send(out []dave.Message, err error) error {
	d.mu.Lock()
	sig := d.sig
	d.mu.Unlock()
	if sig == nil {
		if len(out) > 0 {
			return errors.Join(err, errors.New("davemedia: DAVE message before Start"))
		}
		return err
	}
	for _, m := range out {
		var serr error
		if m.Binary() {
			serr = sig.SendBinary(media.Opcode(m.Op), m.Payload)
		} else {
			serr = sig.SendJSON(media.Opcode(m.Op), map[string]uint16{"transition_id": m.TransitionID})
		}
		if serr != nil {
			err = errors.Join(err, fmt.Errorf("davemedia: sending opcode %d: %w", m.Op, serr))
		}
	}
	return err
}
