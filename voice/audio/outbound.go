package audio

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
)

// Encoder encodes one 20 ms frame of interleaved stereo PCM16 at 48 kHz
// (1920 samples) into out and returns the packet length. *opus.Encoder with
// two channels satisfies it.
type Encoder interface {
	Encode(ctx context.Context, pcm []int16, out []byte) (int, error)
}

// BargeInModel is what a barge-in tells the model (realtime.Session
// satisfies it): stop the response, and remember only what was heard.
type BargeInModel interface {
	CancelResponse(responseID string) bool
	Truncate(itemID string, contentIndex, audioEndMs int) bool
}

// OutboundConfig configures an Outbound.
type OutboundConfig struct {
	// Encoder is the stereo 48 kHz Opus encoder; the Outbound uses it from
	// whichever goroutine calls OutputAudio (and, to end an item, from
	// Run), one call at a time. The caller closes it after Run returns.
	Encoder Encoder
	// Send hands each frame in turn, on Run's goroutine, to the media
	// connection, which owns the one 20 ms clock of our outgoing audio: it
	// paces the frames, DAVE-encrypts them, raises and lowers the speaking
	// flag and ends each utterance with silence frames. Send blocks until
	// the connection takes the frame for its slot (media.Conn.Play), which
	// is all the pacing the Outbound gets, and keeps it at most one frame
	// ahead of the wire; it errs only when ctx ends or the connection is
	// gone. It owns the slice.
	Send func(ctx context.Context, opusFrame []byte) error
	// Model, when set, is told of a barge-in by SpeechStarted:
	// response.cancel and conversation.item.truncate.
	Model BargeInModel
	// MaxQueue bounds the encoded frames waiting to be played (default
	// 3000, a minute); frames beyond it are dropped and counted.
	MaxQueue int
}

// Cut is where a barge-in stopped an assistant item: what the caller sends
// as response.cancel and conversation.item.truncate.
type Cut struct {
	ResponseID string
	ItemID     string
	// AudioEndMs is how much of the item's audio was handed to Send.
	AudioEndMs int
}

// OutboundStats are the speaking path's counters; none holds content.
type OutboundStats struct {
	// AudioOut is the audio sent (frames × 20 ms).
	AudioOut time.Duration
	// FramesOut counts frames handed to Send.
	FramesOut uint64
	// Encoded counts Opus frames encoded.
	Encoded uint64
	// BargeIns counts barge-ins that found Clankie talking.
	BargeIns uint64
	// DroppedBargeIn counts queued frames a barge-in dropped unplayed.
	DroppedBargeIn uint64
	// DroppedCancelled counts frames of an item or response already cut,
	// encoded from deltas that arrived after the barge-in.
	DroppedCancelled uint64
	// DroppedOverflow counts frames refused by a full queue, unencoded.
	DroppedOverflow uint64
	// DroppedModelLost counts queued frames dropped because the model
	// connection that produced them was lost.
	DroppedModelLost uint64
	// Errors counts encode failures and malformed deltas.
	Errors uint64
	// Queued is how many frames wait now.
	Queued int
}

type outboundCounters struct {
	framesOut, encoded, bargeIns, droppedBargeIn, droppedCancelled, overflow, modelLost, errors atomic.Uint64
	queued                                                                                      atomic.Int64
}

type outFrame struct {
	responseID, itemID string
	opus               []byte
}

// cancelledKeep is how many cut item and response ids are remembered to
// refuse their late deltas; a response rarely has more than one audio item.
const cancelledKeep = 8

// Outbound turns the model's audio into Opus frames, queues them for the
// media connection and stops them on barge-in. OutputAudio, BargeIn and
// Stats may be called from any goroutine; Run hands the frames over on
// one.
type Outbound struct {
	cfg   OutboundConfig
	kick  chan struct{}
	stats outboundCounters

	// encMu guards the encoding state. Lock order: encMu, then mu.
	encMu   sync.Mutex
	up      *pcm.Upsampler
	samples []int16
	stereo  []int16 // 48 kHz stereo not yet a whole frame, of encItem
	encResp string
	encItem string
	oddByte int // a delta's trailing odd byte (the low byte of the next sample), or -1
	packet  []byte

	mu         sync.Mutex
	queue      []outFrame
	speaking   bool // an utterance is under way: frames are being handed to Send
	afterAudio bool // a frame was handed over since the queue was last dry: end its item when it runs dry
	playResp   string
	playItem   string
	played     int // frames of playItem handed to Send
	cutItems   []string
	cutResps   []string
}

// NewOutbound validates cfg and returns an Outbound; call Run to hand its
// frames over.
func NewOutbound(cfg OutboundConfig) (*Outbound, error) {
	if cfg.Encoder == nil {
		return nil, errors.New("audio: outbound needs an encoder")
	}
	if cfg.Send == nil {
		return nil, errors.New("audio: outbound needs a send function")
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 3000
	}
	return &Outbound{cfg: cfg, kick: make(chan struct{}, 1), up: pcm.NewUpsampler(),
		oddByte: -1, packet: make([]byte, opus.MaxPacketBytes)}, nil
}

// OutputAudio takes one response.output_audio.delta: PCM16 LE mono at
// 24 kHz, any length. Whole 20 ms frames are encoded and queued at once;
// the rest waits for the next delta of the item (or is padded when the
// item ends). Deltas of an item or response already cut by a barge-in are
// dropped. It never blocks on Send, so it fits realtime.Listener.
func (o *Outbound) OutputAudio(responseID, itemID string, delta []byte) {
	o.encMu.Lock()
	defer o.encMu.Unlock()
	if o.isCut(responseID, itemID) {
		o.stats.droppedCancelled.Add(uint64((len(delta)/2 + 479) / 480))
		return
	}
	if itemID != o.encItem || responseID != o.encResp {
		o.endItemLocked()
		o.encResp, o.encItem = responseID, itemID
	}
	o.samples = o.samples[:0]
	if o.oddByte >= 0 && len(delta) > 0 {
		o.samples = append(o.samples, int16(uint16(o.oddByte)|uint16(delta[0])<<8))
		o.oddByte = -1
		delta = delta[1:]
	}
	even := len(delta) &^ 1
	o.samples, _ = pcm.AppendFromLE(o.samples, delta[:even])
	if even < len(delta) {
		o.oddByte = int(delta[even])
	}
	o.stereo = o.up.AppendStereo(o.stereo, o.samples)
	const frame = 2 * opus.FrameSamples
	done := 0
	for ; len(o.stereo)-done >= frame; done += frame {
		o.encodeLocked(o.stereo[done : done+frame])
	}
	o.stereo = o.stereo[:copy(o.stereo, o.stereo[done:])]
}

// endItemLocked pads the item's last partial frame with silence and queues
// it, so the end of a sentence is not lost. encMu is held.
func (o *Outbound) endItemLocked() {
	o.oddByte = -1
	if len(o.stereo) == 0 {
		return
	}
	const frame = 2 * opus.FrameSamples
	for len(o.stereo) < frame {
		o.stereo = append(o.stereo, 0)
	}
	o.encodeLocked(o.stereo)
	o.stereo = o.stereo[:0]
}

// encodeLocked encodes one stereo frame of the current item and queues it.
// The context is not the caller's: OutputAudio has none (it is a
// realtime.Listener method), and an encode is a bounded computation.
//
// A frame the queue has no room for is dropped (counted as overflow)
// before it is encoded: a model that sends audio far faster than it plays
// costs no encoding beyond what can be played.
func (o *Outbound) encodeLocked(frame []int16) {
	o.mu.Lock()
	full := len(o.queue) >= o.cfg.MaxQueue
	o.mu.Unlock()
	if full {
		o.stats.overflow.Add(1)
		return
	}
	n, err := o.cfg.Encoder.Encode(context.Background(), frame, o.packet)
	if err != nil {
		o.stats.errors.Add(1)
		return
	}
	o.stats.encoded.Add(1)
	o.push(outFrame{responseID: o.encResp, itemID: o.encItem, opus: append([]byte(nil), o.packet[:n]...)})
}

func (o *Outbound) push(f outFrame) {
	o.mu.Lock()
	switch {
	case o.isCutLocked(f.responseID, f.itemID):
		o.stats.droppedCancelled.Add(1)
	case len(o.queue) >= o.cfg.MaxQueue:
		o.stats.overflow.Add(1)
	default:
		o.queue = append(o.queue, f)
		o.stats.queued.Store(int64(len(o.queue)))
	}
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

func (o *Outbound) isCut(responseID, itemID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.isCutLocked(responseID, itemID)
}

func (o *Outbound) isCutLocked(responseID, itemID string) bool {
	for _, id := range o.cutItems {
		if id == itemID {
			return true
		}
	}
	if responseID == "" {
		return false
	}
	for _, id := range o.cutResps {
		if id == responseID {
			return true
		}
	}
	return false
}

func remember(ids []string, id string) []string {
	if id == "" {
		return ids
	}
	for _, have := range ids {
		if have == id {
			return ids
		}
	}
	if len(ids) >= cancelledKeep {
		ids = append(ids[:0], ids[1:]...)
	}
	return append(ids, id)
}

// BargeIn stops Clankie at once: every queued frame is dropped (at most the
// frame already handed to Send still plays), later deltas of the cut item
// and response are refused, and the media connection ends the utterance
// with its silence frames. It reports where the item playing (or about to
// play) was cut, and false when Clankie was not talking.
func (o *Outbound) BargeIn() (Cut, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.speaking && len(o.queue) == 0 {
		return Cut{}, false
	}
	cut := Cut{ResponseID: o.playResp, ItemID: o.playItem, AudioEndMs: o.played * int(FrameDuration/time.Millisecond)}
	if cut.ItemID == "" && len(o.queue) > 0 {
		cut = Cut{ResponseID: o.queue[0].responseID, ItemID: o.queue[0].itemID}
	}
	for _, f := range o.queue {
		o.cutItems = remember(o.cutItems, f.itemID)
		o.cutResps = remember(o.cutResps, f.responseID)
	}
	o.cutItems = remember(o.cutItems, cut.ItemID)
	o.cutResps = remember(o.cutResps, cut.ResponseID)
	o.stats.droppedBargeIn.Add(uint64(len(o.queue)))
	clear(o.queue)
	o.queue = o.queue[:0]
	o.stats.queued.Store(0)
	o.afterAudio = false
	o.stats.bargeIns.Add(1)
	return cut, true
}

// ModelLost forgets everything the lost model connection said: queued
// frames are dropped (the answer belongs to a conversation the next
// connection only knows from its re-seed), a partial frame is discarded,
// and the item playing is forgotten, so a later barge-in sends no truncate
// for an item the new connection never had. An utterance under way ends
// with the media connection's silence frames.
func (o *Outbound) ModelLost() {
	o.encMu.Lock()
	defer o.encMu.Unlock()
	o.stereo = o.stereo[:0]
	o.oddByte = -1
	o.up = pcm.NewUpsampler()
	o.encResp, o.encItem = "", ""
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.modelLost.Add(uint64(len(o.queue)))
	clear(o.queue)
	o.queue = o.queue[:0]
	o.stats.queued.Store(0)
	o.afterAudio = false
	o.playResp, o.playItem, o.played = "", "", 0
}

// SpeechStarted is the model's input_audio_buffer.speech_started: while
// Clankie talks, it barges in and, when Model is set, cancels the response
// and truncates the item at what was played.
func (o *Outbound) SpeechStarted(int) {
	cut, ok := o.BargeIn()
	if !ok || o.cfg.Model == nil || cut.ResponseID == "" && cut.ItemID == "" {
		return // nothing of the current connection's was playing
	}
	o.cfg.Model.CancelResponse(cut.ResponseID)
	if cut.ItemID != "" {
		o.cfg.Model.Truncate(cut.ItemID, 0, cut.AudioEndMs)
	}
}

// SpeechStopped is input_audio_buffer.speech_stopped; nothing to do.
func (o *Outbound) SpeechStopped(int) {}

// Stats returns the counters so far.
func (o *Outbound) Stats() OutboundStats {
	s := &o.stats
	frames := s.framesOut.Load()
	return OutboundStats{
		AudioOut:         time.Duration(frames) * FrameDuration,
		FramesOut:        frames,
		Encoded:          s.encoded.Load(),
		BargeIns:         s.bargeIns.Load(),
		DroppedBargeIn:   s.droppedBargeIn.Load(),
		DroppedCancelled: s.droppedCancelled.Load(),
		DroppedOverflow:  s.overflow.Load(),
		DroppedModelLost: s.modelLost.Load(),
		Errors:           s.errors.Load(),
		Queued:           int(s.queued.Load()),
	}
}

// MarshalLogObject lets a receipt log the counters with zap.Object; they
// hold counts and durations only.
func (s OutboundStats) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddDuration("audio_out", s.AudioOut)
	enc.AddUint64("frames_out", s.FramesOut)
	enc.AddUint64("encoded", s.Encoded)
	enc.AddUint64("barge_ins", s.BargeIns)
	enc.AddUint64("dropped_barge_in", s.DroppedBargeIn)
	enc.AddUint64("dropped_cancelled", s.DroppedCancelled)
	enc.AddUint64("dropped_overflow", s.DroppedOverflow)
	enc.AddUint64("dropped_model_lost", s.DroppedModelLost)
	enc.AddUint64("errors", s.Errors)
	enc.AddInt("queued", s.Queued)
	return nil
}

// Run hands the queued frames to Send, in order, until ctx ends or Send
// fails (the media connection is gone), and returns why. Send's blocking
// is the pacing: Run keeps no clock.
func (o *Outbound) Run(ctx context.Context) error {
	defer o.stop()
	for {
		frame, ok := o.next()
		if !ok {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-o.kick:
			}
			continue
		}
		if err := o.cfg.Send(ctx, frame); err != nil {
			return err
		}
	}
}

// next returns the frame to hand over now, or false when the queue is dry
// (the utterance is then over, as far as the Outbound is concerned).
func (o *Outbound) next() ([]byte, bool) {
	o.mu.Lock()
	if len(o.queue) == 0 && o.afterAudio {
		// The queue ran dry after audio, with Send having taken the last
		// frame for its slot: the item's last partial frame, if any, is
		// encoded now, unless a delta is being encoded right now (more
		// audio is on its way).
		o.afterAudio = false
		o.mu.Unlock()
		if o.encMu.TryLock() {
			o.endItemLocked()
			o.encMu.Unlock()
		}
		o.mu.Lock()
	}
	if len(o.queue) == 0 {
		o.speaking = false
		o.mu.Unlock()
		return nil, false
	}
	f := o.queue[0]
	o.queue[0] = outFrame{}
	o.queue = o.queue[1:]
	o.stats.queued.Store(int64(len(o.queue)))
	if f.itemID != o.playItem || f.responseID != o.playResp {
		o.playResp, o.playItem, o.played = f.responseID, f.itemID, 0
	}
	o.played++
	o.afterAudio = true
	o.speaking = true
	o.mu.Unlock()
	o.stats.framesOut.Add(1)
	return f.opus, true
}

// stop ends an utterance cut short by Run returning.
func (o *Outbound) stop() {
	o.mu.Lock()
	o.speaking = false
	o.mu.Unlock()
}
