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
	select {
	case c.sendQ <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// sender owns the outgoing RTP state; only the pace goroutine touches it.
type sender struct {
	c        *Conn
	seq      uint16
	ts       uint32
	enc, pkt []byte
	hdr      []byte
}

// pace sends queued frames every 20 ms with the speaking flag set, ends an
// utterance with five silence frames, and sends UDP keepalives while idle.
func (c *Conn) pace() {
	defer c.wg.Done()
	s := &sender{c: c, enc: make([]byte, 0, 1500), pkt: make([]byte, 0, 1500), hdr: make([]byte, 0, 12)}
	s.seq, s.ts = randomStart()
	keep := time.NewTicker(keepaliveEvery)
	defer keep.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
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
		next := time.Now()
		silence := 0
		for {
			if f != nil {
				s.transmit(f)
				silence = trailingSilence
			} else {
				s.transmit(silenceFrame[:])
				silence--
				if silence == 0 {
					c.setSpeaking(false)
					break
				}
			}
			next = next.Add(FrameDuration)
			if d := time.Until(next); d < -3*FrameDuration {
				next = time.Now() // stalled: restart the clock rather than burst
			}
			timer.Reset(time.Until(next))
			select {
			case <-c.ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			f = nil
			select {
			case f = <-c.sendQ:
			default:
				if silence == trailingSilence {
					// One frame of grace for a producer running just behind.
					timer.Reset(FrameDuration)
					select {
					case <-c.ctx.Done():
						timer.Stop()
						return
					case f = <-c.sendQ:
						if !timer.Stop() {
							<-timer.C
						}
						next = time.Now()
					case <-timer.C:
						next = time.Now()
						silence = trailingSilence // first silence frame now
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
