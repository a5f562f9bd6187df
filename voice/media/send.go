package media

import (
	"context"
	"encoding/binary"
	"time"

	"go.uber.org/zap"
)

// FrameDuration is the length of one Opus frame as Discord carries it.
const FrameDuration = 20 * time.Millisecond

// trailingSilence is how many silence frames end an utterance.
const trailingSilence = 5

// earlySlack is how far ahead of its slot a frame may be sent.
const earlySlack = 10 * time.Millisecond

// keepaliveEvery is how often an idle connection sends a UDP keepalive.
const keepaliveEvery = 5 * time.Second

// Send queues one 20 ms Opus frame for the pacer. It blocks only while the
// queue is full (the producer is ahead of real time) and returns when ctx
// ends or the connection closes.
func (c *Conn) Send(ctx context.Context, opus []byte) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	f := append([]byte(nil), opus...)
	c.pending.Add(1)
	select {
	case c.sendQ <- f:
		return nil
	case <-ctx.Done():
		c.pending.Add(-1)
		return ctx.Err()
	case <-c.ctx.Done():
		c.pending.Add(-1)
		return ErrClosed
	}
}

// TrySend queues one frame without blocking and reports whether it was
// queued: false when the queue is full or the connection closed.
func (c *Conn) TrySend(opus []byte) bool {
	if c.ctx.Err() != nil {
		return false
	}
	c.pending.Add(1)
	select {
	case c.sendQ <- append([]byte(nil), opus...):
		return true
	default:
		c.pending.Add(-1)
		return false
	}
}

// Flush drops every queued frame and returns how many: barge-in stops our
// audio at once. The utterance then ends with its silence frames.
func (c *Conn) Flush() int {
	n := 0
	for {
		select {
		case <-c.sendQ:
			c.pending.Add(-1)
			n++
		default:
			return n
		}
	}
}

// Speaking reports whether an utterance is in progress: frames queued, or
// sent and not yet ended by the trailing silence.
func (c *Conn) Speaking() bool { return c.pending.Load() > 0 || c.talking.Load() }

// sender owns the outgoing RTP state; only the pace goroutine touches it.
type sender struct {
	c        *Conn
	seq      uint16
	ts       uint32
	enc, pkt []byte
	hdr      []byte
}

// pace sends queued frames on a 20 ms grid with the speaking flag set,
// ends an utterance with five silence frames, and sends UDP keepalives
// while idle. A frame may leave up to earlySlack before its slot, so that a
// producer handing frames over in real time is not held for timer
// wake-ups; on average the pacer never sends faster than real time.
func (c *Conn) pace() {
	defer c.wg.Done()
	s := &sender{c: c, enc: make([]byte, 0, 1500), pkt: make([]byte, 0, 1500), hdr: make([]byte, 0, 12)}
	s.seq, s.ts = randomStart()
	keep := time.NewTicker(keepaliveEvery)
	defer keep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// wait arms the timer for t and reports false when the connection ends.
	wait := func(t time.Time) bool {
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(t))
		return c.ctx.Err() == nil
	}
	var keepN uint32
	for {
		// Idle: wait for the first frame of an utterance.
		var f []byte
		select {
		case <-c.ctx.Done():
			return
		case <-keep.C:
			var ka [8]byte
			binary.LittleEndian.PutUint32(ka[:], keepN)
			keepN++
			_, _ = c.udp.Write(ka[:])
			continue
		case f = <-c.sendQ:
		}
		c.talking.Store(true)
		next := time.Now() // the slot of the frame in hand
		silence := 0
		for {
			if f != nil {
				s.transmit(f)
				c.pending.Add(-1)
				silence = trailingSilence
			} else {
				s.transmit(silenceFrame[:])
				if silence--; silence == 0 {
					c.setSpeaking(false)
					c.talking.Store(false)
					break
				}
			}
			next = next.Add(FrameDuration)
			if time.Until(next) < -3*FrameDuration {
				next = time.Now() // stalled: restart the clock rather than burst
			}
			// Talking: a frame is accepted until one frame after its slot;
			// trailing: until the slot, when the next silence frame is due.
			until := next
			if silence == trailingSilence {
				until = next.Add(FrameDuration)
			}
			if !wait(until) {
				return
			}
			f = nil
			select {
			case <-c.ctx.Done():
				return
			case f = <-c.sendQ:
				// The pacer waits on the queue, not on a timer, so a frame
				// handed over in real time leaves at once; an early one is
				// held until its slot less the slack.
				if due := next.Add(-earlySlack); time.Until(due) > 0 {
					if !wait(due) {
						return
					}
					select {
					case <-c.ctx.Done():
						return
					case <-timer.C:
					}
				}
				// A late frame leaves at once and keeps the grid, so the
				// next frame's slot does not move with one late wake-up.
			case <-timer.C:
				// A frame that is waiting wins over silence even when the
				// pacer woke late and both were ready.
				select {
				case f = <-c.sendQ:
				default:
					if silence == trailingSilence {
						next = time.Now()
					}
				}
			}
		}
	}
}

// transmit encrypts one frame (DAVE, then transport) and writes it. It never
// sends while DAVE says it cannot encrypt.
func (s *sender) transmit(frame []byte) {
	c := s.c
	s.ts += SamplesPerFrame
	if !c.dave.CanEncrypt() {
		c.stats.droppedE2EE.Add(1)
		return
	}
	payload := frame
	if !IsSilence(frame) {
		var err error
		if s.enc, err = c.dave.Encrypt(s.enc[:0], frame); err != nil {
			c.stats.droppedE2EE.Add(1)
			return
		}
		payload = s.enc
	}
	if !c.announced.Load() {
		c.setSpeaking(true)
	}
	s.hdr = appendHeader(s.hdr[:0], s.seq, s.ts, c.ssrc)
	s.pkt = c.transport.Seal(s.pkt[:0], s.hdr, payload)
	s.seq++
	if _, err := c.udp.Write(s.pkt); err == nil {
		c.stats.sent.Add(1)
	}
}

// setSpeaking sends op 5 with the microphone flag on or off.
func (c *Conn) setSpeaking(on bool) {
	flag := 0
	if on {
		flag = 1
	}
	c.announced.Store(on)
	if s := c.sock.Load(); s != nil {
		if err := s.writeJSON(OpSpeaking, map[string]any{"speaking": flag, "delay": 0, "ssrc": c.ssrc}); err != nil {
			c.log.Debug("speaking flag not sent", zap.Error(err))
		}
	}
}
