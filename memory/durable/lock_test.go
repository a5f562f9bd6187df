package durable

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Info item of issue 10: a LOCK that is a symlink or a hard link to another
// file of the root is refused, and the file it names keeps its contents.
func TestLockSymlinkIsNotFollowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(dir string) error
	}{
		{"symlink", func(dir string) error { return os.Symlink("victim.json", filepath.Join(dir, LockName)) }},
		{"dangling symlink", func(dir string) error { return os.Symlink("absent.json", filepath.Join(dir, LockName)) }},
		{"hard link", func(dir string) error {
			return os.Link(filepath.Join(dir, "victim.json"), filepath.Join(dir, LockName))
		}},
		{"directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, LockName), 0o700) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "memory")
			root, err := OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			const content = `{"facts":["kept"]}`
			victim := filepath.Join(dir, "victim.json")
			if err := os.WriteFile(victim, []byte(content), FileMode); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(dir); err != nil {
				t.Fatal(err)
			}
			lock, err := AcquireLock(root, dir)
			if err == nil {
				lock.Release()
				t.Fatal("took a lock that is not a plain file of its own")
			}
			if !strings.Contains(err.Error(), LockName) || !strings.Contains(err.Error(), dir) {
				t.Errorf("the refusal %q does not name the lock file and the root", err)
			}
			if b, _ := os.ReadFile(victim); string(b) != content {
				t.Fatalf("the lock truncated another file: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(dir, "absent.json")); err == nil {
				t.Fatal("the lock created the file a dangling symlink names")
			}
		})
	}
	// A plain LOCK left by an earlier run is reused.
	dir := filepath.Join(t.TempDir(), "memory")
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	os.WriteFile(filepath.Join(dir, LockName), []byte("123\n"), FileMode)
	lock, err := AcquireLock(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	lock.Release()
}
