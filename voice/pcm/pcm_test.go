package pcm

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

const amp = 10000

func tone(freq float64, rate, n int) []int16 {
	return pcmtest.NewTone(freq, rate, amp).Append(nil, n)
}

// feed runs src through fn in chunks of the given sizes (cycled).
func feed(fn func(dst, src []int16) []int16, src []int16, chunks ...int) []int16 {
	var out []int16
	for i, c := 0, 0; i < len(src); c++ {
		n := min(chunks[c%len(chunks)], len(src)-i)
		out = fn(out, src[i:i+n])
		i += n
	}
	return out
}

// steady drops the filter's start-up transient (and a little more).
func steady(s []int16) []int16 { return s[min(len(s), 200):] }

func TestDownsamplerKeepsToneFrequency(t *testing.T) {
	tests := []struct {
		name   string
		freq   float64
		chunks []int
	}{
		{"440 Hz in 20 ms frames", 440, []int{960}},
		{"700 Hz in 20 ms frames", 700, []int{960}},
		{"3 kHz in odd chunks", 3000, []int{7, 961, 1, 333}},
		{"8 kHz near the passband edge", 8000, []int{960}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tone(tt.freq, 48000, 48000/2)
			out := feed(NewDownsampler().Append, in, tt.chunks...)
			if len(out) != len(in)/2 {
				t.Fatalf("got %d samples from %d, want %d", len(out), len(in), len(in)/2)
			}
			got := pcmtest.DominantFrequency(steady(out), 24000, 50, 9000)
			if math.Abs(got-tt.freq) > 2 {
				t.Errorf("dominant frequency %.1f Hz, want %.0f ± 2", got, tt.freq)
			}
			if a := pcmtest.Amplitude(steady(out), 24000, tt.freq); math.Abs(a-amp) > amp/100 {
				t.Errorf("amplitude %.0f, want %d ± 1%%", a, amp)
			}
		})
	}
}

func TestDownsamplerSuppressesAliases(t *testing.T) {
	tests := []struct {
		freq, alias float64
	}{
		{15000, 9000},
		{18000, 6000},
		{21000, 3000},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			out := NewDownsampler().Append(nil, tone(tt.freq, 48000, 48000/2))
			// -60 dB: the alias must be at most a thousandth of the tone.
			if a := pcmtest.Amplitude(steady(out), 24000, tt.alias); a > amp/1000 {
				t.Errorf("%.0f Hz aliases to %.0f Hz at amplitude %.1f, want ≤ %d", tt.freq, tt.alias, a, amp/1000)
			}
		})
	}
}

func TestUpsamplerKeepsToneFrequency(t *testing.T) {
	tests := []struct {
		name   string
		freq   float64
		chunks []int
	}{
		{"440 Hz in 20 ms frames", 440, []int{480}},
		{"700 Hz in odd chunks", 700, []int{1, 479, 13}},
		{"5 kHz", 5000, []int{480}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tone(tt.freq, 24000, 24000/2)
			out := feed(NewUpsampler().AppendStereo, in, tt.chunks...)
			if len(out) != 4*len(in) {
				t.Fatalf("got %d samples from %d, want %d", len(out), len(in), 4*len(in))
			}
			for i := 0; i < len(out); i += 2 {
				if out[i] != out[i+1] {
					t.Fatalf("frame %d: left %d != right %d", i/2, out[i], out[i+1])
				}
			}
			mono := AppendMono(nil, out)
			if got := pcmtest.DominantFrequency(steady(mono), 48000, 50, 8000); math.Abs(got-tt.freq) > 2 {
				t.Errorf("dominant frequency %.1f Hz, want %.0f ± 2", got, tt.freq)
			}
			if a := pcmtest.Amplitude(steady(mono), 48000, tt.freq); math.Abs(a-amp) > amp/100 {
				t.Errorf("amplitude %.0f, want %d ± 1%%", a, amp)
			}
			image := 24000 - tt.freq
			if a := pcmtest.Amplitude(steady(mono), 48000, image); a > amp/1000 {
				t.Errorf("image at %.0f Hz has amplitude %.1f, want ≤ %d", image, a, amp/1000)
			}
		})
	}
}

// Chunking must not change the output: the state carries across calls,
// including the decimation phase after an odd-length chunk.
func TestResamplersAreChunkInvariant(t *testing.T) {
	in48 := tone(1234, 48000, 4801)
	whole := NewDownsampler().Append(nil, in48)
	in24 := tone(1234, 24000, 2401)
	wholeUp := NewUpsampler().AppendStereo(nil, in24)
	for _, chunks := range [][]int{{1}, {2}, {3}, {959, 961}, {4801}, {0, 5}} {
		if chunks[0] == 0 {
			// Empty calls in between change nothing.
			d := NewDownsampler()
			withEmpty := func(dst, src []int16) []int16 {
				if out := d.Append(nil, nil); len(out) != 0 {
					t.Fatalf("empty input gave %d samples", len(out))
				}
				return d.Append(dst, src)
			}
			if out := feed(withEmpty, in48, chunks[1:]...); !slices.Equal(out, whole) {
				t.Errorf("down, empty calls between chunks of %v: output differs", chunks[1:])
			}
			continue
		}
		if got := feed(NewDownsampler().Append, in48, chunks...); !slices.Equal(got, whole) {
			t.Errorf("down, chunks %v: output differs from one call (len %d vs %d)", chunks, len(got), len(whole))
		}
		if got := feed(NewUpsampler().AppendStereo, in24, chunks...); !slices.Equal(got, wholeUp) {
			t.Errorf("up, chunks %v: output differs from one call", chunks)
		}
	}
}

func TestResampleEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		in      []int16
		wantLen int
	}{
		{"empty", nil, 0},
		{"one sample", []int16{1000}, 1},
		{"two samples", []int16{1000, 1000}, 1},
		{"odd length", make([]int16, 961), 481},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewDownsampler().Append(nil, tt.in); len(got) != tt.wantLen {
				t.Errorf("down: %d samples, want %d", len(got), tt.wantLen)
			}
			if got := NewUpsampler().AppendStereo(nil, tt.in); len(got) != 4*len(tt.in) {
				t.Errorf("up: %d samples, want %d", len(got), 4*len(tt.in))
			}
		})
	}
	t.Run("full scale does not wrap", func(t *testing.T) {
		square := make([]int16, 4800)
		for i := range square {
			square[i] = math.MaxInt16
			if (i/24)%2 == 1 {
				square[i] = math.MinInt16
			}
		}
		// A full-scale square wave overshoots (Gibbs); the output must clamp,
		// never flip sign at a peak.
		out := NewUpsampler().AppendStereo(nil, square)
		for i := 200; i < len(out); i++ {
			j := i/4 - 12 // the input sample this output is centred on (delay 23 at 48 kHz)
			if p := j % 24; p < 6 || p > 18 {
				continue // near an edge, where the overshoot is
			}
			if s := square[j]; s == math.MaxInt16 && out[i] < 30000 || s == math.MinInt16 && out[i] > -30000 {
				t.Fatalf("sample %d = %d, input %d: wrapped", i, out[i], s)
			}
		}
	})
}

func TestMix(t *testing.T) {
	a := tone(440, 24000, 12000)
	b := tone(1000, 24000, 12000)
	mixed := Mix(nil, a, b)
	for _, f := range []float64{440, 1000} {
		if got := pcmtest.Amplitude(mixed, 24000, f); math.Abs(got-amp) > amp/100 {
			t.Errorf("mix of 440 Hz and 1 kHz: %v Hz at amplitude %.0f, want %d ± 1%%", f, got, amp)
		}
	}
	if got := pcmtest.Amplitude(mixed, 24000, 700); got > amp/1000 {
		t.Errorf("mix has 700 Hz at amplitude %.0f, want none", got)
	}

	tests := []struct {
		name    string
		sources [][]int16
		want    []int16
	}{
		{"none", nil, []int16{}},
		{"one keeps its level", [][]int16{{1, -2, 3}}, []int16{1, -2, 3}},
		{"sums", [][]int16{{100, 200}, {-50, 50}}, []int16{50, 250}},
		{"shorter source is silence past its end", [][]int16{{1, 1, 1}, {2}}, []int16{3, 1, 1}},
		{"saturates high", [][]int16{{30000, 32767}, {30000, 1}}, []int16{32767, 32767}},
		{"saturates low", [][]int16{{-30000}, {-30000}, {-30000}}, []int16{-32768}},
		{"25 speakers at full scale", slices.Repeat([][]int16{{32767, -32768}}, 25), []int16{32767, -32768}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mix(nil, tt.sources...); !slices.Equal(got, tt.want) {
				t.Errorf("Mix = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestChannels(t *testing.T) {
	tests := []struct {
		in, want []int16
	}{
		{nil, nil},
		{[]int16{100, 300}, []int16{200}},
		{[]int16{32767, 32767, -32768, -32768}, []int16{32767, -32768}},
		{[]int16{1, 2, 3}, []int16{1}}, // trailing odd sample ignored
	}
	for _, tt := range tests {
		if got := AppendMono(nil, tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("AppendMono(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestLittleEndian(t *testing.T) {
	samples := []int16{0, 1, -1, 32767, -32768, 0x1234}
	b := AppendLE(nil, samples)
	if want := []byte{0, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0x80, 0x34, 0x12}; !slices.Equal(b, want) {
		t.Errorf("AppendLE = % x, want % x", b, want)
	}
	back, err := AppendFromLE(nil, b)
	if err != nil || !slices.Equal(back, samples) {
		t.Errorf("AppendFromLE = %v, %v; want %v", back, err, samples)
	}
	if got, err := AppendFromLE([]int16{7}, []byte{1, 2, 3}); !errors.Is(err, ErrOddBytes) || !slices.Equal(got, []int16{7}) {
		t.Errorf("odd bytes: %v, %v; want [7], ErrOddBytes", got, err)
	}
}
