package personfiles

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/bufpool"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/journal"
	"github.com/clankie/clankie/memory/people"
)

// Dir is the store's directory under the memory root.
const Dir = "discord-people"

// TmpDir holds the store's temporary files, so a sweep at start never lists
// the directory of every person.
const TmpDir = Dir + "/tmp"

// Store is safe for concurrent use. Requests for one person are serialised
// by a striped lock, so no update is lost; different people proceed at once
// and their changes share the journal's fdatasync. Every operation takes
// cp (read) before a person lock; a checkpoint takes cp (write), so it runs
// between changes, never inside one.
type Store struct {
	root  *os.Root
	files durable.Disk // makes its writes durable, timing each sync
	pdir  *os.Root     // Dir, so a person's file is one openat away
	logs  *logFiles    // person logs kept open between changes
	log   *zap.Logger
	now   func() time.Time
	locks [4096]sync.Mutex // striped by name: 64 busy people rarely share one
	seed  maphash.Seed     // of the stripes' hash
	cp    sync.RWMutex
	j     *journal.Log

	mu      sync.Mutex
	idx     peopleIndex            // file name → fact count, people with facts only
	hashed  map[string]api.Subject // subjects of hashed file names in idx
	facts   int
	dirty   map[string]bool // person logs written since the last checkpoint
	created bool            // a person log was created since the last checkpoint
	gen     uint64          // the catalog's generation, the journal's
	sealed  bool            // the catalog says its generation's journal records are sealed

	cache *fileCache
	// readBufs holds the buffers person logs are read into: decodeLog
	// copies what it keeps, so a buffer serves the next load, sparing a
	// cold load the allocation and zeroing of a whole log.
	readBufs *bufpool.Pool
	// checkpointing is set while a change that found the journal full
	// checkpoints (checkpointIfFull).
	checkpointing atomic.Bool

	cacheHits, cacheMisses, compactions, checkpoints atomic.Int64
}

// Options are the store's settings, given at Open.
type Options struct {
	// CacheBytes bounds the decoded people kept in memory, counted by
	// decodedBytes (CLANKIE_MEMORY_CACHE_MB); 0 is DefaultCacheBytes.
	CacheBytes int
}

// Open loads the store. With a catalog it reads the catalog and replays the
// journal's lines of the catalog's generation (the changes since the last
// checkpoint) into the person logs they name; without one (a new root, or a
// root of schema-1 files) it scans the directory once, migrating schema-1
// files to logs and moving unreadable files aside. Either way it ends with
// a checkpoint, so the answer's counters match the disk.
func Open(root *os.Root, log *zap.Logger, now func() time.Time, files durable.Disk, opts Options) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	s := &Store{root: root, log: log, now: now, files: files, hashed: map[string]api.Subject{},
		dirty: map[string]bool{}, cache: newFileCache(opts.CacheBytes), logs: newLogFiles(), seed: maphash.MakeSeed(),
		readBufs: bufpool.New(maxReadBuf)}
	if err := durable.MkdirAll(root, Dir); err != nil {
		return nil, err
	}
	if err := durable.MkdirAll(root, TmpDir); err != nil {
		return nil, err
	}
	pdir, err := root.OpenRoot(Dir)
	if err != nil {
		return nil, err
	}
	s.pdir = pdir
	swept, err := durable.SweepTemp(root, TmpDir)
	if err != nil {
		return nil, fmt.Errorf("sweep temp files: %w", err)
	}
	if swept > 0 {
		log.Info("swept leftover temp files", zap.String("store", "people"), zap.Int("count", swept))
	}
	if s.j, err = s.openJournal(); err != nil {
		s.pdir.Close()
		return nil, err
	}
	fail := func(err error) (*Store, error) {
		s.j.Close()
		s.logs.closeAll()
		s.pdir.Close()
		return nil, err
	}
	found, err := s.readCatalog()
	if err != nil {
		return fail(err)
	}
	s.cp.Lock()
	defer s.cp.Unlock()
	if !found {
		if err := s.scan(); err != nil {
			return fail(err)
		}
		if err := s.checkpointLocked(); err != nil {
			return fail(err)
		}
		return s, nil
	}
	lines, got, err := s.readJournal()
	if err != nil {
		return fail(fmt.Errorf("replay the people journal: %w", err))
	}
	if got.Skipped > 0 {
		log.Warn("skipped corrupt people journal records; the records after them were replayed", zap.Int("count", got.Skipped))
	}
	if len(lines) == 0 && s.sealed {
		// Go on in the catalog's generation; lines of an older one are
		// zeroed.
		if err := s.j.Reset(s.gen, got.Used > 0); err != nil {
			return fail(err)
		}
		return s, nil
	}
	if err := s.replay(lines); err != nil {
		return fail(fmt.Errorf("replay the people journal: %w", err))
	}
	if len(lines) > 0 {
		log.Info("replayed the people journal", zap.Int("changes", len(lines)))
	}
	// Zero the journal too: a replayed forget or edit leaves nothing of
	// what it removed in the records before it.
	if err := s.checkpoint(true); err != nil {
		return fail(err)
	}
	return s, nil
}

// Close checkpoints, so the next start reads no journal, and closes the
// journal.
func (s *Store) Close() error {
	s.cp.Lock()
	defer s.cp.Unlock()
	err := s.checkpoint(true)
	if cerr := s.j.Close(); err == nil {
		err = cerr
	}
	if cerr := s.logs.closeAll(); err == nil {
		err = cerr
	}
	if cerr := s.pdir.Close(); err == nil {
		err = cerr
	}
	return err
}

// Refresh does nothing: the store is the only writer of its files, so what
// it holds is always current (PostgreSQL's store, shared by processes,
// reloads here).
func (s *Store) Refresh(context.Context) error { return nil }

// Ready proves the memory root writable by creating and removing a temp
// file, for /readyz. Each probe uses a name of its own, so concurrent
// probes never remove each other's file; a killed probe's file is swept
// at the next start.
func (s *Store) Ready(context.Context) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := durable.TempPrefix + "readyz-" + hex.EncodeToString(b[:])
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, durable.FileMode)
	if err == nil {
		f.Close()
		err = s.root.Remove(name)
	}
	if err != nil {
		return fault.New(fault.Unavailable, "not_ready", "The memory root is not writable.")
	}
	return nil
}

func (s *Store) lock(name string) func() {
	m := &s.locks[maphash.String(s.seed, name)%uint64(len(s.locks))]
	m.Lock()
	return m.Unlock
}

func (s *Store) markDirty(name string, created bool) {
	s.mu.Lock()
	s.dirty[name] = true
	s.created = s.created || created
	s.mu.Unlock()
}

func (s *Store) setCount(name string, subject api.Subject, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setCountLocked(name, subject, n)
}

func (s *Store) setCountLocked(name string, subject api.Subject, n int) {
	s.facts += n - s.idx.set(name, n)
	if n == 0 {
		delete(s.hashed, name)
		return
	}
	if strings.HasPrefix(name, hashedTag) {
		s.hashed[name] = subject
	}
}

// subjectOf returns the subject of an indexed file name; s.mu is held.
func (s *Store) subjectOf(name string) api.Subject {
	if subj, ok := ParseFileName(name); ok {
		return subj
	}
	return s.hashed[name]
}

// Stats returns the counters without touching the disk.
func (s *Store) Stats() people.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return people.Stats{People: s.idx.len(), Facts: s.facts, Store: api.StoreFile}
}

// Metrics returns the store's counters without touching the disk.
func (s *Store) Metrics() people.Metrics {
	st, js, cm := s.Stats(), s.j.Stats(), s.cache.metrics()
	return people.Metrics{
		People: st.People, Facts: st.Facts,
		JournalSyncs: js.Syncs, JournalChanges: js.Records, JournalSyncTime: js.SyncTime,
		CacheHits: s.cacheHits.Load(), CacheMisses: s.cacheMisses.Load(),
		Compactions: s.compactions.Load(), Checkpoints: s.checkpoints.Load(),
		CacheBytes: cm.Bytes, CacheEvictions: cm.Evictions,
	}
}

// Store is a Storer.
var _ people.Storer = (*Store)(nil)
