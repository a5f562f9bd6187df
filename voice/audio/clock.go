package audio

import "time"

// FrameDuration is the length of one Opus frame as Discord carries it and
// the period of the Inbound's mix.
const FrameDuration = 20 * time.Millisecond

// Clock is the time source of the Inbound's mix, injectable so tests
// advance time by hand and assert the 20 ms grid exactly. The Outbound has
// none: the media connection's pacer is the outgoing audio's clock.
type Clock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() Timer
}

// Timer is the part of time.Timer the Inbound uses.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Reset arms the timer to fire after d (at once when d <= 0),
	// discarding any earlier arming and any unread firing.
	Reset(d time.Duration)
	// Stop disarms the timer and discards any unread firing.
	Stop()
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a stopped time.Timer.
func (SystemClock) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return systemTimer{t}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }

// Reset relies on Go 1.23+ timers: Stop and Reset leave no stale value in C.
func (s systemTimer) Reset(d time.Duration) { s.t.Reset(d) }

func (s systemTimer) Stop() { s.t.Stop() }
