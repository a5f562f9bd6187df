package opus

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// EncoderConfig chooses how Clankie's voice is encoded.
type EncoderConfig struct {
	// Channels is 1 or 2; Discord expects stereo.
	Channels int
	// Application is ApplicationAudio by default: the model's voice is clean
	// synthetic speech, not a noisy microphone, so VoIP's speech processing
	// (high-pass, emphasis) would only colour it; at 64 kbit/s the audio
	// mode still picks SILK/hybrid for speech by its own signal analysis.
	// It is also what @discordjs/voice's encoder uses for bots.
	Application Application
	// Bitrate in bit/s; 64000 by default (Discord's default channel bitrate).
	Bitrate int
	// Complexity 0..10; 10 by default (libopus's default; see the benchmarks).
	Complexity int
	// LossPercent > 0 turns on in-band FEC tuned for that expected packet loss.
	LossPercent int
}

// DefaultEncoderConfig is 48 kHz stereo voice at 64 kbit/s without FEC.
func DefaultEncoderConfig() EncoderConfig {
	return EncoderConfig{Channels: 2, Application: ApplicationAudio, Bitrate: 64000, Complexity: 10}
}

// Encoder turns 20 ms frames of interleaved PCM16 at 48 kHz into Opus packets.
type Encoder struct {
	in       *instance
	encode   api.Function
	destroy  api.Function
	enc      uint32
	pcm      uint32
	out      uint32
	channels int
}

// NewEncoder returns an encoder with its own module instance.
func (r *Runtime) NewEncoder(ctx context.Context, cfg EncoderConfig) (*Encoder, error) {
	if err := validChannels(cfg.Channels); err != nil {
		return nil, err
	}
	if cfg.Complexity < 0 || cfg.Complexity > 10 {
		return nil, fmt.Errorf("opus: complexity %d, want 0..10", cfg.Complexity)
	}
	if cfg.LossPercent < 0 || cfg.LossPercent > 100 {
		return nil, fmt.Errorf("opus: loss percent %d, want 0..100", cfg.LossPercent)
	}
	in, err := r.instantiate(ctx)
	if err != nil {
		return nil, err
	}
	e, err := newEncoder(ctx, in, cfg)
	if err != nil {
		return nil, errors.Join(err, in.close(ctx))
	}
	return e, nil
}

func newEncoder(ctx context.Context, in *instance, cfg EncoderConfig) (*Encoder, error) {
	e := &Encoder{in: in, channels: cfg.Channels}
	create, err := in.fn("shim_encoder_create")
	if err != nil {
		return nil, err
	}
	if e.encode, err = in.fn("shim_encode"); err != nil {
		return nil, err
	}
	if e.destroy, err = in.fn("shim_encoder_destroy"); err != nil {
		return nil, err
	}
	if e.pcm, err = in.malloc(ctx, 2*FrameSamples*cfg.Channels); err != nil {
		return nil, err
	}
	if e.out, err = in.malloc(ctx, MaxPacketBytes); err != nil {
		return nil, err
	}
	errPtr, err := in.malloc(ctx, 4)
	if err != nil {
		return nil, err
	}
	enc, err := in.call(ctx, create, uint64(cfg.Channels), uint64(uint32(cfg.Application)), uint64(cfg.Bitrate),
		uint64(cfg.Complexity), uint64(cfg.LossPercent), uint64(errPtr))
	if err != nil {
		return nil, err
	}
	if enc == 0 {
		code, ok := in.mem.ReadUint32Le(errPtr)
		if !ok {
			return nil, fmt.Errorf("create encoder: %w", ErrInternal)
		}
		return nil, fmt.Errorf("create encoder: %w", Error(int32(code)))
	}
	e.enc = uint32(enc)
	return e, nil
}

// Encode encodes one 20 ms frame (FrameSamples × channels interleaved
// samples) into out and returns the packet length. out should hold
// MaxPacketBytes; a shorter out may fail with ErrBufferTooSmall.
func (e *Encoder) Encode(ctx context.Context, pcm []int16, out []byte) (int, error) {
	if len(pcm) != FrameSamples*e.channels {
		return 0, fmt.Errorf("opus: encode %d samples, want %d (20 ms × %d channels)", len(pcm), FrameSamples*e.channels, e.channels)
	}
	if e.in.broken {
		return 0, ErrBroken
	}
	if err := e.in.writeInt16(e.pcm, pcm); err != nil {
		return 0, err
	}
	limit := min(len(out), MaxPacketBytes)
	n, err := e.in.call(ctx, e.encode, uint64(e.enc), uint64(e.pcm), FrameSamples, uint64(e.out), uint64(limit))
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, Error(n)
	}
	b, err := e.in.view(e.out, int(n))
	if err != nil {
		return 0, err
	}
	return copy(out, b), nil
}

// Close frees the encoder and its module instance.
func (e *Encoder) Close(ctx context.Context) error {
	if !e.in.broken {
		_, _ = e.in.call(ctx, e.destroy, uint64(e.enc))
	}
	return e.in.close(ctx)
}
