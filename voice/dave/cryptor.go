package dave

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
// standard library's GCM only produces 12- to 16-byte tags, so sealing
// truncates the full tag and opening decrypts with CTR (GCM's own keystream)
// and recomputes the full tag to compare its first 8 bytes in constant time.
type cryptor struct {
	aead  cipher.AEAD
	block cipher.Block
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
	return &cryptor{aead: aead, block: block}, nil
}

func fullNonce(n uint32) [12]byte {
	var nonce [12]byte
	binary.LittleEndian.PutUint32(nonce[8:], n)
	return nonce
}

// seal encrypts plaintext into dst (which must not overlap plaintext unless
// equal) and returns the ciphertext and the truncated tag, both inside the
// returned slice: ciphertext || tag8.
func (c *cryptor) seal(dst []byte, nonce uint32, plaintext, aad []byte) []byte {
	n := fullNonce(nonce)
	out := c.aead.Seal(dst, n[:], plaintext, aad)
	return out[:len(out)-16+tagSize]
}

// open decrypts ciphertext into dst[:len(ciphertext)] and reports whether the
// truncated tag matched; scratch is reused to recompute the tag. On failure
// dst holds garbage the caller must not use.
func (c *cryptor) open(dst, scratch []byte, nonce uint32, ciphertext, tag, aad []byte) ([]byte, []byte, bool) {
	n := fullNonce(nonce)
	var iv [16]byte
	copy(iv[:12], n[:])
	iv[15] = 2 // GCM encrypts from inc32(J0), J0 = nonce || 1
	pt := dst[:len(ciphertext)]
	cipher.NewCTR(c.block, iv[:]).XORKeyStream(pt, ciphertext)
	scratch = c.aead.Seal(scratch[:0], n[:], pt, aad)
	full := scratch[len(pt):]
	ok := subtle.ConstantTimeCompare(full[:tagSize], tag) == 1
	return pt, scratch, ok
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

func (e *encryptor) ready() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.passthrough || e.ratchet != nil
}

// encrypt appends the protocol frame for an Opus frame to dst. Opus frames
// are encrypted whole (no unencrypted ranges); the Opus silence frame and
// passthrough mode return the frame unchanged.
func (e *encryptor) encrypt(dst, frame []byte) ([]byte, error) {
	if IsSilence(frame) {
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
	start := len(dst)
	dst = e.cryptor.seal(dst, e.nonce, frame, nil)
	supp := tagSize + uleb128Size(uint64(e.nonce)) + suppSizeSize + markerSize
	dst = appendULEB128(dst, uint64(e.nonce))
	dst = append(dst, byte(supp), marker, marker)
	_ = start
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
	for g, c := range m.cryptors {
		if !c.expiry.IsZero() && now.After(c.expiry) {
			delete(m.cryptors, g)
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
	scratch          []byte
	aad              []byte
	ct               []byte
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

// decrypt appends the decrypted frame to dst.
func (d *decryptor) decrypt(dst, frame []byte, now time.Time) ([]byte, error) {
	if IsSilence(frame) {
		d.stats.passthroughs.Add(1)
		return append(dst, frame...), nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.managers) > 0 && d.managers[0].expired(now) {
		d.managers[0] = nil
		d.managers = d.managers[1:]
	}
	f, err := ParseFrame(frame)
	if err != nil {
		if d.canPassthrough(now) {
			d.stats.passthroughs.Add(1)
			return append(dst, frame...), nil
		}
		d.stats.failures.Add(1)
		if errors.Is(err, ErrNotProtocolFrame) {
			return dst, ErrNotEncrypted
		}
		return dst, err
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
	if cap(d.scratch) < len(ct)+16 {
		d.scratch = make([]byte, 0, len(ct)+16+64)
	}
	start := len(dst)
	dst = append(dst, make([]byte, len(f.Media))...)
	out := dst[start:]
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
		var pt []byte
		pt, d.scratch, ok = c.open(out, d.scratch, f.Nonce, ct, f.Tag, d.aad)
		if !ok {
			result = ErrAuthentication
			continue
		}
		m.reportSuccess(gen, f.Nonce, now)
		if len(f.Ranges) > 0 {
			reconstruct(out, pt, f.Media, f.Ranges)
		}
		d.stats.successes.Add(1)
		return dst, nil
	}
	clear(out)
	d.stats.failures.Add(1)
	return dst[:start], result
}

// reconstruct interleaves decrypted bytes (at the front of out, as open
// wrote them) with the unencrypted ranges of media into out.
func reconstruct(out, pt, media []byte, ranges []Range) {
	plain := append([]byte(nil), pt...)
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

func (e *encryptor) isPassthrough() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.passthrough
}
