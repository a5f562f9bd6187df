// Package pcm is the sample plumbing between Discord's audio (48 kHz stereo
// PCM16 from the Opus decoder) and the realtime model's (24 kHz mono PCM16,
// little-endian): mixing, channel conversion, 2:1 resampling, byte packing,
// and the tone generator and frequency detector tests use to prove what a
// listener would hear.
package pcm

import (
	"errors"
	"math"
)

// saturate clamps a sum to int16 instead of letting it wrap: a wrap is a loud
// click, a clamp is mild distortion.
func saturate(v int32) int16 {
	if v > math.MaxInt16 {
		return math.MaxInt16
	}
	if v < math.MinInt16 {
		return math.MinInt16
	}
	return int16(v)
}

// Mix sums mono sources sample by sample into dst with saturation and
// returns dst[:n], where n is the longest source's length (a shorter source
// is silence past its end). dst is grown if it is too short. Mixing sums
// rather than averages so one speaker alone keeps their level.
func Mix(dst []int16, sources ...[]int16) []int16 {
	n := 0
	for _, s := range sources {
		n = max(n, len(s))
	}
	if cap(dst) < n {
		dst = make([]int16, n)
	}
	dst = dst[:n]
	for i := range dst {
		var sum int32
		for _, s := range sources {
			if i < len(s) {
				sum += int32(s[i])
			}
		}
		dst[i] = saturate(sum)
	}
	return dst
}

// AppendMono appends the mono downmix of interleaved stereo src ((L+R)/2,
// rounded toward zero) to dst. A trailing odd sample is ignored.
func AppendMono(dst, stereo []int16) []int16 {
	for i := 0; i+1 < len(stereo); i += 2 {
		dst = append(dst, int16((int32(stereo[i])+int32(stereo[i+1]))/2))
	}
	return dst
}

// ErrOddBytes reports PCM16 bytes that do not split into whole samples.
var ErrOddBytes = errors.New("pcm: odd number of bytes for 16-bit samples")

// AppendLE appends samples as little-endian PCM16 bytes (the model's wire format).
func AppendLE(dst []byte, samples []int16) []byte {
	for _, s := range samples {
		dst = append(dst, byte(s), byte(uint16(s)>>8))
	}
	return dst
}

// AppendFromLE appends the little-endian PCM16 samples in b to dst. It
// fails with ErrOddBytes, appending nothing, when len(b) is odd.
func AppendFromLE(dst []int16, b []byte) ([]int16, error) {
	if len(b)%2 != 0 {
		return dst, ErrOddBytes
	}
	for i := 0; i < len(b); i += 2 {
		dst = append(dst, int16(uint16(b[i])|uint16(b[i+1])<<8))
	}
	return dst, nil
}
