package media

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/clankie/clankie/voice/opus"
)

// FrameDuration is the length of one Opus frame as Discord carries it.
const FrameDuration = 20 * time.Millisecond

// trailingSilence is how many silence frames end an utterance.
const trailingSilence = 5

// burstAllowance is how far ahead of real time the pacer lets packets
// run: two frames, which a receiver's jitter buffer absorbs and which lets
// a producer that stalled for up to two frames catch up.
const burstAllowance = 2 * FrameDuration

// keepaliveEvery is how often an idle connection sends a UDP keepalive.
const keepaliveEvery = 5 * time.Second

// send queues a copy of one frame for the pacer, blocking while the queue
// is full, until ctx ends or the connection closes.
func (u *udpConn) send(ctx context.Context, q chan<- []byte, frame []byte) error {
	if u.ctx.Err() != nil {
		return ErrClosed
	}
	f := append([]byte(nil), frame...)
	u.pending.Add(1)
	select {
	case q <- f:
		return nil
	case <-ctx.Done():
		u.pending.Add(-1)
		return ctx.Err()
	case <-u.ctx.Done():
		u.pending.Add(-1)
		return ErrClosed
	}
}

// trySend queues a copy of one frame without blocking.
func (u *udpConn) trySend(frame []byte) bool {
	if u.ctx.Err() != nil {
		return false
	}
	u.pending.Add(1)
	select {
	case u.sendQ <- append([]byte(nil), frame...):
		return true
	default:
		u.pending.Add(-1)
		return false
	}
}

// flush drops every queued frame and returns how many.
func (u *udpConn) flush() int {
	n := 0
	for {
		select {
		case <-u.sendQ:
			u.pending.Add(-1)
			n++
		default:
			return n
		}
	}
}

// sender owns the outgoing RTP state; only the pace goroutine touches it.
type sender struct {
	u        *udpConn
	seq      uint16
	ts       uint32
	enc, pkt []byte
	hdr      []byte
	silence  []byte
}

// pace is the one clock of our outgoing audio. It sends frames with the
// speaking flag set, ends an utterance with five silence frames, and sends
// UDP keepalives while idle. Pacing is a GCRA (virtual scheduling): each
// packet advances a theoretical time by 20 ms and a packet may leave once
// it is at most burstAllowance ahead of it. A producer handing frames over
// in real time has each sent on arrival, a stall of up to burstAllowance
// caught up without lasting delay; frames queued ahead of real time leave
// at 20 ms intervals (after at most three back to back).
//
// The next frame is taken only once it may leave: until then it stays
// queued, where Flush can still drop it, and a Play caller still waits.
func (u *udpConn) pace() {
	defer u.wg.Done()
	s := newSender(u)
	s.seq, s.ts = randomStart()
	keep := time.NewTicker(keepaliveEvery)
	defer keep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// sleepUntil waits for t and reports false when the connection ends.
	sleepUntil := func(t time.Time) bool {
		d := time.Until(t)
		if d <= 0 {
			return u.ctx.Err() == nil
		}
		timer.Reset(d)
		select {
		case <-u.ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	var keepN uint32
	for {
		// Idle: wait for the first frame of an utterance.
		var f []byte
		select {
		case <-u.ctx.Done():
			return
		case <-keep.C:
			var ka [8]byte
			binary.LittleEndian.PutUint32(ka[:], keepN)
			keepN++
			_, _ = u.sock.Write(ka[:])
			continue
		case f = <-u.sendQ:
		case f = <-u.handQ:
		}
		u.talking.Store(true)
		tat := time.Now() // theoretical time of the next packet
		silence := trailingSilence
		for {
			now := time.Now()
			if f != nil {
				s.transmit(f)
				u.pending.Add(-1)
				silence = trailingSilence
			} else {
				s.transmit(s.silence)
				if silence--; silence == 0 {
					u.speaking(false)
					u.talking.Store(false)
					break
				}
			}
			tat = later(tat, now).Add(FrameDuration)
			if !sleepUntil(tat.Add(-burstAllowance)) {
				return
			}
			// Talking: wait for the next frame until one frame after it
			// is due, then start the silence; trailing: until the next
			// silence frame is due.
			until := tat
			if silence == trailingSilence {
				until = tat.Add(FrameDuration)
			}
			timer.Reset(time.Until(until))
			f = nil
			select {
			case <-u.ctx.Done():
				return
			case f = <-u.sendQ:
				// Go ≥1.23 timers: after Stop or Reset no stale tick is
				// delivered, so there is nothing to drain.
				timer.Stop()
			case f = <-u.handQ:
				timer.Stop()
			case <-timer.C:
				// A frame that is waiting wins over silence even when the
				// pacer woke late and both were ready.
				select {
				case f = <-u.sendQ:
				case f = <-u.handQ:
				default:
				}
			}
			if f != nil && silence != trailingSilence {
				// Speech resumes after silence frames filled a gap: those
				// slots are not owed to the schedule, so it restarts now
				// rather than holding every later frame behind them.
				tat = time.Now()
			}
		}
	}
}

func newSender(u *udpConn) *sender {
	return &sender{u: u, enc: make([]byte, 0, 1500), pkt: make([]byte, 0, 1500), hdr: make([]byte, 0, 12), silence: []byte(opus.SilenceFrame)}
}

// randomStart returns a random RTP sequence and timestamp origin.
func randomStart() (uint16, uint32) {
	return uint16(rand.Uint32()), rand.Uint32()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// transmit encrypts one frame (DAVE, then transport) and writes it. It never
// sends while DAVE says it cannot encrypt.
func (s *sender) transmit(frame []byte) {
	u := s.u
	// The DAVE session encrypts under keys a voice server's MLS messages
	// set up; a panic there drops this frame, not the process.
	defer recoverPeer(u.log, &u.stats.panics, ComponentMedia)
	s.ts += SamplesPerFrame
	if !u.dave.CanEncrypt() {
		u.stats.droppedE2EE.Add(1)
		return
	}
	payload := frame
	if !opus.IsSilence(frame) {
		var err error
		if s.enc, err = u.dave.Encrypt(s.enc[:0], frame); err != nil {
			u.stats.droppedE2EE.Add(1)
			return
		}
		payload = s.enc
	}
	u.speaking(true)
	s.hdr = appendHeader(s.hdr[:0], s.seq, s.ts, u.ssrc)
	s.pkt = u.transport.Seal(s.pkt[:0], s.hdr, payload)
	s.seq++
	if _, err := u.sock.Write(s.pkt); err == nil {
		u.stats.sent.Add(1)
	}
}
