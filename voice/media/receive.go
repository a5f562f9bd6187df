package media

import (
	"errors"
	"net"
	"time"
)

// receive reads UDP packets until the socket closes, then closes Frames.
func (c *Conn) receive() {
	defer c.wg.Done()
	defer close(c.frames)
	buf := make([]byte, 2048)
	scratch := make([]byte, 0, 2048)
	for {
		n, err := c.udp.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || c.ctx.Err() != nil {
				return
			}
			continue
		}
		c.receiveSafely(buf[:n], scratch, time.Now())
	}
}

// receiveSafely is receivePacket behind recover: a datagram whose handling
// panics (in a parser, the DAVE session) is dropped and counted, and the
// next one is read.
func (c *Conn) receiveSafely(pkt, scratch []byte, arrived time.Time) {
	defer c.recoverPeer(&c.stats.mediaPanics, ComponentMedia)
	c.receivePacket(pkt, scratch, arrived)
}

// Packets from an SSRC the gateway has not named yet are held, still
// encrypted, for the speaking op (5) that names it: a speaker's first
// packets can beat that op, since it travels on the websocket and they on
// UDP. At most maxHeld are held, none longer than holdFor.
const (
	maxHeld = 32
	holdFor = 250 * time.Millisecond
)

// heldPacket is a packet waiting for its SSRC to be named.
type heldPacket struct {
	h       Header
	pkt     []byte
	arrived time.Time
}

// receivePacket runs the receive path in its fixed order: clear header,
// speaker by SSRC, consent, and only then transport decryption, DAVE and
// delivery. An unconsented speaker's packet is dropped and counted before
// any key touches it. It runs on the receive goroutine only.
func (c *Conn) receivePacket(pkt, scratch []byte, arrived time.Time) {
	c.stats.received.Add(1)
	h, err := ParseHeader(pkt)
	if err != nil {
		c.stats.malformed.Add(1)
		return
	}
	if h.PayloadType != PayloadTypeOpus {
		c.stats.notAudio.Add(1)
		return
	}
	if h.SSRC == c.ssrc {
		c.stats.unknown.Add(1) // our own: we never hear ourselves
		return
	}
	c.mu.RLock()
	user, ok := c.bySSRC[h.SSRC]
	c.mu.RUnlock()
	if len(c.held) > 0 {
		c.release(h.SSRC, ok, user, scratch, arrived)
	}
	if !ok {
		c.hold(h, pkt, arrived)
		return
	}
	c.process(h, pkt, user, scratch, arrived)
}

// hold keeps a copy of a packet whose SSRC is not named yet, evicting the
// oldest when full.
func (c *Conn) hold(h Header, pkt []byte, arrived time.Time) {
	if len(c.held) == maxHeld {
		c.held = c.held[1:]
		c.stats.unknown.Add(1)
	}
	c.stats.heldSSRC.Add(1)
	c.held = append(c.held, heldPacket{h: h, pkt: append([]byte(nil), pkt...), arrived: arrived})
}

// release processes, in arrival order, the held packets of ssrc now that
// it is named, and drops those held too long.
func (c *Conn) release(ssrc uint32, named bool, user string, scratch []byte, now time.Time) {
	kept := c.held[:0]
	for _, p := range c.held {
		switch {
		case named && p.h.SSRC == ssrc:
			c.process(p.h, p.pkt, user, scratch, p.arrived)
		case now.Sub(p.arrived) > holdFor:
			c.stats.unknown.Add(1)
		default:
			kept = append(kept, p)
		}
	}
	clear(c.held[len(kept):])
	c.held = kept
}

// process is the receive path once the speaker is known: consent first.
func (c *Conn) process(h Header, pkt []byte, user string, scratch []byte, arrived time.Time) {
	if !c.cfg.Allow(user) {
		c.stats.noConsent.Add(1)
		return
	}
	plain, err := c.transport.Open(scratch[:0], h, pkt)
	if err != nil {
		c.stats.transportFail.Add(1)
		return
	}
	var opus []byte
	if IsSilence(plain) {
		// The silence frame is never end-to-end encrypted.
		opus = append([]byte(nil), plain...)
	} else if opus, err = c.dave.Decrypt(make([]byte, 0, len(plain)), user, plain); err != nil {
		c.stats.daveFail.Add(1)
		return
	}
	f := Frame{UserID: user, SSRC: h.SSRC, Sequence: h.Sequence, Timestamp: h.Timestamp, Opus: opus, Arrived: arrived}
	select {
	case c.frames <- f:
		c.stats.delivered.Add(1)
	default:
		c.stats.overflow.Add(1)
	}
}
