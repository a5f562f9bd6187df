package voicetest

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"

	"golang.org/x/crypto/chacha20poly1305"
)

// The fake's transport crypto is written apart from voice/media's on
// purpose: a test that relays through it checks the client against a second
// reading of the rtpsize format, not against itself.

type transport struct {
	aead  cipher.AEAD
	nonce uint32 // guarded by the owning session's mutex
}

func newTransport(mode string, key []byte) (*transport, error) {
	switch mode {
	case "aead_aes256_gcm_rtpsize":
		b, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(b)
		return &transport{aead: g}, err
	case "aead_xchacha20_poly1305_rtpsize":
		a, err := chacha20poly1305.NewX(key)
		return &transport{aead: a}, err
	}
	return nil, errors.New("unknown mode")
}

// clearLen is the rtpsize AAD length: fixed header, CSRCs, extension word.
func clearLen(p []byte) (int, bool) {
	if len(p) < 12 || p[0]>>6 != 2 {
		return 0, false
	}
	n := 12 + 4*int(p[0]&0x0f)
	if p[0]&0x10 != 0 {
		n += 4
	}
	if len(p) < n+16+4 {
		return 0, false
	}
	return n, true
}

// open returns the clear header and the plaintext (extension body included).
func (t *transport) open(p []byte) (hdr, plain []byte, err error) {
	n, ok := clearLen(p)
	if !ok {
		return nil, nil, errors.New("short packet")
	}
	nonce := make([]byte, t.aead.NonceSize())
	copy(nonce, p[len(p)-4:])
	plain, err = t.aead.Open(nil, nonce, p[n:len(p)-4], p[:n])
	return p[:n], plain, err
}

func (t *transport) seal(hdr, plain []byte) []byte {
	t.nonce++
	nonce := make([]byte, t.aead.NonceSize())
	binary.BigEndian.PutUint32(nonce, t.nonce)
	out := append([]byte(nil), hdr...)
	out = t.aead.Seal(out, nonce, plain, hdr)
	return binary.BigEndian.AppendUint32(out, t.nonce)
}
