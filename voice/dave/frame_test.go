package dave

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

func TestULEB128RoundTripAndLimits(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, 1 << 24, 1<<32 - 1, 1<<63 + 5, ^uint64(0)} {
		b := appendULEB128(nil, v)
		if len(b) != uleb128Size(v) {
			t.Fatalf("size of %d: %d bytes written, uleb128Size says %d", v, len(b), uleb128Size(v))
		}
		got, n, err := readULEB128(b)
		if err != nil || got != v || n != len(b) {
			t.Fatalf("read %x: %d, %d, %v; want %d", b, got, n, err, v)
		}
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, errULEBTruncated},
		{"unterminated", []byte{0x80, 0x80}, errULEBTruncated},
		{"eleven bytes", bytes.Repeat([]byte{0xFF}, 11), errULEBOverflow},
		{"tenth byte too big", append(bytes.Repeat([]byte{0xFF}, 9), 0x02), errULEBOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := readULEB128(tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// frameWith builds media || tag || nonce || ranges || size || marker.
func frameWith(media []byte, nonce uint64, ranges []Range, rawTail []byte) []byte {
	f := append([]byte(nil), media...)
	f = append(f, make([]byte, tagSize)...)
	supp := f[len(media):]
	_ = supp
	tail := appendULEB128(nil, nonce)
	for _, r := range ranges {
		tail = appendULEB128(tail, r.Offset)
		tail = appendULEB128(tail, r.Size)
	}
	tail = append(tail, rawTail...)
	f = append(f, tail...)
	f = append(f, byte(tagSize+len(tail)+3), 0xFA, 0xFA)
	return f
}

// ParseFrame is parse into a fresh Frame, for the tests (the cryptor
// parses into its own).
func ParseFrame(frame []byte) (Frame, error) {
	var f Frame
	if err := f.parse(frame); err != nil {
		return Frame{}, err
	}
	return f, nil
}

func TestParseFrame(t *testing.T) {
	media := bytes.Repeat([]byte{0x11}, 20)
	tests := []struct {
		name    string
		frame   []byte
		wantErr error
		ranges  int
	}{
		{"opus, no ranges", frameWith(media, 5, nil, nil), nil, 0},
		{"two ranges", frameWith(media, 1<<24+3, []Range{{0, 2}, {10, 3}}, nil), nil, 2},
		{"range to the end", frameWith(media, 1, []Range{{18, 2}}, nil), nil, 1},
		{"no marker", append(bytes.Repeat([]byte{1}, 20), 0xFA, 0xFB), ErrNotProtocolFrame, 0},
		{"too short", []byte{0xFA, 0xFA}, ErrNotProtocolFrame, 0},
		{"silence", []byte{0xF8, 0xFF, 0xFE}, ErrNotProtocolFrame, 0},
		{"size below minimum", append(bytes.Repeat([]byte{1}, 20), 5, 0xFA, 0xFA), ErrMalformedFrame, 0},
		{"size above frame", append(bytes.Repeat([]byte{1}, 20), 200, 0xFA, 0xFA), ErrMalformedFrame, 0},
		{"nonce over 32 bits", frameWith(media, 1<<33, nil, nil), ErrMalformedFrame, 0},
		{"unterminated nonce", frameWith(media, 0, nil, []byte{0x80}), ErrMalformedFrame, 0},
		{"overlapping ranges", frameWith(media, 1, []Range{{0, 5}, {4, 1}}, nil), ErrMalformedFrame, 0},
		{"out of order ranges", frameWith(media, 1, []Range{{10, 1}, {2, 1}}, nil), ErrMalformedFrame, 0},
		{"range past media", frameWith(media, 1, []Range{{15, 6}}, nil), ErrMalformedFrame, 0},
		{"absurd range size", frameWith(media, 1, []Range{{1, ^uint64(0)}}, nil), ErrMalformedFrame, 0},
		{"absurd range offset", frameWith(media, 1, []Range{{^uint64(0), 1}}, nil), ErrMalformedFrame, 0},
		{"half a range", frameWith(media, 1, nil, []byte{0x01}), ErrMalformedFrame, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFrame(tt.frame)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseFrame: %v, want %v", err, tt.wantErr)
			}
			if err == nil && len(f.Ranges) != tt.ranges {
				t.Fatalf("%d ranges, want %d", len(f.Ranges), tt.ranges)
			}
		})
	}
}

// TestRatchetKnownAnswer pins the ratchet to MLS's ExpandWithLabel: the
// generation-0 key of an all-zero base secret, computed independently
// (HKDF-Expand-SHA256 with info 0010 0f "MLS 1.0 key" 04 00000000).
func TestRatchetKnownAnswer(t *testing.T) {
	r := newKeyRatchet(make([]byte, 16))
	k0, err := r.key(0)
	if err != nil {
		t.Fatal(err)
	}
	want := expandReference(t, make([]byte, 16), "MLS 1.0 key", []byte{0, 0, 0, 0}, 16)
	if !bytes.Equal(k0, want) {
		t.Fatalf("generation 0 key %x, want %x", k0, want)
	}
	k3, err := r.key(3)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]byte, 16)
	for g := 0; g < 3; g++ {
		s = expandReference(t, s, "MLS 1.0 secret", []byte{0, 0, 0, byte(g)}, 32)
	}
	if want := expandReference(t, s, "MLS 1.0 key", []byte{0, 0, 0, 3}, 16); !bytes.Equal(k3, want) {
		t.Fatalf("generation 3 key %x, want %x", k3, want)
	}
	r.erase(0)
	if _, err := r.key(0); !errors.Is(err, errGenerationErased) {
		t.Fatalf("erased generation: %v", err)
	}
}

func TestCryptorMatchesFullGCM(t *testing.T) {
	key, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	c, err := newCryptor(key)
	if err != nil {
		t.Fatal(err)
	}
	pt := bytes.Repeat([]byte("opus"), 30)
	sealed := c.seal(nil, 7, pt, []byte("hdr"))
	full := c.aead.Seal(nil, c.fullNonce(7), pt, []byte("hdr"))
	if !bytes.Equal(sealed, full[:len(pt)+8]) {
		t.Fatal("truncated seal is not the first 8 tag bytes of AES-GCM")
	}
	scratch := make([]byte, 0, 256)
	for _, aad := range [][]byte{nil, []byte("hdr"), bytes.Repeat([]byte{9}, 17)} {
		sealed := c.seal(nil, 7, pt, aad)
		if _, ok := c.authentic(scratch, 7, sealed[:len(pt)], sealed[len(pt):], aad); !ok {
			t.Fatalf("authentic refused a good frame (aad %d bytes)", len(aad))
		}
		if got := c.decrypt(scratch, 7, sealed[:len(pt)]); !bytes.Equal(got, pt) {
			t.Fatal("decrypt returned other bytes")
		}
		for _, i := range []int{0, 3, len(pt) - 1, len(pt), len(pt) + 7} {
			bad := bytes.Clone(sealed)
			bad[i] ^= 1
			if _, ok := c.authentic(scratch, 7, bad[:len(pt)], bad[len(pt):], aad); ok {
				t.Fatalf("authentic accepted a frame corrupted at %d", i)
			}
		}
		if _, ok := c.authentic(scratch, 8, sealed[:len(pt)], sealed[len(pt):], aad); ok {
			t.Fatal("authentic accepted a frame under another nonce")
		}
	}
	// The tag check must hold for every length, not just multiples of 16.
	for n := 0; n < 70; n++ {
		p := bytes.Repeat([]byte{byte(n)}, n)
		sealed := c.seal(nil, uint32(n), p, nil)
		if _, ok := c.authentic(scratch, uint32(n), sealed[:n], sealed[n:], nil); !ok {
			t.Fatalf("authentic refused a good %d-byte frame", n)
		}
	}
}

func newPair(t *testing.T) (*encryptor, *decryptor, time.Time) {
	t.Helper()
	base := bytes.Repeat([]byte{7}, 16)
	now := time.Unix(1_700_000_000, 0)
	e := &encryptor{}
	e.setRatchet(newKeyRatchet(base))
	d := &decryptor{}
	d.addRatchet(newKeyRatchet(base), now)
	return e, d, now
}

func TestEncryptDecryptFrames(t *testing.T) {
	e, d, now := newPair(t)
	frame := bytes.Repeat([]byte{0xAB}, 120)
	enc, err := e.encrypt(nil, frame)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != 120+8+1+1+2 {
		t.Fatalf("encrypted size %d", len(enc))
	}
	got, err := d.decrypt(nil, enc, now)
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("decrypt: %v", err)
	}
	// Replay: refused, and says so.
	if _, err := d.decrypt(nil, enc, now); !errors.Is(err, ErrReplayedNonce) {
		t.Fatalf("replay: %v", err)
	}
	// Corruption anywhere in the ciphertext or tag: refused.
	for _, i := range []int{0, 60, 119, 120, 127} {
		enc2, _ := e.encrypt(nil, frame)
		enc2[i] ^= 0x40
		if _, err := d.decrypt(nil, enc2, now); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("corrupted byte %d: %v", i, err)
		}
	}
	// Truncations never panic and are refused.
	enc3, _ := e.encrypt(nil, frame)
	for n := 0; n < len(enc3); n++ {
		if _, err := d.decrypt(nil, enc3[:n], now); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	// Silence passes both ways untouched.
	sil := []byte{0xF8, 0xFF, 0xFE}
	if out, _ := e.encrypt(nil, sil); !bytes.Equal(out, sil) {
		t.Fatal("silence was encrypted")
	}
	if out, err := d.decrypt(nil, sil, now); err != nil || !bytes.Equal(out, sil) {
		t.Fatalf("silence: %v", err)
	}
}

func TestWrongKeyRefused(t *testing.T) {
	e, _, now := newPair(t)
	other := &decryptor{}
	other.addRatchet(newKeyRatchet(bytes.Repeat([]byte{8}, 16)), now)
	enc, _ := e.encrypt(nil, []byte("hello opus frame"))
	if _, err := other.decrypt(nil, enc, now); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("wrong key: %v", err)
	}
	if st := other.stats.snapshot(); st.Attempts != 1 || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestGenerationBoundaryAndOutOfOrder(t *testing.T) {
	e, d, now := newPair(t)
	// Move the sender near the end of generation 0; a receiver accepts
	// generation 1 only once the ratchet is old enough for 2^24 frames at
	// the maximum frame rate, as the reference implementation does.
	e.nonce = 1<<24 - 3
	now = now.Add(time.Duration((1<<24)/maxFramesPerSecond+2) * time.Second)
	var frames [][]byte
	for i := 0; i < 6; i++ {
		enc, err := e.encrypt(nil, []byte{byte(i), 1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, enc)
	}
	if e.generation != 1 {
		t.Fatalf("sender at generation %d, want 1", e.generation)
	}
	// Out of order across the boundary: generation-1 frames overtake
	// generation-0 frames, which still decrypt.
	for _, i := range []int{0, 4, 3, 1, 5, 2} {
		got, err := d.decrypt(nil, frames[i], now)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got[0] != byte(i) {
			t.Fatalf("frame %d decrypted to frame %d", i, got[0])
		}
	}
	// Old generation keys expire 10 s after the newer one is used.
	late, _ := (&encryptor{ratchet: newKeyRatchet(bytes.Repeat([]byte{7}, 16)), nonce: 100}).encrypt(nil, []byte{9})
	if _, err := d.decrypt(nil, late, now.Add(11*time.Second)); err == nil {
		t.Fatal("generation 0 still accepted 11 s after generation 1 took over")
	}
}

func TestGenerationFromTheFutureRefused(t *testing.T) {
	e, d, now := newPair(t)
	e.nonce = 1<<24 - 1 // next frame is generation 1, impossible 0 s into the epoch
	enc, _ := e.encrypt(nil, []byte{1})
	if _, err := d.decrypt(nil, enc, now); !errors.Is(err, ErrNoKey) {
		t.Fatalf("generation 1 at once: %v", err)
	}
	if d.stats.snapshot().Attempts != 0 {
		t.Fatal("a frame with an implausible generation reached AES-GCM")
	}
}

func TestPassthroughRules(t *testing.T) {
	d := &decryptor{}
	now := time.Unix(0, 0)
	plain := []byte{0x78, 1, 2, 3, 4}
	if _, err := d.decrypt(nil, plain, now); !errors.Is(err, ErrNotEncrypted) {
		t.Fatalf("plain frame without passthrough: %v", err)
	}
	d.setPassthrough(true, now, 0)
	if out, err := d.decrypt(nil, plain, now); err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("passthrough: %v", err)
	}
	d.setPassthrough(false, now, 10*time.Second)
	if _, err := d.decrypt(nil, plain, now.Add(5*time.Second)); err != nil {
		t.Fatalf("passthrough within the transition: %v", err)
	}
	if _, err := d.decrypt(nil, plain, now.Add(11*time.Second)); !errors.Is(err, ErrNotEncrypted) {
		t.Fatalf("passthrough after the transition: %v", err)
	}
}

func TestEncryptWithoutKeyRefuses(t *testing.T) {
	e := &encryptor{}
	if _, err := e.encrypt(nil, []byte{1, 2, 3, 4}); !errors.Is(err, ErrNoEncryptKey) {
		t.Fatalf("got %v", err)
	}
}

func TestUnencryptedRangesRoundTrip(t *testing.T) {
	// A frame with unencrypted ranges (as video codecs produce) decrypts
	// with the ranges authenticated and restored in place.
	base := bytes.Repeat([]byte{7}, 16)
	r := newKeyRatchet(base)
	k, _ := r.key(0)
	c, _ := newCryptor(k)
	media := []byte("HHencrypted-partMMmore")
	ranges := []Range{{0, 2}, {16, 2}}
	var aad, pt []byte
	aad = append(aad, media[0:2]...)
	aad = append(aad, media[16:18]...)
	pt = append(pt, media[2:16]...)
	pt = append(pt, media[18:]...)
	sealed := c.seal(nil, 1, pt, aad)
	ct, tag := sealed[:len(pt)], sealed[len(pt):]
	frame := append([]byte{}, media[0:2]...)
	frame = append(frame, ct[:14]...)
	frame = append(frame, media[16:18]...)
	frame = append(frame, ct[14:]...)
	frame = append(frame, tag...)
	tail := appendULEB128(nil, 1)
	for _, rg := range ranges {
		tail = appendULEB128(tail, rg.Offset)
		tail = appendULEB128(tail, rg.Size)
	}
	frame = append(frame, tail...)
	frame = append(frame, byte(8+len(tail)+3), 0xFA, 0xFA)
	d := &decryptor{}
	now := time.Unix(0, 0)
	d.addRatchet(newKeyRatchet(base), now)
	got, err := d.decrypt(nil, frame, now)
	if err != nil || !bytes.Equal(got, media) {
		t.Fatalf("got %q, %v", got, err)
	}
	frame[0] ^= 1 // tamper with an unencrypted (authenticated) byte
	d2 := &decryptor{}
	d2.addRatchet(newKeyRatchet(base), now)
	if _, err := d2.decrypt(nil, frame, now); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("tampered header: %v", err)
	}
}

func TestSenderStateIsBounded(t *testing.T) {
	s, err := New(Options{UserID: 1})
	if err != nil {
		t.Fatal(err)
	}
	for u := UserID(2); u < maxSenders+500; u++ {
		s.Skip(u)
		_, _ = s.Decrypt(u, nil, []byte{1, 2, 3, 0xFA, 0xFA})
	}
	s.decMu.RLock()
	n := len(s.decs)
	s.decMu.RUnlock()
	if n > maxSenders {
		t.Fatalf("%d senders tracked, bound is %d", n, maxSenders)
	}
}

// decrypt is decryptCounted without the failure count: the tests' view.
func (d *decryptor) decrypt(dst, frame []byte, now time.Time) ([]byte, error) {
	out, _, err := d.decryptCounted(dst, frame, now, false)
	return out, err
}
