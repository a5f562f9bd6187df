package media

import (
	"encoding/binary"
	"errors"
)

// PayloadTypeOpus is the RTP payload type Discord uses for Opus.
const PayloadTypeOpus = 120

// SamplesPerFrame is the RTP timestamp step of one 20 ms frame at 48 kHz.
const SamplesPerFrame = 960

// nonceSize is the size of the nonce suffix an rtpsize packet carries.
const nonceSize = 4

// Header is the clear part of an RTP packet as the rtpsize modes use it.
type Header struct {
	Padding     bool
	Extension   bool
	PayloadType uint8
	Sequence    uint16
	Timestamp   uint32
	SSRC        uint32
	// Size is the length of the unencrypted header: 12 bytes, the CSRCs and,
	// with an extension, its 4-byte profile/length word. It is the AAD.
	Size int
	// ExtensionWords is the extension body's length in 32-bit words; the body
	// itself is encrypted and is stripped from the plaintext.
	ExtensionWords int
}

// ErrMalformed reports a packet that is not a well-formed rtpsize RTP packet.
var ErrMalformed = errors.New("malformed RTP packet")

// ParseHeader parses the clear RTP header of packet. It never reads past the
// slice and reports ErrMalformed for anything that cannot hold an encrypted
// payload, its tag and the nonce suffix.
func ParseHeader(packet []byte) (Header, error) {
	if len(packet) < 12 {
		return Header{}, ErrMalformed
	}
	b0 := packet[0]
	if b0>>6 != 2 {
		return Header{}, ErrMalformed
	}
	h := Header{
		Padding:     b0&0x20 != 0,
		Extension:   b0&0x10 != 0,
		PayloadType: packet[1] & 0x7f,
		Sequence:    binary.BigEndian.Uint16(packet[2:]),
		Timestamp:   binary.BigEndian.Uint32(packet[4:]),
		SSRC:        binary.BigEndian.Uint32(packet[8:]),
	}
	h.Size = 12 + 4*int(b0&0x0f)
	if h.Extension {
		if len(packet) < h.Size+4 {
			return Header{}, ErrMalformed
		}
		h.ExtensionWords = int(binary.BigEndian.Uint16(packet[h.Size+2:]))
		h.Size += 4
	}
	// Room for at least the tag and the nonce suffix.
	if len(packet) < h.Size+16+nonceSize {
		return Header{}, ErrMalformed
	}
	return h, nil
}

// appendHeader appends a 12-byte RTP header for an Opus packet.
func appendHeader(dst []byte, seq uint16, ts, ssrc uint32) []byte {
	dst = append(dst, 0x80, PayloadTypeOpus)
	dst = binary.BigEndian.AppendUint16(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, ts)
	return binary.BigEndian.AppendUint32(dst, ssrc)
}

// stripPlaintext removes the encrypted extension body and RTP padding from a
// decrypted payload, reporting false when their lengths do not fit.
func stripPlaintext(h Header, plain []byte) ([]byte, bool) {
	if h.Padding {
		if len(plain) == 0 {
			return nil, false
		}
		n := int(plain[len(plain)-1])
		if n == 0 || n > len(plain) {
			return nil, false
		}
		plain = plain[:len(plain)-n]
	}
	if h.Extension {
		n := 4 * h.ExtensionWords
		if n > len(plain) {
			return nil, false
		}
		plain = plain[n:]
	}
	return plain, true
}
