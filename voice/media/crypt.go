package media

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/crypto/chacha20poly1305"
)

// Mode is a transport encryption mode.
type Mode string

// The rtpsize modes Discord offers: AES-256-GCM preferred, XChaCha20-Poly1305
// the fallback every voice server supports.
const (
	ModeAES256GCM Mode = "aead_aes256_gcm_rtpsize"
	ModeXChaCha   Mode = "aead_xchacha20_poly1305_rtpsize"
)

// ChooseMode returns the mode we prefer among those the server offers.
func ChooseMode(offered []string) (Mode, bool) {
	have := map[string]bool{}
	for _, m := range offered {
		have[m] = true
	}
	for _, m := range []Mode{ModeAES256GCM, ModeXChaCha} {
		if have[string(m)] {
			return m, true
		}
	}
	return "", false
}

// Transport seals and opens rtpsize packets under one secret key. Opens
// counts every AEAD open it performs, including failed ones: it is the only
// path to the key, so the count cannot miss a decryption.
type Transport struct {
	aead  cipher.AEAD
	nonce atomic.Uint32
	opens atomic.Uint64
}

// NewTransport returns a transport for mode with key (32 bytes).
func NewTransport(mode Mode, key []byte) (*Transport, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("transport key is %d bytes, want 32", len(key))
	}
	var (
		a   cipher.AEAD
		err error
	)
	switch mode {
	case ModeAES256GCM:
		var b cipher.Block
		if b, err = aes.NewCipher(key); err == nil {
			a, err = cipher.NewGCM(b)
		}
	case ModeXChaCha:
		a, err = chacha20poly1305.NewX(key)
	default:
		return nil, fmt.Errorf("unsupported encryption mode %q", mode)
	}
	if err != nil {
		return nil, fmt.Errorf("transport cipher: %w", err)
	}
	return &Transport{aead: a}, nil
}

// Opens reports how many AEAD opens (decryptions) this transport performed.
func (t *Transport) Opens() uint64 { return t.opens.Load() }

// Seal appends to dst the packet for header (the AAD, sent in clear),
// payload encrypted, and the 4-byte nonce suffix. dst must not overlap payload.
func (t *Transport) Seal(dst, header, payload []byte) []byte {
	var nonce [chacha20poly1305.NonceSizeX]byte
	n := t.nonce.Add(1)
	binary.BigEndian.PutUint32(nonce[:], n)
	dst = append(dst, header...)
	dst = t.aead.Seal(dst, nonce[:t.aead.NonceSize()], payload, header)
	return binary.BigEndian.AppendUint32(dst, n)
}

var errOpen = errors.New("transport decryption failed")

// Open decrypts packet whose clear header h was parsed by ParseHeader,
// appending the plaintext (extension body and padding removed) to dst.
func (t *Transport) Open(dst []byte, h Header, packet []byte) ([]byte, error) {
	var nonce [chacha20poly1305.NonceSizeX]byte
	copy(nonce[:nonceSize], packet[len(packet)-nonceSize:])
	t.opens.Add(1)
	start := len(dst)
	out, err := t.aead.Open(dst, nonce[:t.aead.NonceSize()], packet[h.Size:len(packet)-nonceSize], packet[:h.Size])
	if err != nil {
		return dst, errOpen
	}
	plain, ok := stripPlaintext(h, out[start:])
	if !ok {
		return dst, ErrMalformed
	}
	return append(dst[:start], plain...), nil
}
