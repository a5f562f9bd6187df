package pcm

import "math"

// The 2:1 resamplers share one linear-phase half-band low-pass FIR: 47
// taps, Kaiser-windowed sinc with its cutoff at a quarter of the high rate
// (12 kHz of 48 kHz). Every other tap of a half-band filter is zero, so a
// 48 kHz → 24 kHz frame costs 24 multiply-adds per output sample and the
// upsampler's odd outputs are a plain delay. Passband (to ~9.5 kHz, all of
// speech) is flat within 0.01 dB; aliases from 14.5 kHz up are ~70 dB down.
// Both directions delay the signal by 23 samples at 48 kHz (~0.48 ms).
const (
	halfBandTaps   = 47
	halfBandCenter = halfBandTaps / 2 // 23
	kaiserBeta     = 7.0
)

// halfBandSideTaps returns h[c+k] for k = 1, 3, ..., 23 (the non-zero taps
// beside the centre, which is 0.5), normalised so the DC gain is exactly 1.
func halfBandSideTaps() []float32 {
	n := (halfBandCenter + 1) / 2 // 12
	side := make([]float64, n)
	sum := 0.5
	for i := range side {
		k := float64(2*i + 1)
		x := k / 2
		sinc := math.Sin(math.Pi*x) / (math.Pi * x)
		r := k / float64(halfBandCenter)
		w := besselI0(kaiserBeta*math.Sqrt(1-r*r)) / besselI0(kaiserBeta)
		side[i] = 0.5 * sinc * w
		sum += 2 * side[i]
	}
	taps := make([]float32, n)
	for i, v := range side {
		taps[i] = float32(v / sum)
	}
	return taps
}

// besselI0 is the zeroth-order modified Bessel function (power series).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 50; k++ {
		term *= (x / (2 * float64(k))) * (x / (2 * float64(k)))
		sum += term
		if term < 1e-12*sum {
			break
		}
	}
	return sum
}

func toInt16(v float32) int16 {
	if v >= 0 {
		v += 0.5
	} else {
		v -= 0.5
	}
	if v > math.MaxInt16 {
		return math.MaxInt16
	}
	if v < math.MinInt16 {
		return math.MinInt16
	}
	return int16(v)
}

// Downsampler converts a stream of 48 kHz mono PCM16 to 24 kHz, carrying
// filter state across calls so frame boundaries leave no seam. Any input
// length works, odd included: the decimation phase carries over too. Not
// safe for concurrent use.
type Downsampler struct {
	side []float32
	// buf is history (the previous halfBandTaps-1 inputs) followed by the
	// current input, as float32.
	buf []float32
	// odd reports whether the next input sample has an odd absolute index
	// (and is therefore dropped by the decimation).
	odd bool
}

// NewDownsampler returns a 48 kHz → 24 kHz resampler starting from silence.
func NewDownsampler() *Downsampler {
	return &Downsampler{side: halfBandSideTaps(), buf: make([]float32, halfBandTaps-1, halfBandTaps-1+2*960)}
}

// Append resamples src and appends the output samples (len(src)/2, give
// or take one for the phase) to dst.
func (d *Downsampler) Append(dst, src []int16) []int16 {
	const hist = halfBandTaps - 1
	d.buf = d.buf[:hist]
	for _, s := range src {
		d.buf = append(d.buf, float32(s))
	}
	start := 0
	if d.odd {
		start = 1
	}
	for j := start; j < len(src); j += 2 {
		// x[n-c+k] lives at buf[j+c+k] (n = j, history offset hist = 2c).
		mid := j + halfBandCenter
		acc := 0.5 * d.buf[mid]
		for i, h := range d.side {
			k := 2*i + 1
			acc += h * (d.buf[mid-k] + d.buf[mid+k])
		}
		dst = append(dst, toInt16(acc))
	}
	if len(src)%2 == 1 {
		d.odd = !d.odd
	}
	copy(d.buf, d.buf[len(d.buf)-hist:])
	d.buf = d.buf[:hist]
	return dst
}

// Upsampler converts a stream of 24 kHz mono PCM16 to 48 kHz interleaved
// stereo (both channels equal), carrying filter state across calls. Not
// safe for concurrent use.
type Upsampler struct {
	side []float32
	// buf is history (the previous halfBandCenter inputs) followed by the
	// current input.
	buf []float32
}

// NewUpsampler returns a 24 kHz mono → 48 kHz stereo resampler starting from silence.
func NewUpsampler() *Upsampler {
	return &Upsampler{side: halfBandSideTaps(), buf: make([]float32, halfBandCenter, halfBandCenter+480)}
}

// AppendStereo resamples src and appends 4×len(src) interleaved stereo
// samples (2×len(src) frames) to dst.
func (u *Upsampler) AppendStereo(dst, src []int16) []int16 {
	const hist = halfBandCenter // 23 earlier inputs reach into each output
	u.buf = u.buf[:hist]
	for _, s := range src {
		u.buf = append(u.buf, float32(s))
	}
	n := len(u.side) // 12 tap pairs
	for j := range src {
		m := hist + j // buf index of x[m]
		// Even output: 2·Σ h[2t]·x[m-t] for t = 0..23; h[2t] is a side tap
		// (symmetric around t = 11.5), so pair x[m-t] with x[m-23+t].
		var acc float32
		for i, h := range u.side {
			t := n - 1 - i // side[i] = h[c+2i+1] = h[2(12+i)] = h[2(11-i)]
			acc += h * (u.buf[m-t] + u.buf[m-hist+t])
		}
		even := toInt16(2 * acc)
		// Odd output: only the centre tap (0.5) meets a sample: x[m-11].
		odd := toInt16(u.buf[m-(hist-1)/2])
		dst = append(dst, even, even, odd, odd)
	}
	copy(u.buf, u.buf[len(u.buf)-hist:])
	u.buf = u.buf[:hist]
	return dst
}
