package memory

import (
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/personfiles"
)

// corruptMark is in the name of a person file the store set aside because
// it could not be parsed (<name>.corrupt-<unix seconds>).
const corruptMark = ".corrupt-"

// corruptFiles lists the person files set aside as unreadable, oldest
// first. It reads the directory's names, never the files, in batches: the
// directory holds a log per person (100,000 of them is a normal size) and
// only the few set aside are kept, so the catalog and a metrics scrape cost
// no memory that grows with the number of people.
func (s *Service) corruptFiles() []api.CorruptFile {
	d, err := s.root.Open(personfiles.Dir)
	if err != nil {
		return []api.CorruptFile{} // no person files (the PostgreSQL store keeps none)
	}
	defer d.Close()
	out := []api.CorruptFile{}
	for {
		entries, err := d.ReadDir(512)
		for _, e := range entries {
			if f, ok := corruptFile(e); ok {
				out = append(out, f)
			}
		}
		if err != nil || len(entries) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SetAsideAt.Equal(out[j].SetAsideAt) {
			return out[i].SetAsideAt.Before(out[j].SetAsideAt)
		}
		return out[i].File < out[j].File
	})
	return out
}

// corruptFile describes e when it is a person file set aside as unreadable.
func corruptFile(e fs.DirEntry) (api.CorruptFile, bool) {
	i := strings.LastIndex(e.Name(), corruptMark)
	if i < 0 || e.IsDir() {
		return api.CorruptFile{}, false
	}
	f := api.CorruptFile{File: personfiles.Dir + "/" + e.Name()}
	if unix, err := strconv.ParseInt(e.Name()[i+len(corruptMark):], 10, 64); err == nil {
		f.SetAsideAt = time.Unix(unix, 0).UTC()
	}
	if info, err := e.Info(); err == nil {
		f.Bytes = info.Size()
	}
	return f, true
}

// listCorrupt is GET /v1/memory/discord-people/corrupt (operator only):
// which person files were set aside, so an operator can inspect or restore
// them by hand.
func (s *Service) listCorrupt(*request) (reply, error) {
	return reply{body: api.CorruptFiles{SchemaVersion: api.SchemaVersion, Files: s.corruptFiles()}}, nil
}
