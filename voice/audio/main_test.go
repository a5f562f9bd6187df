package audio

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testRT != nil {
		_ = testRT.Close(context.Background())
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// rt is libopus compiled once for the package's tests (compiling takes
// seconds under the race detector); each test makes its own codecs.
var (
	testRT *opus.Runtime
	rtOnce sync.Once
	rtErr  error
)

// fakeClock is a Clock that moves only when a test advances it, so the
// Inbound's 20 ms grid can be asserted exactly.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	ch    chan time.Time
	when  time.Time
	armed bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	t.when, t.armed = t.c.now.Add(d), true
	if d <= 0 {
		t.fire()
	}
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.armed = false
	t.drain()
}

func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

func (t *fakeTimer) fire() {
	t.armed = false
	select {
	case t.ch <- t.c.now:
	default:
	}
}

// Advance moves the clock and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if t.armed && !t.when.After(c.now) {
			t.fire()
		}
	}
}

// waitArmed waits until some timer is armed: the goroutine that owns it is
// waiting for the clock.
func (c *fakeClock) waitArmed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, tm := range c.timers {
			if tm.armed {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(50 * time.Microsecond)
	}
	t.Fatal("no timer armed within 5 s")
}

const toneAmp = 8000

func newRuntime(t testing.TB) *opus.Runtime {
	t.Helper()
	rtOnce.Do(func() { testRT, rtErr = opus.NewRuntime(context.Background()) })
	if rtErr != nil {
		t.Fatalf("NewRuntime: %v", rtErr)
	}
	return testRT
}

func newEncoder(t testing.TB, rt *opus.Runtime) *opus.Encoder {
	t.Helper()
	enc, err := rt.NewEncoder(context.Background(), opus.DefaultEncoderConfig())
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	t.Cleanup(func() { _ = enc.Close(context.Background()) })
	return enc
}

var toneCache sync.Map // toneKey → [][]byte

type toneKey struct {
	freq float64
	n    int
}

// toneOpus returns n 20 ms Opus frames of a freq Hz tone, encoded by
// voice/opus at 48 kHz stereo the way a Discord client sends a voice.
// Frames are shared between tests (read-only).
func toneOpus(t testing.TB, rt *opus.Runtime, freq float64, n int) [][]byte {
	t.Helper()
	if f, ok := toneCache.Load(toneKey{freq, n}); ok {
		return f.([][]byte)
	}
	frames := encodeTone(t, rt, freq, n)
	toneCache.Store(toneKey{freq, n}, frames)
	return frames
}

func encodeTone(t testing.TB, rt *opus.Runtime, freq float64, n int) [][]byte {
	t.Helper()
	return encodeToneAt(t, rt, freq, toneAmp, n)
}

// encodeToneAt is encodeTone at the given peak amplitude.
func encodeToneAt(t testing.TB, rt *opus.Runtime, freq float64, amp int16, n int) [][]byte {
	t.Helper()
	enc := newEncoder(t, rt)
	gen := pcmtest.NewTone(freq, opus.SampleRate, amp)
	frames := make([][]byte, n)
	out := make([]byte, opus.MaxPacketBytes)
	for i := range frames {
		stereo := pcmtest.AppendStereo(nil, gen.Append(nil, opus.FrameSamples))
		k, err := enc.Encode(context.Background(), stereo, out)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		frames[i] = append([]byte(nil), out[:k]...)
	}
	return frames
}
