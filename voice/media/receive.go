package media

import (
	"errors"
	"net"
	"time"

	"github.com/clankie/clankie/voice/opus"
)

// receive reads UDP packets until the socket closes, then closes Frames.
func (u *udpConn) receive() {
	defer u.wg.Done()
	defer close(u.frames)
	buf := make([]byte, 2048)
	scratch := make([]byte, 0, 2048)
	for {
		n, err := u.sock.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || u.ctx.Err() != nil {
				return
			}
			continue
		}
		u.receiveSafely(buf[:n], scratch, time.Now())
	}
}

// receiveSafely is receivePacket behind recover: a datagram whose handling
// panics (in a parser, the DAVE session) is dropped and counted, and the
// next one is read.
func (u *udpConn) receiveSafely(pkt, scratch []byte, arrived time.Time) {
	defer recoverPeer(u.log, &u.stats.panics, ComponentMedia)
	u.receivePacket(pkt, scratch, arrived)
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
func (u *udpConn) receivePacket(pkt, scratch []byte, arrived time.Time) {
	u.stats.received.Add(1)
	h, err := ParseHeader(pkt)
	if err != nil {
		u.stats.malformed.Add(1)
		return
	}
	if h.PayloadType != PayloadTypeOpus {
		u.stats.notAudio.Add(1)
		return
	}
	if h.SSRC == u.ssrc {
		u.stats.unknown.Add(1) // our own: we never hear ourselves
		return
	}
	u.mu.RLock()
	user, ok := u.bySSRC[h.SSRC]
	u.mu.RUnlock()
	if len(u.held) > 0 {
		u.release(h.SSRC, ok, user, scratch, arrived)
	}
	if !ok {
		u.hold(h, pkt, arrived)
		return
	}
	u.process(h, pkt, user, scratch, arrived)
}

// hold keeps a copy of a packet whose SSRC is not named yet, evicting the
// oldest when full.
func (u *udpConn) hold(h Header, pkt []byte, arrived time.Time) {
	if len(u.held) == maxHeld {
		u.held = u.held[1:]
		u.stats.unknown.Add(1)
	}
	u.stats.heldSSRC.Add(1)
	u.held = append(u.held, heldPacket{h: h, pkt: append([]byte(nil), pkt...), arrived: arrived})
}

// release processes, in arrival order, the held packets of ssrc now that
// it is named, and drops those held too long.
func (u *udpConn) release(ssrc uint32, named bool, user string, scratch []byte, now time.Time) {
	kept := u.held[:0]
	for _, p := range u.held {
		switch {
		case named && p.h.SSRC == ssrc:
			u.process(p.h, p.pkt, user, scratch, p.arrived)
		case now.Sub(p.arrived) > holdFor:
			u.stats.unknown.Add(1)
		default:
			kept = append(kept, p)
		}
	}
	clear(u.held[len(kept):])
	u.held = kept
}

// process is the receive path once the speaker is known: consent first.
func (u *udpConn) process(h Header, pkt []byte, user string, scratch []byte, arrived time.Time) {
	if !u.allow(user) {
		u.stats.noConsent.Add(1)
		return
	}
	plain, err := u.transport.Open(scratch[:0], h, pkt)
	if err != nil {
		u.stats.transportFail.Add(1)
		return
	}
	var frame []byte
	if opus.IsSilence(plain) {
		// The silence frame is never end-to-end encrypted.
		frame = append([]byte(nil), plain...)
	} else if frame, err = u.dave.Decrypt(make([]byte, 0, len(plain)), user, plain); err != nil {
		u.stats.daveFail.Add(1)
		return
	}
	f := Frame{UserID: user, SSRC: h.SSRC, Sequence: h.Sequence, Timestamp: h.Timestamp, Opus: frame, Arrived: arrived}
	select {
	case u.frames <- f:
		u.stats.delivered.Add(1)
	default:
		u.stats.overflow.Add(1)
	}
}
