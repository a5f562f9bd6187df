package personfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

// reopen opens a second store on the root, as a restart does (the first is
// abandoned without Close, as a kill -9 leaves it, unless the test closed it).
func reopen(t *testing.T, root *os.Root, c *clock) *Store {
	t.Helper()
	s, err := Open(root, zap.NewNop(), c.now, durable.Disk{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readFile(t *testing.T, root *os.Root, name string) []byte {
	t.Helper()
	b, err := root.ReadFile(path.Join(Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func bodies(facts []api.Fact) string {
	var out []string
	for _, f := range facts {
		out = append(out, f.Body)
	}
	return strings.Join(out, ",")
}

func TestRestartAfterKillReplaysTheJournal(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage undoes what a power cut may undo of the unsynced log
		// appends of person u (its log as the last checkpoint left it is
		// before; now is what the process wrote).
		damage func(t *testing.T, root *os.Root, name string, before, now []byte)
	}{
		{"logs as the process left them", func(*testing.T, *os.Root, string, []byte, []byte) {}},
		{"the last appends lost", func(t *testing.T, root *os.Root, name string, before, _ []byte) {
			if err := root.WriteFile(path.Join(Dir, name), before, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a torn tail", func(t *testing.T, root *os.Root, name string, before, now []byte) {
			torn := append(bytes.Clone(before), now[len(before):len(before)+40]...)
			if err := root.WriteFile(path.Join(Dir, name), torn, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"the log never created", func(t *testing.T, root *os.Root, name string, before, _ []byte) {
			if len(before) == 0 {
				if err := root.Remove(path.Join(Dir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		// A kill between the log's creation and its first write (the
		// crash test met it once in CI): 0 bytes on disk, the change in
		// the journal.
		{"the log created, never written", func(t *testing.T, root *os.Root, name string, before, _ []byte) {
			if err := root.WriteFile(path.Join(Dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root, c := newStore(t)
			u := api.Subject{GuildID: "g", UserID: "u"}
			v := api.Subject{GuildID: "g", UserID: "v"}
			mustPropose(t, s, text, proposal("v1", "g", "v", "v", "c", "v one"))
			var before []byte
			if strings.Contains(tc.name, "lost") || strings.Contains(tc.name, "torn") {
				mustPropose(t, s, text, proposal("u0", "g", "u", "u", "c", "u zero"))
				if err := s.checkpointIfFullForTest(); err != nil {
					t.Fatal(err)
				}
				before = readFile(t, root, FileName(u))
			}
			first := mustPropose(t, s, text, proposal("u1", "g", "u", "u", "c", "u one"))
			c.t = c.t.Add(time.Second)
			sup := proposal("u2", "g", "u", "u", "c", "u two")
			sup.Fact.SupersedesFactID = first.Fact.FactID
			mustPropose(t, s, text, sup)
			now := readFile(t, root, FileName(u))
			tc.damage(t, root, FileName(u), before, now)

			s2 := reopen(t, root, c)
			want := "u two"
			if before != nil {
				want = "u zero,u two"
			}
			got, err := s2.Export(u)
			if err != nil || bodies(got.Facts) != strings.Join(reverse(strings.Split(want, ",")), ",") {
				t.Fatalf("after restart u holds %q (%v), want %q", bodies(got.Facts), err, want)
			}
			if got, _ := s2.Export(v); bodies(got.Facts) != "v one" {
				t.Fatalf("after restart v holds %q", bodies(got.Facts))
			}
			if st := s2.Stats(); st.People != 2 || st.Facts != len(strings.Split(want, ","))+1 {
				t.Fatalf("counts after restart: %+v", st)
			}
			// The retry of an acknowledged proposal is recognised.
			resp, _, err := s2.Propose(text, sup)
			if err != nil || !resp.Replayed {
				t.Fatalf("retry after restart: %+v %v", resp, err)
			}
			// The log was brought level: it replays alone to the same facts.
			_, facts, err := DecodeFile(readFile(t, root, FileName(u)))
			if err != nil || len(facts) != len(got.Facts) {
				t.Fatalf("the log after replay holds %d facts (%v)", len(facts), err)
			}
			// The journal was checkpointed: a third start replays nothing.
			if got, err := s2.j.Replay(s2.gen, func([]byte) error { return nil }); err != nil || got.Records != 0 {
				t.Fatalf("the journal still holds %d records after the restart's checkpoint (%v)", got.Records, err)
			}
		})
	}
}

// checkpointIfFullForTest checkpoints now, as a full journal would.
func (s *Store) checkpointIfFullForTest() error {
	s.cp.Lock()
	defer s.cp.Unlock()
	return s.checkpointLocked()
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestTornTailCostsOnlyItself(t *testing.T) {
	s, root, c := newStore(t)
	u := api.Subject{GuildID: "g", UserID: "u"}
	for i := range 3 {
		mustPropose(t, s, text, proposal(fmt.Sprintf("p%d", i), "g", "u", "u", "c", fmt.Sprintf("fact %d", i)))
		c.t = c.t.Add(time.Second)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	name := path.Join(Dir, FileName(u))
	whole := readFile(t, root, FileName(u))
	torn := append(bytes.Clone(whole), `{"seq":4,"put":[{"factId":"fhalf","body":"half a`...)
	if err := root.WriteFile(name, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, root, c)
	got, err := s2.Export(u)
	if err != nil || got.Total != 3 {
		t.Fatalf("a torn tail cost more than itself: %d facts, %v", got.Total, err)
	}
	if b := readFile(t, root, FileName(u)); !bytes.Equal(b, whole) {
		t.Fatalf("the torn tail was not cut off before the next append (%d bytes, want %d)", len(b), len(whole))
	}
	mustPropose(t, s2, text, proposal("p9", "g", "u", "u", "c", "after the tear"))
	_, facts, err := DecodeFile(readFile(t, root, FileName(u)))
	if err != nil || len(facts) != 4 {
		t.Fatalf("after an append the log holds %d facts (%v)", len(facts), err)
	}
	// A whole line that does not parse, in the middle, costs only itself.
	b := readFile(t, root, FileName(u))
	i := bytes.IndexByte(b, '\n')
	mangled := append(append(bytes.Clone(b[:i+1]), "not json at all\n"...), b[i+1:]...)
	if err := root.WriteFile(name, mangled, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, facts, err := DecodeFile(mangled); err != nil || len(facts) != 4 {
		t.Fatalf("a bad middle line cost %d facts (%v)", 4-len(facts), err)
	}
}

func TestStartReadsTheCatalogNotThePersonLogs(t *testing.T) {
	s, root, c := newStore(t)
	for i := range 5 {
		for j := range i + 1 {
			mustPropose(t, s, text, proposal(fmt.Sprintf("p%d-%d", i, j), "g", fmt.Sprint(i), "u", "c", "a fact"))
		}
	}
	long := api.Subject{GuildID: strings.Repeat("g", 64), UserID: strings.Repeat("🙂", 64)}
	req := proposal("long", long.GuildID, long.UserID, "u", "c", "hashed name")
	mustPropose(t, s, text, req)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make every person log unreadable as JSON: a start that read one would
	// move it aside. The catalog alone must give the counts.
	logs := 0
	d, _ := root.Open(Dir)
	names, _ := d.Readdirnames(-1)
	d.Close()
	saved := map[string][]byte{}
	for _, n := range names {
		if IsPersonFile(n) {
			saved[n] = readFile(t, root, n)
			if err := root.WriteFile(path.Join(Dir, n), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			logs++
		}
	}
	if logs != 6 {
		t.Fatalf("%d person logs, want 6", logs)
	}
	s2 := reopen(t, root, c)
	if st := s2.Stats(); st.People != 6 || st.Facts != 1+2+3+4+5+1 {
		t.Fatalf("counts from the catalog: %+v", st)
	}
	for n, b := range saved {
		if got := readFile(t, root, n); string(got) != "garbage" {
			t.Fatalf("start read %s", n)
		}
		if err := root.WriteFile(path.Join(Dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list, _ := s2.List(context.Background(), "", 100)
	found := false
	for _, p := range list.People {
		found = found || p.Subject == long && p.Facts == 1
	}
	if !found || list.Total != 6 {
		t.Fatalf("list after start: %+v", list)
	}
	if got, _ := s2.Export(long); got.Total != 1 {
		t.Fatalf("hashed person after start: %+v", got)
	}
}

func TestSchemaOneFilesMigrate(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	seed := func(user string, n int) api.Subject {
		s := api.Subject{GuildID: "g", UserID: user}
		var facts []api.Fact
		var ids []string
		for i := range n {
			at := c.t.Add(-time.Duration(n-i) * time.Hour)
			facts = append(facts, api.Fact{FactID: fmt.Sprintf("fold%04d", i), Subject: s, Kind: api.KindPersonFact,
				Body: fmt.Sprintf("%s old %d", user, i), Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.5,
				CreatedAt: at, UpdatedAt: at, Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, ProposerUserID: user, ChannelID: "c"}})
			ids = append(ids, fmt.Sprintf("old-%s-%d", user, i))
		}
		// The proposal records of schema 1 ride along, as the old store
		// wrote them.
		pf := legacyFile{Subject: s, Facts: facts}
		for i, id := range ids {
			pf.Proposals = append(pf.Proposals, people.ProposalRecord{ProposalID: id, Digest: "d", FactID: facts[i].FactID})
		}
		b, err := json.Marshal(pf)
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WriteFile(path.Join(Dir, LegacyFileName(s)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := seed("a", 3)
	b := seed("b", 2)
	if err := root.WriteFile(path.Join(Dir, LegacyFileName(api.Subject{GuildID: "g", UserID: "z"})), []byte(`{"facts":[{"body":"torn`), 0o600); err != nil {
		t.Fatal(err)
	}

	// At start (no catalog): every schema-1 file becomes a log.
	s := reopen(t, root, c)
	if st := s.Stats(); st.People != 2 || st.Facts != 5 {
		t.Fatalf("counts after migration: %+v", st)
	}
	for _, subj := range []api.Subject{a, b} {
		if _, err := root.Stat(path.Join(Dir, LegacyFileName(subj))); !os.IsNotExist(err) {
			t.Fatalf("the schema-1 file of %s survived migration: %v", subj.UserID, err)
		}
		_, facts, err := DecodeFile(readFile(t, root, FileName(subj)))
		if err != nil || !strings.HasPrefix(bodies(facts), subj.UserID+" old 0") {
			t.Fatalf("the log of %s: %q %v", subj.UserID, bodies(facts), err)
		}
	}
	names := dirNames(t, root)
	if !strings.Contains(names, LegacyFileName(api.Subject{GuildID: "g", UserID: "z"})+corruptSuffix) {
		t.Fatalf("the unreadable schema-1 file was not moved aside: %s", names)
	}
	// The idempotency records migrate too: the id is known, so a
	// different fact under it is a conflict and stores nothing.
	if _, _, err := s.Propose(text, proposal("old-a-1", "g", "a", "a", "c", "whatever")); kind(err) != fault.Conflict {
		t.Fatalf("reuse of a migrated proposal id: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// On first access (a catalog exists): a schema-1 file dropped in later.
	s2 := reopen(t, root, c)
	late := seed("late", 4)
	got, err := s2.Export(late)
	if err != nil || got.Total != 4 {
		t.Fatalf("late schema-1 file on first access: %+v %v", got, err)
	}
	if st := s2.Stats(); st.People != 3 || st.Facts != 9 {
		t.Fatalf("counts after the late migration: %+v", st)
	}
	// Its count is durable: a restart without Close still counts it.
	s3 := reopen(t, root, c)
	if st := s3.Stats(); st.People != 3 || st.Facts != 9 {
		t.Fatalf("counts after a restart: %+v", st)
	}
}

func dirNames(t *testing.T, root *os.Root) string {
	t.Helper()
	d, err := root.Open(Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	return strings.Join(names, " ")
}

func TestForgetLeavesNoBodyOnDisk(t *testing.T) {
	for _, how := range []string{"forget", "edit", "forget-person"} {
		t.Run(how, func(t *testing.T) {
			s, root, c := newStore(t)
			u := api.Subject{GuildID: "g", UserID: "u"}
			secret := "the secret body " + how
			r := mustPropose(t, s, text, proposal("s1", "g", "u", "u", "c", secret))
			mustPropose(t, s, text, proposal("s2", "g", "u", "u", "c", "an ordinary fact"))
			switch how {
			case "forget":
				if _, err := s.Forget(text, u, r.Fact.FactID, "u"); err != nil {
					t.Fatal(err)
				}
			case "edit":
				body := "a corrected body"
				if _, err := s.Edit(u, r.Fact.FactID, api.FactPatch{Body: &body}); err != nil {
					t.Fatal(err)
				}
			case "forget-person":
				if _, err := s.ForgetPerson(u); err != nil {
					t.Fatal(err)
				}
			}
			walk(t, root, Dir, func(name string, b []byte) {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s still holds the body after %s", name, how)
				}
			})
			// And a restart without Close does not bring it back.
			s2 := reopen(t, root, c)
			got, _ := s2.Export(u)
			if strings.Contains(bodies(got.Facts), secret) {
				t.Fatalf("the body came back after a restart: %q", bodies(got.Facts))
			}
			if how == "forget-person" && (got.Total != 0 || strings.Contains(dirNames(t, root), "p-g_u")) {
				t.Fatalf("forget-person left %d facts, files %s", got.Total, dirNames(t, root))
			}
		})
	}
}

func walk(t *testing.T, root *os.Root, dir string, fn func(name string, b []byte)) {
	t.Helper()
	d, err := root.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := d.ReadDir(-1)
	d.Close()
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if e.IsDir() {
			walk(t, root, p, fn)
			continue
		}
		b, err := root.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fn(p, b)
	}
}

func TestForgetPersonInTheJournalFinishesAtRestart(t *testing.T) {
	s, root, c := newStore(t)
	u := api.Subject{GuildID: "g", UserID: "u"}
	mustPropose(t, s, text, proposal("a", "g", "u", "u", "c", "to be forgotten"))
	// The journal line is durable, the process dies before the files go.
	s.cp.Lock()
	line, _ := encodeJournal(journalLine{Person: FileName(u), Subject: u, ForgetPerson: true})
	if err := s.j.Append(line); err != nil {
		t.Fatal(err)
	}
	s.cp.Unlock()
	s2 := reopen(t, root, c)
	if got, _ := s2.Export(u); got.Total != 0 {
		t.Fatalf("the forgotten person came back: %+v", got)
	}
	if strings.Contains(dirNames(t, root), FileName(u)) {
		t.Fatalf("the person's log survived: %s", dirNames(t, root))
	}
	if st := s2.Stats(); st.People != 0 {
		t.Fatalf("counts: %+v", st)
	}
}

func TestConcurrentChangesShareJournalSyncs(t *testing.T) {
	s, root, c := newStore(t)
	const writers, each = 32, 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, _, err := s.Propose(text, proposal(fmt.Sprintf("w%d-%d", w, i), "g", fmt.Sprint(w), "u", "c", "a fact")); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	m := s.Metrics()
	if m.JournalChanges != writers*each || m.Facts != writers*each || m.People != writers {
		t.Fatalf("metrics: %+v", m)
	}
	if m.JournalSyncs >= m.JournalChanges {
		t.Fatalf("%d changes took %d journal syncs: none shared", m.JournalChanges, m.JournalSyncs)
	}
	t.Logf("%d changes, %d journal fdatasyncs", m.JournalChanges, m.JournalSyncs)
	s2 := reopen(t, root, c)
	if st := s2.Stats(); st.Facts != writers*each || st.People != writers {
		t.Fatalf("after restart: %+v", st)
	}
}

// TestLogsAreCompactedAtFiveQuartersOfTheirLiveSize: a log never grows
// past 5/4 of its state (compactAt), give or take the state's drift
// between compactions, so a cold read decodes little that is dead.
func TestLogsAreCompactedAtFiveQuartersOfTheirLiveSize(t *testing.T) {
	s, root, c := newStore(t)
	u := api.Subject{GuildID: "g", UserID: "u"}
	var last string
	for i := range 16 {
		r := mustPropose(t, s, text, proposal(fmt.Sprintf("seed%d", i), "g", "u", "u", "c", strings.Repeat("x", 100)+fmt.Sprint(i)))
		last = r.Fact.FactID
		c.t = c.t.Add(time.Second)
	}
	maxSize := 0
	for i := range 200 {
		req := proposal(fmt.Sprintf("sup%d", i), "g", "u", "u", "c", strings.Repeat("y", 100)+fmt.Sprint(i))
		req.Fact.SupersedesFactID = last
		r := mustPropose(t, s, text, req)
		last = r.Fact.FactID
		c.t = c.t.Add(time.Second)
		maxSize = max(maxSize, len(readFile(t, root, FileName(u))))
	}
	got, _ := s.Export(u)
	snap, _ := encodeSnapshot(func() *personFile { pf, _ := s.load(FileName(u), u, copied); return pf }())
	if got.Total != 16 || maxSize > len(snap)*5/4+256 || s.Metrics().Compactions < 10 {
		t.Fatalf("%d facts, log peaked at %d bytes, live %d, %d compactions", got.Total, maxSize, len(snap), s.Metrics().Compactions)
	}
}

// TestRecallReadsTheCacheInPlace: a recall reads the cached state without
// copying it, so it must answer what a recall over a copy answers and leave
// the state's order as it was, before and after changes.
func TestRecallReadsTheCacheInPlace(t *testing.T) {
	s, _, c := newStore(t)
	u := api.Subject{GuildID: "g", UserID: "u"}
	soon := c.t.Add(time.Hour)
	var ids []string
	for i := range 12 {
		req := proposal(fmt.Sprintf("p%d", i), "g", "u", "u", "c", fmt.Sprintf("fact %d <b>&\"quoted\"</b> tea", i))
		switch i % 4 {
		case 1:
			req.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "c"}
		case 2:
			req.Fact.ExpiresAt = &soon
		}
		r := mustPropose(t, s, text, req)
		ids = append(ids, r.Fact.FactID)
		c.t = c.t.Add(time.Second)
	}
	check := func(when string) {
		t.Helper()
		for _, q := range []people.RecallQuery{
			{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c"}},
			{Who: text, RecallQuery: api.RecallQuery{ChannelID: "other", Limit: 128}},
			{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c", Query: "TEA fact", Limit: 3}},
			{Who: operator, RecallQuery: api.RecallQuery{Limit: 128}},
			{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c", Query: "absent"}},
		} {
			stored, err1 := s.snapshot(u) // a copy, in stored order
			order := factIDs(stored)
			got, err2 := s.Recall(u, q)
			want := q
			if want.Limit == 0 {
				want.Limit = api.DefaultRecallLimit
			}
			if err1 != nil || err2 != nil || !reflect.DeepEqual(got, people.RecallView(u, stored, want, c.t)) {
				t.Fatalf("%s, %+v: got %+v (%v %v)", when, q, got, err1, err2)
			}
			if after, _ := s.snapshot(u); !slices.Equal(factIDs(after), order) {
				t.Fatalf("%s, %+v: the recall reordered the stored facts: %v, was %v", when, q, factIDs(after), order)
			}
		}
	}
	check("fresh")
	check("memoised")
	body := "an edited body"
	if _, err := s.Edit(u, ids[0], api.FactPatch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	check("after an edit")
	if _, err := s.Forget(operator, u, ids[3], ""); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour) // the expiring facts have expired
	check("after a forget and expiry")
	if got, err := s.Recall(api.Subject{GuildID: "g", UserID: "nobody"}, people.RecallQuery{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c"}}); err != nil || got.Facts == nil || got.Total != 0 {
		t.Fatalf("nobody: %+v %v", got, err)
	}
}

func factIDs(facts []api.Fact) []string {
	ids := make([]string, len(facts))
	for i, f := range facts {
		ids[i] = f.FactID
	}
	return ids
}

func TestCompactionIsCoveredByTheJournal(t *testing.T) {
	// A compaction rewrites the log in place with no sync of its own; a
	// power cut may keep any mix of the old and the new bytes, or none.
	cases := map[string]func(old, compacted []byte) []byte{
		"emptied":          func(old, compacted []byte) []byte { return []byte{} },
		"the old log back": func(old, compacted []byte) []byte { return old },
		"written but not cut": func(old, compacted []byte) []byte {
			return append(slices.Clone(compacted), old[len(compacted):]...)
		},
		"first sector lost": func(old, compacted []byte) []byte {
			return append(append(slices.Clone(old[:512]), compacted[512:]...), old[len(compacted):]...)
		},
		"only the first sector written": func(old, compacted []byte) []byte {
			return append(slices.Clone(compacted[:512]), old[512:]...)
		},
	}
	for lost, damage := range cases {
		t.Run(lost, func(t *testing.T) {
			s, root, c := newStore(t)
			u := api.Subject{GuildID: "g", UserID: "u"}
			var last string
			for i := range 8 {
				r := mustPropose(t, s, text, proposal(fmt.Sprintf("seed%d", i), "g", "u", "u", "c", strings.Repeat("x", 200)+fmt.Sprint(i)))
				last = r.Fact.FactID
				c.t = c.t.Add(time.Second)
			}
			if err := s.checkpointIfFullForTest(); err != nil {
				t.Fatal(err)
			}
			var old []byte
			for i := 0; s.Metrics().Compactions == 0; i++ {
				old = readFile(t, root, FileName(u))
				req := proposal(fmt.Sprintf("sup%d", i), "g", "u", "u", "c", strings.Repeat("y", 200)+fmt.Sprint(i))
				req.Fact.SupersedesFactID = last
				last = mustPropose(t, s, text, req).Fact.FactID
				c.t = c.t.Add(time.Second)
			}
			compacted := readFile(t, root, FileName(u))
			if len(compacted) >= len(old) || len(compacted) < 1024 {
				t.Fatalf("the compaction made %d bytes of %d", len(compacted), len(old))
			}
			// Two more changes after the compaction, appended to it.
			for i := range 2 {
				mustPropose(t, s, text, proposal(fmt.Sprintf("after%d", i), "g", "u", "u", "c", fmt.Sprint("after ", i)))
				c.t = c.t.Add(time.Second)
			}
			want, _ := s.Export(u)
			// A power cut loses what was not synced: some or all of the
			// compacted log's bytes, and the appends after them.
			if err := root.WriteFile(path.Join(Dir, FileName(u)), damage(old, compacted), 0o600); err != nil {
				t.Fatal(err)
			}
			s2 := reopen(t, root, c)
			got, _ := s2.Export(u)
			if bodies(got.Facts) != bodies(want.Facts) || got.Total != 10 {
				t.Fatalf("after the restart:\n got %q\nwant %q", bodies(got.Facts), bodies(want.Facts))
			}
			if strings.Contains(dirNames(t, root), corruptSuffix) {
				t.Fatalf("a file was moved aside: %s", dirNames(t, root))
			}
		})
	}
}
