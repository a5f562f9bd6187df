package memory

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// corruptMark is in the name of a person file the store set aside because
// it could not be parsed (<name>.corrupt-<unix seconds>).
const corruptMark = ".corrupt-"

// corruptFiles lists the person files set aside as unreadable, oldest
// first. It reads the directory (a few names), never the files.
func (s *Service) corruptFiles() []api.CorruptFile {
	d, err := s.root.Open(people.Dir)
	if err != nil {
		return nil
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil
	}
	out := []api.CorruptFile{}
	for _, e := range entries {
		i := strings.LastIndex(e.Name(), corruptMark)
		if i < 0 || e.IsDir() {
			continue
		}
		f := api.CorruptFile{File: people.Dir + "/" + e.Name()}
		if unix, err := strconv.ParseInt(e.Name()[i+len(corruptMark):], 10, 64); err == nil {
			f.SetAsideAt = time.Unix(unix, 0).UTC()
		}
		if info, err := e.Info(); err == nil {
			f.Bytes = info.Size()
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SetAsideAt.Equal(out[j].SetAsideAt) {
			return out[i].SetAsideAt.Before(out[j].SetAsideAt)
		}
		return out[i].File < out[j].File
	})
	return out
}

// listCorrupt is GET /v1/memory/discord-people/corrupt (operator only):
// which person files were set aside, so an operator can inspect or restore
// them by hand.
func (s *Service) listCorrupt(*request) (int, any, error) {
	return http.StatusOK, api.CorruptFiles{SchemaVersion: api.SchemaVersion, Files: s.corruptFiles()}, nil
}
