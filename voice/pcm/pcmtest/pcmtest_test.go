package pcmtest

import (
	"math"
	"slices"
	"testing"
)

func TestDominantFrequency(t *testing.T) {
	tests := []struct {
		freq float64
		rate int
		n    int
	}{
		{440, 24000, 12000},
		{441.5, 48000, 48000},
		{700, 48000, 960 * 10},
		{3999, 24000, 24000},
	}
	for _, tt := range tests {
		got := DominantFrequency(NewTone(tt.freq, tt.rate, 10000).Append(nil, tt.n), tt.rate, 50, 5000)
		if math.Abs(got-tt.freq) > 0.5 {
			t.Errorf("%v Hz at %d Hz (%d samples): detected %.2f", tt.freq, tt.rate, tt.n, got)
		}
	}
	if got := DominantFrequency(nil, 24000, 50, 5000); got != 0 {
		t.Errorf("empty input: %v, want 0", got)
	}
}

func TestAppendStereo(t *testing.T) {
	stereo := AppendStereo(nil, []int16{1, -32768, 32767})
	if want := []int16{1, 1, -32768, -32768, 32767, 32767}; !slices.Equal(stereo, want) {
		t.Errorf("AppendStereo = %v, want %v", stereo, want)
	}
}
