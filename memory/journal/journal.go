package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clankie/clankie/memory/durable"
)

// Options are the settings of a log, all given at Open.
type Options struct {
	// Size is how many bytes of zeros a new file is created with. The log
	// does not stop at it: the caller starts a new generation (Reset) once
	// Used nears it, so appends stay in preallocated blocks.
	Size int64
	// Disk makes the fdatasyncs and tells its observer each one's
	// duration; the zero Disk times nothing.
	Disk durable.Disk
}

// Stats are a log's running totals since Open: plain numbers, never
// content.
type Stats struct {
	// Syncs counts the fdatasyncs of appends and Records the records they
	// made durable (their ratio is the group-commit factor); SyncTime is
	// the time spent in those fdatasyncs.
	Syncs, Records int64
	SyncTime       time.Duration
}

// Replayed is what a replay found.
type Replayed struct {
	// Records is how many records were handed to the reader.
	Records int
	// Skipped is how many lines failing their checksum lay before a good
	// record of the generation: each cost only itself.
	Skipped int
	// Used is how far from offset 0 the file holds anything but zeros
	// (the part Reset with zero overwrites).
	Used int64
}

// CorruptionError is a record replay cannot skip: it passed its checksum,
// so it was written whole, but the reader refused it. Its Err is the
// reader's answer; neither carries the record's bytes.
type CorruptionError struct {
	Path   string
	Offset int64 // where the record's line begins
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("journal %s: the record at offset %d: %v", e.Path, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// ErrRecord is Append's answer to a record that is not one line of a JSON
// object (see the package doc); nothing was appended.
var ErrRecord = errors.New("a journal record must be a JSON object on one line")

// Log is one journal file. It is safe for concurrent use.
type Log struct {
	f    *os.File
	path string
	disk durable.Disk

	// excl is held (read) by each Append for its whole run, and (write)
	// by Reset and Blank, which rewrite what appends write.
	excl sync.RWMutex
	gen  uint64 // changed only under excl (write)

	mu      sync.Mutex
	off     int64 // where the next record goes
	high    int64 // bytes from 0 that may hold records (zeroed by Reset)
	open    *batch
	syncing bool
	// lastBatch is how many records the last sync carried.
	lastBatch int

	nsyncs, records, syncNanos atomic.Int64
}

// batch is the records waiting for one fdatasync.
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

// Open opens the log at name (a slash path in root), creating it with
// opts.Size zeros, durably, when it is missing. Its generation is 0 until
// Reset; replay first, then Reset, then append.
func Open(root *os.Root, name string, opts Options) (*Log, error) {
	f, err := root.OpenFile(name, os.O_RDWR, durable.FileMode)
	if durable.IsNotExist(err) {
		if err := opts.Disk.WriteFile(root, name, make([]byte, opts.Size)); err != nil {
			return nil, fmt.Errorf("create journal %s: %w", name, err)
		}
		f, err = root.OpenFile(name, os.O_RDWR, durable.FileMode)
	}
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", name, err)
	}
	return &Log{f: f, path: name, disk: opts.Disk, open: newBatch()}, nil
}

// Close closes the file. It does not sync: every append already did.
func (l *Log) Close() error { return l.f.Close() }

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	return Stats{Syncs: l.nsyncs.Load(), Records: l.records.Load(), SyncTime: time.Duration(l.syncNanos.Load())}
}

// Used returns how many bytes the current generation's records take.
func (l *Log) Used() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.off
}

// The frame around a record (see the package doc).
const (
	frameOpen = `{"g":`
	sealField = `,"crc32c":"`
	sealClose = `"}`
	// sealLen is the bytes the seal adds after the record's fields.
	sealLen = len(sealField) + 8 + len(sealClose)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// validRecord reports whether rec can be framed (see the package doc).
func validRecord(rec []byte) bool {
	n := len(rec)
	return n >= 2 && rec[0] == '{' && rec[n-1] == '}' && (n == 2 || rec[1] == '"') && bytes.IndexByte(rec, '\n') < 0
}

// frame appends rec's line in generation gen to dst.
func frame(dst []byte, gen uint64, rec []byte) []byte {
	start := len(dst)
	dst = append(dst, frameOpen...)
	dst = strconv.AppendUint(dst, gen, 10)
	if len(rec) > 2 {
		dst = append(dst, ',')
		dst = append(dst, rec[1:len(rec)-1]...)
	}
	sum := crc32.Checksum(dst[start:], castagnoli)
	dst = append(dst, sealField...)
	dst = hex.AppendEncode(dst, binary.BigEndian.AppendUint32(nil, sum))
	dst = append(dst, sealClose...)
	return append(dst, '\n')
}

// unseal checks a line (without its newline) against its checksum and
// returns the bytes the checksum covers.
func unseal(line []byte) ([]byte, bool) {
	n := len(line) - sealLen
	if n < 1 || !bytes.HasPrefix(line[n:], []byte(sealField)) || !bytes.HasSuffix(line, []byte(sealClose)) {
		return nil, false
	}
	var want [8]byte
	hex.Encode(want[:], binary.BigEndian.AppendUint32(nil, crc32.Checksum(line[:n], castagnoli)))
	if !bytes.Equal(line[n+len(sealField):len(line)-len(sealClose)], want[:]) {
		return nil, false
	}
	return line[:n], true
}

// lineGen reads the generation a line begins with ({"g":n followed by ','
// or the line's end) and returns where the record's fields begin (the
// comma, or len(line)). Blank calls it on every line of the file, so it
// parses the digits itself rather than allocate a string for strconv.
func lineGen(line []byte) (gen uint64, fields int, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(frameOpen))
	if !found {
		return 0, 0, false
	}
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		d := uint64(rest[i] - '0')
		if gen > (math.MaxUint64-d)/10 {
			return 0, 0, false
		}
		gen = gen*10 + d
	}
	if i == 0 || (i < len(rest) && rest[i] != ',') {
		return 0, 0, false
	}
	return gen, len(frameOpen) + i, true
}

// record turns body, the part of a line a record was framed into (before
// the seal, or the whole line of an unsealed one), back into the record
// as appended, in place: the caller's buffer is scratch.
func record(body []byte, fields int, sealed bool) []byte {
	if fields >= len(body) {
		return []byte("{}")
	}
	body[fields] = '{' // the comma after the generation
	if !sealed {
		return body[fields:] // it ends in the record's own brace
	}
	// A sealed line's body is followed by the seal: its first byte (the
	// seal's comma) becomes the record's closing brace.
	rec := body[fields : len(body)+1]
	rec[len(rec)-1] = '}'
	return rec
}

// Append makes recs durable, in order, and returns once they are on disk
// (nil) or failed (then none of them is acknowledged). Records that arrive
// while an fdatasync runs wait together and share the next one: when the
// running sync ends, its leader hands the turn to that batch, and the first
// of its waiters to wake leads it.
//
// Under contention (the leader was handed the turn, or the last sync
// carried more than one record) the leader yields once before it takes its
// batch: the appends already runnable reach the log and join it instead of
// each waiting for a sync of its own. Without that, on two cores, a batch
// held about two records with 64 writers, because the syncing goroutine's
// processor is held through the fdatasync and the writers arrive one by
// one. A lone writer never yields.
func (l *Log) Append(recs ...[]byte) error {
	size := 0
	for _, rec := range recs {
		if !validRecord(rec) {
			return ErrRecord
		}
		size += len(rec) + 24 + sealLen
	}
	l.excl.RLock()
	defer l.excl.RUnlock()
	buf := make([]byte, 0, size)
	for _, rec := range recs {
		buf = frame(buf, l.gen, rec)
	}
	return l.commit(buf, len(recs))
}

// commit writes buf, n framed records, with group commit.
func (l *Log) commit(buf []byte, n int) error {
	l.mu.Lock()
	b := l.open
	if b.n == 0 {
		b.buf = buf // this append's own buffer: the ones that join append to it
	} else {
		b.buf = append(b.buf, buf...)
	}
	b.n += n
	handed := false
	if l.syncing {
		l.mu.Unlock()
		select {
		case <-b.done:
			return b.err
		case <-b.turn:
		}
		l.mu.Lock()
		if b.flushed || l.syncing || l.open != b {
			l.mu.Unlock()
			<-b.done
			return b.err
		}
		handed = true
	}
	l.syncing = true
	if handed || l.lastBatch > 1 {
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
	}
	l.open = newBatch()
	l.lastBatch = b.n
	off := l.off
	l.off += int64(len(b.buf))
	l.high = max(l.high, l.off)
	l.mu.Unlock()

	err := l.write(b.buf, off)
	l.records.Add(int64(b.n))

	l.mu.Lock()
	b.err, b.flushed = err, true
	l.syncing = false
	next, waiting := l.open, l.open.n > 0
	l.mu.Unlock()
	close(b.done)
	if waiting {
		next.passTurn()
	}
	return err
}

func (l *Log) write(buf []byte, off int64) error {
	if _, err := l.f.WriteAt(buf, off); err != nil {
		return fmt.Errorf("append to journal %s: %w", l.path, err)
	}
	start := time.Now()
	err := l.disk.Datasync(l.f)
	l.syncNanos.Add(int64(time.Since(start)))
	l.nsyncs.Add(1)
	if err != nil {
		return fmt.Errorf("fdatasync journal %s: %w", l.path, err)
	}
	return nil
}

// Replay calls fn with each record of generation gen, from offset 0, in
// the order they were appended (see the package doc for what it skips and
// where it ends). rec is valid only during the call. An error of fn stops
// replay: Replay returns it in a *CorruptionError. Call it once, after Open
// and before the first Append.
func (l *Log) Replay(gen uint64, fn func(rec []byte) error) (Replayed, error) {
	return l.replay(gen, true, fn)
}

// ReplayUnsealed is Replay of a journal written before records carried a
// checksum: lines {"g":n,…} without the crc32c field. With no checksum a
// bad line cannot be told from the end, so replay ends at the first line
// that is not a JSON object of generation gen.
func (l *Log) ReplayUnsealed(gen uint64, fn func(rec []byte) error) (Replayed, error) {
	return l.replay(gen, false, fn)
}

func (l *Log) replay(gen uint64, sealed bool, fn func(rec []byte) error) (Replayed, error) {
	b, err := l.readUsed()
	if err != nil {
		return Replayed{}, err
	}
	got := Replayed{Used: int64(len(b))}
	l.mu.Lock()
	l.high = max(l.high, got.Used)
	l.mu.Unlock()
	if !sealed {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
	}
	pending := 0 // bad lines since the last good record
	for off := 0; off < len(b); {
		line, _, whole := bytes.Cut(b[off:], []byte("\n"))
		if !whole {
			break // a torn tail
		}
		at := off
		off += len(line) + 1
		if len(bytes.Trim(line, " ")) == 0 {
			continue // a blanked record
		}
		body := line
		if sealed {
			var ok bool
			if body, ok = unseal(line); !ok {
				pending++
				continue
			}
		} else if !json.Valid(line) {
			break
		}
		g, fields, ok := lineGen(body)
		if !ok {
			if !sealed {
				break
			}
			pending++
			continue
		}
		if g != gen {
			break // an older generation's record: this one ends before it
		}
		if err := fn(record(body, fields, sealed)); err != nil {
			return got, &CorruptionError{Path: l.path, Offset: int64(at), Err: err}
		}
		got.Records++
		got.Skipped += pending
		pending = 0
	}
	return got, nil
}

// readUsed reads the file from offset 0 up to the first 64 KiB block of
// zeros, without the zeros it ends in. Records are written from offset 0
// up, each generation over the last, so everything but zeros lies before
// that block; a zero byte before it is damage inside a record, which then
// fails its checksum.
func (l *Log) readUsed() ([]byte, error) {
	var b []byte
	chunk := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := l.f.ReadAt(chunk, off)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("read journal %s: %w", l.path, err)
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
	return b[:len(bytes.TrimRight(b, "\x00"))], nil
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

// Reset starts generation gen at offset 0: replay ignores the older
// records after the new ones. With zero it first overwrites, durably, every
// byte that may hold a record, so nothing of any record stays in the file.
// It waits for running appends and holds off new ones.
func (l *Log) Reset(gen uint64, zero bool) error {
	l.excl.Lock()
	defer l.excl.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if zero && l.high > 0 {
		zeros := make([]byte, min(l.high, 1<<20))
		for off := int64(0); off < l.high; off += int64(len(zeros)) {
			n := min(int64(len(zeros)), l.high-off)
			if _, err := l.f.WriteAt(zeros[:n], off); err != nil {
				return fmt.Errorf("zero journal %s: %w", l.path, err)
			}
		}
		if err := l.disk.Datasync(l.f); err != nil {
			return fmt.Errorf("fdatasync journal %s: %w", l.path, err)
		}
	}
	l.gen, l.off = gen, 0
	if zero {
		l.high = 0
	}
	return nil
}

// Blank overwrites with spaces (keeping each newline) every record for
// which match holds, of any generation and whether or not it passes its
// checksum, but the newest of the current generation when keepNewest is
// set; and the line where the current generation ends, if an older
// generation left one there (what is left of an older record the new ones
// were written over, which match may no longer recognise). Then it
// fdatasyncs, and returns how many lines it blanked. Replay skips a blank
// line; an older generation's records are obsolete, so blanking one loses
// nothing.
//
// match sees each record as it was appended (its start, when the line is
// damaged), valid only during the call. It waits for running appends and
// holds off new ones.
func (l *Log) Blank(match func(rec []byte) bool, keepNewest bool) (int, error) {
	l.excl.Lock()
	defer l.excl.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, end := l.off, max(l.high, l.off)
	type span struct{ start, end int64 }
	var spans []span
	newest := -1 // the index in spans of the newest record of the current generation
	buf := make([]byte, 256<<10)
	for off := int64(0); off < end; {
		n, err := l.f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if n == 0 && err != nil {
			return 0, fmt.Errorf("read journal %s: %w", l.path, err)
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
		if cur >= off && cur < off+int64(len(chunk)) && cur < l.high {
			i := cur - off
			spans = append(spans, span{cur, cur + int64(bytes.IndexByte(chunk[i:], '\n'))})
		}
		for start := 0; start < len(chunk); {
			stop := start + bytes.IndexByte(chunk[start:], '\n')
			if matches(chunk[start:stop], match) {
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
		if (keepNewest && i == newest) || sp.end <= sp.start {
			continue
		}
		n := int(sp.end - sp.start)
		for len(spaces) < n {
			spaces = append(spaces, ' ')
		}
		if _, err := l.f.WriteAt(spaces[:n], sp.start); err != nil {
			return blanked, fmt.Errorf("blank a record of journal %s: %w", l.path, err)
		}
		blanked++
	}
	if blanked > 0 {
		if err := l.disk.Datasync(l.f); err != nil {
			return blanked, fmt.Errorf("fdatasync journal %s: %w", l.path, err)
		}
	}
	return blanked, nil
}

// matches reports whether match holds for line's record: the line without
// its frame, rebuilt in place (line is scratch). A line that does not
// begin with a frame is no record; a damaged one is offered whole after
// its frame's opening, its seal cut off when it still looks like one.
// Blank calls it on every line of the file: it compares bytes directly.
func matches(line []byte, match func([]byte) bool) bool {
	i := len(frameOpen)
	if len(line) <= i || string(line[:i]) != frameOpen {
		return false
	}
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	if i == len(frameOpen) || (i < len(line) && line[i] != ',') {
		return false
	}
	body, sealed := line, false
	if n := len(line) - sealLen; n >= i && string(line[n:n+len(sealField)]) == sealField && string(line[len(line)-len(sealClose):]) == sealClose {
		body, sealed = line[:n], true
	}
	return match(record(body, i, sealed))
}
