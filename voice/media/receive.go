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
		c.receivePacket(buf[:n], scratch, time.Now())
	}
}

// receivePacket runs the receive path in its fixed order: clear header,
// speaker by SSRC, consent, and only then transport decryption, DAVE and
// delivery. An unconsented speaker's packet is dropped and counted before
// any key touches it.
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
	c.mu.RLock()
	user, ok := c.bySSRC[h.SSRC]
	c.mu.RUnlock()
	if !ok {
		c.stats.unknown.Add(1)
		return
	}
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
