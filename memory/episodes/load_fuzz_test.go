package episodes

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// FuzzLoadLaneFile writes arbitrary bytes as lane files (the lanes picked by
// mask's low four bits, in api.AllLanes() order; none means the operator lane) and
// opens the store over them. Loading must not fail or panic on content,
// whatever loads must be an episode the store could keep, and the next
// Record must succeed and leave lane files whose every line is an episode
// that a fresh Open loads again, unchanged and without skipping a line.
func FuzzLoadLaneFile(f *testing.F) {
	at := base.Format(time.RFC3339Nano)
	line := func(id string, lane api.Lane, extra string) string {
		return `{"episodeId":"` + id + `","lane":"` + string(lane) + `","room":"#general","summary":"note ` + id +
			`","visibility":"shareable","occurredAt":"` + at + `","provenance":{"characterId":"captain","selfAuthored":true,"rawTranscript":false}` + extra + "}\n"
	}
	f.Add(byte(1), []byte(line("a", "operator", "")+line("b", "operator", `,"retained":true`)))
	f.Add(byte(2), []byte(line("a", "discord_voice", "")+`{"episodeId":"torn","lane":"disc`))
	f.Add(byte(3), []byte(line("dup", "operator", "")+line("dup", "discord_voice", "")))
	f.Add(byte(8), []byte("\n\n  \x00\xff{}\n[]\nnull\n"+line("../../x", "gameplay", "")))
	f.Add(byte(1), []byte(strings.ReplaceAll(line("y", "operator", ""), at, "9999-12-31T23:00:00-05:00")))
	f.Fuzz(func(t *testing.T, mask byte, data []byte) {
		dir := t.TempDir()
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if err := durable.MkdirAll(root, Dir); err != nil {
			t.Fatal(err)
		}
		var written []api.Lane
		for i, lane := range api.AllLanes() {
			if mask&(1<<i) != 0 {
				written = append(written, lane)
			}
		}
		if len(written) == 0 {
			written = []api.Lane{api.LaneOperator}
		}
		for _, lane := range written {
			if err := root.WriteFile(FileName(lane), data, durable.FileMode); err != nil {
				t.Fatal(err)
			}
		}
		now := func() time.Time { return base.Add(1000 * time.Hour) }

		s, err := Open(root, zap.NewNop(), now, durable.Disk{})
		if err != nil {
			t.Fatalf("Open failed on file content: %v", err)
		}
		checkLoaded(t, s, written)

		lane := written[0]
		req := api.EpisodeRequest{
			SchemaVersion: api.SchemaVersion, Lane: lane, Room: "fuzz room", Summary: "after the fuzzed load",
			OccurredAt: base.Add(999 * time.Hour),
			Provenance: api.EpisodeProvenance{CharacterID: "captain", SessionID: "fuzz", SelfAuthored: true},
		}
		resp, info, err := s.Record(lane, req)
		if err != nil {
			t.Fatalf("Record after the fuzzed load: %v", err)
		}
		if !info.Created || resp.Episode.EpisodeID == "" {
			t.Fatalf("Record after the fuzzed load: %+v %+v", resp, info)
		}
		checkLoaded(t, s, written)

		// Every lane file now holds only lines that parse into episodes of
		// that lane: exactly the store's own lines, in its own order.
		for _, l := range api.AllLanes() {
			b, err := root.ReadFile(FileName(l))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			var want []byte
			for _, r := range s.list {
				if r.ep.Lane == l {
					want = append(want, r.line...)
				}
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("lane %s file differs from the store after Record", l)
			}
			for n, ln := range bytes.SplitAfter(b, []byte("\n")) {
				if len(ln) == 0 {
					continue
				}
				var ep api.Episode
				dec := json.NewDecoder(bytes.NewReader(ln))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&ep); err != nil || ln[len(ln)-1] != '\n' {
					t.Fatalf("lane %s line %d does not parse after Record: %v", l, n+1, err)
				}
				if ep.Lane != l {
					t.Fatalf("lane %s line %d holds an episode of lane %q", l, n+1, ep.Lane)
				}
			}
		}

		again, err := Open(root, zap.NewNop(), now, durable.Disk{})
		if err != nil {
			t.Fatalf("reopen after Record: %v", err)
		}
		if len(again.list) != len(s.list) {
			t.Fatalf("reopen loaded %d episodes, the store held %d", len(again.list), len(s.list))
		}
		for i := range s.list {
			if !bytes.Equal(again.list[i].line, s.list[i].line) {
				t.Fatalf("reopen: episode %d differs", i)
			}
		}
		if len(again.stale) != 0 {
			t.Fatalf("reopen after Record finds stale lanes %v", again.stale)
		}
	})
}

// checkLoaded asserts the store's invariants over what it loaded: every
// episode is one the store could keep, in order, indexed, within the ring.
func checkLoaded(t *testing.T, s *Store, written []api.Lane) {
	t.Helper()
	seen := map[string]bool{}
	unretained, retained := 0, 0
	perLane := map[api.Lane]int{}
	for i, r := range s.list {
		ep := r.ep
		switch {
		case !validLane(ep.Lane):
			t.Fatalf("episode %d: lane %q", i, ep.Lane)
		case !validID(ep.EpisodeID):
			t.Fatalf("episode %d: malformed id %q", i, ep.EpisodeID)
		case checkVisibility(ep.Visibility, false) != nil:
			t.Fatalf("episode %s: visibility %q", ep.EpisodeID, ep.Visibility)
		case ep.OccurredAt.IsZero():
			t.Fatalf("episode %s: no occurredAt", ep.EpisodeID)
		case seen[ep.EpisodeID]:
			t.Fatalf("episode id %s loaded twice", ep.EpisodeID)
		case s.byID[ep.EpisodeID] != r:
			t.Fatalf("episode %s is not indexed by its id", ep.EpisodeID)
		case i > 0 && compareRec(s.list[i-1], r) >= 0:
			t.Fatalf("episodes %d and %d out of order", i-1, i)
		}
		if !slices.Contains(written, ep.Lane) {
			t.Fatalf("episode %s of lane %s loaded from a file that was not written", ep.EpisodeID, ep.Lane)
		}
		seen[ep.EpisodeID] = true
		if ep.Retained {
			retained++
		} else {
			unretained++
		}
		perLane[ep.Lane]++
		var back api.Episode
		if err := json.Unmarshal(r.line, &back); err != nil {
			t.Fatalf("episode %s: its stored line does not parse: %v", ep.EpisodeID, err)
		}
		if again, err := json.Marshal(back); err != nil || !bytes.Equal(append(again, '\n'), r.line) {
			t.Fatalf("episode %s: its stored line does not round-trip (%v)", ep.EpisodeID, err)
		}
		if strings.ContainsAny(r.card, "\n\r") || strings.ContainsRune(r.card, '\u2028') || strings.ContainsRune(r.card, '\u2029') {
			t.Fatalf("episode %s: its card line breaks", ep.EpisodeID)
		}
		// Every loaded note obeys the content rules a write obeys.
		if _, err := checkSummary(ep.Summary); err != nil || ep.Summary != strings.TrimSpace(ep.Summary) {
			t.Fatalf("episode %s: summary breaks the write rules: %v", ep.EpisodeID, err)
		}
		room := ep.Room
		if room == "" || room != strings.TrimSpace(room) || !utf8.ValidString(room) ||
			utf8.RuneCountInString(room) > MaxRoom || strings.IndexFunc(room, breaksLine) >= 0 {
			t.Fatalf("episode %s: room breaks the write rules", ep.EpisodeID)
		}
	}
	if len(s.byID) != len(s.list) {
		t.Fatalf("index holds %d ids, list %d", len(s.byID), len(s.list))
	}
	if unretained > api.EpisodeRingCapacity {
		t.Fatalf("%d unretained episodes loaded, the ring holds %d", unretained, api.EpisodeRingCapacity)
	}
	st := s.Stats()
	if st.Total != len(s.list) || st.Unretained != unretained || st.Retained != retained {
		t.Fatalf("stats %+v disagree with the store (%d unretained, %d retained)", st, unretained, retained)
	}
	for _, l := range api.AllLanes() {
		if st.PerLane[l] != perLane[l] {
			t.Fatalf("stats per lane %v disagree with the store %v", st.PerLane, perLane)
		}
	}
	if c := s.Card(api.LaneOperator); c.Count > api.EpisodeCardSize || strings.Count(c.Card, "\n") != c.Count {
		t.Fatalf("card of %d lines: %q", c.Count, c.Card)
	}
}
