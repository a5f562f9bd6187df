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

// Timed runs sync, an fsync or fdatasync of a file or directory under
// root, and tells root's observer how long it took. The durable functions
// sync through it; a store that syncs its own files (the people journal's
// group commits, a checkpoint's logs) calls it too, so the histogram sees
// every sync the memory root makes.
func Timed(root *os.Root, sync func() error) error {
	fn, ok := syncObservers.Load(root)
	if !ok {
		return sync()
	}
	start := time.Now()
	err := sync()
	fn.(func(time.Duration))(time.Since(start))
	return err
}
