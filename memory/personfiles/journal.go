package personfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/journal"
	"github.com/clankie/clankie/memory/people"
)

// The journal is the store's write-ahead log (memory/journal, which frames,
// seals and group-commits the records this file encodes): every change to a
// person is one record in <root>/discord-people/journal, made durable by one
// fdatasync shared by every change that arrived while the previous one ran,
// before the change is appended to the person's own log and answered.
// Person logs are only written, never synced, on that path: the journal is
// what survives a power cut, and start-up replays it into them.
//
// A checkpoint syncs the person logs written since the last one, writes the
// catalog (every person's fact count) under a new generation, and starts
// the journal's generation of that number, so start-up reads the catalog
// and the short journal and no person file. A clean stop's checkpoint also
// zeroes the journal's used part. A record of a superseded or evicted fact
// may stay there, as it may in the person's log until compaction, but
// nothing of a forgotten one does: a forget, an edit or a forget-person
// blanks the person's older records (see redact) before it answers.
//
// A record is a journalLine, as json.Marshal writes it (storage.go's commit
// writes the same bytes by hand on the proposal path):
//
//	{"person":"p-…jsonl","subject":{…},"facts":5,"change":{…a person log change…}}
//
// When a change takes a person's log past 5/4 of its live size (compactAt), its record
// carries the compacted state instead ({"seq":n,"reset":[header, fact and
// proposal lines]}), and the log is rewritten from it without a sync of
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
	Person  string      `json:"person"`
	Subject api.Subject `json:"subject"`
	Facts   int         `json:"facts"`
	// ForgetPerson removes the person's files; Change is absent then.
	ForgetPerson bool           `json:"forgetPerson,omitempty"`
	Change       *people.Change `json:"change,omitempty"`
}

// openJournal opens (creating and preallocating when missing) the journal,
// whose syncs the store's Disk makes and times.
func (s *Store) openJournal() (*journal.Log, error) {
	return journal.Open(s.root, path.Join(Dir, JournalName), journal.Options{Size: journalSize, Disk: s.files})
}

// errUndecodable and errNoChange are a whole journal record that is no
// change: no content is quoted, the record's offset says where it is.
var (
	errUndecodable = errors.New("a people journal record does not decode")
	errNoChange    = errors.New("a people journal record holds no change")
)

// readJournal returns the records of the catalog's generation and how many
// damaged records were skipped (each cost only itself). Without sealed (a
// catalog written before records carried checksums) it reads the older
// records, which stop at the first line that does not parse.
func (s *Store) readJournal() ([]journalLine, journal.Replayed, error) {
	var lines []journalLine
	decode := func(rec []byte) error {
		var l journalLine
		if json.Unmarshal(rec, &l) != nil {
			return errUndecodable
		}
		if l.Change == nil && !l.ForgetPerson {
			return errNoChange
		}
		if FileName(l.Subject) != l.Person {
			return fmt.Errorf("a people journal record names %s for another subject", l.Person)
		}
		lines = append(lines, l)
		return nil
	}
	replay := s.j.Replay
	if !s.sealed {
		replay = s.j.ReplayUnsealed
	}
	got, err := replay(s.gen, decode)
	return lines, got, err
}

// encodeJournal renders one journal record.
func encodeJournal(l journalLine) ([]byte, error) { return json.Marshal(l) }

// personRecords matches the journal records of the person whose log is
// name, for Blank.
func personRecords(name string) func(rec []byte) bool {
	prefix := []byte(`{"person":"` + name + `"`)
	return func(rec []byte) bool { return bytes.HasPrefix(rec, prefix) }
}
