package personfiles

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/bufpool"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

// personFile is one person's state as the file store keeps it: what
// replaying their log gives, and the log's sizes.
type personFile struct {
	people.Person
	size int64 // bytes of the log on disk (0: no log)
	live int64 // bytes of the compacted log when last measured
	// factsOnly says the log was read for its facts alone (load viewed):
	// Proposals is empty whatever the log holds, so this state is only
	// ever read, never changed, written or handed out whole.
	factsOnly bool
}

// access is how a caller holds a person's state from load. Every caller
// holds cp and the person's lock.
type access int

const (
	// borrowed is the cached state itself, for a read: the caller must not
	// change or keep it.
	borrowed access = iota
	// viewed is borrowed for a read of the facts alone (a recall). A person
	// not in the cache is read without their idempotency records, which
	// only a change needs: they are about half a steady log's lines and a
	// quarter of the time it takes to read it. The cache keeps them so
	// (factsOnly), and any other access reads their log again, whole.
	viewed
	// copied is a copy of the caller's own.
	copied
	// taken is the cached state taken out of the cache, for a change: the
	// caller puts it back, changed or not, or leaves it out when a change
	// of it failed.
	taken
)

// load is the one way to get a person's state: from the cache, else from
// their log, else from a schema-1 file (migrated on the spot), else an
// empty person for nobody. A file that cannot be read is never treated as
// empty and overwritten: it is moved aside and reported content-free, and
// the person starts empty. name is FileName(subject).
func (s *Store) load(name string, subject api.Subject, how access) (*personFile, error) {
	if pf, ok := s.cache.get(name, how); ok {
		s.cacheHits.Add(1)
		return pf, nil
	}
	s.cacheMisses.Add(1)
	pf, err := s.loadFile(name, subject, how == viewed)
	if err != nil {
		return nil, err
	}
	if pf == nil {
		s.setCount(name, subject, 0)
		pf = &personFile{Person: people.Person{Subject: subject}}
	}
	if pf.Facts == nil {
		pf.Facts = []api.Fact{} // answers say "facts":[], never null
	}
	switch {
	case (how == borrowed || how == viewed) && pf.size > 0:
		s.keep(name, pf)
	case how == copied && pf.size > 0:
		s.keep(name, clonePerson(pf))
	}
	return pf, nil
}

// loadFile reads a person from their log (without their records when
// factsOnly), else from a schema-1 file (migrated on the spot, whole); nil
// for nobody.
func (s *Store) loadFile(name string, subject api.Subject, factsOnly bool) (*personFile, error) {
	pf, err := s.readLog(name, factsOnly)
	if err != nil || pf != nil {
		return pf, err
	}
	pf, err = s.migrateLegacy(LegacyFileName(subject), name)
	if err != nil || pf == nil {
		return nil, err
	}
	// Count the migrated person durably: a journal line with no change,
	// which replay turns into a count from the log.
	if err := s.commit(name, pf, []byte("{}\n")); err != nil {
		return nil, err
	}
	s.setCount(name, pf.Subject, len(pf.Facts))
	return pf, nil
}

// readLog reads and replays one person log (decodeLog, or decodeLogFacts
// when factsOnly), cutting off a torn tail. A missing log is nil, nil. The
// log stays open for the change that usually follows a read.
func (s *Store) readLog(name string, factsOnly bool) (*personFile, error) {
	f, release, err := s.logs.acquire(s.pdir, name, false)
	if err != nil {
		if durable.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("open person log: %w", err)
	}
	defer release()
	b, err := readAll(f, s.readBufs)
	defer s.readBufs.Put(b) // after decodeLog, which keeps nothing of b
	if err != nil {
		return nil, fmt.Errorf("read person log: %w", err)
	}
	if len(b) == 0 {
		// An empty log holds nothing to lose: a creation cut short (the
		// journal holds its change), or a compaction whose data a power
		// cut lost. The person starts from the journal, or empty.
		return nil, nil
	}
	decode := decodeLog
	if factsOnly {
		decode = decodeLogFacts
	}
	pf, good, err := decode(b)
	if err != nil || FileName(pf.Subject) != name {
		return nil, s.moveAside(name) // drops the open log; release closes it
	}
	if good < len(b) {
		// A torn tail is a write the crash cut short; it was never
		// acknowledged. Cut it off so the next append follows a whole line.
		if err := f.Truncate(int64(good)); err != nil {
			return nil, fmt.Errorf("cut a torn tail off a person log: %w", err)
		}
		s.markDirty(name, false)
	}
	return pf, nil
}

// maxReadBuf is the largest read buffer kept for the next load: a log of
// 128 facts at its steady size is about 100 KiB.
const maxReadBuf = 1 << 20

// readAll reads a whole file from offset 0 with one read for a file whose
// size does not change meanwhile (the caller holds the person's lock),
// into a buffer from bufs.
func readAll(f *os.File, bufs *bufpool.Pool) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := bufs.Get(int(st.Size()))[:st.Size()]
	n, err := f.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b[:n], err
}

// moveAside renames an unreadable file to <name>.corrupt-<unix seconds>.
func (s *Store) moveAside(name string) error {
	s.logs.drop(name)
	aside := name + corruptSuffix + strconv.FormatInt(s.now().Unix(), 10)
	if err := s.files.Rename(s.root, path.Join(Dir, name), path.Join(Dir, aside)); err != nil {
		return fmt.Errorf("move unreadable person file aside: %w", err)
	}
	_ = s.root.Chmod(path.Join(Dir, aside), durable.FileMode)
	s.log.Warn("person file could not be parsed; moved aside and starting that person empty",
		zap.String("movedTo", path.Join(Dir, aside)))
	return nil
}

// readLegacy reads the schema-1 file legacy as the state of the person
// named name. A missing file is nil, nil; one that cannot be read as that
// person is moved aside.
func (s *Store) readLegacy(legacy, name string) (*personFile, error) {
	b, err := s.pdir.ReadFile(legacy)
	if err != nil {
		if durable.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read person file: %w", err)
	}
	subject, facts, proposals, err := decodeLegacy(b)
	if err != nil || FileName(subject) != name {
		return nil, s.moveAside(legacy)
	}
	if facts == nil {
		facts = []api.Fact{}
	}
	return &personFile{Person: people.Person{Subject: subject, Facts: facts, Proposals: proposals}}, nil
}

// migrateLegacy turns a schema-1 file into a person log (written durably)
// and removes it. A missing file is nil, nil; an unreadable one is moved
// aside.
func (s *Store) migrateLegacy(legacy, name string) (*personFile, error) {
	pf, err := s.readLegacy(legacy, name)
	if err != nil || pf == nil {
		return nil, err
	}
	if err := s.rewrite(name, pf); err != nil {
		return nil, err
	}
	if err := s.files.Remove(s.root, path.Join(Dir, legacy)); err != nil && !durable.IsNotExist(err) {
		return nil, fmt.Errorf("remove the migrated person file: %w", err)
	}
	return pf, nil
}

// migrateUnsynced is migrateLegacy for the start-up scan, which batches
// the syncs: the log is written in place without a sync, and the schema-1
// file is left for the caller to remove once it has made the log durable.
// No temp file is needed: until the schema-1 file is gone it wins over the
// log at every start (and every start scans until a catalog is written),
// so a log cut short by a crash is only migrated again.
func (s *Store) migrateUnsynced(legacy, name string) (*personFile, error) {
	pf, err := s.readLegacy(legacy, name)
	if err != nil || pf == nil {
		return nil, err
	}
	snap, err := encodeSnapshot(pf)
	if err != nil {
		return nil, err
	}
	f, err := s.pdir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, durable.FileMode)
	if err != nil {
		return nil, fmt.Errorf("create person log: %w", err)
	}
	_, err = f.Write(snap)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write person log: %w", err)
	}
	pf.size, pf.live = int64(len(snap)), int64(len(snap))
	return pf, nil
}

// commit makes one change durable in the journal; change is the change's
// log line (ending in '\n'), encoded once for both files. The caller holds
// cp.
func (s *Store) commit(name string, after *personFile, change []byte) error {
	// journalLine as json.Marshal writes it, around the change's bytes:
	// names are ASCII letters, digits and "%_.-", quoted as they are; the
	// subject as json.Marshal writes it (appendSubject).
	line := make([]byte, 0, len(change)+len(name)+len(after.Subject.GuildID)+len(after.Subject.UserID)+96)
	line = append(line, `{"person":"`...)
	line = append(line, name...)
	line = append(line, `","subject":`...)
	line = appendSubject(line, after.Subject)
	line = append(line, `,"facts":`...)
	line = strconv.AppendInt(line, int64(len(after.Facts)), 10)
	line = append(line, `,"change":`...)
	line = append(line, change[:len(change)-1]...)
	line = append(line, '}')
	return s.j.Append(line)
}

// change applies ch to pf, the caller's copy of a person's state, which the
// cache then owns: the journal first (durable when it returns), then the
// person's log (written, synced at the next checkpoint), then the cache and
// the counts. The caller holds cp (read or write) and the person's lock.
func (s *Store) change(name string, pf *personFile, ch *people.Change) error {
	pf.apply(ch) // pf is the caller's own (take gave it)
	line, err := encodeChange(ch)
	if err != nil {
		return err
	}
	snap, reset, err := compactedLine(pf, line)
	if err != nil {
		return err
	}
	journaled := line
	if snap != nil {
		journaled = reset
	}
	if err := s.commit(name, pf, journaled); err != nil {
		s.cache.drop(name)
		return err
	}
	if snap != nil {
		err = s.compact(name, pf, snap)
	} else {
		err = s.appendLog(name, pf, line)
	}
	if err != nil {
		// The change is in the journal; only the log write failed. Try a
		// whole rewrite; if that fails too, replay at the next start
		// brings the log level with the journal.
		s.cache.drop(name)
		if err2 := s.rewrite(name, pf); err2 != nil {
			return err
		}
	}
	s.keep(name, pf)
	s.setCount(name, pf.Subject, len(pf.Facts))
	return nil
}

// appendLog appends ch to pf's log (creating it when pf had none): one
// pwrite into the open log, no sync (the journal holds the change).
func (s *Store) appendLog(name string, pf *personFile, line []byte) error {
	created := pf.size == 0
	if created {
		subject := pf.Subject
		head, err := encodeLine(&people.Change{SchemaVersion: logVersion, Subject: &subject})
		if err != nil {
			return err
		}
		line = append(head, line...)
	}
	f, release, err := s.logs.acquire(s.pdir, name, created)
	if err != nil {
		return fmt.Errorf("open person log: %w", err)
	}
	defer release()
	if _, err := f.WriteAt(line, pf.size); err != nil {
		return fmt.Errorf("append to person log: %w", err)
	}
	if created {
		// A log pf did not know of was empty or missing (readLog); cut
		// whatever a crash left past the new lines.
		if err := f.Truncate(int64(len(line))); err != nil {
			return fmt.Errorf("write person log: %w", err)
		}
	}
	pf.size += int64(len(line))
	s.markDirty(name, created)
	return nil
}

// compactAt is how far a person log may grow past its live size, in
// quarters: it is compacted when it would pass 5/4 of it. A person not in
// memory is loaded by decoding the whole log, so every byte past the live
// state is paid by each cold read (at twice, as before, a steady log was
// half again its state on average; at 5/4 an eighth). A compaction
// rewrites the state and journals it whole, which at 128 facts happens
// about every 30 proposals instead of every 130.
const compactAt = 5

// compactedLine returns, when pf's log would pass compactAt/4 of its live
// size with line appended, the log's compacted state and the change to journal in
// line's place: a reset to that state ({"seq":n,"reset":[the state's
// lines]}). The journal line then carries the whole state, so the
// compacted log needs no sync of its own: replay rebuilds it from the
// journal until the next checkpoint syncs it.
func compactedLine(pf *personFile, line []byte) (snap, reset []byte, err error) {
	grown := pf.size + int64(len(line))
	if pf.size == 0 || 4*grown <= compactAt*pf.live || grown < 4096 {
		return nil, nil, nil
	}
	if snap, err = encodeSnapshot(pf); err != nil {
		return nil, nil, err
	}
	pf.live = int64(len(snap))
	if 4*grown <= compactAt*pf.live {
		return nil, nil, nil
	}
	reset = make([]byte, 0, len(snap)+48)
	reset = append(reset, `{"seq":`...)
	reset = strconv.AppendUint(reset, pf.Seq, 10)
	reset = append(reset, `,"reset":[`...)
	// The state's lines are JSON objects without a raw newline (JSON
	// escapes one in a string), so joining them with commas makes an array.
	reset = append(reset, bytes.ReplaceAll(snap[:len(snap)-1], []byte("\n"), []byte(","))...)
	reset = append(reset, "]}\n"...)
	return snap, reset, nil
}

// compact replaces pf's log with snap, its compacted state, in place: the
// snapshot over the log's first bytes, then the log cut to its length. No
// new file and no sync here: the journal holds the state (a reset line), so
// a crash anywhere in between is repaired by replay, which applies a reset
// over whatever the log holds; the next checkpoint syncs the log before the
// journal lets go of the state.
func (s *Store) compact(name string, pf *personFile, snap []byte) error {
	f, release, err := s.logs.acquire(s.pdir, name, false)
	if err != nil {
		return fmt.Errorf("open person log: %w", err)
	}
	defer release()
	if _, err := f.WriteAt(snap, 0); err != nil {
		return fmt.Errorf("compact a person log: %w", err)
	}
	if err := f.Truncate(int64(len(snap))); err != nil {
		return fmt.Errorf("compact a person log: %w", err)
	}
	pf.size, pf.live = int64(len(snap)), int64(len(snap))
	s.compactions.Add(1)
	s.markDirty(name, false)
	return nil
}

// rewrite replaces a person's log durably with its compacted state, or
// removes it when nothing is left; it leaves nothing of what the state no
// longer holds. The caller holds the person's lock.
func (s *Store) rewrite(name string, pf *personFile) error {
	if len(pf.Facts) == 0 && len(pf.Proposals) == 0 {
		s.logs.drop(name)
		if err := s.files.Remove(s.root, path.Join(Dir, name)); err != nil && !durable.IsNotExist(err) {
			return err
		}
		pf.size, pf.live = 0, 0
		return nil
	}
	snap, err := encodeSnapshot(pf)
	if err != nil {
		return err
	}
	return s.writeSnapshot(name, pf, snap)
}

func (s *Store) writeSnapshot(name string, pf *personFile, snap []byte) error {
	s.logs.drop(name) // the rename replaces the open file
	if err := s.writeVia(TmpDir, path.Join(Dir, name), snap); err != nil {
		return err
	}
	pf.size, pf.live = int64(len(snap)), int64(len(snap))
	return nil
}

// keep puts pf in the cache, which then owns it.
func (s *Store) keep(name string, pf *personFile) {
	s.cache.put(name, pf, decodedBytes(pf))
}

// clonePerson copies a person's state so the cache never shares a slice
// with a caller that goes on changing its copy.
func clonePerson(pf *personFile) *personFile {
	c := *pf
	c.Facts = slices.Clone(pf.Facts)
	c.Proposals = slices.Clone(pf.Proposals)
	return &c
}
