package people

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// The journal is the store's write-ahead log: every change to a person is
// one JSON line in <root>/discord-people/journal, made durable by one
// fdatasync shared by every change that arrived while the previous one ran
// (group commit), before the change is appended to the person's own log and
// answered. Person logs are only written, never synced, on that path: the
// journal is what survives a power cut, and start-up replays it into them.
//
// A checkpoint syncs the person logs written since the last one, writes the
// catalog (every person's fact count) under a new generation, and zeroes
// the journal's used part, so start-up reads the catalog and the short
// journal and no person file.
//
// The file is preallocated with zeros, so an append writes into blocks the
// file already has and its fdatasync has no size to commit. A line is
//
//	{"g":3,"person":"p-…jsonl","subject":{…},"facts":5,"change":{…a person log change…}}
//
// and replay stops at the first line that is not whole, does not parse or
// belongs to another generation (a line left from before a checkpoint).
const (
	// JournalName is the journal's file name in Dir.
	JournalName = "journal"
	// journalSize is the preallocation; a checkpoint starts once the used
	// part passes journalCheckpoint, so appends stay in preallocated blocks.
	journalSize       = 4 << 20
	journalCheckpoint = 3 << 20
)

type journalLine struct {
	Gen     uint64      `json:"g"`
	Person  string      `json:"person"`
	Subject api.Subject `json:"subject"`
	Facts   int         `json:"facts"`
	// ForgetPerson removes the person's files; Change is absent then.
	ForgetPerson bool     `json:"forgetPerson,omitempty"`
	Change       *logLine `json:"change,omitempty"`
}

// journal appends lines with group commit. It is safe for concurrent use.
type journal struct {
	f *os.File

	mu      sync.Mutex
	gen     uint64
	off     int64 // where the next line goes
	high    int64 // bytes from 0 that may hold lines (zeroed at checkpoint)
	cond    *sync.Cond
	open    *batch
	syncing bool

	syncs, synced, syncNanos atomic.Int64
}

// batch is the lines waiting for one fdatasync.
type batch struct {
	buf     []byte
	n       int
	flushed bool
	err     error
}

// openJournal opens (creating and preallocating when missing) the journal.
func openJournal(root *os.Root) (*journal, error) {
	name := path.Join(Dir, JournalName)
	f, err := root.OpenFile(name, os.O_RDWR, durable.FileMode)
	if durable.IsNotExist(err) {
		if err := durable.WriteFile(root, name, make([]byte, journalSize)); err != nil {
			return nil, fmt.Errorf("create the people journal: %w", err)
		}
		f, err = root.OpenFile(name, os.O_RDWR, durable.FileMode)
	}
	if err != nil {
		return nil, fmt.Errorf("open the people journal: %w", err)
	}
	j := &journal{f: f, open: &batch{}}
	j.cond = sync.NewCond(&j.mu)
	return j, nil
}

// read answers the lines of generation gen from the start of the journal,
// and how far from 0 the file holds anything but zeros (the part a
// checkpoint must zero).
func (j *journal) read(gen uint64) ([]journalLine, int64, error) {
	st, err := j.f.Stat()
	if err != nil {
		return nil, 0, err
	}
	b := make([]byte, st.Size())
	if _, err := j.f.ReadAt(b, 0); err != nil {
		return nil, 0, fmt.Errorf("read the people journal: %w", err)
	}
	high := int64(len(bytes.TrimRight(b, "\x00")))
	var lines []journalLine
	rest := b[:high]
	for len(rest) > 0 {
		line, after, whole := bytes.Cut(rest, []byte("\n"))
		if !whole {
			break
		}
		var l journalLine
		if json.Unmarshal(line, &l) != nil || l.Gen != gen || (l.Change == nil && !l.ForgetPerson) {
			break
		}
		lines = append(lines, l)
		rest = after
	}
	return lines, high, nil
}

// commit appends line (ending in '\n') and returns once it is on disk. Lines
// that arrive while an fdatasync runs wait together and share the next one:
// the first of them to wake leads it.
func (j *journal) commit(line []byte) error {
	j.mu.Lock()
	b := j.open
	b.buf = append(b.buf, line...)
	b.n++
	for !b.flushed {
		if j.syncing || j.open != b {
			j.cond.Wait()
			continue
		}
		j.syncing = true
		j.open = &batch{}
		off := j.off
		j.off += int64(len(b.buf))
		j.high = max(j.high, j.off)
		j.mu.Unlock()
		err := j.write(b.buf, off)
		j.synced.Add(int64(b.n))
		j.mu.Lock()
		b.err, b.flushed = err, true
		j.syncing = false
		j.cond.Broadcast()
	}
	err := b.err
	j.mu.Unlock()
	return err
}

func (j *journal) write(buf []byte, off int64) error {
	if _, err := j.f.WriteAt(buf, off); err != nil {
		return fmt.Errorf("append to the people journal: %w", err)
	}
	start := time.Now()
	err := fdatasync(j.f)
	j.syncNanos.Add(int64(time.Since(start)))
	j.syncs.Add(1)
	if err != nil {
		return fmt.Errorf("fdatasync the people journal: %w", err)
	}
	return nil
}

// used answers how many bytes of lines the current generation holds.
func (j *journal) used() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.off
}

// reset zeroes every byte that may hold a line and starts generation gen at
// offset 0. The caller holds the store's checkpoint lock, so no commit runs.
func (j *journal) reset(gen uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.high > 0 {
		zeros := make([]byte, min(j.high, 1<<20))
		for off := int64(0); off < j.high; off += int64(len(zeros)) {
			n := min(int64(len(zeros)), j.high-off)
			if _, err := j.f.WriteAt(zeros[:n], off); err != nil {
				return fmt.Errorf("zero the people journal: %w", err)
			}
		}
		if err := fdatasync(j.f); err != nil {
			return fmt.Errorf("fdatasync the people journal: %w", err)
		}
	}
	j.gen, j.off, j.high = gen, 0, 0
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// fdatasync flushes a file's data (and only the metadata needed to read it
// back): an append into preallocated blocks commits no inode change.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
