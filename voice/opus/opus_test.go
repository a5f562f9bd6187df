package opus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

// wasmSHA256 is the sha256 of opus.wasm as scripts/build-opus-wasm builds it
// (also in README.md); a change to the module must come with a rebuild.
const wasmSHA256 = "cdfc22db578ed6f32178f1d6904677e79613e01e772d01e770ad5e7dc48deef2"

const toneAmp = 8000

func newRuntime(t testing.TB) *Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := NewRuntime(ctx)
	if err != nil {
		t.Fatalf("NewRuntime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	return rt
}

// toneFrames returns n 20 ms frames of a freq Hz tone, interleaved with the
// given channel count.
func toneFrames(freq float64, channels, n int) [][]int16 {
	gen := pcmtest.NewTone(freq, SampleRate, toneAmp)
	frames := make([][]int16, n)
	for i := range frames {
		mono := gen.Append(nil, FrameSamples)
		if channels == 2 {
			frames[i] = pcmtest.AppendStereo(nil, mono)
		} else {
			frames[i] = mono
		}
	}
	return frames
}

func encodeAll(t testing.TB, enc *Encoder, frames [][]int16) [][]byte {
	t.Helper()
	packets := make([][]byte, len(frames))
	for i, f := range frames {
		out := make([]byte, MaxPacketBytes)
		n, err := enc.Encode(context.Background(), f, out)
		if err != nil {
			t.Fatalf("Encode frame %d: %v", i, err)
		}
		packets[i] = out[:n]
	}
	return packets
}

func toMono(pcmData []int16, channels int) []int16 {
	if channels == 1 {
		return pcmData
	}
	return pcm.AppendMono(nil, pcmData)
}

// modes names the Opus modes used by packets (from the TOC byte, RFC 6716 §3.1).
func modes(packets [][]byte) map[string]int {
	m := map[string]int{}
	for _, p := range packets {
		switch cfg := p[0] >> 3; {
		case cfg < 12:
			m["SILK"]++
		case cfg < 16:
			m["hybrid"]++
		default:
			m["CELT"]++
		}
	}
	return m
}

// packetDecoder is what Decoder and GoDecoder share.
type packetDecoder interface {
	Decode(ctx context.Context, packet []byte, pcm []int16) (int, error)
}

// decoderKinds makes each decoder implementation under test.
func decoderKinds(t testing.TB, rt *Runtime) []struct {
	name string
	make func(channels int) packetDecoder
} {
	return []struct {
		name string
		make func(channels int) packetDecoder
	}{
		{"libopus-wasm", func(channels int) packetDecoder {
			d, err := rt.NewDecoder(context.Background(), channels)
			if err != nil {
				t.Fatalf("NewDecoder: %v", err)
			}
			t.Cleanup(func() { _ = d.Close(context.Background()) })
			return d
		}},
		{"pion-go", func(channels int) packetDecoder {
			d, err := NewGoDecoder(channels)
			if err != nil {
				t.Fatalf("NewGoDecoder: %v", err)
			}
			return d
		}},
	}
}

func TestEmbeddedModuleIsTheScriptedBuild(t *testing.T) {
	sum := sha256.Sum256(wasmModule)
	if got := hex.EncodeToString(sum[:]); got != wasmSHA256 {
		t.Fatalf("opus.wasm sha256 %s, want %s: rebuild with scripts/build-opus-wasm and update README.md", got, wasmSHA256)
	}
	rt := newRuntime(t)
	if n := len(rt.compiled.ImportedFunctions()); n != 0 {
		t.Errorf("module imports %d functions, want 0", n)
	}
}

// The tone a person plays must come out of the decoder at the same
// frequency and about the same level, for the settings we use and the
// obvious alternatives, whichever decoder hears it: pion/opus is an
// independent implementation of RFC 6716, so it also proves the packets are
// standard Opus, not just something libopus round-trips. The settings cover
// all three modes (CELT, SILK, hybrid).
func TestEncodeDecodeKeepsToneFrequency(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	stereo := DefaultEncoderConfig()
	voip := stereo
	voip.Application = ApplicationVoIP
	fec := stereo
	fec.LossPercent = 10
	mono := stereo
	mono.Channels = 1
	mono.Bitrate = 32000
	low := stereo
	low.Complexity = 0
	tests := []struct {
		name string
		cfg  EncoderConfig
		freq float64
	}{
		{"700 Hz stereo audio 64k", stereo, 700},
		{"440 Hz stereo audio 64k", stereo, 440},
		{"3 kHz stereo audio 64k", stereo, 3000},
		{"700 Hz stereo voip", voip, 700},
		{"700 Hz stereo with FEC", fec, 700},
		{"700 Hz mono 32k", mono, 700},
		{"700 Hz complexity 0", low, 700},
	}
	for _, tt := range tests {
		enc, err := rt.NewEncoder(ctx, tt.cfg)
		if err != nil {
			t.Fatalf("%s: NewEncoder: %v", tt.name, err)
		}
		packets := encodeAll(t, enc, toneFrames(tt.freq, tt.cfg.Channels, 50))
		_ = enc.Close(ctx)
		for _, kind := range decoderKinds(t, rt) {
			t.Run(tt.name+"/"+kind.name, func(t *testing.T) {
				dec := kind.make(tt.cfg.Channels)
				var decoded []int16
				buf := make([]int16, MaxFrameSamples*tt.cfg.Channels)
				for i, p := range packets {
					n, err := dec.Decode(ctx, p, buf)
					if err != nil {
						t.Fatalf("Decode packet %d (%v): %v", i, modes(packets[i:i+1]), err)
					}
					if n != FrameSamples {
						t.Fatalf("packet %d decoded to %d samples, want %d", i, n, FrameSamples)
					}
					decoded = append(decoded, buf[:n*tt.cfg.Channels]...)
				}
				// Judge the second half second, well past the encoder's start-up.
				got := toMono(decoded, tt.cfg.Channels)[SampleRate/2:]
				if f := pcmtest.DominantFrequency(got, SampleRate, 50, 4000); math.Abs(f-tt.freq) > 2 {
					t.Errorf("decoded dominant frequency %.1f Hz, want %.0f ± 2", f, tt.freq)
				}
				if a := pcmtest.Amplitude(got, SampleRate, tt.freq); math.Abs(a-toneAmp) > toneAmp/5 {
					t.Errorf("decoded amplitude %.0f, want %d ± 20%%", a, toneAmp)
				}
				t.Logf("packets: %v, mean %d bytes", modes(packets), meanLen(packets))
			})
		}
	}
}

func meanLen(packets [][]byte) int {
	total := 0
	for _, p := range packets {
		total += len(p)
	}
	return total / max(len(packets), 1)
}

func TestDecodeLostPacketConceals(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	for _, kind := range decoderKinds(t, rt) {
		dec := kind.make(2)
		buf := make([]int16, MaxFrameSamples*2)
		if n, err := dec.Decode(ctx, nil, buf); err != nil || n != FrameSamples {
			t.Errorf("%s: Decode(lost) = %d, %v; want %d, nil", kind.name, n, err, FrameSamples)
		}
	}
}

func TestDecodeRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	enc, err := rt.NewEncoder(ctx, DefaultEncoderConfig())
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	defer enc.Close(ctx)
	good := encodeAll(t, enc, toneFrames(700, 2, 1))[0]

	tests := []struct {
		name   string
		packet []byte
		bufLen int
		want   error
	}{
		{"code 3 with zero frames", []byte{0x03, 0x00}, MaxFrameSamples * 2, ErrInvalidPacket},
		{"code 2 with a length past the end", []byte{0x02, 0xff, 0x01}, MaxFrameSamples * 2, ErrInvalidPacket},
		{"longer than any packet", make([]byte, MaxPacketBytes+1), MaxFrameSamples * 2, ErrInvalidPacket},
		{"output too small for the frame", good, 100, ErrBufferTooSmall},
		{"no output at all", good, 0, ErrBufferTooSmall},
	}
	for _, kind := range decoderKinds(t, rt) {
		dec := kind.make(2)
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				n, err := dec.Decode(ctx, tt.packet, make([]int16, tt.bufLen))
				if !errors.Is(err, tt.want) {
					t.Errorf("Decode = %d, %v; want %v", n, err, tt.want)
				}
			})
		}
		// The decoder still works after rejecting all that.
		if n, err := dec.Decode(ctx, good, make([]int16, MaxFrameSamples*2)); err != nil || n != FrameSamples {
			t.Errorf("%s: Decode(good) after bad input = %d, %v", kind.name, n, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	base := DefaultEncoderConfig()
	tests := []struct {
		name   string
		mutate func(*EncoderConfig)
	}{
		{"three channels", func(c *EncoderConfig) { c.Channels = 3 }},
		{"complexity 11", func(c *EncoderConfig) { c.Complexity = 11 }},
		{"loss 101%", func(c *EncoderConfig) { c.LossPercent = 101 }},
		{"unknown application", func(c *EncoderConfig) { c.Application = 7 }},
		{"negative bitrate", func(c *EncoderConfig) { c.Bitrate = -5 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mutate(&cfg)
			if enc, err := rt.NewEncoder(ctx, cfg); err == nil {
				_ = enc.Close(ctx)
				t.Errorf("NewEncoder(%+v) succeeded, want an error", cfg)
			}
		})
	}
	if _, err := rt.NewDecoder(ctx, 0); err == nil {
		t.Error("NewDecoder(0 channels) succeeded, want an error")
	}
	if _, err := NewGoDecoder(3); err == nil {
		t.Error("NewGoDecoder(3 channels) succeeded, want an error")
	}
	enc, err := rt.NewEncoder(ctx, base)
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	defer enc.Close(ctx)
	if _, err := enc.Encode(ctx, make([]int16, FrameSamples), make([]byte, MaxPacketBytes)); err == nil {
		t.Error("Encode of a mono-sized frame into a stereo encoder succeeded, want an error")
	}
}

// Encoders and decoders from one Runtime run on separate goroutines (the
// race detector checks they share nothing mutable).
func TestConcurrentCodecs(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			enc, err := rt.NewEncoder(ctx, DefaultEncoderConfig())
			if err != nil {
				errs <- err
				return
			}
			defer enc.Close(ctx)
			dec, err := rt.NewDecoder(ctx, 2)
			if err != nil {
				errs <- err
				return
			}
			defer dec.Close(ctx)
			freq := 300 + 200*float64(g)
			var decoded []int16
			buf := make([]int16, MaxFrameSamples*2)
			out := make([]byte, MaxPacketBytes)
			for _, f := range toneFrames(freq, 2, 25) {
				n, err := enc.Encode(ctx, f, out)
				if err != nil {
					errs <- err
					return
				}
				m, err := dec.Decode(ctx, out[:n], buf)
				if err != nil {
					errs <- err
					return
				}
				decoded = append(decoded, buf[:2*m]...)
			}
			got := pcm.AppendMono(nil, decoded)[SampleRate/10:]
			if f := pcmtest.DominantFrequency(got, SampleRate, 50, 4000); math.Abs(f-freq) > 3 {
				errs <- errors.New("goroutine decoded the wrong frequency")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzDecode feeds arbitrary packets to one long-lived decoder, as a
// hostile or broken peer would: no panic, no trap, output within bounds,
// and the instance's memory stays at its cap.
func FuzzDecode(f *testing.F) {
	ctx := context.Background()
	rt := newRuntime(f)
	addSeeds(f, rt)

	dec, err := rt.NewDecoder(ctx, 2)
	if err != nil {
		f.Fatalf("NewDecoder: %v", err)
	}
	buf := make([]int16, MaxFrameSamples*2)
	f.Fuzz(func(t *testing.T, packet []byte) {
		n, err := dec.Decode(ctx, packet, buf)
		if errors.Is(err, ErrBroken) || (err != nil && !errors.As(err, new(Error))) {
			t.Fatalf("Decode(%x) = %v: the module trapped", packet, err)
		}
		if err == nil && (n <= 0 || n > MaxFrameSamples) {
			t.Fatalf("Decode(%x) = %d samples, want 1..%d", packet, n, MaxFrameSamples)
		}
		if size := dec.in.mem.Size(); size > memoryLimitPages*65536 {
			t.Fatalf("decoder memory %d bytes, over the %d-page cap", size, memoryLimitPages)
		}
	})
}

// addSeeds seeds a decoder fuzz target with real CELT, SILK and hybrid
// packets and a few malformed ones.
func addSeeds(f *testing.F, rt *Runtime) {
	ctx := context.Background()
	voip := DefaultEncoderConfig()
	voip.Application = ApplicationVoIP
	for _, cfg := range []EncoderConfig{DefaultEncoderConfig(), voip} {
		enc, err := rt.NewEncoder(ctx, cfg)
		if err != nil {
			f.Fatalf("NewEncoder: %v", err)
		}
		for _, p := range encodeAll(f, enc, toneFrames(700, 2, 5)) {
			f.Add(p)
		}
		_ = enc.Close(ctx)
	}
	f.Add([]byte{})
	f.Add([]byte{0x03, 0x00})
	f.Add([]byte{0xfc, 0xff, 0xfe})
	f.Add([]byte{0x0b, 0x83, 0x01, 0x02})
}

// FuzzGoDecode is FuzzDecode for the pure-Go decoder: no panic escapes,
// errors are ErrInvalidPacket, output within bounds.
func FuzzGoDecode(f *testing.F) {
	addSeeds(f, newRuntime(f))
	dec, err := NewGoDecoder(2)
	if err != nil {
		f.Fatalf("NewGoDecoder: %v", err)
	}
	buf := make([]int16, MaxFrameSamples*2)
	f.Fuzz(func(t *testing.T, packet []byte) {
		n, err := dec.Decode(context.Background(), packet, buf)
		if err != nil && !errors.Is(err, ErrInvalidPacket) {
			t.Fatalf("Decode(%x) = %v, want nil or ErrInvalidPacket", packet, err)
		}
		if err == nil && (n <= 0 || n > MaxFrameSamples) {
			t.Fatalf("Decode(%x) = %d samples, want 1..%d", packet, n, MaxFrameSamples)
		}
	})
}
