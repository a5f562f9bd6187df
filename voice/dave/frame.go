package dave

import (
	"errors"
	"fmt"
	"math"
)

// Layout constants of a DAVE protocol frame (protocol.md, "Payload Format").
const (
	tagSize        = 8 // truncated AES-128-GCM tag
	markerSize     = 2
	suppSizeSize   = 1
	minSuppSize    = tagSize + suppSizeSize + markerSize
	marker         = 0xFA // both bytes of the 0xFAFA magic marker
	generationBits = 24   // the generation is the top byte of the 32-bit nonce
	maxRanges      = 64   // a supplemental section is < 256 bytes, so at most ~120 ranges fit; bound it lower
)

// Range is an unencrypted byte range of an interleaved protocol frame.
type Range struct {
	Offset, Size uint64
}

// Frame is a parsed protocol frame: views into the frame it was parsed from.
type Frame struct {
	// Media is the interleaved media part (everything before the tag).
	Media []byte
	// Tag is the 8-byte truncated authentication tag.
	Tag []byte
	// Nonce is the 32-bit truncated synchronisation nonce; its top byte is
	// the key ratchet generation.
	Nonce uint32
	// Ranges are the unencrypted ranges of Media, ascending and disjoint.
	Ranges []Range
}

// Generation returns the (unwrapped) key generation carried in the nonce.
func (f *Frame) Generation() uint32 { return f.Nonce >> generationBits }

// Errors a frame parse returns; callers tell them apart with errors.Is.
var (
	ErrNotProtocolFrame = errors.New("dave: not a protocol frame")
	ErrMalformedFrame   = errors.New("dave: malformed protocol frame")
)

// LooksLikeFrame reports whether frame ends with the 0xFAFA magic marker, the
// cheap first step of the protocol frame check.
func LooksLikeFrame(frame []byte) bool {
	n := len(frame)
	return n >= minSuppSize && frame[n-1] == marker && frame[n-2] == marker
}

// parse parses the supplemental data of a protocol frame into f, without
// any cryptography and reusing f.Ranges' storage. It returns
// ErrNotProtocolFrame when the frame fails the protocol frame check's
// marker test, and ErrMalformedFrame (wrapped with a reason) when the
// marker is present but the supplemental data is invalid. It never
// allocates more than a bounded slice of ranges.
func (f *Frame) parse(frame []byte) error {
	ranges := f.Ranges[:0]
	*f = Frame{}
	if !LooksLikeFrame(frame) {
		return ErrNotProtocolFrame
	}
	n := len(frame)
	supp := int(frame[n-markerSize-suppSizeSize])
	if supp < minSuppSize {
		return fmt.Errorf("%w: supplemental size %d below minimum %d", ErrMalformedFrame, supp, minSuppSize)
	}
	if supp > n {
		return fmt.Errorf("%w: supplemental size %d exceeds frame size %d", ErrMalformedFrame, supp, n)
	}
	start := n - supp
	f.Media, f.Tag, f.Ranges = frame[:start:start], frame[start:start+tagSize:start+tagSize], ranges
	rest := frame[start+tagSize : n-markerSize-suppSizeSize]
	nonce, k, err := readULEB128(rest)
	if err != nil {
		return fmt.Errorf("%w: nonce: %w", ErrMalformedFrame, err)
	}
	if nonce > math.MaxUint32 {
		return fmt.Errorf("%w: nonce exceeds 32 bits", ErrMalformedFrame)
	}
	f.Nonce = uint32(nonce)
	rest = rest[k:]
	var prevEnd uint64
	mediaLen := uint64(len(f.Media))
	for len(rest) > 0 {
		if len(f.Ranges) == maxRanges {
			return fmt.Errorf("%w: more than %d unencrypted ranges", ErrMalformedFrame, maxRanges)
		}
		off, k1, err := readULEB128(rest)
		if err != nil {
			return fmt.Errorf("%w: range offset: %w", ErrMalformedFrame, err)
		}
		rest = rest[k1:]
		size, k2, err := readULEB128(rest)
		if err != nil {
			return fmt.Errorf("%w: range size: %w", ErrMalformedFrame, err)
		}
		rest = rest[k2:]
		if off < prevEnd {
			return fmt.Errorf("%w: unencrypted ranges overlap or are out of order", ErrMalformedFrame)
		}
		if off > mediaLen || size > mediaLen-off {
			return fmt.Errorf("%w: unencrypted range exceeds the media frame", ErrMalformedFrame)
		}
		prevEnd = off + size
		f.Ranges = append(f.Ranges, Range{Offset: off, Size: size})
	}
	return nil
}

var (
	errULEBTruncated = errors.New("truncated ULEB128")
	errULEBOverflow  = errors.New("ULEB128 overflows 64 bits")
)

// readULEB128 reads one unsigned LEB128 value from b, returning it and the
// number of bytes consumed. At most 10 bytes are read.
func readULEB128(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == 9 {
			if c > 1 {
				return 0, 0, errULEBOverflow
			}
			return v | uint64(c)<<63, 10, nil
		}
		v |= uint64(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errULEBTruncated
}

// appendULEB128 appends v in unsigned LEB128 to b.
func appendULEB128(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// uleb128Size returns the encoded size of v.
func uleb128Size(v uint64) int {
	n := 1
	for v >= 0x80 {
		n++
		v >>= 7
	}
	return n
}
