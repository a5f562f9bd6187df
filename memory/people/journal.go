package people

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
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
// catalog (every person's fact count) under a new generation, and starts
// the journal again from offset 0, so start-up reads the catalog and the
// short journal and no person file. A clean stop's checkpoint also zeroes
// the journal's used part. A line of a superseded or evicted fact may stay
// there, as it may in the person's log until compaction, but nothing of a
// forgotten one does: a forget, an edit or a forget-person blanks the
// person's older lines (see blank) before it answers.
//
// The file is preallocated with zeros, so an append writes into blocks the
// file already has and its fdatasync has no size to commit. A record is
// one line,
//
//	{"g":3,"person":"p-…jsonl","subject":{…},"facts":5,"change":{…a person log change…},"crc32c":"1a2b3c4d"}
//
// sealed by the CRC-32C of the bytes before its checksum field. Replay
// skips a record that fails its checksum (it costs only itself; the
// records after it are replayed) and ends at the first whole record of
// another generation (a line left from before a checkpoint) or where the
// file holds only zeros; a last line without its newline is a torn tail.
// When a change takes a person's log past twice its live size, its journal
// line carries the compacted state instead ({"seq":n,"reset":[header, fact
// and proposal lines]}), and the log is rewritten from it without a sync of
// its own: until the next checkpoint syncs it, replay rebuilds it from the
// journal.
const (
	// JournalName is the journal's file name in Dir.
	JournalName = "journal"
	// journalSize is the preallocation; a checkpoint starts once the used
	// part passes journalCheckpoint, so appends stay in preallocated blocks.
	journalSize       = 16 << 20
	journalCheckpoint = 12 << 20
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
	f       *os.File
	observe durable.Syncs // the store's, told each fdatasync's duration

	mu      sync.Mutex
	gen     uint64
	off     int64 // where the next line goes
	high    int64 // bytes from 0 that may hold lines (zeroed at checkpoint)
	open    *batch
	syncing bool
	// lastBatch is how many lines the last sync carried.
	lastBatch int

	syncs, synced, syncNanos atomic.Int64
}

// batch is the lines waiting for one fdatasync.
type batch struct {
	buf     []byte
	n       int
	flushed bool
	err     error
	done    chan struct{} // closed once flushed
	turn    chan struct{} // closed when the batch may start its sync
	once    sync.Once
}

func newBatch() *batch { return &batch{done: make(chan struct{}), turn: make(chan struct{})} }

func (b *batch) passTurn() { b.once.Do(func() { close(b.turn) }) }

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
	return &journal{f: f, open: newBatch()}, nil
}

// read returns the records of generation gen from the start of the
// journal, how many of them were skipped as corrupt, and how far from 0 the
// file holds anything but zeros (the part a checkpoint must zero).
//
// With sealed (the catalog says its generation's records carry a
// checksum), a record whose checksum does not match costs only itself:
// replay resyncs at the next newline and goes on; the first whole record
// of another generation (a line left from before a checkpoint) ends the
// generation's records. Bad records after the last good one are a torn
// tail or what is left of an older generation, and are not counted.
// Without sealed (a journal written before records carried checksums),
// replay stops at the first line that does not parse.
func (j *journal) read(gen uint64, sealed bool) (lines []journalLine, skipped int, high int64, err error) {
	// Records are written from offset 0 up, each generation over the
	// last, so everything but zeros lies before the first chunk that is
	// all zeros (after a clean stop that is the first chunk). A zero byte
	// before it is damage inside a record, which then fails its checksum.
	var b []byte
	chunk := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := j.f.ReadAt(chunk, off)
		if err != nil && err != io.EOF {
			return nil, 0, 0, fmt.Errorf("read the people journal: %w", err)
		}
		if allZero(chunk[:n]) {
			break
		}
		b = append(b, chunk[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
	}
	b = b[:len(bytes.TrimRight(b, "\x00"))]
	high = int64(len(b))
	if !sealed {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
	}
	pending := 0 // bad records since the last good one
	for rest := b; len(rest) > 0; {
		rec, after, whole := bytes.Cut(rest, []byte("\n"))
		if !whole {
			break // a torn tail
		}
		rest = after
		if len(bytes.Trim(rec, " ")) == 0 {
			continue // a record blanked by a forget
		}
		if !sealed {
			var l journalLine
			if json.Unmarshal(rec, &l) != nil || l.Gen != gen || (l.Change == nil && !l.ForgetPerson) {
				break
			}
			lines = append(lines, l)
			continue
		}
		body, ok := unsealRecord(rec)
		if !ok {
			pending++
			continue
		}
		if g, ok := recordGen(body); ok && g != gen {
			break // an older generation's record: this one ends before it
		}
		var l journalLine
		if json.Unmarshal(rec, &l) != nil || l.Gen != gen || (l.Change == nil && !l.ForgetPerson) {
			pending++
			continue
		}
		lines = append(lines, l)
		skipped += pending
		pending = 0
	}
	return lines, skipped, high, nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// A sealed record is a JSON object whose last field is its checksum: the
// CRC-32C (Castagnoli) of every byte before that field, in eight hex
// digits, so the line stays plain JSON that jq reads, and a record damaged
// anywhere (a flipped bit, a zeroed sector, a torn write) fails its check:
//
//	{"g":3,"person":"p-….jsonl",…,"change":{…},"crc32c":"1a2b3c4d"}
const sealField = `,"crc32c":"`

// sealLen is the bytes the seal adds after the record's fields.
const sealLen = len(sealField) + 8 + len(`"}`)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealRecord finishes a journal record: open is a JSON object without its
// closing brace; the answer appends the checksum field, the brace and the
// newline (reusing open's array when it has room).
func sealRecord(open []byte) []byte {
	sum := crc32.Checksum(open, castagnoli)
	out := append(open, sealField...)
	out = append(out, "00000000"...)
	hex.Encode(out[len(out)-8:], binary.BigEndian.AppendUint32(nil, sum))
	return append(out, "\"}\n"...)
}

// unsealRecord checks a record (without its newline) against its checksum
// and returns the bytes it covers.
func unsealRecord(rec []byte) ([]byte, bool) {
	n := len(rec) - sealLen
	if n < 1 || !bytes.HasPrefix(rec[n:], []byte(sealField)) || !bytes.HasSuffix(rec, []byte(`"}`)) {
		return nil, false
	}
	var want [8]byte
	hex.Encode(want[:], binary.BigEndian.AppendUint32(nil, crc32.Checksum(rec[:n], castagnoli)))
	if !bytes.Equal(rec[n+len(sealField):len(rec)-2], want[:]) {
		return nil, false
	}
	return rec[:n], true
}

// recordNames reports whether a record begins {"g":n,"person":"<person>"
// (needle is the part from the comma).
func recordNames(rec, needle []byte) bool {
	rest, ok := bytes.CutPrefix(rec, []byte(`{"g":`))
	if !ok {
		return false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return bytes.HasPrefix(rest[i:], needle)
}

// recordGen reads the generation a record begins with ({"g":n,…}).
func recordGen(body []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"g":`))
	if !ok {
		return 0, false
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return 0, false
	}
	g, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	return g, err == nil
}

// commit appends line (ending in '\n') and returns once it is on disk. Lines
// that arrive while an fdatasync runs wait together in the open batch and
// share the next one: when the running sync ends, its leader hands the
// turn to that batch, and the first of its waiters to wake leads it.
//
// Under contention (the leader was handed the turn, or the last sync
// carried more than one line) the leader yields once before it takes its
// batch: the requests already runnable reach the journal and join it
// instead of each waiting for a sync of its own. Without that, on two
// cores, a batch held about two lines with 64 writers, because the syncing
// goroutine's processor is held through the fdatasync and the writers
// arrive one by one. A lone writer never yields.
func (j *journal) commit(line []byte) error {
	j.mu.Lock()
	b := j.open
	if b.n == 0 {
		b.buf = line // commit's own buffer: a line that joins is appended to it
	} else {
		b.buf = append(b.buf, line...)
	}
	b.n++
	handed := false
	if j.syncing {
		j.mu.Unlock()
		select {
		case <-b.done:
			return b.err
		case <-b.turn:
		}
		j.mu.Lock()
		if b.flushed || j.syncing || j.open != b {
			j.mu.Unlock()
			<-b.done
			return b.err
		}
		handed = true
	}
	j.syncing = true
	if handed || j.lastBatch > 1 {
		j.mu.Unlock()
		runtime.Gosched()
		j.mu.Lock()
	}
	j.open = newBatch()
	j.lastBatch = b.n
	off := j.off
	j.off += int64(len(b.buf))
	j.high = max(j.high, j.off)
	j.mu.Unlock()

	err := j.write(b.buf, off)
	j.synced.Add(int64(b.n))

	j.mu.Lock()
	b.err, b.flushed = err, true
	j.syncing = false
	next, waiting := j.open, j.open.n > 0
	j.mu.Unlock()
	close(b.done)
	if waiting {
		next.passTurn()
	}
	return err
}

func (j *journal) write(buf []byte, off int64) error {
	if _, err := j.f.WriteAt(buf, off); err != nil {
		return fmt.Errorf("append to the people journal: %w", err)
	}
	start := time.Now()
	err := j.observe.Datasync(j.f)
	j.syncNanos.Add(int64(time.Since(start)))
	j.syncs.Add(1)
	if err != nil {
		return fmt.Errorf("fdatasync the people journal: %w", err)
	}
	return nil
}

// used returns how many bytes of lines the current generation holds.
func (j *journal) used() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.off
}

// reset starts generation gen at offset 0; replay ignores the older lines
// after the new ones. With zero it first overwrites every byte that may
// hold a line with zeros, so nothing of a forgotten fact stays in the
// journal. The caller holds the store's checkpoint lock, so no commit runs.
func (j *journal) reset(gen uint64, zero bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if zero && j.high > 0 {
		zeros := make([]byte, min(j.high, 1<<20))
		for off := int64(0); off < j.high; off += int64(len(zeros)) {
			n := min(int64(len(zeros)), j.high-off)
			if _, err := j.f.WriteAt(zeros[:n], off); err != nil {
				return fmt.Errorf("zero the people journal: %w", err)
			}
		}
		if err := j.observe.Datasync(j.f); err != nil {
			return fmt.Errorf("fdatasync the people journal: %w", err)
		}
	}
	j.gen, j.off = gen, 0
	if zero {
		j.high = 0
	}
	return nil
}

// blank overwrites with spaces (keeping each newline) every record that
// names person, but the newest of the current generation when keepLast is
// set, and the remnant of an older generation's record where the current
// generation ends; then it fdatasyncs, and returns how many it blanked.
// A forget, an edit or a forget-person calls it after rewriting the
// person's log durably: the person's older records are then redundant, and
// blanking them leaves nothing of a forgotten body in the journal without
// a checkpoint (a catalog write that grows with the number of people). The
// newest record stays: it holds no forgotten content, and it brings the
// catalog's count level at a replay. Replay skips a line of spaces. Older
// generations' records are obsolete (their checkpoint synced the logs), so
// blanking one loses nothing. The caller holds the store's checkpoint lock,
// so no commit runs.
func (j *journal) blank(person string, keepLast bool) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cur, end := j.off, max(j.high, j.off)
	needle := []byte(`,"person":"` + person + `"`)
	type span struct{ start, end int64 }
	var spans []span
	newest := -1 // the index in spans of the newest record of the current generation
	buf := make([]byte, 256<<10)
	for off := int64(0); off < end; {
		n, err := j.f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if n == 0 && err != nil {
			return 0, fmt.Errorf("read the people journal: %w", err)
		}
		last := bytes.LastIndexByte(buf[:n], '\n')
		if last < 0 {
			if off+int64(n) >= end {
				break // a tail without a newline: no record
			}
			buf = make([]byte, 2*len(buf)) // a record longer than the buffer
			continue
		}
		chunk := buf[:last+1] // whole lines only
		if cur >= off && cur < off+int64(len(chunk)) && cur < j.high {
			i := cur - off
			spans = append(spans, span{cur, cur + int64(bytes.IndexByte(chunk[i:], '\n'))})
		}
		for start := 0; start < len(chunk); {
			stop := start + bytes.IndexByte(chunk[start:], '\n')
			if recordNames(chunk[start:stop], needle) {
				spans = append(spans, span{off + int64(start), off + int64(stop)})
				if off+int64(stop) < cur {
					newest = len(spans) - 1
				}
			}
			start = stop + 1
		}
		off += int64(len(chunk))
	}
	blanked := 0
	var spaces []byte
	for i, sp := range spans {
		if (keepLast && i == newest) || sp.end <= sp.start {
			continue
		}
		n := int(sp.end - sp.start)
		for len(spaces) < n {
			spaces = append(spaces, ' ')
		}
		if _, err := j.f.WriteAt(spaces[:n], sp.start); err != nil {
			return blanked, fmt.Errorf("blank a people journal record: %w", err)
		}
		blanked++
	}
	if blanked > 0 {
		if err := j.observe.Datasync(j.f); err != nil {
			return blanked, fmt.Errorf("fdatasync the people journal: %w", err)
		}
	}
	return blanked, nil
}

func (j *journal) close() error { return j.f.Close() }
