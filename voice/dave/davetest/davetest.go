// Package davetest plays the voice gateway's part in DAVE for tests: the
// external sender that signs add and remove proposals with its own P-256
// key, and the binary framing the gateway uses. A fake voice server and the
// interop tests share it. It uses only the standard library, so it is an
// independent check of the MLS structures voice/dave produces and accepts.
package davetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// ExternalSender is the voice gateway's MLS external sender.
type ExternalSender struct {
	key      *ecdsa.PrivateKey
	identity []byte
}

// NewExternalSender creates an external sender with a fresh P-256 key.
func NewExternalSender() (*ExternalSender, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("davetest: external sender key: %w", err)
	}
	return &ExternalSender{key: k, identity: []byte("voice-gateway")}, nil
}

// Package returns the op 25 body: the ExternalSender struct, its signature
// public key (an uncompressed P-256 point) and a basic credential.
func (e *ExternalSender) Package() []byte {
	pub, _ := e.key.PublicKey.ECDH()
	var b []byte
	b = appendVector(b, pub.Bytes())
	b = binary.BigEndian.AppendUint16(b, 1) // basic
	return appendVector(b, e.identity)
}

// ProposeAdd returns an MLSMessage carrying an external add proposal for
// keyPackage (a bare KeyPackage or an MLSMessage holding one, as op 26
// carries it), and the proposal's reference for a later revoke.
func (e *ExternalSender) ProposeAdd(groupID []byte, epoch uint64, keyPackage []byte) (msg, ref []byte, err error) {
	kp := keyPackage
	if len(kp) >= 4 && binary.BigEndian.Uint16(kp) == 1 && binary.BigEndian.Uint16(kp[2:]) == 5 {
		kp = kp[4:] // MLSMessage wire_format mls_key_package
	}
	if len(kp) < 4 || binary.BigEndian.Uint16(kp) != 1 || binary.BigEndian.Uint16(kp[2:]) != 2 {
		return nil, nil, errors.New("davetest: not an MLS 1.0 ciphersuite 2 key package")
	}
	body := binary.BigEndian.AppendUint16(nil, 1) // add
	body = append(body, kp...)
	return e.propose(groupID, epoch, body)
}

// ProposeRemove returns an MLSMessage carrying an external remove proposal
// for the member at leaf, and its reference.
func (e *ExternalSender) ProposeRemove(groupID []byte, epoch uint64, leaf uint32) (msg, ref []byte, err error) {
	body := binary.BigEndian.AppendUint16(nil, 3) // remove
	body = binary.BigEndian.AppendUint32(body, leaf)
	return e.propose(groupID, epoch, body)
}

// propose frames and signs a proposal as a PublicMessage from external
// sender 0 (RFC 9420 §6).
func (e *ExternalSender) propose(groupID []byte, epoch uint64, proposal []byte) (msg, ref []byte, err error) {
	var content []byte
	content = appendVector(content, groupID)
	content = binary.BigEndian.AppendUint64(content, epoch)
	content = append(content, 2)                        // sender_type external
	content = binary.BigEndian.AppendUint32(content, 0) // sender_index
	content = appendVector(content, nil)                // authenticated_data
	content = append(content, 2)                        // content_type proposal
	content = append(content, proposal...)
	tbs := []byte{0, 1, 0, 1} // version mls10, wire_format public
	tbs = append(tbs, content...)
	sig, err := e.signWithLabel("FramedContentTBS", tbs)
	if err != nil {
		return nil, nil, err
	}
	auth := appendVector(nil, sig)
	msg = append([]byte{0, 1, 0, 1}, content...)
	msg = append(msg, auth...)
	// AuthenticatedContent = wire_format || content || auth
	ac := append([]byte{0, 1}, content...)
	ac = append(ac, auth...)
	return msg, refHash("MLS 1.0 Proposal Reference", ac), nil
}

func (e *ExternalSender) signWithLabel(label string, content []byte) ([]byte, error) {
	var sc []byte
	sc = appendVector(sc, []byte("MLS 1.0 "+label))
	sc = appendVector(sc, content)
	h := sha256.Sum256(sc)
	sig, err := ecdsa.SignASN1(rand.Reader, e.key, h[:])
	if err != nil {
		return nil, fmt.Errorf("davetest: signing: %w", err)
	}
	return sig, nil
}

func refHash(label string, value []byte) []byte {
	var in []byte
	in = appendVector(in, []byte(label))
	in = appendVector(in, value)
	h := sha256.Sum256(in)
	return h[:]
}

// ProposalsAppend returns an op 27 body appending the given proposal messages.
func ProposalsAppend(msgs ...[]byte) []byte {
	var all []byte
	for _, m := range msgs {
		all = append(all, m...)
	}
	return appendVector([]byte{0}, all)
}

// ProposalsRevoke returns an op 27 body revoking proposals by reference.
func ProposalsRevoke(refs ...[]byte) []byte {
	var all []byte
	for _, r := range refs {
		all = appendVector(all, r)
	}
	return appendVector([]byte{1}, all)
}

// Binary frames a server → client binary message: sequence number, opcode,
// and for ops 29 and 30 the transition id, then the body.
func Binary(seq uint16, op uint8, transitionID uint16, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, seq)
	b = append(b, op)
	if op == 29 || op == 30 {
		b = binary.BigEndian.AppendUint16(b, transitionID)
	}
	return append(b, body...)
}

// appendVector appends an MLS variable-size vector (RFC 9420 §2.1.2).
func appendVector(b, v []byte) []byte {
	n := len(v)
	switch {
	case n < 1<<6:
		b = append(b, byte(n))
	case n < 1<<14:
		b = binary.BigEndian.AppendUint16(b, uint16(n)|0x4000)
	default:
		b = binary.BigEndian.AppendUint32(b, uint32(n)|0x80000000)
	}
	return append(b, v...)
}

// Roster tracks which user occupies which leaf of the group, as the voice
// gateway must to address remove proposals: an add takes the leftmost blank
// leaf, a remove blanks one and trailing blanks are dropped (RFC 9420 §12.1).
type Roster struct {
	leaves []uint64 // 0: blank
}

// Add places user at the leaf an add proposal will give them, returning it.
func (r *Roster) Add(user uint64) uint32 {
	for i, u := range r.leaves {
		if u == 0 {
			r.leaves[i] = user
			return uint32(i)
		}
	}
	r.leaves = append(r.leaves, user)
	return uint32(len(r.leaves) - 1)
}

// Remove blanks user's leaf and returns it.
func (r *Roster) Remove(user uint64) (uint32, bool) {
	for i, u := range r.leaves {
		if u == user {
			r.leaves[i] = 0
			for len(r.leaves) > 0 && r.leaves[len(r.leaves)-1] == 0 {
				r.leaves = r.leaves[:len(r.leaves)-1]
			}
			return uint32(i), true
		}
	}
	return 0, false
}

// Reset empties the roster (a new group).
func (r *Roster) Reset() { r.leaves = nil }

// Leaf returns user's leaf.
func (r *Roster) Leaf(user uint64) (uint32, bool) {
	for i, u := range r.leaves {
		if u == user {
			return uint32(i), true
		}
	}
	return 0, false
}
