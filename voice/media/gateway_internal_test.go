package media

import (
	"testing"
	"time"
)

// TestResumeBackoff holds resume's pauses to their schedule: 100 ms
// doubled each time, capped at 5 s, the same on every run (no jitter).
func TestResumeBackoff(t *testing.T) {
	ms := time.Millisecond
	for run := range 2 {
		p := resumeBackoff()
		for i, want := range []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms} {
			if got := p.NextBackOff(); got != want {
				t.Fatalf("run %d, pause %d = %v, want %v", run, i+1, got, want)
			}
		}
	}
}
