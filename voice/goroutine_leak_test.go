package voice

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's test binary when any goroutine is still
// running after every test and its cleanups have finished.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
