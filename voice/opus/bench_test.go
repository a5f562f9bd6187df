package opus

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/clankie/clankie/voice/pcm"
)

// frameNanos is the real time one 20 ms frame of audio lasts.
const frameNanos = 20e6

// benchSignal is one second of 300 + 700 + 2500 Hz tones, 4000 each, as 20
// ms stereo frames: the same signal csrc/bench_native.c encodes.
func benchSignal() [][]int16 {
	frames := make([][]int16, 50)
	freqs := []float64{300, 700, 2500}
	for f := range frames {
		frame := make([]int16, 2*FrameSamples)
		for j := range FrameSamples {
			i := f*FrameSamples + j
			var v float64
			for _, fr := range freqs {
				v += 4000 * math.Sin(2*math.Pi*fr*float64(i)/SampleRate)
			}
			frame[2*j] = int16(math.RoundToEven(v))
			frame[2*j+1] = frame[2*j]
		}
		frames[f] = frame
	}
	return frames
}

// reportCPU adds the CPU time per 20 ms of audio as a fraction of 20 ms.
func reportCPU(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/frameNanos, "cpu/20ms")
}

func BenchmarkEncode(b *testing.B) {
	ctx := context.Background()
	rt := newRuntime(b)
	for _, complexity := range []int{10, 5} {
		b.Run("complexity="+strconv.Itoa(complexity), func(b *testing.B) {
			cfg := DefaultEncoderConfig()
			cfg.Complexity = complexity
			enc, err := rt.NewEncoder(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close(ctx)
			frames := benchSignal()
			out := make([]byte, MaxPacketBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := enc.Encode(ctx, frames[i%len(frames)], out); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b)
		})
	}
}

// BenchmarkEncodeNative runs the same libopus natively (gcc -O2, same
// defines, same signal and settings as BenchmarkEncode/complexity=10) via
// scripts/opus-native-bench over a fixed 1000 frames (20 s of audio), as
// the baseline for the wasm cost; its ns/op is the native encode time per
// frame. It skips
// when gcc or the libopus source (npm) is unavailable.
func BenchmarkEncodeNative(b *testing.B) {
	if _, err := exec.LookPath("gcc"); err != nil {
		b.Skip("gcc not installed: no native baseline")
	}
	out, err := exec.Command(filepath.Join("..", "..", "scripts", "opus-native-bench"), "1000").CombinedOutput()
	if err != nil {
		b.Skipf("scripts/opus-native-bench: %v: %s", err, out)
	}
	m := regexp.MustCompile(`encode_ns_per_frame=(\d+) decode_ns_per_frame=(\d+)`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("unexpected output %q", out)
	}
	enc, _ := strconv.ParseFloat(string(m[1]), 64)
	dec, _ := strconv.ParseFloat(string(m[2]), 64)
	b.ReportMetric(enc, "ns/op") // one op is one native 20 ms stereo encode, comparable with BenchmarkEncode
	b.ReportMetric(enc, "native-encode-ns/frame")
	b.ReportMetric(enc/frameNanos, "native-encode-cpu/20ms")
	b.ReportMetric(dec, "native-decode-ns/frame")
	b.ReportMetric(dec/frameNanos, "native-decode-cpu/20ms")
}

func encodedBenchSignal(b *testing.B, rt *Runtime) [][]byte {
	b.Helper()
	enc, err := rt.NewEncoder(context.Background(), DefaultEncoderConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close(context.Background())
	return encodeAll(b, enc, benchSignal())
}

func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	rt := newRuntime(b)
	packets := encodedBenchSignal(b, rt)
	b.Run("libopus-wasm", func(b *testing.B) {
		dec, err := rt.NewDecoder(ctx, 2)
		if err != nil {
			b.Fatal(err)
		}
		defer dec.Close(ctx)
		buf := make([]int16, MaxFrameSamples*2)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := dec.Decode(ctx, packets[i%len(packets)], buf); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b)
	})
	// pion/opus is the pure-Go alternative the issue names: the baseline
	// for choosing the decoder.
	b.Run("pion-go", func(b *testing.B) {
		dec, err := NewGoDecoder(2)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]int16, MaxFrameSamples*2)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := dec.Decode(ctx, packets[i%len(packets)], buf); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b)
	})
}

// BenchmarkListen25 is the per-frame work of the listening path for 25
// consented speakers talking at once: 25 decodes, stereo → mono, the mix,
// and 48 → 24 kHz, with either decoder. cpu/20ms is the fraction of one
// core it needs.
func BenchmarkListen25(b *testing.B) {
	ctx := context.Background()
	rt := newRuntime(b)
	packets := encodedBenchSignal(b, rt)
	const speakers = 25
	for _, kind := range decoderKinds(b, rt) {
		b.Run(kind.name, func(b *testing.B) {
			decs := make([]packetDecoder, speakers)
			for i := range decs {
				decs[i] = kind.make(2)
			}
			buf := make([]int16, MaxFrameSamples*2)
			monos := make([][]int16, speakers)
			for i := range monos {
				monos[i] = make([]int16, 0, FrameSamples)
			}
			mixed := make([]int16, FrameSamples)
			down := pcm.NewDownsampler()
			out := make([]int16, 0, FrameSamples/2)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for s, d := range decs {
					n, err := d.Decode(ctx, packets[(i+s)%len(packets)], buf)
					if err != nil {
						b.Fatal(err)
					}
					monos[s] = pcm.AppendMono(monos[s][:0], buf[:2*n])
				}
				mixed = pcm.Mix(mixed, monos...)
				out = down.Append(out[:0], mixed)
			}
			reportCPU(b)
		})
	}
}
