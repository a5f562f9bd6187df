package dave

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	keySize    = 16 // AES-128
	secretSize = 32 // SHA-256 output, the MLS ciphersuite 2 Nh
	// senderKeyLabel and the exporter length are fixed by protocol.md
	// ("Sender Key Derivation").
	senderKeyLabel = "Discord Secure Frames v0"
	baseSecretSize = 16
)

var errGenerationErased = errors.New("dave: key generation already erased")

// keyRatchet derives the per-generation media keys of one sender in one epoch,
// the way MLS derives its sender ratchet (RFC 9420 §9.1): from each
// generation's secret come that generation's key and the next secret. It
// keeps the keys it has handed out until erased, and forgets secrets as soon
// as it has moved past them.
type keyRatchet struct {
	secret []byte // secret of generation next
	next   uint32
	keys   map[uint32][]byte
}

func newKeyRatchet(baseSecret []byte) *keyRatchet {
	return &keyRatchet{secret: append([]byte(nil), baseSecret...), keys: make(map[uint32][]byte)}
}

// key returns the media key for generation gen, ratcheting forward as needed.
// Callers bound gen against the newest generation they have seen, so the
// forward work stays small.
func (r *keyRatchet) key(gen uint32) ([]byte, error) {
	if k, ok := r.keys[gen]; ok {
		return k, nil
	}
	if gen < r.next {
		return nil, errGenerationErased
	}
	for r.next <= gen {
		ctx := binary.BigEndian.AppendUint32(nil, r.next)
		k, err := expandWithLabel(r.secret, "key", ctx, keySize)
		if err != nil {
			return nil, err
		}
		s, err := expandWithLabel(r.secret, "secret", ctx, secretSize)
		if err != nil {
			return nil, err
		}
		clear(r.secret)
		r.secret = s
		r.keys[r.next] = k
		r.next++
	}
	return r.keys[gen], nil
}

// erase forgets the key of generation gen.
func (r *keyRatchet) erase(gen uint32) {
	if k, ok := r.keys[gen]; ok {
		clear(k)
		delete(r.keys, gen)
	}
}

// expandWithLabel is MLS's ExpandWithLabel (RFC 9420 §8) over HKDF-SHA256:
// the info is struct{uint16 length; opaque label<V> = "MLS 1.0 "+label;
// opaque context<V>}.
func expandWithLabel(secret []byte, label string, context []byte, length int) ([]byte, error) {
	full := "MLS 1.0 " + label
	info := make([]byte, 0, 2+2+len(full)+2+len(context))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = appendVarint(info, len(full))
	info = append(info, full...)
	info = appendVarint(info, len(context))
	info = append(info, context...)
	out, err := hkdf.Expand(sha256.New, secret, string(info), length)
	if err != nil {
		return nil, fmt.Errorf("dave: deriving a ratchet key: %w", err)
	}
	return out, nil
}

// appendVarint appends an MLS variable-size vector length (RFC 9420 §2.1.2).
func appendVarint(b []byte, n int) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return binary.BigEndian.AppendUint16(b, uint16(n)|0x4000)
	default:
		return binary.BigEndian.AppendUint32(b, uint32(n)|0x80000000)
	}
}
