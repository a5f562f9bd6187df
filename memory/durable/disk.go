package durable

import (
	"fmt"
	"os"
	"path"
	"syscall"
	"time"
)

// Disk makes changes to files durable: a sync, a whole-file replace, a
// rename or a removal, each followed by the syncs that make it survive a
// power cut. Every fsync and fdatasync it makes is timed and told to the
// observer it was built with (the service's fsync histogram), so the
// histogram sees exactly the syncs of the stores that serve requests,
// without a process-wide hook. A store is given its Disk when it is
// opened; the zero Disk times nothing.
type Disk struct{ observe func(time.Duration) }

// NewDisk returns a Disk that tells observe each sync's duration.
func NewDisk(observe func(time.Duration)) Disk { return Disk{observe: observe} }

// Sync runs sync, an fsync or fdatasync, and reports its duration.
func (o Disk) Sync(sync func() error) error {
	if o.observe == nil {
		return sync()
	}
	start := time.Now()
	err := sync()
	o.observe(time.Since(start))
	return err
}

// Datasync fdatasyncs f (retrying an interrupted call) and reports its
// duration: it flushes the file's data and only the metadata needed to
// read it back, so an append into preallocated blocks commits no inode
// change.
func (o Disk) Datasync(f *os.File) error {
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
func (o Disk) WriteFile(root *os.Root, name string, data []byte) error {
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
func (o Disk) SyncDir(root *os.Root, dir string) error {
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
func (o Disk) Remove(root *os.Root, name string) error {
	if err := root.Remove(name); err != nil {
		return err
	}
	return o.SyncDir(root, path.Dir(name))
}

// Rename moves a file within root and makes the move durable, reporting
// the syncs of the directories involved.
func (o Disk) Rename(root *os.Root, from, to string) error {
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
