package durable

import (
	"fmt"
	"os"
	"path"
	"syscall"
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

// Datasync fdatasyncs f (retrying an interrupted call) and reports its
// duration: it flushes the file's data and only the metadata needed to
// read it back, so an append into preallocated blocks commits no inode
// change.
func (o Syncs) Datasync(f *os.File) error {
	return o.Sync(func() error {
		for {
			if err := syscall.Fdatasync(int(f.Fd())); err != syscall.EINTR {
				return err
			}
		}
	})
}

// WriteFile replaces name (a slash path relative to root) with data
// durably, reporting the file's fsync and its directory's: when it returns
// nil the new contents are on disk under name.
func (o Syncs) WriteFile(root *os.Root, name string, data []byte) error {
	dir := path.Dir(name)
	tmp := path.Join(dir, TempPrefix+randomSuffix())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return fmt.Errorf("create temp file in %s: %w", dir, err)
	}
	cleanup := func() { _ = root.Remove(tmp) }
	if _, err := f.Write(data); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("write temp file: %w", err)
	}
	if err := o.Sync(f.Sync); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("fsync temp file: %w", err)
	}
	if err := f.Close(); err != nil {
		cleanup()
		return fmt.Errorf("close temp file: %w", err)
	}
	if err := root.Rename(tmp, name); err != nil {
		cleanup()
		return fmt.Errorf("rename into place: %w", err)
	}
	return o.SyncDir(root, dir)
}

// SyncDir fsyncs a directory so that renames and creations in it are
// durable, reporting the sync.
func (o Syncs) SyncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	defer d.Close()
	if err := o.Sync(d.Sync); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}

// Remove deletes name and makes the removal durable, reporting the
// directory's sync.
func (o Syncs) Remove(root *os.Root, name string) error {
	if err := root.Remove(name); err != nil {
		return err
	}
	return o.SyncDir(root, path.Dir(name))
}

// Rename moves a file within root and makes the move durable, reporting
// the syncs of the directories involved.
func (o Syncs) Rename(root *os.Root, from, to string) error {
	if err := root.Rename(from, to); err != nil {
		return err
	}
	if err := o.SyncDir(root, path.Dir(to)); err != nil {
		return err
	}
	if path.Dir(from) != path.Dir(to) {
		return o.SyncDir(root, path.Dir(from))
	}
	return nil
}
