package opus

import (
	"context"
	"errors"
	"fmt"

	pionopus "github.com/pion/opus"
)

// GoDecoder is the listening path's decoder: pion/opus v0.1.0, which
// decodes SILK, CELT and hybrid packets (RFC 6716) without the wasm
// runtime and, in BenchmarkDecode, in about two thirds of the time libopus
// in wasm takes, which is what keeps 25 simultaneous speakers under 10% of
// a core. It has no packet-loss concealment (a lost packet decodes to
// silence) and runs in-process rather than in a sandbox, so a decoder bug
// on a hostile packet is caught here as ErrInvalidPacket rather than
// contained by wasm. Not safe for concurrent use.
type GoDecoder struct {
	dec      pionDecoder
	channels int
}

// pionDecoder is the one method GoDecoder uses of *pionopus.Decoder; a
// test puts a decoder that panics in its place.
type pionDecoder interface {
	DecodeToInt16(in []byte, out []int16) (int, error)
}

// ErrDecoderPanicked reports a packet on which pion/opus panicked: it is
// an ErrInvalidPacket (skipped like any malformed packet), told apart so
// that callers can count what a hostile packet did to the parser.
var ErrDecoderPanicked = fmt.Errorf("%w: the pure-Go decoder panicked on it", ErrInvalidPacket)

// NewGoDecoder returns a pure-Go decoder producing the given channel count (1 or 2).
func NewGoDecoder(channels int) (*GoDecoder, error) {
	if err := validChannels(channels); err != nil {
		return nil, err
	}
	dec, err := newPion(channels)
	if err != nil {
		return nil, err
	}
	return &GoDecoder{dec: dec, channels: channels}, nil
}

func newPion(channels int) (*pionopus.Decoder, error) {
	dec, err := pionopus.NewDecoderWithOutput(SampleRate, channels)
	if err != nil {
		return nil, fmt.Errorf("opus: pure-Go decoder: %w", err)
	}
	return &dec, nil
}

// Channels reports the channel count Decode writes.
func (d *GoDecoder) Channels() int { return d.channels }

// Decode decodes one packet into pcm (interleaved) and returns the samples
// per channel written. An empty packet (lost) decodes to FrameSamples of
// silence. Malformed packets are ErrInvalidPacket, and a panic inside
// pion/opus on one is ErrDecoderPanicked (an ErrInvalidPacket too), after
// which the decoder starts afresh, its half-updated state discarded; pcm
// shorter than the packet's duration is ErrBufferTooSmall.
func (d *GoDecoder) Decode(_ context.Context, packet []byte, pcm []int16) (n int, err error) {
	if len(packet) == 0 {
		if len(pcm) < FrameSamples*d.channels {
			return 0, ErrBufferTooSmall
		}
		clear(pcm[:FrameSamples*d.channels])
		return FrameSamples, nil
	}
	if len(packet) > MaxPacketBytes {
		return 0, ErrInvalidPacket
	}
	need, err := packetSamples(packet)
	if err != nil {
		return 0, err
	}
	if len(pcm) < need*d.channels {
		return 0, ErrBufferTooSmall
	}
	defer func() {
		if recover() != nil {
			n, err = 0, ErrDecoderPanicked
			if fresh, ferr := newPion(d.channels); ferr == nil {
				d.dec = fresh
			} else {
				err = errors.Join(ErrDecoderPanicked, ferr)
			}
		}
	}()
	n, err = d.dec.DecodeToInt16(packet, pcm)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidPacket, err)
	}
	return n, nil
}

// packetSamples returns the samples per channel at 48 kHz a packet holds,
// from its TOC byte and frame count (RFC 6716 §3.1–3.2), rejecting packets
// over 120 ms.
func packetSamples(packet []byte) (int, error) {
	toc := packet[0]
	cfg := toc >> 3
	var frame int // samples per frame at 48 kHz
	switch {
	case cfg < 12: // SILK: 10, 20, 40, 60 ms
		frame = []int{480, 960, 1920, 2880}[cfg&3]
	case cfg < 16: // hybrid: 10, 20 ms
		frame = []int{480, 960}[cfg&1]
	default: // CELT: 2.5, 5, 10, 20 ms
		frame = []int{120, 240, 480, 960}[cfg&3]
	}
	frames := 1
	switch toc & 3 {
	case 1, 2:
		frames = 2
	case 3:
		if len(packet) < 2 {
			return 0, ErrInvalidPacket
		}
		frames = int(packet[1] & 0x3f)
		if frames == 0 {
			return 0, ErrInvalidPacket
		}
	}
	if frames*frame > MaxFrameSamples {
		return 0, ErrInvalidPacket
	}
	return frames * frame, nil
}
