package pcm

import (
	"testing"

	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

// reportCPU adds the CPU time per 20 ms of audio as a fraction of 20 ms.
func reportCPU(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/20e6, "cpu/20ms")
}

// BenchmarkDownsample is one 20 ms frame of 48 kHz mono to 24 kHz.
func BenchmarkDownsample(b *testing.B) {
	d := NewDownsampler()
	in := pcmtest.NewTone(440, 48000, 8000).Append(nil, 960)
	out := make([]int16, 0, 480)
	b.ReportAllocs()
	for b.Loop() {
		out = d.Append(out[:0], in)
	}
	reportCPU(b)
}

// BenchmarkUpsample is one 20 ms frame of 24 kHz mono to 48 kHz stereo.
func BenchmarkUpsample(b *testing.B) {
	u := NewUpsampler()
	in := pcmtest.NewTone(440, 24000, 8000).Append(nil, 480)
	out := make([]int16, 0, 4*480)
	b.ReportAllocs()
	for b.Loop() {
		out = u.AppendStereo(out[:0], in)
	}
	reportCPU(b)
}

// BenchmarkMix25 mixes 25 speakers' 20 ms mono 48 kHz frames.
func BenchmarkMix25(b *testing.B) {
	sources := make([][]int16, 25)
	for i := range sources {
		sources[i] = pcmtest.NewTone(200+float64(50*i), 48000, 1000).Append(nil, 960)
	}
	dst := make([]int16, 960)
	b.ReportAllocs()
	for b.Loop() {
		dst = Mix(dst, sources...)
	}
	reportCPU(b)
}
