package opus

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// Decoder turns Opus packets into interleaved PCM16 at 48 kHz. It is
// libopus's decoder: it handles SILK, CELT and hybrid packets (Discord
// clients and @discordjs/voice send CELT/hybrid), conceals lost packets and
// rejects malformed ones with ErrInvalidPacket. Only tests use it, as the
// reference GoDecoder and the encoder are checked against; the listening
// path decodes with GoDecoder. The module still carries the decoder.
type Decoder struct {
	in       *instance
	decode   api.Function
	destroy  api.Function
	dec      uint32
	packet   uint32
	pcm      uint32
	channels int
}

// NewDecoder returns a decoder producing the given channel count (1 or 2),
// whatever the packets carry; it has its own module instance.
func (r *Runtime) NewDecoder(ctx context.Context, channels int) (*Decoder, error) {
	if err := validChannels(channels); err != nil {
		return nil, err
	}
	in, err := r.instantiate(ctx)
	if err != nil {
		return nil, err
	}
	d, err := newDecoder(ctx, in, channels)
	if err != nil {
		return nil, errors.Join(err, in.close(ctx))
	}
	return d, nil
}

func newDecoder(ctx context.Context, in *instance, channels int) (*Decoder, error) {
	d := &Decoder{in: in, channels: channels}
	create, err := in.fn("shim_decoder_create")
	if err != nil {
		return nil, err
	}
	if d.decode, err = in.fn("shim_decode"); err != nil {
		return nil, err
	}
	if d.destroy, err = in.fn("shim_decoder_destroy"); err != nil {
		return nil, err
	}
	if d.packet, err = in.malloc(ctx, MaxPacketBytes); err != nil {
		return nil, err
	}
	if d.pcm, err = in.malloc(ctx, 2*MaxFrameSamples*channels); err != nil {
		return nil, err
	}
	errPtr, err := in.malloc(ctx, 4)
	if err != nil {
		return nil, err
	}
	dec, err := in.call(ctx, create, uint64(channels), uint64(errPtr))
	if err != nil {
		return nil, err
	}
	if dec == 0 {
		code, ok := in.mem.ReadUint32Le(errPtr)
		if !ok {
			return nil, fmt.Errorf("create decoder: %w", ErrInternal)
		}
		return nil, fmt.Errorf("create decoder: %w", Error(int32(code)))
	}
	d.dec = uint32(dec)
	return d, nil
}

// Channels reports the channel count Decode writes.
func (d *Decoder) Channels() int { return d.channels }

// Decode decodes one packet into pcm (interleaved) and returns the samples
// per channel written: 960 for a 20 ms packet. An empty packet means "lost":
// the decoder conceals FrameSamples of audio. pcm must hold the packet's
// duration (up to MaxFrameSamples × channels for any packet); packets longer
// than MaxPacketBytes are rejected as invalid.
func (d *Decoder) Decode(ctx context.Context, packet []byte, pcm []int16) (int, error) {
	if d.in.broken {
		return 0, ErrBroken
	}
	if len(packet) > MaxPacketBytes {
		return 0, ErrInvalidPacket
	}
	frame := min(len(pcm)/d.channels, MaxFrameSamples)
	if len(packet) == 0 {
		frame = min(frame, FrameSamples)
	}
	if frame == 0 {
		return 0, ErrBufferTooSmall
	}
	var packetPtr uint32
	if len(packet) > 0 {
		b, err := d.in.view(d.packet, len(packet))
		if err != nil {
			return 0, err
		}
		copy(b, packet)
		packetPtr = d.packet
	}
	n, err := d.in.call(ctx, d.decode, uint64(d.dec), uint64(packetPtr), uint64(len(packet)), uint64(d.pcm), uint64(frame), 0)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, Error(n)
	}
	if err := d.in.readInt16(d.pcm, pcm[:int(n)*d.channels]); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Close frees the decoder and its module instance.
func (d *Decoder) Close(ctx context.Context) error {
	if !d.in.broken {
		_, _ = d.in.call(ctx, d.destroy, uint64(d.dec))
	}
	return d.in.close(ctx)
}

// readInt16 loads len(dst) little-endian samples from ptr.
func (in *instance) readInt16(ptr uint32, dst []int16) error {
	b, err := in.view(ptr, 2*len(dst))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
	}
	return nil
}
