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

// burstAllowance is how far ahead of real time the pacer lets packets
// run: two frames, which a receiver's jitter buffer absorbs and which lets
// a producer that stalled for up to two frames catch up.
const burstAllowance = 2 * FrameDuration

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
	silence  []byte
}

// pace sends frames with the speaking flag set, ends an utterance with
// five silence frames, and sends UDP keepalives while idle. Pacing is a
// GCRA (virtual scheduling): each packet advances a theoretical time by
// 20 ms and a packet may leave once it is at most burstAllowance ahead of
// it. A producer handing frames over in real time has each sent on
// arrival, a stall of up to burstAllowance caught up without lasting delay;
// frames queued ahead of real time leave at 20 ms intervals (after at most
// three back to back).
func (c *Conn) pace() {
	defer c.wg.Done()
	s := newSender(c)
	s.seq, s.ts = randomStart()
	keep := time.NewTicker(keepaliveEvery)
	defer keep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// sleepUntil waits for t and reports false when the connection ends.
	sleepUntil := func(t time.Time) bool {
		d := time.Until(t)
		if d <= 0 {
			return c.ctx.Err() == nil
		}
		timer.Reset(d)
		select {
		case <-c.ctx.Done():
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
		tat := time.Now() // theoretical time of the next packet
		silence := trailingSilence
		for {
			if f != nil && silence != trailingSilence {
				// Speech resumes after silence frames filled a gap: those
				// slots are not owed to the schedule, so it restarts now
				// rather than holding every later frame behind them.
				tat = time.Now()
			}
			if !sleepUntil(tat.Add(-burstAllowance)) {
				return
			}
			now := time.Now()
			if f != nil {
				s.transmit(f)
				c.pending.Add(-1)
				silence = trailingSilence
			} else {
				s.transmit(s.silence)
				if silence--; silence == 0 {
					c.setSpeaking(false)
					c.talking.Store(false)
					break
				}
			}
			tat = later(tat, now).Add(FrameDuration)
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
			case <-c.ctx.Done():
				return
			case f = <-c.sendQ:
				// Go ≥1.23 timers: after Stop or Reset no stale tick is
				// delivered, so there is nothing to drain.
				timer.Stop()
			case <-timer.C:
				// A frame that is waiting wins over silence even when the
				// pacer woke late and both were ready.
				select {
				case f = <-c.sendQ:
				default:
				}
			}
		}
	}
}

func newSender(c *Conn) *sender {
	return &sender{c: c, enc: make([]byte, 0, 1500), pkt: make([]byte, 0, 1500), hdr: make([]byte, 0, 12), silence: []byte(SilenceFrame)}
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
	c := s.c
	// The DAVE session encrypts under keys a voice server's MLS messages
	// set up; a panic there drops this frame, not the process.
	defer c.recoverPeer(&c.stats.mediaPanics, ComponentMedia)
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
