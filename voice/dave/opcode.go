package dave

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Opcode is a voice gateway opcode DAVE uses.
type Opcode uint8

// The voice gateway opcodes of protocol.md ("Voice Gateway Opcodes").
const (
	OpSelectProtocolAck       Opcode = 4
	OpClientsConnect          Opcode = 11
	OpClientDisconnect        Opcode = 13
	OpPrepareTransition       Opcode = 21 // JSON, server → client
	OpExecuteTransition       Opcode = 22 // JSON, server → client
	OpReadyForTransition      Opcode = 23 // JSON, client → server
	OpPrepareEpoch            Opcode = 24 // JSON, server → client
	OpMLSExternalSender       Opcode = 25 // binary, server → client
	OpMLSKeyPackage           Opcode = 26 // binary, client → server
	OpMLSProposals            Opcode = 27 // binary, server → client
	OpMLSCommitWelcome        Opcode = 28 // binary, client → server
	OpMLSAnnounceCommit       Opcode = 29 // binary, server → client
	OpMLSWelcome              Opcode = 30 // binary, server → client
	OpMLSInvalidCommitWelcome Opcode = 31 // JSON, client → server
)

// Message is something to send to the voice gateway. JSON opcodes (23, 31)
// carry a transition id; binary opcodes (26, 28) carry their payload, the
// bytes after the opcode byte.
type Message struct {
	Op           Opcode
	TransitionID uint16
	Payload      []byte
}

// Binary reports whether the message goes out as a binary websocket frame.
func (m Message) Binary() bool { return m.Op == OpMLSKeyPackage || m.Op == OpMLSCommitWelcome }

// Encode returns the websocket frame body: for binary opcodes the opcode
// byte then the payload (clients send no sequence number), for JSON opcodes
// {"op":N,"d":{"transition_id":T}}.
func (m Message) Encode() []byte {
	if m.Binary() {
		out := make([]byte, 0, 1+len(m.Payload))
		return append(append(out, byte(m.Op)), m.Payload...)
	}
	b, _ := json.Marshal(struct {
		Op int `json:"op"`
		D  struct {
			TransitionID uint16 `json:"transition_id"`
		} `json:"d"`
	}{Op: int(m.Op), D: struct {
		TransitionID uint16 `json:"transition_id"`
	}{m.TransitionID}})
	return b
}

// BinaryMessage is a parsed server → client binary DAVE message.
type BinaryMessage struct {
	Seq          uint16
	Op           Opcode
	TransitionID uint16 // ops 29 and 30
	// Payload is what follows the opcode (and the transition id for 29/30):
	// the ExternalSender (25), the proposals operation (27), the MLSMessage
	// commit (29) or the Welcome (30).
	Payload []byte
}

// ErrBadOpcode reports a binary message that is not a DAVE server message.
var ErrBadOpcode = errors.New("dave: not a DAVE binary message")

// ParseBinary parses a server → client binary message: uint16 sequence
// number, opcode, then the opcode's body.
func ParseBinary(msg []byte) (BinaryMessage, error) {
	if len(msg) < 3 {
		return BinaryMessage{}, fmt.Errorf("%w: %d bytes", ErrBadOpcode, len(msg))
	}
	b := BinaryMessage{Seq: binary.BigEndian.Uint16(msg), Op: Opcode(msg[2]), Payload: msg[3:]}
	switch b.Op {
	case OpMLSExternalSender, OpMLSProposals:
	case OpMLSAnnounceCommit, OpMLSWelcome:
		if len(b.Payload) < 2 {
			return BinaryMessage{}, fmt.Errorf("%w: opcode %d without a transition id", ErrBadMessage, b.Op)
		}
		b.TransitionID = binary.BigEndian.Uint16(b.Payload)
		b.Payload = b.Payload[2:]
	default:
		return BinaryMessage{}, fmt.Errorf("%w: opcode %d", ErrBadOpcode, b.Op)
	}
	if len(b.Payload) == 0 {
		return BinaryMessage{}, fmt.Errorf("%w: opcode %d with an empty body", ErrBadMessage, b.Op)
	}
	return b, nil
}

const (
	proposalsAppend = 0
	proposalsRevoke = 1
)

// parseProposals splits an op 27 body into its operation and its items: the
// MLSMessages of an append or the proposal refs of a revoke. Items are
// views into payload; their count is bounded by the payload's size.
func parseProposals(payload []byte) (byte, [][]byte, error) {
	if len(payload) < 1 {
		return 0, nil, fmt.Errorf("%w: empty proposals", ErrBadMessage)
	}
	op := payload[0]
	if op != proposalsAppend && op != proposalsRevoke {
		return 0, nil, fmt.Errorf("%w: proposals operation %d", ErrBadMessage, op)
	}
	vec, rest, err := readVector(payload[1:])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: proposals vector: %w", ErrBadMessage, err)
	}
	if len(rest) != 0 {
		return 0, nil, fmt.Errorf("%w: %d bytes after the proposals vector", ErrBadMessage, len(rest))
	}
	var items [][]byte
	for len(vec) > 0 {
		var item []byte
		if op == proposalsRevoke {
			item, vec, err = readVector(vec)
		} else {
			var n int
			n, err = mlsMessageLen(vec)
			item, vec = vec[:n:n], vec[n:]
		}
		if err != nil {
			return 0, nil, fmt.Errorf("%w: proposal %d: %w", ErrBadMessage, len(items), err)
		}
		items = append(items, item)
	}
	return op, items, nil
}

var (
	errTruncated  = errors.New("truncated")
	errBadVarint  = errors.New("invalid vector length")
	errUnexpected = errors.New("unexpected content")
)

// readVarint reads an MLS variable-size length (RFC 9420 §2.1.2).
func readVarint(b []byte) (int, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errTruncated
	}
	switch b[0] >> 6 {
	case 0:
		return int(b[0]), b[1:], nil
	case 1:
		if len(b) < 2 {
			return 0, nil, errTruncated
		}
		return int(binary.BigEndian.Uint16(b) & 0x3FFF), b[2:], nil
	case 2:
		if len(b) < 4 {
			return 0, nil, errTruncated
		}
		return int(binary.BigEndian.Uint32(b) & 0x3FFFFFFF), b[4:], nil
	default:
		return 0, nil, errBadVarint
	}
}

// readVector reads a variable-size vector, returning its body and the rest.
// A declared length larger than the input is an error, never an allocation.
func readVector(b []byte) ([]byte, []byte, error) {
	n, rest, err := readVarint(b)
	if err != nil {
		return nil, nil, err
	}
	if n > len(rest) {
		return nil, nil, fmt.Errorf("%w: vector of %d bytes, %d left", errTruncated, n, len(rest))
	}
	return rest[:n:n], rest[n:], nil
}

func skipVector(b []byte) ([]byte, error) {
	_, rest, err := readVector(b)
	return rest, err
}

func skip(b []byte, n int) ([]byte, error) {
	if len(b) < n {
		return nil, errTruncated
	}
	return b[n:], nil
}

// mlsMessageLen returns the length of the MLSMessage PublicMessage carrying a
// proposal or commit at the start of b, walking its structure (RFC 9420 §6)
// without interpreting it, so that concatenated messages can be split.
func mlsMessageLen(b []byte) (int, error) {
	total := len(b)
	if len(b) < 4 {
		return 0, errTruncated
	}
	if binary.BigEndian.Uint16(b) != 1 || binary.BigEndian.Uint16(b[2:]) != 1 {
		return 0, fmt.Errorf("%w: not an MLS 1.0 public message", errUnexpected)
	}
	b = b[4:]
	var err error
	if b, err = skipVector(b); err != nil { // group_id
		return 0, err
	}
	if b, err = skip(b, 8); err != nil { // epoch
		return 0, err
	}
	if len(b) < 1 {
		return 0, errTruncated
	}
	senderType := b[0]
	b = b[1:]
	switch senderType {
	case 1, 2: // member(leaf_index), external(sender_index)
		if b, err = skip(b, 4); err != nil {
			return 0, err
		}
	case 3, 4: // new_member_proposal, new_member_commit
	default:
		return 0, fmt.Errorf("%w: sender type %d", errUnexpected, senderType)
	}
	if b, err = skipVector(b); err != nil { // authenticated_data
		return 0, err
	}
	if len(b) < 1 {
		return 0, errTruncated
	}
	contentType := b[0]
	b = b[1:]
	switch contentType {
	case 2: // proposal
		if b, err = skipProposal(b); err != nil {
			return 0, err
		}
	case 3: // commit
		if b, err = skipCommit(b); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("%w: content type %d where a proposal or commit was expected", errUnexpected, contentType)
	}
	if b, err = skipVector(b); err != nil { // signature
		return 0, err
	}
	if contentType == 3 { // confirmation_tag
		if b, err = skipVector(b); err != nil {
			return 0, err
		}
	}
	if senderType == 1 { // membership_tag
		if b, err = skipVector(b); err != nil {
			return 0, err
		}
	}
	return total - len(b), nil
}

// skipCommit skips a Commit: proposals<V>, optional<UpdatePath>.
func skipCommit(b []byte) ([]byte, error) {
	var err error
	if b, err = skipVector(b); err != nil {
		return nil, err
	}
	if len(b) < 1 {
		return nil, errTruncated
	}
	present := b[0]
	b = b[1:]
	switch present {
	case 0:
		return b, nil
	case 1:
		if b, err = skipLeafNode(b); err != nil {
			return nil, err
		}
		return skipVector(b) // nodes
	default:
		return nil, fmt.Errorf("%w: optional flag %d", errUnexpected, present)
	}
}

// SplitCommitWelcome splits an op 28 body (an MLSMessage commit, then the
// Welcome when the commit adds members) into its two parts; welcome is nil
// when absent. A voice gateway (or a fake one) needs this to relay them.
func SplitCommitWelcome(payload []byte) (commit, welcome []byte, err error) {
	n, err := mlsMessageLen(payload)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: commit: %w", ErrBadMessage, err)
	}
	commit = payload[:n:n]
	if n < len(payload) {
		welcome = payload[n:]
	}
	return commit, welcome, nil
}

// skipProposal skips an add or remove Proposal, the only types DAVE allows.
func skipProposal(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errTruncated
	}
	typ := binary.BigEndian.Uint16(b)
	b = b[2:]
	switch typ {
	case 1: // add: KeyPackage
		return skipKeyPackage(b)
	case 3: // remove: uint32 removed
		return skip(b, 4)
	default:
		return nil, fmt.Errorf("%w: proposal type %d", errUnexpected, typ)
	}
}

// skipKeyPackage skips a KeyPackage (RFC 9420 §10).
func skipKeyPackage(b []byte) ([]byte, error) {
	var err error
	if b, err = skip(b, 4); err != nil { // version, cipher_suite
		return nil, err
	}
	if b, err = skipVector(b); err != nil { // init_key
		return nil, err
	}
	if b, err = skipLeafNode(b); err != nil {
		return nil, err
	}
	if b, err = skipVector(b); err != nil { // extensions
		return nil, err
	}
	return skipVector(b) // signature
}

// skipLeafNode skips a LeafNode (RFC 9420 §7.2).
func skipLeafNode(b []byte) ([]byte, error) {
	var err error
	for i := 0; i < 2; i++ { // encryption_key, signature_key
		if b, err = skipVector(b); err != nil {
			return nil, err
		}
	}
	if b, err = skipCredential(b); err != nil {
		return nil, err
	}
	for i := 0; i < 5; i++ { // capabilities: versions, cipher_suites, extensions, proposals, credentials
		if b, err = skipVector(b); err != nil {
			return nil, err
		}
	}
	if len(b) < 1 {
		return nil, errTruncated
	}
	source := b[0]
	b = b[1:]
	switch source {
	case 1: // key_package: lifetime
		if b, err = skip(b, 16); err != nil {
			return nil, err
		}
	case 2: // update
	case 3: // commit: parent_hash
		if b, err = skipVector(b); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: leaf node source %d", errUnexpected, source)
	}
	if b, err = skipVector(b); err != nil { // extensions
		return nil, err
	}
	return skipVector(b) // signature
}

func skipCredential(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errTruncated
	}
	typ := binary.BigEndian.Uint16(b)
	b = b[2:]
	switch typ {
	case 1: // basic: identity
		return skipVector(b)
	case 2: // x509: certificates<V> of Certificate{opaque cert_data<V>}
		return skipVector(b)
	default:
		return nil, fmt.Errorf("%w: credential type %d", errUnexpected, typ)
	}
}
