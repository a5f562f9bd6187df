package durable

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDiskReportsEachSync counts what a Disk's observer is told: one
// report per fsync, none for the zero Disk, and the writes durable
// whichever is used.
func TestDiskReportsEachSync(t *testing.T) {
	root, err := OpenRoot(filepath.Join(t.TempDir(), "root"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := MkdirAll(root, "d"); err != nil {
		t.Fatal(err)
	}
	var told []time.Duration
	syncs := NewDisk(func(d time.Duration) { told = append(told, d) })
	for _, tc := range []struct {
		name string
		do   func(Disk) error
		want int
	}{
		{"write a file: the temp file, then its directory", func(o Disk) error { return o.WriteFile(root, "d/a", []byte("one")) }, 2},
		{"rename within a directory", func(o Disk) error { return o.Rename(root, "d/a", "d/b") }, 1},
		{"rename across directories", func(o Disk) error { return o.Rename(root, "d/b", "c") }, 2},
		{"remove", func(o Disk) error { return o.Remove(root, "c") }, 1},
		{"sync a directory", func(o Disk) error { return o.SyncDir(root, "d") }, 1},
		{"a failed sync is reported too", func(o Disk) error {
			if err := o.Sync(func() error { return os.ErrClosed }); err != os.ErrClosed {
				t.Fatalf("Sync returned %v, not its sync's error", err)
			}
			return nil
		}, 1},
	} {
		told = told[:0]
		if err := tc.do(syncs); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(told) != tc.want {
			t.Fatalf("%s: told %d syncs, want %d", tc.name, len(told), tc.want)
		}
	}
	if err := (Disk{}).WriteFile(root, "d/nil", []byte("two")); err != nil {
		t.Fatalf("the zero Disk: %v", err)
	}
	if b, err := root.ReadFile("d/nil"); err != nil || string(b) != "two" {
		t.Fatalf("the zero Disk wrote %q, %v", b, err)
	}
}
