package durable

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// OpenRoot creates dir with DirMode if it is missing, tightens it when it is
// wider (refusing with a sentence when it cannot), and opens it as a Root.
func OpenRoot(dir string) (*os.Root, error) {
	if dir == "" {
		return nil, errors.New("the memory root is empty; set CLANKIE_MEMORY_DIR")
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("cannot create the memory root %s: %s", dir, ownership(filepath.Dir(dir)))
		}
		return nil, fmt.Errorf("cannot create the memory root %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read the memory root %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("the memory root %s is not a directory", dir)
	}
	if st.Mode().Perm()&^DirMode != 0 {
		if err := os.Chmod(dir, DirMode); err != nil {
			if owner, ok := ownerOf(st); ok && owner != os.Getuid() {
				return nil, fmt.Errorf("the memory root %s has mode %04o and cannot be tightened to 0700: %s", dir, st.Mode().Perm(), ownership(dir))
			}
			return nil, fmt.Errorf("the memory root %s has mode %04o and cannot be tightened to 0700 (%v); fix its permissions or choose another CLANKIE_MEMORY_DIR", dir, st.Mode().Perm(), err)
		}
	}
	if owner, ok := ownerOf(st); ok && owner != os.Getuid() && os.Getuid() != 0 {
		// Mode 0700 owned by someone else: nothing in it can be written.
		return nil, fmt.Errorf("the memory root %s cannot be used: %s", dir, ownership(dir))
	}
	return os.OpenRoot(dir)
}

// ownerOf returns the uid that owns a file, where the platform says.
func ownerOf(st fs.FileInfo) (int, bool) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid), true
	}
	return 0, false
}

// ownership explains a directory owned by another user: the fix is a chown
// (or running as that user), not a chmod. A host directory bind-mounted
// into the container is the usual case: the image runs as uid 65532.
func ownership(dir string) string {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Sprintf("%s cannot be read (%v)", dir, errors.Unwrap(err))
	}
	owner, ok := ownerOf(st)
	me := os.Getuid()
	if !ok || owner == me {
		return fmt.Sprintf("%s has mode %04o and this user (uid %d) may not write in it; fix its permissions", dir, st.Mode().Perm(), me)
	}
	return fmt.Sprintf("%s is owned by uid %d, but clankie runs as uid %d; give it to this user (chown -R %d %s) or run clankie as uid %d", dir, owner, me, me, dir, owner)
}

// Lock is the exclusive lock that makes one service the only writer of a root.
type Lock struct{ f *os.File }

// LockName is the lock file inside the root.
const LockName = "LOCK"

// ErrLocked is wrapped by AcquireLock when another process holds the root.
var ErrLocked = errors.New("memory root is locked")

// AcquireLock takes an exclusive, non-blocking flock on <root>/LOCK and writes
// our pid into it. The lock lives as long as the process (or until Release).
//
// LOCK is only ever a plain file this service created: a symlink (even one
// pointing inside the root), a hard link to another file or anything that is
// not a regular file is refused with a sentence, so taking the lock can never
// create, truncate or overwrite a file it does not own.
func AcquireLock(root *os.Root, rootPath string) (*Lock, error) {
	f, err := openLockFile(root, rootPath)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "unknown"
		if b, rerr := io.ReadAll(io.LimitReader(f, 32)); rerr == nil {
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = pid
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another memory service (pid %s) already owns %s", ErrLocked, holder, rootPath)
		}
		return nil, fmt.Errorf("lock %s: %w", rootPath, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		_ = f.Sync()
	}
	return &Lock{f: f}, nil
}

// openLockFile opens LOCK without following a symlink and checks that what
// it opened is the plain, singly linked file it looked at: os.Root resolves
// a symlink that stays inside the root, so the check compares the entry
// (Lstat) with the open file (Stat) rather than trusting the open.
func openLockFile(root *os.Root, rootPath string) (*os.File, error) {
	notOurs := func() error {
		return fmt.Errorf("the lock file %s in the memory root %s is not a plain file of its own (a symlink, a hard link or another kind of file); remove it and start again", LockName, rootPath)
	}
	entry, err := root.Lstat(LockName)
	if errors.Is(err, fs.ErrNotExist) {
		// O_CREATE|O_EXCL never follows a symlink: if one appeared meanwhile
		// the open fails rather than creating its target.
		f, cerr := root.OpenFile(LockName, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
		if cerr == nil {
			return f, nil
		}
		if !errors.Is(cerr, fs.ErrExist) {
			return nil, fmt.Errorf("create lock file in %s: %w", rootPath, cerr)
		}
		// Another service created it meanwhile: check what is there now.
		entry, err = root.Lstat(LockName)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file in %s: %w", rootPath, err)
	}
	if !entry.Mode().IsRegular() {
		return nil, notOurs()
	}
	f, err := root.OpenFile(LockName, os.O_RDWR, FileMode)
	if err != nil {
		return nil, fmt.Errorf("open lock file in %s: %w", rootPath, err)
	}
	opened, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open lock file in %s: %w", rootPath, err)
	}
	st, ok := opened.Sys().(*syscall.Stat_t)
	if !os.SameFile(entry, opened) || !opened.Mode().IsRegular() || !ok || st.Nlink != 1 {
		f.Close()
		return nil, notOurs()
	}
	return f, nil
}

// Release drops the lock. The pid is left behind; it is only read while the
// lock is held by someone.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// IsNotExist reports whether err says a file is missing.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
