// Package durable writes files so that an acknowledged write survives kill -9
// and power loss: temp file in the same directory, fsync, rename over the
// target, fsync the directory. Libraries such as renameio skip the last step,
// which is the one that makes the rename itself durable.
//
// Every path is opened through an *os.Root, so no name can leave the data root.
package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// TempPrefix starts every temporary file name. Stored names never start with
// a dot, so a sweep can never remove a real file.
const TempPrefix = ".tmp-"

// FileMode and DirMode are the only permissions the service creates.
const (
	FileMode fs.FileMode = 0o600
	DirMode  fs.FileMode = 0o700
)

// WriteFile replaces name (a slash path relative to root) with data durably.
// When it returns nil the new contents are on disk under name. It times
// nothing; a store's writes go through its Disk.
func WriteFile(root *os.Root, name string, data []byte) error {
	return Disk{}.WriteFile(root, name, data)
}

// SyncDir fsyncs a directory so that renames and creations in it are
// durable, timing nothing (Disk.SyncDir times it).
func SyncDir(root *os.Root, dir string) error { return Disk{}.SyncDir(root, dir) }

// MkdirAll creates dir (relative to root) with DirMode and tightens an
// existing one that is wider.
func MkdirAll(root *os.Root, dir string) error {
	if err := root.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return tighten(root, dir)
}

func tighten(root *os.Root, dir string) error {
	st, err := root.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st.Mode().Perm()&^DirMode != 0 {
		if err := root.Chmod(dir, DirMode); err != nil {
			return fmt.Errorf("tighten %s to 0700: %w", dir, err)
		}
	}
	return nil
}

// SweepTemp removes temporary files a killed process left in dir and returns
// how many it removed.
func SweepTemp(root *os.Root, dir string) (int, error) {
	d, err := root.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, TempPrefix) {
			if err := root.Remove(path.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, err
			}
			n++
		}
	}
	if n > 0 {
		return n, SyncDir(root, dir)
	}
	return 0, nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
