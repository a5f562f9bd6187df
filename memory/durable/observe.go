package durable

import (
	"os"
	"sync"
	"time"
)

// syncObservers maps a root to the function that is told how long each of
// its fsyncs took. It is keyed by root, not one process-wide hook, so two
// services in one process (as in tests) each see only their own writes;
// the durable functions keep their signatures, so no store changes.
var syncObservers sync.Map // *os.Root → func(time.Duration)

// ObserveSyncs has fn told the duration of every fsync (of a file or a
// directory) made through root, until the returned stop is called. The
// service uses it for its fsync latency histogram.
func ObserveSyncs(root *os.Root, fn func(time.Duration)) (stop func()) {
	syncObservers.Store(root, fn)
	return func() { syncObservers.Delete(root) }
}

// timedSync runs sync and reports its duration to root's observer.
func timedSync(root *os.Root, sync func() error) error {
	fn, ok := syncObservers.Load(root)
	if !ok {
		return sync()
	}
	start := time.Now()
	err := sync()
	fn.(func(time.Duration))(time.Since(start))
	return err
}
