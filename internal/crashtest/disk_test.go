package crashtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/personfiles"
)

// personFile is what a person file must decode into.
type personFile struct {
	SchemaVersion int         `json:"schemaVersion"`
	Subject       api.Subject `json:"subject"`
	Facts         []api.Fact  `json:"facts"`
}

// diskState is everything found under a data root, read directly from the
// files, never through the service.
type diskState struct {
	temps []string // ".tmp-" files (a killed writer's leftovers)
	// emptyLogs are person logs of 0 bytes: a kill between a log's
	// creation and its first write. The store reads one as no log (the
	// journal holds the change; see readLog), so after a kill it is
	// counted like a temp file, and after a restart it is an error.
	emptyLogs  []string
	corrupt    []string // files the service moved aside as unreadable
	unexpected []string // anything the service does not write
	badPerm    []string // directories not 0700, files not 0600
	broken     []string // files that do not parse, with the reason
	people     map[string]personFile
	lanes      map[api.Lane][]api.Episode // lane → episodes in file order
	laneBytes  int
}

func (d *diskState) problems() []string {
	var out []string
	for _, p := range d.corrupt {
		out = append(out, "moved aside as corrupt: "+p)
	}
	for _, p := range d.unexpected {
		out = append(out, "unexpected file: "+p)
	}
	for _, p := range d.badPerm {
		out = append(out, "wrong permissions: "+p)
	}
	out = append(out, d.broken...)
	return out
}

// fileKey identifies one version of a file: a durable rewrite is a new inode
// with a new modification time.
type fileKey struct {
	ino  uint64
	size int64
	mod  int64
}

// parsedPeople remembers person files already parsed, so that a long run
// does not decode every unchanged file again on every check.
var parsedPeople = struct {
	sync.Mutex
	m map[string]parsedPerson
}{m: map[string]parsedPerson{}}

type parsedPerson struct {
	key fileKey
	pf  personFile
}

func keyOf(info fs.FileInfo) fileKey {
	k := fileKey{size: info.Size(), mod: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k
}

// readDisk walks root. Every person log must replay (personfiles.DecodeFile) to
// the subject its name encodes; every lane file must be whole JSONL lines (the
// last one ending in a newline: a durable rewrite never leaves a torn line)
// that decode into episodes of that lane. Temp files are only counted.
func readDisk(root string) (*diskState, error) {
	d := &diskState{people: map[string]personFile{}, lanes: map[api.Lane][]api.Episode{}}
	laneOf := map[string]api.Lane{}
	for _, lane := range api.AllLanes() {
		laneOf[filepath.Base(episodes.FileName(lane))] = lane
	}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := e.Info()
		if err != nil {
			return err
		}
		if e.IsDir() {
			if info.Mode().Perm() != durable.DirMode {
				d.badPerm = append(d.badPerm, fmt.Sprintf("%s is %04o", rel, info.Mode().Perm()))
			}
			switch rel {
			case ".", personfiles.Dir, episodes.Dir, personfiles.TmpDir:
				return nil
			}
			d.unexpected = append(d.unexpected, rel+"/")
			return fs.SkipDir
		}
		name := e.Name()
		if strings.HasPrefix(name, durable.TempPrefix) {
			// A temp file is created 0600 too, but it is only counted:
			// the check is that none survives a restart.
			d.temps = append(d.temps, rel)
			return nil
		}
		if info.Mode().Perm() != durable.FileMode || !info.Mode().IsRegular() {
			d.badPerm = append(d.badPerm, fmt.Sprintf("%s is %v", rel, info.Mode()))
		}
		if strings.Contains(name, ".corrupt-") {
			d.corrupt = append(d.corrupt, rel)
			return nil
		}
		dir := filepath.Dir(rel)
		switch {
		case dir == "." && name == durable.LockName:
		case dir == "." && name == "bearers.json":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !json.Valid(b) {
				d.broken = append(d.broken, rel+": not JSON")
			}
		case dir == "." && name == "interaction-claims":
			// "<unix nanoseconds> <interaction id>" lines; a last line
			// without its newline is a claim a kill cut short (never
			// acknowledged), which the next start drops.
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines := strings.Split(string(b), "\n")
			for _, l := range lines[:len(lines)-1] {
				at, id, ok := strings.Cut(l, " ")
				if _, err := strconv.ParseInt(at, 10, 64); err != nil || !ok || !api.ValidSnowflake(id) {
					d.broken = append(d.broken, rel+": a line is not a claim")
					break
				}
			}
		case dir == personfiles.Dir && (name == personfiles.JournalName || name == personfiles.CatalogName):
			// The journal is zeros and lines; the catalog is checked by
			// the service at start (it refuses one it cannot read).
		case dir == personfiles.Dir && personfiles.IsPersonFile(name):
			parsedPeople.Lock()
			c, ok := parsedPeople.m[p]
			parsedPeople.Unlock()
			if ok && c.key == keyOf(info) {
				d.people[name] = c.pf
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if len(b) == 0 {
				d.emptyLogs = append(d.emptyLogs, rel)
				return nil
			}
			// A person log: the header, then whole lines; a torn tail
			// (a write the kill cut short) costs only itself.
			subject, facts, err := personfiles.DecodeFile(b)
			if err != nil {
				d.broken = append(d.broken, fmt.Sprintf("%s: %v (%d bytes)", rel, err, len(b)))
				return nil
			}
			pf := personFile{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts}
			if personfiles.FileName(pf.Subject) != name {
				d.broken = append(d.broken, fmt.Sprintf("%s: holds subject %+v", rel, pf.Subject))
				return nil
			}
			d.people[name] = pf
			parsedPeople.Lock()
			parsedPeople.m[p] = parsedPerson{keyOf(info), pf}
			parsedPeople.Unlock()
		case dir == episodes.Dir && laneOf[name] != "":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			d.laneBytes += len(b)
			eps, bad := parseLane(laneOf[name], b)
			for _, why := range bad {
				d.broken = append(d.broken, rel+": "+why)
			}
			d.lanes[laneOf[name]] = eps
		default:
			d.unexpected = append(d.unexpected, rel)
		}
		return nil
	})
	return d, err
}

func parseLane(lane api.Lane, b []byte) (eps []api.Episode, bad []string) {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		bad = append(bad, fmt.Sprintf("torn: the file (%d bytes) does not end with a newline", len(b)))
	}
	for i, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ep api.Episode
		if err := json.Unmarshal(bytes.TrimSuffix(line, []byte("\n")), &ep); err != nil {
			bad = append(bad, fmt.Sprintf("line %d does not parse: %v", i+1, err))
			continue
		}
		if ep.Lane != lane || ep.EpisodeID == "" || ep.OccurredAt.IsZero() {
			bad = append(bad, fmt.Sprintf("line %d is not an episode of lane %s", i+1, lane))
			continue
		}
		eps = append(eps, ep)
	}
	return eps, bad
}
