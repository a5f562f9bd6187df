// Package pcmtest generates and measures test tones for the voice
// packages' tests: a sine generator continuous across frames, and Goertzel
// estimates of a frequency's amplitude and of the dominant frequency. No
// production path needs them, so they live here rather than in voice/pcm.
package pcmtest

import "math"

// Tone generates a sine wave continuously across calls, so a tone split
// into 20 ms frames has no phase jumps at frame edges.
type Tone struct {
	step      float64 // phase advance per sample, in radians
	phase     float64
	amplitude float64
}

// NewTone returns a sine of freqHz sampled at rateHz with the given peak amplitude.
func NewTone(freqHz float64, rateHz int, amplitude int16) *Tone {
	return &Tone{step: 2 * math.Pi * freqHz / float64(rateHz), amplitude: float64(amplitude)}
}

// Append appends n mono samples to dst.
func (t *Tone) Append(dst []int16, n int) []int16 {
	for range n {
		dst = append(dst, int16(math.Round(t.amplitude*math.Sin(t.phase))))
		t.phase += t.step
		if t.phase >= 2*math.Pi {
			t.phase -= 2 * math.Pi
		}
	}
	return dst
}

// Amplitude estimates the peak amplitude of the freqHz component of mono
// samples at rateHz (a Goertzel filter over a Hann-windowed block). A pure
// tone of amplitude A at freqHz reads ≈ A; frequencies more than two bins
// (2·rateHz/len(samples)) away read near 0.
func Amplitude(samples []int16, rateHz int, freqHz float64) float64 {
	w, wsum := hann(samples)
	return goertzel(w, wsum, rateHz, freqHz)
}

// hann returns the Hann-windowed samples and the window's sum.
func hann(samples []int16) ([]float64, float64) {
	n := len(samples)
	out := make([]float64, n)
	var wsum float64
	for i, v := range samples {
		w := 0.5
		if n > 1 {
			w = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n-1))
		}
		wsum += w
		out[i] = w * float64(v)
	}
	return out, wsum
}

func goertzel(windowed []float64, wsum float64, rateHz int, freqHz float64) float64 {
	if wsum == 0 {
		return 0
	}
	coeff := 2 * math.Cos(2*math.Pi*freqHz/float64(rateHz))
	var s1, s2 float64
	for _, v := range windowed {
		s1, s2 = v+coeff*s1-s2, s1
	}
	power := s1*s1 + s2*s2 - coeff*s1*s2
	if power < 0 {
		power = 0
	}
	return 2 * math.Sqrt(power) / wsum
}

// DominantFrequency reports the frequency between loHz and hiHz with the
// most energy in mono samples at rateHz: a Goertzel scan one bin
// (rateHz/len(samples)) apart, refined around the best bin in 0.1 Hz steps.
// For a tone that lasts the whole block this is accurate to well under 1 Hz.
func DominantFrequency(samples []int16, rateHz int, loHz, hiHz float64) float64 {
	if len(samples) < 2 || hiHz <= loHz {
		return 0
	}
	w, wsum := hann(samples)
	bin := float64(rateHz) / float64(len(samples))
	best := scan(w, wsum, rateHz, loHz, hiHz, bin)
	return scan(w, wsum, rateHz, math.Max(loHz, best-bin), math.Min(hiHz, best+bin), 0.1)
}

func scan(windowed []float64, wsum float64, rateHz int, lo, hi, step float64) float64 {
	best, bestAmp := lo, -1.0
	for i := 0; ; i++ {
		f := lo + float64(i)*step
		if f > hi {
			break
		}
		if a := goertzel(windowed, wsum, rateHz, f); a > bestAmp {
			best, bestAmp = f, a
		}
	}
	return best
}

// AppendStereo appends mono src duplicated into interleaved stereo to dst:
// a tone as the 48 kHz stereo an Opus encoder takes.
func AppendStereo(dst, mono []int16) []int16 {
	for _, s := range mono {
		dst = append(dst, s, s)
	}
	return dst
}
