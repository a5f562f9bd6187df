package personfiles

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

// CatalogName (<root>/discord-people/catalog) is the checkpoint of every
// person's fact count, so start-up reads it and the journal and no person
// log. Plain text:
//
//	{"schemaVersion":2,"generation":7,"people":2,"facts":12}
//	p-100_200.jsonl 5
//	h-3f…9a.jsonl 7 <esc(guildId)> <esc(userId)>
//
// one line per person with at least one fact, sorted by file name; a hashed
// name carries its ids, escaped as in readable file names.
const CatalogName = "catalog"

type catalogHead struct {
	SchemaVersion int    `json:"schemaVersion"`
	Generation    uint64 `json:"generation"`
	People        int    `json:"people"`
	Facts         int    `json:"facts"`
	// Journal names the checksum of the generation's journal records;
	// empty in a catalog written before records carried one.
	Journal string `json:"journal,omitempty"`
}

// journalSeal is catalogHead.Journal for sealed records.
const journalSeal = "crc32c"

// readCatalog loads the counts and the generation; found is false when
// there is no catalog. It reads the file a buffer at a time into the
// front-coded index, so loading 100,000 people holds no copy of the file
// and no string per person.
func (s *Store) readCatalog() (found bool, err error) {
	f, err := s.root.Open(path.Join(Dir, CatalogName))
	if err != nil {
		if durable.IsNotExist(err) {
			return false, nil
		}
		return false, fmt.Errorf("read the people catalog: %w", err)
	}
	defer f.Close()
	bad := func(why string) (bool, error) {
		return false, fmt.Errorf("the people catalog %s is unreadable (%s); remove it and the service rebuilds it from the person logs", path.Join(Dir, CatalogName), why)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	first, err := r.ReadSlice('\n')
	if err != nil && err != io.EOF {
		if err == bufio.ErrBufferFull {
			return bad("no header")
		}
		return false, fmt.Errorf("read the people catalog: %w", err)
	}
	var h catalogHead
	if err := json.Unmarshal(first, &h); err != nil || h.SchemaVersion != logVersion || h.People < 0 {
		return bad("no header")
	}
	type late struct {
		name    string
		subject api.Subject
		n       int
	}
	var (
		b        frontCodedBuilder
		unsorted []late // lines out of name order (a hand-edited catalog)
		counted  int
	)
	s.facts = 0
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return bad("a line is not a name and a count")
		}
		if err != nil && err != io.EOF {
			return false, fmt.Errorf("read the people catalog: %w", err)
		}
		if line = bytes.TrimSuffix(line, []byte("\n")); len(line) > 0 {
			name, rest, _ := bytes.Cut(line, []byte(" "))
			count, ids, _ := bytes.Cut(rest, []byte(" "))
			n, aerr := strconv.Atoi(string(count))
			if aerr != nil || n < 1 || n > people.MaxFactsStored || !isPersonFileBytes(name) {
				return bad("a line is not a name and a count")
			}
			subject := api.Subject{}
			hashed := bytes.HasPrefix(name, []byte(hashedTag))
			if hashed != (len(ids) > 0) {
				return bad("a hashed name without its ids, or ids after a readable name")
			}
			if hashed {
				gid, uid, _ := bytes.Cut(ids, []byte(" "))
				g, err1 := unescape(string(gid))
				u, err2 := unescape(string(uid))
				subject = api.Subject{GuildID: g, UserID: u}
				if err1 != nil || err2 != nil || FileName(subject) != string(name) {
					return bad("a line's ids do not decode to its name")
				}
				s.hashed[string(name)] = subject
			}
			if !b.add(name[:len(name)-len("jsonl")], n) {
				unsorted = append(unsorted, late{string(name), subject, n})
			} else {
				counted++
				s.facts += n
			}
		}
		if err == io.EOF {
			break
		}
	}
	s.idx = peopleIndex{base: b.finish(), n: counted}
	for _, l := range unsorted {
		s.setCountLocked(l.name, l.subject, l.n)
	}
	if s.idx.len() != h.People || s.facts != h.Facts {
		return bad("its totals do not match its lines")
	}
	s.gen = h.Generation
	s.sealed = h.Journal == journalSeal
	return true, nil
}

// isPersonFileBytes is IsPersonFile of a name still in a read buffer.
func isPersonFileBytes(name []byte) bool {
	return (bytes.HasPrefix(name, []byte(readableTag)) || bytes.HasPrefix(name, []byte(hashedTag))) &&
		bytes.HasSuffix(name, []byte(fileSuffix)) && bytes.Count(name, []byte(".")) == 1
}

// writeCatalog writes the counts under gen, durably, streaming the index
// to the file, and folds the people added since the last one into the
// index's compact part. The caller holds cp (write), so no change is
// running: the index is only read meanwhile, and mu is taken to rebuild it.
func (s *Store) writeCatalog(gen uint64) error {
	err := s.writeStreamVia(TmpDir, path.Join(Dir, CatalogName), func(w *bufio.Writer) error {
		head, _ := json.Marshal(catalogHead{SchemaVersion: logVersion, Generation: gen, People: s.idx.len(), Facts: s.facts, Journal: journalSeal})
		w.Write(head)
		w.WriteByte('\n')
		var num []byte
		s.idx.each("", func(key []byte, count int) bool {
			w.Write(key)
			w.WriteString("jsonl ")
			num = strconv.AppendInt(num[:0], int64(count), 10)
			w.Write(num)
			if bytes.HasPrefix(key, []byte(hashedTag)) {
				subj := s.hashed[nameOf(key)]
				w.WriteByte(' ')
				w.WriteString(escape(subj.GuildID))
				w.WriteByte(' ')
				w.WriteString(escape(subj.UserID))
			}
			w.WriteByte('\n')
			return true
		})
		return nil
	})
	if err != nil {
		return err
	}
	if len(s.idx.extra) > 0 || s.idx.base.tombstones > 0 {
		s.mu.Lock()
		s.idx.rebuild()
		s.mu.Unlock()
	}
	return nil
}

// checkpointLocked makes every person log written since the last checkpoint
// durable, writes the catalog under the next generation and zeroes the
// journal. The caller holds cp (write): no change is between its journal
// line and its log write.
func (s *Store) checkpointLocked() error { return s.checkpoint(false) }

// checkpoint is checkpointLocked, zeroing the journal when zero is set.
func (s *Store) checkpoint(zero bool) error {
	names := make([]string, 0, len(s.dirty))
	for n := range s.dirty {
		names = append(names, n)
	}
	if err := s.syncLogs(names); err != nil {
		return err
	}
	if s.created {
		if err := s.files.SyncDir(s.root, Dir); err != nil {
			return err
		}
	}
	next := s.gen + 1
	if err := s.writeCatalog(next); err != nil {
		return fmt.Errorf("write the people catalog: %w", err)
	}
	if err := s.j.Reset(next, zero); err != nil {
		return err
	}
	s.gen, s.sealed = next, true
	s.dirty, s.created = map[string]bool{}, false
	s.checkpoints.Add(1)
	return nil
}

// checkpointIfFull checkpoints when the journal's preallocated part is
// nearly used. One change checkpoints; the others that find the journal
// full meanwhile go on into its headroom (they wait anyway, for cp, once
// the checkpoint asks for it) rather than each take cp in turn to find
// nothing left to do: with 64 writers that queue stalled them for 300 ms.
// The caller holds no lock.
func (s *Store) checkpointIfFull() error {
	if s.j.Used() < journalCheckpoint || !s.checkpointing.CompareAndSwap(false, true) {
		return nil
	}
	defer s.checkpointing.Store(false)
	s.cp.Lock()
	defer s.cp.Unlock()
	if s.j.Used() < journalCheckpoint {
		return nil
	}
	return s.checkpointLocked()
}

// syncLogs fdatasyncs the named person logs, several at once: the file
// system shares its journal commits among them and the disk's flushes
// overlap, so a checkpoint of 64 busy people stalls changes for about 15 ms
// on the machine this was measured on, not 170 ms one after another. A log
// that is gone (forgotten) needs no sync.
func (s *Store) syncLogs(names []string) error {
	return forEach(len(names), 8, func(i int) error {
		f, release, err := s.logs.acquire(s.pdir, names[i], false)
		if durable.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open a person log to sync it: %w", err)
		}
		defer release()
		if err := s.files.Datasync(f); err != nil {
			return fmt.Errorf("fdatasync a person log: %w", err)
		}
		return nil
	})
}

// forEach calls do for 0 ≤ i < n on up to workers goroutines and returns
// the first error; once one fails no further i is started.
func forEach(n, workers int, do func(i int) error) error {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					next.Store(int64(n)) // start no more
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// replay brings each person log named in lines level with the journal: the
// changes a log lacks (a power cut lost its unsynced append, or the process
// died between the journal and the log) are applied and the log is
// rewritten whole. The caller holds cp (write).
func (s *Store) replay(lines []journalLine) error {
	byPerson := map[string][]journalLine{}
	var order []string
	for _, l := range lines {
		if byPerson[l.Person] == nil {
			order = append(order, l.Person)
		}
		byPerson[l.Person] = append(byPerson[l.Person], l)
	}
	for _, name := range order {
		pf, err := s.readLog(name, false)
		if err != nil {
			return err
		}
		for _, l := range byPerson[name] {
			if l.ForgetPerson {
				if err := s.removePersonFiles(name, l.Subject); err != nil {
					return err
				}
				pf = nil
				continue
			}
			if pf == nil {
				pf = &personFile{Person: people.Person{Subject: l.Subject, Facts: []api.Fact{}}}
			}
			pf.apply(l.Change)
		}
		if pf == nil {
			s.setCountLocked(name, api.Subject{}, 0)
			continue
		}
		if err := s.rewrite(name, pf); err != nil {
			return err
		}
		s.setCountLocked(name, pf.Subject, len(pf.Facts))
	}
	return nil
}

// scan reads every file of the directory once: person logs are counted
// (a torn tail cut off), schema-1 files are migrated to logs, and
// unreadable files are moved aside. The caller holds cp (write).
//
// It lists the directory scanBatch names at a time (100,000 names are never
// held at once) and reads each batch with one worker per core. A batch's
// migrations are written without a sync each: then one syncfs makes the new
// logs' data durable, one directory fsync their names, and only then are
// the batch's schema-1 files removed (and the directory synced again), so
// a schema-1 file goes only once its log is durable, as on access. Progress
// is logged every few seconds, as counts only.
func (s *Store) scan() error {
	d, err := s.root.Open(Dir)
	if err != nil {
		return err
	}
	defer d.Close()
	start, lastLog := time.Now(), time.Now()
	var st scanStats
	for {
		names, rerr := d.Readdirnames(scanBatch)
		if len(names) > 0 {
			if err := s.scanNames(d, names, &st); err != nil {
				return err
			}
		}
		if rerr == io.EOF || (rerr == nil && len(names) == 0) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("list the people directory: %w", rerr)
		}
		if time.Since(lastLog) >= scanLogEvery {
			lastLog = time.Now()
			s.log.Info("reading person files (no catalog)", zap.Int64("files", st.files.Load()),
				zap.Int64("migrated", st.migrated.Load()), zap.Duration("elapsed", time.Since(start).Round(time.Millisecond)))
		}
	}
	if st.migrated.Load() > 0 {
		s.log.Info("migrated person files to logs", zap.Int64("count", st.migrated.Load()),
			zap.Duration("elapsed", time.Since(start).Round(time.Millisecond)))
	}
	return nil
}

const (
	scanBatch    = 1024
	scanLogEvery = 2 * time.Second
)

type scanStats struct{ files, migrated atomic.Int64 }

// scanNames reads one batch of the directory's names in parallel.
func (s *Store) scanNames(d *os.File, names []string, st *scanStats) error {
	var (
		mu   sync.Mutex
		done []string // schema-1 files migrated, to remove once their logs are durable
	)
	err := forEach(len(names), runtime.GOMAXPROCS(0), func(i int) error {
		name := names[i]
		var pf *personFile
		var err error
		switch {
		case IsPersonFile(name):
			st.files.Add(1)
			// A schema-1 file still present wins: it is removed only once
			// its log is durable, before any change to that log. It is
			// migrated when its name comes.
			if _, err := s.pdir.Lstat(strings.TrimSuffix(name, fileSuffix) + legacySuffix); err == nil {
				return nil
			}
			pf, err = s.readLog(name, true) // a count needs the facts alone
		case isLegacyFile(name):
			st.files.Add(1)
			log := strings.TrimSuffix(name, legacySuffix) + fileSuffix
			if pf, err = s.migrateUnsynced(name, log); pf != nil {
				mu.Lock()
				done = append(done, name)
				mu.Unlock()
				st.migrated.Add(1)
			}
			name = log
		default:
			return nil
		}
		if err != nil {
			return err
		}
		if pf != nil && len(pf.Facts) > 0 {
			s.setCount(name, pf.Subject, len(pf.Facts))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(done) == 0 {
		return nil
	}
	if err := syncfs(d); err != nil {
		return fmt.Errorf("sync the migrated person logs: %w", err)
	}
	if err := s.files.SyncDir(s.root, Dir); err != nil {
		return err
	}
	for _, legacy := range done {
		if err := s.pdir.Remove(legacy); err != nil && !durable.IsNotExist(err) {
			return fmt.Errorf("remove the migrated person file: %w", err)
		}
	}
	return s.files.SyncDir(s.root, Dir)
}

// syncfs makes every file written on d's file system durable: one call
// for a batch of new person logs instead of an fdatasync each.
func syncfs(d *os.File) error {
	for {
		err := unix.Syncfs(int(d.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// removePersonFiles removes a person's log, schema-1 file and every copy
// moved aside as corrupt. The caller holds the person's lock or cp (write).
func (s *Store) removePersonFiles(name string, subject api.Subject) error {
	s.cache.drop(name)
	s.logs.drop(name)
	for _, n := range []string{name, LegacyFileName(subject)} {
		if err := s.root.Remove(path.Join(Dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove a person file: %w", err)
		}
	}
	if err := s.removeCorruptCopies(name, LegacyFileName(subject)); err != nil {
		return err
	}
	return s.files.SyncDir(s.root, Dir)
}

// corruptSuffix follows a person file's name when load moves an unreadable
// copy aside: <name>.corrupt-<unix seconds>.
const corruptSuffix = ".corrupt-"

// removeCorruptCopies deletes every copy of the named files that load moved
// aside: they may hold what was kept about the person, so forgetting the
// person removes them too.
func (s *Store) removeCorruptCopies(names ...string) error {
	d, err := s.root.Open(Dir)
	if err != nil {
		return fmt.Errorf("list the people directory: %w", err)
	}
	defer d.Close()
	// A batch of names at a time: the directory holds a log per person.
	for {
		entries, err := d.Readdirnames(scanBatch)
		for _, e := range entries {
			for _, name := range names {
				if !strings.HasPrefix(e, name+corruptSuffix) {
					continue
				}
				if err := s.root.Remove(path.Join(Dir, e)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("remove a corrupt copy of a person file: %w", err)
				}
			}
		}
		if err == io.EOF || (err == nil && len(entries) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list the people directory: %w", err)
		}
	}
}

// legacyFile is the schema-1 person file: one JSON document.
type legacyFile struct {
	SchemaVersion int                     `json:"schemaVersion"`
	Subject       api.Subject             `json:"subject"`
	Facts         []api.Fact              `json:"facts"`
	Proposals     []people.ProposalRecord `json:"proposals,omitempty"`
}

func decodeLegacy(b []byte) (api.Subject, []api.Fact, []people.ProposalRecord, error) {
	var lf legacyFile
	err := json.Unmarshal(b, &lf)
	return lf.Subject, lf.Facts, lf.Proposals, err
}

// writeVia replaces name with data durably by way of a temp file in tmp (a
// directory of the same file system): write, fdatasync, rename, fsync the
// target's directory.
func (s *Store) writeVia(tmp, name string, data []byte) error {
	return s.writeFileVia(tmp, name, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// writeStreamVia is writeVia of what write writes through a buffer.
func (s *Store) writeStreamVia(tmp, name string, write func(*bufio.Writer) error) error {
	return s.writeFileVia(tmp, name, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 64<<10)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
}

func (s *Store) writeFileVia(tmp, name string, write func(*os.File) error) error {
	root := s.root
	t := path.Join(tmp, durable.TempPrefix+randomName())
	f, err := root.OpenFile(t, os.O_WRONLY|os.O_CREATE|os.O_EXCL, durable.FileMode)
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		_ = root.Remove(t)
		return fmt.Errorf("write temp file: %w", err)
	}
	if err := s.files.Datasync(f); err != nil {
		f.Close()
		_ = root.Remove(t)
		return fmt.Errorf("fdatasync temp file: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = root.Remove(t)
		return fmt.Errorf("close temp file: %w", err)
	}
	if err := root.Rename(t, name); err != nil {
		_ = root.Remove(t)
		return fmt.Errorf("rename into place: %w", err)
	}
	return s.files.SyncDir(root, path.Dir(name))
}

func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
