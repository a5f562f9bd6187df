package dave

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clankie/clankie/voice/opus"
)

// Behaviour constants from protocol.md and the reference implementation.
const (
	cryptorExpiry      = 10 * time.Second // old keys kept for in-flight media
	maxGenerationGap   = 250              // how far ahead of the newest generation a frame may claim
	maxMissingNonces   = 1000             // out-of-order nonces remembered for replay checks
	maxFramesPerSecond = 50 + 2*60        // bounds how fast generations can plausibly advance
	generationWrap     = 1 << 8
)

// Errors Decrypt returns; every one is a sentence without key material.
var (
	ErrReplayedNonce  = errors.New("dave: frame refused: nonce already used or too old")
	ErrAuthentication = errors.New("dave: frame refused: authentication failed (corrupted frame or wrong key)")
	ErrNoKey          = errors.New("dave: frame refused: no key for this sender and generation")
	ErrNotEncrypted   = errors.New("dave: frame refused: not a DAVE frame and passthrough is off")
	ErrSkipped        = errors.New("dave: frame dropped unread: sender not allowed")
	ErrNoEncryptKey   = errors.New("dave: cannot encrypt: no key for our own frames yet")
)

// cryptor is AES-128-GCM with the 8-byte truncated tag DAVE uses. The
// standard library's GCM only checks 12- to 16-byte tags, so sealing
// truncates the full tag, and opening recomputes the full tag over the
// ciphertext first (see open) and decrypts only a frame that is authentic.
type cryptor struct {
	aead  cipher.AEAD
	nonce [12]byte // reused: the caller's lock guards a cryptor
	// hx[i] is H·x^i in GCM's field, H = AES_K(0^128): the multiples needed
	// to correct a tag for a different GHASH length block (see open).
	hx [128][2]uint64
}

func newCryptor(key []byte) (*cryptor, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("dave: media cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("dave: media cipher: %w", err)
	}
	c := &cryptor{aead: aead}
	var h [16]byte
	block.Encrypt(h[:], h[:])
	v := [2]uint64{binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])}
	for i := range c.hx {
		c.hx[i] = v
		// v = v·x: a right shift in GCM's reflected bit order, reduced by
		// R = 0xE1 || 0^120 when a bit falls off.
		carry := v[1] & 1
		v[1] = v[1]>>1 | v[0]<<63
		v[0] >>= 1
		if carry != 0 {
			v[0] ^= 0xE1 << 56
		}
	}
	clear(h[:])
	return c, nil
}

// mulH returns d·H, d given as a 128-bit block.
func (c *cryptor) mulH(d0, d1 uint64) (uint64, uint64) {
	var z0, z1 uint64
	for d0 != 0 {
		i := bits.LeadingZeros64(d0) // bit i of the block, from the left
		z0 ^= c.hx[i][0]
		z1 ^= c.hx[i][1]
		d0 &^= 1 << (63 - i)
	}
	for d1 != 0 {
		i := bits.LeadingZeros64(d1)
		z0 ^= c.hx[64+i][0]
		z1 ^= c.hx[64+i][1]
		d1 &^= 1 << (63 - i)
	}
	return z0, z1
}

// fullNonce expands the truncated nonce into the 12-byte GCM nonce: zeros,
// then the 32-bit nonce little-endian (protocol.md, "Truncated
// synchronization nonce").
func (c *cryptor) fullNonce(n uint32) []byte {
	binary.LittleEndian.PutUint32(c.nonce[8:], n)
	return c.nonce[:]
}

// seal appends ciphertext || tag8 of plaintext to dst. dst must not
// overlap plaintext.
func (c *cryptor) seal(dst []byte, nonce uint32, plaintext, aad []byte) []byte {
	out := c.aead.Seal(dst, c.fullNonce(nonce), plaintext, aad)
	return out[:len(out)-16+tagSize]
}

// authentic reports whether tag is the truncated GCM tag of (aad,
// ciphertext). GCM's tag is GHASH_H(aad, ciphertext) xor AES_K(J0). Sealing
// an empty plaintext with additional data X = pad16(aad) || ciphertext
// hashes the same blocks, and differs only in the final length block:
// [len(X) | 0] instead of [len(aad) | len(ciphertext)]. GHASH is linear, so
// the tag we need is that tag xor (the length blocks' difference)·H.
// scratch must hold len(aad)+16+len(ciphertext)+16 bytes and is returned.
func (c *cryptor) authentic(scratch []byte, nonce uint32, ciphertext, tag, aad []byte) ([]byte, bool) {
	n := c.fullNonce(nonce)
	x := ciphertext
	scratch = scratch[:0]
	if len(aad) > 0 {
		x = append(scratch[:0], aad...)
		for len(x)%16 != 0 {
			x = append(x, 0)
		}
		x = append(x, ciphertext...)
		scratch = x
	}
	out := c.aead.Seal(scratch[len(scratch):], n, nil, x)
	d0 := uint64(len(aad))*8 ^ uint64(len(x))*8
	d1 := uint64(len(ciphertext)) * 8
	z0, _ := c.mulH(d0, d1)
	var want [8]byte
	binary.BigEndian.PutUint64(want[:], binary.BigEndian.Uint64(out[:8])^z0)
	return scratch, subtle.ConstantTimeCompare(want[:], tag) == 1
}

// decrypt returns the plaintext of an authenticated ciphertext: GCM's
// keystream is the same whichever direction, so sealing the ciphertext
// yields the plaintext (the tag computed alongside is discarded).
func (c *cryptor) decrypt(scratch []byte, nonce uint32, ciphertext []byte) []byte {
	out := c.aead.Seal(scratch[:0], c.fullNonce(nonce), ciphertext, nil)
	return out[:len(ciphertext)]
}

// encryptor seals our own frames with the current epoch's key ratchet.
type encryptor struct {
	mu          sync.Mutex
	ratchet     *keyRatchet
	nonce       uint32
	generation  uint32
	cryptor     *cryptor
	passthrough bool
	scratch     []byte
}

// setRatchet switches to a new epoch's ratchet; the nonce restarts at 0.
func (e *encryptor) setRatchet(r *keyRatchet) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ratchet, e.cryptor, e.nonce, e.generation = r, nil, 0, 0
}

func (e *encryptor) setPassthrough(on bool) {
	e.mu.Lock()
	e.passthrough = on
	e.mu.Unlock()
}

// inClear reports whether our frames go out unencrypted (passthrough).
func (e *encryptor) inClear() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.passthrough
}

func (e *encryptor) ready() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.passthrough || e.ratchet != nil
}

// encrypt appends the protocol frame for an Opus frame to dst. Opus frames
// are encrypted whole (no unencrypted ranges); the Opus silence frame and
// passthrough mode return the frame unchanged (protocol.md, "Silence
// Packets": the SFU synthesises it for a muted source).
func (e *encryptor) encrypt(dst, frame []byte) ([]byte, error) {
	if opus.IsSilence(frame) {
		return append(dst, frame...), nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.passthrough {
		return append(dst, frame...), nil
	}
	if e.ratchet == nil {
		return dst, ErrNoEncryptKey
	}
	e.nonce++
	gen := wrappedGeneration(e.generation, e.nonce>>generationBits)
	if gen != e.generation || e.cryptor == nil {
		k, err := e.ratchet.key(gen)
		if err != nil {
			return dst, fmt.Errorf("dave: encrypt: %w", err)
		}
		c, err := newCryptor(k)
		if err != nil {
			return dst, err
		}
		if gen > e.generation {
			for g := e.generation; g < gen; g++ {
				e.ratchet.erase(g)
			}
		}
		e.generation, e.cryptor = gen, c
	}
	e.scratch = e.cryptor.seal(e.scratch[:0], e.nonce, frame, nil)
	dst = append(dst, e.scratch...)
	clear(e.scratch)
	supp := tagSize + uleb128Size(uint64(e.nonce)) + suppSizeSize + markerSize
	dst = appendULEB128(dst, uint64(e.nonce))
	dst = append(dst, byte(supp), marker, marker)
	return dst, nil
}

// wrappedGeneration widens an 8-bit generation from a nonce to the full
// generation counter, given the oldest generation still in use.
func wrappedGeneration(oldest, gen8 uint32) uint32 {
	rem := oldest % generationWrap
	factor := oldest / generationWrap
	if gen8 < rem {
		factor++
	}
	return factor*generationWrap + gen8
}

// bigNonce combines a widened generation with the low 24 bits of a nonce
// into a monotonic counter for replay checks.
func bigNonce(gen, nonce uint32) uint64 {
	return uint64(gen)<<generationBits | uint64(nonce&(1<<generationBits-1))
}

type expiringCryptor struct {
	c      *cryptor
	expiry time.Time // zero: no expiry
}

// cryptorManager holds one sender's keys for one epoch on the receiving side:
// the ratchet, cryptors per generation, and the replay window.
type cryptorManager struct {
	ratchet        *keyRatchet
	created        time.Time
	expiry         time.Time // zero: none
	cryptors       map[uint32]*expiringCryptor
	anyExpiry      bool // some cryptor has an expiry: cleanup has work
	oldest, newest uint32
	haveNewest     bool
	newestNonce    uint64
	missing        []uint64 // nonces skipped over, oldest first, at most maxMissingNonces
}

func newCryptorManager(r *keyRatchet, now time.Time) *cryptorManager {
	return &cryptorManager{ratchet: r, created: now, cryptors: make(map[uint32]*expiringCryptor)}
}

func (m *cryptorManager) expired(now time.Time) bool {
	return !m.expiry.IsZero() && now.After(m.expiry)
}

func (m *cryptorManager) expireBy(t time.Time) {
	if m.expiry.IsZero() || t.Before(m.expiry) {
		m.expiry = t
	}
}

func (m *cryptorManager) canProcessNonce(gen, nonce uint32) bool {
	if !m.haveNewest {
		return true
	}
	b := bigNonce(gen, nonce)
	if b > m.newestNonce {
		return true
	}
	for i := len(m.missing) - 1; i >= 0; i-- {
		if m.missing[i] == b {
			return true
		}
	}
	return false
}

func (m *cryptorManager) cleanup(now time.Time) {
	if !m.anyExpiry {
		return
	}
	m.anyExpiry = false
	for g, c := range m.cryptors {
		if !c.expiry.IsZero() && now.After(c.expiry) {
			delete(m.cryptors, g)
		} else if !c.expiry.IsZero() {
			m.anyExpiry = true
		}
	}
	for m.oldest < m.newest {
		if _, ok := m.cryptors[m.oldest]; ok {
			break
		}
		m.ratchet.erase(m.oldest)
		m.oldest++
	}
}

func (m *cryptorManager) cryptorFor(gen uint32, now time.Time) *cryptor {
	m.cleanup(now)
	if gen < m.oldest || gen > m.newest+maxGenerationGap {
		return nil
	}
	lifetime := uint64(now.Sub(m.created) / time.Second)
	if uint64(gen) > (maxFramesPerSecond*lifetime)>>generationBits {
		return nil
	}
	if c, ok := m.cryptors[gen]; ok {
		return c.c
	}
	k, err := m.ratchet.key(gen)
	if err != nil {
		return nil
	}
	c, err := newCryptor(k)
	if err != nil {
		return nil
	}
	ec := &expiringCryptor{c: c}
	if gen < m.newest {
		ec.expiry = now.Add(cryptorExpiry)
		m.anyExpiry = true
	}
	m.cryptors[gen] = ec
	return c
}

func (m *cryptorManager) reportSuccess(gen, nonce uint32, now time.Time) {
	b := bigNonce(gen, nonce)
	switch {
	case !m.haveNewest:
		m.haveNewest, m.newestNonce = true, b
	case b > m.newestNonce:
		gap := b - m.newestNonce - 1
		if gap > maxMissingNonces {
			gap = maxMissingNonces
		}
		if drop := len(m.missing) + int(gap) - maxMissingNonces; drop > 0 {
			m.missing = append(m.missing[:0], m.missing[drop:]...)
		}
		for i := b - gap; i < b; i++ {
			m.missing = append(m.missing, i)
		}
		m.newestNonce = b
	default:
		for i, v := range m.missing {
			if v == b {
				m.missing = append(m.missing[:i], m.missing[i+1:]...)
				break
			}
		}
	}
	if gen <= m.newest {
		return
	}
	if _, ok := m.cryptors[gen]; !ok {
		return
	}
	m.newest = gen
	exp := now.Add(cryptorExpiry)
	for g, c := range m.cryptors {
		if g < gen && (c.expiry.IsZero() || exp.Before(c.expiry)) {
			c.expiry = exp
			m.anyExpiry = true
		}
	}
}

// DecryptStats counts what a session did with one sender's frames. Attempts
// is incremented by the code that runs AES-GCM, immediately before it runs,
// so a sender whose frames were all skipped has Attempts == 0.
type DecryptStats struct {
	Attempts     uint64 // AES-GCM opens performed
	Successes    uint64 // frames decrypted
	Failures     uint64 // frames refused
	Passthroughs uint64 // frames passed through unencrypted (silence, passthrough mode)
	Skipped      uint64 // frames dropped unread because the sender is not allowed
}

type counters struct {
	attempts, successes, failures, passthroughs, skipped atomic.Uint64
}

func (c *counters) snapshot() DecryptStats {
	return DecryptStats{
		Attempts: c.attempts.Load(), Successes: c.successes.Load(), Failures: c.failures.Load(),
		Passthroughs: c.passthroughs.Load(), Skipped: c.skipped.Load(),
	}
}

// decryptor holds one sender's receive keys across epochs (newest last).
type decryptor struct {
	mu               sync.Mutex
	managers         []*cryptorManager
	passthroughUntil time.Time // passthrough allowed while now is before this
	passthroughOn    bool      // passthrough allowed with no end
	stats            counters
	// run counts this sender's consecutive failures while the session
	// counts them (see Session.Decrypt); a decryption ends it.
	run     int
	frame   Frame // parse target, reused
	scratch []byte
	aad     []byte
	ct      []byte
}

// addRatchet adds a new epoch's ratchet; older epochs stay usable until
// expireOld is called (at the transition's execution).
func (d *decryptor) addRatchet(r *keyRatchet, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.managers = append(d.managers, newCryptorManager(r, now))
}

// expireOld limits every ratchet but the newest to ttl from now.
func (d *decryptor) expireOld(now time.Time, ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := 0; i < len(d.managers)-1; i++ {
		d.managers[i].expireBy(now.Add(ttl))
	}
}

// expireAll limits every ratchet to ttl from now (a downgrade or a reset).
func (d *decryptor) expireAll(now time.Time, ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.managers {
		m.expireBy(now.Add(ttl))
	}
}

func (d *decryptor) setPassthrough(on bool, now time.Time, ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.passthroughOn = true
		return
	}
	if d.passthroughOn {
		d.passthroughOn = false
		d.passthroughUntil = now.Add(ttl)
	} else if end := now.Add(ttl); end.Before(d.passthroughUntil) {
		d.passthroughUntil = end
	}
}

func (d *decryptor) canPassthrough(now time.Time) bool {
	return d.passthroughOn || now.Before(d.passthroughUntil)
}

// resetRun restarts the sender's run of consecutive failures.
func (d *decryptor) resetRun() {
	d.mu.Lock()
	d.run = 0
	d.mu.Unlock()
}

// decryptCounted is decrypt that also returns the sender's run of
// consecutive failures: a failure adds one to it when count is set, a
// decryption or a passthrough ends it, the silence frame (never encrypted,
// so no sign of working keys) leaves it.
func (d *decryptor) decryptCounted(dst, frame []byte, now time.Time, count bool) (_ []byte, run int, err error) {
	if opus.IsSilence(frame) {
		d.stats.passthroughs.Add(1)
		return append(dst, frame...), 0, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer func() {
		switch {
		case err == nil:
			d.run = 0
		case count:
			d.run++
		}
		run = d.run
	}()
	for len(d.managers) > 0 && d.managers[0].expired(now) {
		d.managers[0] = nil
		d.managers = d.managers[1:]
	}
	f := &d.frame
	defer func() { f.Media, f.Tag = nil, nil }() // hold no view of the caller's buffer
	if err := f.parse(frame); err != nil {
		if d.canPassthrough(now) {
			d.stats.passthroughs.Add(1)
			return append(dst, frame...), 0, nil
		}
		d.stats.failures.Add(1)
		if errors.Is(err, ErrNotProtocolFrame) {
			return dst, 0, ErrNotEncrypted
		}
		return dst, 0, err
	}
	// Split the media into authenticated (unencrypted) and encrypted bytes.
	d.aad, d.ct = d.aad[:0], d.ct[:0]
	var at uint64
	for _, r := range f.Ranges {
		d.ct = append(d.ct, f.Media[at:r.Offset]...)
		d.aad = append(d.aad, f.Media[r.Offset:r.Offset+r.Size]...)
		at = r.Offset + r.Size
	}
	ct := f.Media[at:]
	if len(f.Ranges) > 0 {
		ct = append(d.ct, ct...)
		d.ct = ct
	}
	if need := len(d.aad) + 32 + len(ct); cap(d.scratch) < need {
		d.scratch = make([]byte, 0, need+64)
	}
	result := ErrNoKey
	for i := len(d.managers) - 1; i >= 0; i-- {
		m := d.managers[i]
		gen := wrappedGeneration(m.oldest, f.Generation())
		if !m.canProcessNonce(gen, f.Nonce) {
			result = ErrReplayedNonce
			continue
		}
		c := m.cryptorFor(gen, now)
		if c == nil {
			continue
		}
		d.stats.attempts.Add(1)
		var ok bool
		d.scratch, ok = c.authentic(d.scratch, f.Nonce, ct, f.Tag, d.aad)
		if !ok {
			result = ErrAuthentication
			continue
		}
		m.reportSuccess(gen, f.Nonce, now)
		pt := c.decrypt(d.scratch, f.Nonce, ct)
		start := len(dst)
		dst = slices.Grow(dst, len(f.Media))[:start+len(f.Media)]
		if len(f.Ranges) > 0 {
			reconstruct(dst[start:], pt, f.Media, f.Ranges)
		} else {
			copy(dst[start:], pt)
		}
		d.stats.successes.Add(1)
		return dst, 0, nil
	}
	d.stats.failures.Add(1)
	return dst, 0, result
}

// reconstruct interleaves the decrypted bytes pt with the unencrypted
// ranges of media into out.
func reconstruct(out, plain, media []byte, ranges []Range) {
	var at, p uint64
	for _, r := range ranges {
		n := r.Offset - at
		copy(out[at:r.Offset], plain[p:p+n])
		p += n
		copy(out[r.Offset:r.Offset+r.Size], media[r.Offset:r.Offset+r.Size])
		at = r.Offset + r.Size
	}
	copy(out[at:], plain[p:])
}
