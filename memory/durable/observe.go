package durable

import (
	"os"
	"time"
)

// Syncs is told how long each fsync or fdatasync took, for the service's
// fsync histogram; a nil Syncs times nothing. A store keeps one (the
// service hands it over with the store's ObserveSyncs) and makes its
// durable writes through it, so the histogram sees exactly the syncs of
// the stores that serve requests, without a process-wide hook.
type Syncs func(time.Duration)

// Sync runs sync, an fsync or fdatasync, and reports its duration.
func (o Syncs) Sync(sync func() error) error {
	if o == nil {
		return sync()
	}
	start := time.Now()
	err := sync()
	o(time.Since(start))
	return err
}

// WriteFile is WriteFile with its two syncs reported.
func (o Syncs) WriteFile(root *os.Root, name string, data []byte) error {
	return writeFile(root, name, data, o)
}

// SyncDir is SyncDir with its sync reported.
func (o Syncs) SyncDir(root *os.Root, dir string) error { return syncDir(root, dir, o) }

// Remove deletes name and makes the removal durable, reporting the
// directory's sync.
func (o Syncs) Remove(root *os.Root, name string) error { return remove(root, name, o) }

// Rename moves a file within root and makes the move durable, reporting
// the syncs of the directories involved.
func (o Syncs) Rename(root *os.Root, from, to string) error { return rename(root, from, to, o) }
