package personfiles

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestLogFilesStayBoundedAndNeverCloseOneInUse(t *testing.T) {
	dir, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	l := newLogFiles()
	defer l.closeAll()

	// One held from the start stays usable while twice the bound pass by.
	held, releaseHeld, err := l.acquire(dir, "held.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * maxOpenLogs {
		f, release, err := l.acquire(dir, fmt.Sprintf("p-%d.jsonl", i), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("x\n"), 0); err != nil {
			t.Fatal(err)
		}
		release()
		if n := l.order.Len(); n > maxOpenLogs {
			t.Fatalf("%d logs open, at most %d may be", n, maxOpenLogs)
		}
	}
	if _, err := held.WriteAt([]byte("still open\n"), 0); err != nil {
		t.Fatalf("a log in use was closed to make room: %v", err)
	}
	releaseHeld()

	// A log dropped while in use (its file about to be replaced) stays
	// usable until released, then is closed; the next acquire opens the
	// file anew.
	f, release, err := l.acquire(dir, "p-0.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	l.drop("p-0.jsonl")
	if _, err := f.WriteAt([]byte("y\n"), 0); err != nil {
		t.Fatalf("a dropped log in use was closed: %v", err)
	}
	release()
	if _, err := f.WriteAt([]byte("z\n"), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("a dropped log was not closed once released: %v", err)
	}
	g, release, err := l.acquire(dir, "p-0.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	if g == f {
		t.Fatal("acquire after a drop returned the dropped descriptor")
	}
	release()

	// Without create, a missing log is an error that says so.
	if _, _, err := l.acquire(dir, "missing.jsonl", false); !os.IsNotExist(err) {
		t.Fatalf("acquire of a missing log: %v", err)
	}
}
