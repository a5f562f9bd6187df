// Package dave implements Discord's audio/video end-to-end encryption, the
// DAVE protocol version 1 (github.com/discord/dave-protocol), as a call
// member: the MLS group (RFC 9420, ciphersuite 2, through
// github.com/thomas-vilte/mls-go) and the media frame transform. It is pure
// Go; no cgo.
//
// A Session is fed the voice gateway's DAVE opcodes (HandleJSON,
// HandleBinary) and returns the messages to send back; it encrypts our own
// Opus frames (Encrypt) and decrypts other members' frames (Decrypt). A
// sender whose audio must not be heard is dropped before any decryption work
// (Options.Allow or Skip), and Stats proves it. When one sender's frames
// keep failing to decrypt, Decrypt says so (ErrRecoveryDue) and
// RecoverDecryption returns what to send to be re-added to the group.
//
// Keys and secrets never appear in errors; the package does not log.
package dave

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thomas-vilte/mls-go/group"
)

// MaxProtocolVersion is the highest DAVE protocol version this package
// speaks, for the identify opcode's max_dave_protocol_version.
const MaxProtocolVersion = 1

// UserID is a Discord user id (snowflake).
type UserID uint64

// String returns the decimal form Discord's JSON uses.
func (u UserID) String() string { return strconv.FormatUint(uint64(u), 10) }

// ParseUserID parses a decimal snowflake.
func ParseUserID(s string) (UserID, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("dave: user id %q is not a snowflake", s)
	}
	return UserID(v), nil
}

// Options configure a Session.
type Options struct {
	// UserID is our own user id; ChannelID the voice channel's id, which
	// becomes the MLS group id.
	UserID    UserID
	ChannelID uint64
	// Allow, when set, is asked before each Decrypt: a sender it refuses is
	// dropped with ErrSkipped before the frame is parsed or any key is
	// touched, and counted in Stats.Skipped.
	Allow func(UserID) bool
	// Now is the clock (tests move it); time.Now when nil.
	Now func() time.Time
}

// Session is one member's DAVE state for one voice connection. Its methods
// are safe for concurrent use: handlers run on the gateway goroutine while
// Encrypt and Decrypt run on media goroutines.
type Session struct {
	userID UserID
	allow  func(UserID) bool
	now    func() time.Time

	mu         sync.Mutex
	m          *member
	version    uint16
	pending    map[uint16]uint16 // transition id → protocol version
	recognized map[UserID]bool
	nextOwn    *keyRatchet // our send ratchet for the epoch a transition will execute
	members    []UserID    // the established group's roster
	// e2ee records that the call has been end-to-end encrypted (a protocol
	// version above 0 was selected or executed): from then on only the
	// documented downgrade may put our frames in the clear.
	e2ee bool
	// lastTID is the last transition executed: what op 31 names when
	// sustained decryption failures, not a message, show the group broken.
	lastTID uint16

	// steady mirrors, for the media goroutines, whether decryption failures
	// mean something: an end-to-end encrypted call, an established group
	// and no transition pending (during one, frames under keys we do not
	// hold yet are expected). unlock keeps it current.
	steady atomic.Bool
	// due is set by the Decrypt that reports ErrRecoveryDue and taken by
	// RecoverDecryption, which does nothing without it.
	due atomic.Bool

	refused refusals

	enc encryptor

	decMu sync.RWMutex
	decs  map[UserID]*decryptor
	// overflow serves senders beyond maxSenders: no keys, shared counters
	overflow *decryptor
	// template for decryptors created later: passthrough on, or until a time
	passOn    bool
	passUntil time.Time
}

// New returns a session in protocol version 0 (passthrough) until the
// gateway selects DAVE (OnSelectProtocolAck or HandleJSON op 4).
func New(opts Options) (*Session, error) {
	if opts.UserID == 0 {
		return nil, errors.New("dave: a session needs our user id")
	}
	m, err := newMember(uint64(opts.UserID))
	if err != nil {
		return nil, err
	}
	m.groupID = groupID(opts.ChannelID)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Session{
		userID: opts.UserID, allow: opts.Allow, now: now, m: m,
		pending: make(map[uint16]uint16), recognized: make(map[UserID]bool),
		decs: make(map[UserID]*decryptor),
	}
	s.enc.passthrough = true
	s.passOn = true
	return s, nil
}

// Refusals count what a session refused or survived from the voice
// server: counts only, never who or what.
type Refusals struct {
	// Panics counts messages or frames whose handling panicked (inside
	// mls-go, a pre-1.0 parser of the server's bytes, or our own): each
	// was dropped, a commit or welcome answered as invalid, and the
	// session lives on.
	Panics uint64
	// UsersOverCap counts users op 11 named beyond maxRecognized.
	UsersOverCap uint64
	// Downgrades counts attempts to drop an end-to-end encrypted call to
	// protocol version 0 other than the documented transition (op 21 with
	// a transition id, then op 22): refused, our frames stay encrypted.
	Downgrades uint64
	// Recoveries counts the times the session reset its MLS state and
	// asked the voice gateway to re-add it (op 31, then a new key
	// package): after a commit or welcome it could not use, or after
	// DecryptFailureTolerance consecutive frames from one sender failed.
	Recoveries uint64
}

type refusals struct{ panics, users, downgrades, recoveries atomic.Uint64 }

// Refusals returns the session's counts of refused and recovered input.
func (s *Session) Refusals() Refusals {
	return Refusals{
		Panics: s.refused.panics.Load(), UsersOverCap: s.refused.users.Load(),
		Downgrades: s.refused.downgrades.Load(), Recoveries: s.refused.recoveries.Load(),
	}
}

// ErrPeerPanic reports a message whose handling panicked; it was dropped.
var ErrPeerPanic = errors.New("dave: message could not be handled and was dropped")

// ErrDowngradeRefused reports a move of an end-to-end encrypted call to
// protocol version 0 that is not Discord's documented downgrade.
var ErrDowngradeRefused = errors.New("dave: downgrade to protocol version 0 refused: not the documented transition")

// ErrWelcomeAfterGroup reports a welcome (op 30) that arrived while we
// already hold an established group: it cannot be applied (libdave refuses
// it too), so the session answers it as an unusable welcome.
var ErrWelcomeAfterGroup = errors.New("dave: welcome refused: the group is already established")

// DecryptFailureTolerance is how many frames in a row from one sender may
// fail to decrypt, in an established group with no transition pending,
// before the session concludes its group state is broken. It is
// discord.js's DEFAULT_DECRYPTION_FAILURE_TOLERANCE: a few frames fail
// around any epoch change, dozens only when keys truly disagree.
const DecryptFailureTolerance = 36

// ErrRecoveryDue is returned, wrapped with the frame's own error, by the
// Decrypt whose failure made a sender's run of consecutive failures reach
// DecryptFailureTolerance. The caller should then call RecoverDecryption
// and send what it returns; Decrypt cannot send.
var ErrRecoveryDue = errors.New("dave: sustained decryption failures: the MLS group needs re-initialising")

// unlock updates steady from the state the handler leaves, then releases
// s.mu: every handler that changes the version, the group or the pending
// transitions unlocks through it.
func (s *Session) unlock() {
	s.steady.Store(s.version > 0 && s.m.established != nil && len(s.pending) == 0)
	s.mu.Unlock()
}

// caught, deferred by a handler with a named error, turns a panic in it
// into ErrPeerPanic and counts it. The handler's deferred unlock still
// runs, so the session stays usable.
func (s *Session) caught(err *error) {
	if recover() != nil {
		s.refused.panics.Add(1)
		*err = ErrPeerPanic
	}
}

// Downgraded reports that the call was end-to-end encrypted and our frames
// now go out in the clear (transport encryption only), after the voice
// server's documented downgrade: what /voice status must say.
func (s *Session) Downgraded() bool {
	s.mu.Lock()
	e2ee := s.e2ee
	s.mu.Unlock()
	return e2ee && s.enc.inClear()
}

// maxRecognized bounds the users op 11 may name: a voice call holds at
// most a few hundred, and a server naming more would only grow our memory.
const maxRecognized = 1024

func groupID(channel uint64) []byte {
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = byte(channel)
		channel >>= 8
	}
	return b
}

// SetChannelID sets the MLS group id for groups created from now on.
func (s *Session) SetChannelID(channel uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.groupID = groupID(channel)
}

// ProtocolVersion returns the protocol version in effect for our frames.
func (s *Session) ProtocolVersion() uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Ready reports whether our frames can go out: encrypted under a current
// key, or unencrypted because the call is not end-to-end encrypted.
func (s *Session) Ready() bool { return s.enc.ready() }

// Epoch returns the established group's epoch, 0 when there is none.
func (s *Session) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.established == nil {
		return 0
	}
	return s.m.established.Epoch().AsUint64()
}

// TransitionPending reports whether a prepared transition awaits its
// execute (op 22): until then our frames still go out under the previous
// epoch's key.
func (s *Session) TransitionPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) > 0
}

// Members returns the user ids in the established group.
func (s *Session) Members() []UserID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.members)
}

// EpochAuthenticator returns the established group's epoch authenticator,
// the value members compare out of band (protocol.md, "Epoch Authenticator").
func (s *Session) EpochAuthenticator() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.established == nil {
		return nil
	}
	return slices.Clone(s.m.established.EpochAuthenticator())
}

// AddUser records that a user is in the call (op 11), so an add proposal
// for them is accepted.
func (s *Session) AddUser(u UserID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recognized[u] && len(s.recognized) >= maxRecognized {
		s.refused.users.Add(1)
		return
	}
	s.recognized[u] = true
}

// RemoveUser records that a user left the call (op 13): add proposals for
// them are refused until they connect again, and their receive keys expire.
func (s *Session) RemoveUser(u UserID) {
	s.mu.Lock()
	delete(s.recognized, u)
	s.mu.Unlock()
	if d := s.decryptorIfAny(u); d != nil {
		d.expireAll(s.now(), cryptorExpiry)
	}
}

// Encrypt appends the DAVE frame for an Opus frame of ours to dst. In
// protocol version 0 the frame is returned unchanged; the Opus silence frame
// always is. In an end-to-end encrypted call without a key yet it returns
// ErrNoEncryptKey rather than send audio in the clear.
func (s *Session) Encrypt(dst, frame []byte) ([]byte, error) {
	return s.enc.encrypt(dst, frame)
}

// Decrypt appends the decrypted frame a user sent to dst. A frame is refused
// with ErrAuthentication (corrupted, or under a key we do not hold),
// ErrReplayedNonce, ErrNoKey, ErrNotEncrypted or ErrMalformedFrame; a sender
// Options.Allow refuses gets ErrSkipped with no decryption work, and never
// counts as a failure.
//
// The failure that makes one sender's run of consecutive failures (counted
// only while the group is established and no transition is pending) reach
// DecryptFailureTolerance also wraps ErrRecoveryDue: the caller should call
// RecoverDecryption. A successful decryption from the sender ends its run.
func (s *Session) Decrypt(u UserID, dst, frame []byte) (out []byte, err error) {
	if s.allow != nil && !s.allow(u) {
		s.Skip(u)
		return dst, ErrSkipped
	}
	defer func() {
		if recover() != nil {
			s.refused.panics.Add(1)
			out, err = dst, ErrPeerPanic
		}
	}()
	out, run, err := s.decryptor(u).decryptCounted(dst, frame, s.now(), s.steady.Load())
	if err != nil && run == DecryptFailureTolerance {
		s.due.Store(true)
		return out, fmt.Errorf("%w: %w", ErrRecoveryDue, err)
	}
	return out, err
}

// RecoverDecryption is what to do after Decrypt returned ErrRecoveryDue, as
// discord.js does: it resets the MLS state and returns op 31 for the last
// executed transition and a fresh key package (op 26), so the voice
// gateway removes our stale leaf and adds us anew. It returns nothing when
// no ErrRecoveryDue called for it, or the state no longer does (another
// sender's failures already triggered the recovery, or the group changed
// meanwhile). Every sender's run of failures restarts from zero.
func (s *Session) RecoverDecryption() (_ []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.caught(&err)
	if !s.due.Swap(false) || s.version == 0 || s.m.established == nil || len(s.pending) > 0 {
		return nil, nil
	}
	s.eachDecryptor(func(_ UserID, d *decryptor) { d.resetRun() })
	return s.recoverLocked(s.lastTID, nil)
}

// Skip counts a frame from u that the caller dropped without calling
// Decrypt, so that Stats shows it.
func (s *Session) Skip(u UserID) {
	s.decryptor(u).stats.skipped.Add(1)
}

// Stats returns what the session did with u's frames.
func (s *Session) Stats(u UserID) DecryptStats {
	if d := s.decryptorIfAny(u); d != nil {
		return d.stats.snapshot()
	}
	return DecryptStats{}
}

func (s *Session) decryptorIfAny(u UserID) *decryptor {
	s.decMu.RLock()
	defer s.decMu.RUnlock()
	return s.decs[u]
}

// maxSenders bounds the per-sender state a session keeps, whatever user
// ids a caller passes to Decrypt or Skip; a voice call has far fewer.
const maxSenders = 4096

func (s *Session) decryptor(u UserID) *decryptor {
	if d := s.decryptorIfAny(u); d != nil {
		return d
	}
	s.decMu.Lock()
	defer s.decMu.Unlock()
	if d := s.decs[u]; d != nil {
		return d
	}
	if len(s.decs) >= maxSenders {
		if s.overflow == nil {
			s.overflow = &decryptor{passthroughOn: s.passOn, passthroughUntil: s.passUntil}
		}
		return s.overflow
	}
	d := &decryptor{passthroughOn: s.passOn, passthroughUntil: s.passUntil}
	s.decs[u] = d
	return d
}

// setPassthroughAll switches every decryptor's passthrough: on, or off
// after ttl.
func (s *Session) setPassthroughAll(on bool, ttl time.Duration) {
	now := s.now()
	s.decMu.Lock()
	if on {
		s.passOn = true
	} else if s.passOn {
		s.passOn, s.passUntil = false, now.Add(ttl)
	}
	s.decMu.Unlock()
	s.eachDecryptor(func(_ UserID, d *decryptor) { d.setPassthrough(on, now, ttl) })
}

func (s *Session) eachDecryptor(f func(UserID, *decryptor)) {
	s.decMu.RLock()
	defer s.decMu.RUnlock()
	for u, d := range s.decs {
		f(u, d)
	}
}

// HandleJSON handles a JSON voice gateway opcode DAVE cares about (4, 11,
// 13, 21, 22, 24) given its "d" object, and returns what to send back.
// Other opcodes are ignored.
func (s *Session) HandleJSON(op Opcode, d json.RawMessage) (_ []Message, err error) {
	defer s.caught(&err)
	var p struct {
		ProtocolVersion     *uint16  `json:"protocol_version"`
		DAVEProtocolVersion uint16   `json:"dave_protocol_version"`
		TransitionID        uint16   `json:"transition_id"`
		Epoch               uint64   `json:"epoch"`
		UserIDs             []string `json:"user_ids"`
		UserID              string   `json:"user_id"`
	}
	switch op {
	case OpSelectProtocolAck, OpClientsConnect, OpClientDisconnect, OpPrepareTransition, OpExecuteTransition, OpPrepareEpoch:
	default:
		return nil, nil
	}
	if err := json.Unmarshal(d, &p); err != nil {
		return nil, fmt.Errorf("%w: opcode %d: %w", ErrBadMessage, op, err)
	}
	version := uint16(0)
	if p.ProtocolVersion != nil {
		version = *p.ProtocolVersion
	}
	switch op {
	case OpSelectProtocolAck:
		return s.OnSelectProtocolAck(p.DAVEProtocolVersion)
	case OpClientsConnect:
		for _, id := range p.UserIDs {
			u, err := ParseUserID(id)
			if err != nil {
				return nil, err
			}
			s.AddUser(u)
		}
	case OpClientDisconnect:
		u, err := ParseUserID(p.UserID)
		if err != nil {
			return nil, err
		}
		s.RemoveUser(u)
	case OpPrepareTransition:
		return s.OnPrepareTransition(p.TransitionID, version), nil
	case OpExecuteTransition:
		s.OnExecuteTransition(p.TransitionID)
	case OpPrepareEpoch:
		return s.OnPrepareEpoch(p.Epoch, version)
	}
	return nil, nil
}

// HandleBinary handles a binary server message (ops 25, 27, 29, 30, with
// their sequence number) and returns the parsed header, for the caller's
// seq_ack, and what to send back. When a commit or welcome cannot be used,
// the messages are op 31 and a fresh key package, and the error says why.
func (s *Session) HandleBinary(msg []byte) (b BinaryMessage, _ []Message, err error) {
	defer s.caught(&err)
	b, err = ParseBinary(msg)
	if err != nil {
		return b, nil, err
	}
	var out []Message
	switch b.Op {
	case OpMLSExternalSender:
		out, err = s.OnExternalSender(b.Payload)
	case OpMLSProposals:
		out, err = s.OnProposals(b.Payload)
	case OpMLSAnnounceCommit:
		out, err = s.OnAnnounceCommit(b.TransitionID, b.Payload)
	case OpMLSWelcome:
		out, err = s.OnWelcome(b.TransitionID, b.Payload)
	}
	return b, out, err
}

// OnSelectProtocolAck starts DAVE when the gateway selects a version above
// 0, returning our key package; version 0 means passthrough.
func (s *Session) OnSelectProtocolAck(version uint16) (_ []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.caught(&err)
	if version == 0 && s.e2ee {
		s.refused.downgrades.Add(1)
		return nil, ErrDowngradeRefused
	}
	s.version = version
	if version == 0 {
		s.passthroughLocked()
		return nil, nil
	}
	s.e2ee = true
	// The call is end-to-end encrypted from now on: our frames wait for a
	// key; others' unencrypted frames pass for a transition period.
	s.enc.setPassthrough(false)
	s.setPassthroughAll(false, cryptorExpiry)
	return s.reinitLocked()
}

// OnPrepareEpoch handles op 24: epoch 1 announces a new group, so we reset
// and send a new key package.
func (s *Session) OnPrepareEpoch(epoch uint64, version uint16) (_ []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.caught(&err)
	if epoch != 1 {
		return nil, nil
	}
	if version == 0 && s.e2ee {
		// protocol.md announces a downgrade with op 21, never op 24.
		s.refused.downgrades.Add(1)
		return nil, ErrDowngradeRefused
	}
	s.version = version
	if version == 0 {
		s.passthroughLocked()
		return nil, nil
	}
	return s.reinitLocked()
}

// OnExternalSender handles op 25.
func (s *Session) OnExternalSender(payload []byte) (_ []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.caught(&err)
	if err := s.m.setExternalSender(payload); err != nil {
		return nil, err
	}
	if s.m.kp != nil && s.version > 0 {
		if err := s.createPendingLocked(); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// OnProposals handles op 27 and returns our commit (op 28) when proposals
// remain to be committed.
func (s *Session) OnProposals(payload []byte) (_ []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.caught(&err)
	out, err := s.m.proposals(payload, func(u uint64) bool { return s.recognized[UserID(u)] })
	if err != nil || out == nil {
		return nil, err
	}
	return []Message{{Op: OpMLSCommitWelcome, Payload: out}}, nil
}

// OnAnnounceCommit handles op 29.
func (s *Session) OnAnnounceCommit(transitionID uint16, commit []byte) (out []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.recoverCommitLocked(transitionID, &out, &err)
	changed, err := s.m.processCommit(commit)
	if err != nil {
		return s.recoverLocked(transitionID, err)
	}
	if !changed {
		return nil, nil
	}
	return s.enterEpochLocked(transitionID)
}

// OnWelcome handles op 30.
//
// A welcome while our group is established cannot be applied: it is
// answered like any unusable welcome (op 31 for its transition, a reset and
// a fresh key package, ErrWelcomeAfterGroup), not ignored, so the gateway
// re-adds us and its view of the group and ours agree again.
func (s *Session) OnWelcome(transitionID uint16, welcome []byte) (out []Message, err error) {
	s.mu.Lock()
	defer s.unlock()
	defer s.recoverCommitLocked(transitionID, &out, &err)
	if s.m.established != nil {
		return s.recoverLocked(transitionID, ErrWelcomeAfterGroup)
	}
	if err := s.m.processWelcome(welcome); err != nil {
		return s.recoverLocked(transitionID, err)
	}
	return s.enterEpochLocked(transitionID)
}

// recoverCommitLocked, deferred by the commit and welcome handlers, answers
// one whose handling panicked (in mls-go, on the server's bytes) as an
// unusable commit or welcome: op 31 and a fresh key package, the group
// state reset, so that nothing half-applied is kept. s.mu is held.
func (s *Session) recoverCommitLocked(transitionID uint16, out *[]Message, err *error) {
	if recover() != nil {
		s.refused.panics.Add(1)
		*out, *err = s.recoverLocked(transitionID, ErrPeerPanic)
	}
}

// OnPrepareTransition handles op 21 and returns op 23 unless the transition
// (id 0) executes at once. In a call that was end-to-end encrypted, a
// transition to protocol version 0 is accepted only as protocol.md
// documents a downgrade: announced with a transition id, executed by op 22.
// One with id 0 (executed at once) is refused and nothing answered.
func (s *Session) OnPrepareTransition(transitionID, version uint16) []Message {
	s.mu.Lock()
	defer s.unlock()
	if version == 0 && transitionID == 0 && s.e2ee {
		s.refused.downgrades.Add(1)
		return nil
	}
	s.pending[transitionID] = version
	if transitionID == 0 {
		s.executeLocked(transitionID)
		return nil
	}
	if version == 0 {
		s.setPassthroughAll(true, 0)
	}
	return []Message{{Op: OpReadyForTransition, TransitionID: transitionID}}
}

// OnExecuteTransition handles op 22.
func (s *Session) OnExecuteTransition(transitionID uint16) {
	s.mu.Lock()
	defer s.unlock()
	s.executeLocked(transitionID)
}

func (s *Session) executeLocked(transitionID uint16) {
	version, ok := s.pending[transitionID]
	if !ok {
		return
	}
	delete(s.pending, transitionID)
	s.version = version
	s.lastTID = transitionID
	now := s.now()
	if version == 0 {
		s.passthroughLocked()
		return
	}
	// Our next ratchet belongs to the group a transition brings us into,
	// or, for transition 0, to the local group we are the sole member of.
	// After a reset (op 31) it is the new local group's, which no one else
	// holds: an execute left over from before keeps our current key.
	if s.nextOwn != nil && (transitionID == 0 || s.m.established != nil) {
		s.enc.setRatchet(s.nextOwn)
		s.nextOwn = nil
	}
	s.e2ee = true
	s.enc.setPassthrough(false)
	s.setPassthroughAll(false, cryptorExpiry)
	current := make(map[UserID]bool, len(s.members))
	for _, u := range s.members {
		current[u] = true
	}
	s.eachDecryptor(func(u UserID, d *decryptor) {
		if current[u] {
			d.expireOld(now, cryptorExpiry)
		} else {
			d.expireAll(now, cryptorExpiry)
		}
	})
}

func (s *Session) passthroughLocked() {
	now := s.now()
	s.enc.setPassthrough(true)
	s.setPassthroughAll(true, 0)
	s.eachDecryptor(func(_ UserID, d *decryptor) { d.expireAll(now, cryptorExpiry) })
}

// reinitLocked resets the MLS state and returns a new key package (op 26).
func (s *Session) reinitLocked() ([]Message, error) {
	s.m.reset()
	s.nextOwn = nil
	kp, err := s.m.keyPackage()
	if err != nil {
		return nil, err
	}
	if s.m.extSender != nil {
		if err := s.createPendingLocked(); err != nil {
			return nil, err
		}
	}
	return []Message{{Op: OpMLSKeyPackage, Payload: kp}}, nil
}

// createPendingLocked founds our local group and prepares our send ratchet
// for it. Our frames use it only once a transition executes it: op 21 with
// transition id 0 after op 24 epoch 1 makes us the sole member (protocol.md,
// "Sole member reset"); otherwise the commit or welcome that establishes
// the group does. Who else op 11 named is no sign of being alone.
func (s *Session) createPendingLocked() error {
	if err := s.m.createPending(); err != nil {
		return err
	}
	if s.m.pending == nil {
		return nil
	}
	secret, err := senderSecret(s.m.pending, uint64(s.userID))
	if err != nil {
		return err
	}
	r := newKeyRatchet(secret)
	clear(secret)
	s.nextOwn = r
	return nil
}

// enterEpochLocked derives every member's ratchet for the new epoch: others'
// go to their decryptors at once (new frames may arrive before the execute),
// ours waits for the transition.
func (s *Session) enterEpochLocked(transitionID uint16) ([]Message, error) {
	g := s.m.established
	if err := s.installLocked(g); err != nil {
		return s.recoverLocked(transitionID, err)
	}
	s.pending[transitionID] = s.version
	if s.version == 0 {
		s.pending[transitionID] = MaxProtocolVersion
	}
	if transitionID == 0 {
		s.executeLocked(0)
		return nil, nil
	}
	return []Message{{Op: OpReadyForTransition, TransitionID: transitionID}}, nil
}

func (s *Session) installLocked(g *group.Group) error {
	now := s.now()
	ids := roster(g)
	members := make([]UserID, 0, len(ids))
	for _, id := range ids {
		u := UserID(id)
		members = append(members, u)
		secret, err := senderSecret(g, id)
		if err != nil {
			return err
		}
		r := newKeyRatchet(secret)
		clear(secret)
		if u == s.userID {
			s.nextOwn = r
			continue
		}
		s.decryptor(u).addRatchet(r, now)
	}
	s.members = members
	return nil
}

// recoverLocked resets the session after an unusable commit or welcome (or
// sustained decryption failures, cause nil) and returns what answers it:
// op 31 for its transition, then a new key package (protocol.md, "Recovery
// from Invalid Commit or Welcome").
func (s *Session) recoverLocked(transitionID uint16, cause error) ([]Message, error) {
	s.refused.recoveries.Add(1)
	out := []Message{{Op: OpMLSInvalidCommitWelcome, TransitionID: transitionID}}
	kp, err := s.reinitLocked()
	if err != nil {
		return out, errors.Join(cause, err)
	}
	return append(out, kp...), cause
}

// Close forgets the session's keys and groups; later frames are refused
// and handlers start from scratch. Safe to call more than once.
func (s *Session) Close() {
	s.mu.Lock()
	s.m.reset()
	s.m.extSender = nil
	s.nextOwn, s.members = nil, nil
	s.unlock()
	s.enc.setRatchet(nil)
	s.enc.setPassthrough(false)
	s.decMu.Lock()
	s.decs = make(map[UserID]*decryptor)
	s.decMu.Unlock()
}
