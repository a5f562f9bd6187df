package personfiles

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// lostAppends undoes what a power cut may undo after the last checkpoint:
// the person logs created since were never synced, so they are gone and
// only the journal holds the acknowledged changes.
func lostAppends(t *testing.T, root *os.Root, subjects ...api.Subject) {
	t.Helper()
	for _, s := range subjects {
		if err := root.Remove(path.Join(Dir, FileName(s))); err != nil {
			t.Fatal(err)
		}
	}
}

// damageJournal rewrites the record holding marker with damage.
func damageJournal(t *testing.T, root *os.Root, marker string, damage func(rec []byte)) {
	t.Helper()
	name := path.Join(Dir, JournalName)
	b := readFile(t, root, JournalName)
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		t.Fatalf("no record holds %q", marker)
	}
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	end := i + bytes.IndexByte(b[i:], '\n')
	damage(b[start:end])
	if err := root.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptJournalRecordCostsOnlyItself(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(rec []byte)
	}{
		{"a flipped bit in the body", func(rec []byte) {
			i := bytes.Index(rec, []byte("secret of b"))
			rec[i] ^= 0x04
		}},
		{"a flipped bit in the generation", func(rec []byte) { rec[5] ^= 0x01 }},
		{"a zeroed stretch", func(rec []byte) { clear(rec[20:60]) }},
		{"a flipped bit in the checksum", func(rec []byte) { rec[len(rec)-4] ^= 0x01 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root, c := newStore(t)
			a := api.Subject{GuildID: "g", UserID: "a"}
			b := api.Subject{GuildID: "g", UserID: "b"}
			cc := api.Subject{GuildID: "g", UserID: "c"}
			for _, p := range [][2]string{{"a", "fact of a"}, {"b", "secret of b"}, {"c", "first of c"}, {"a", "second of a"}, {"c", "second of c"}} {
				mustPropose(t, s, text, proposal(strings.ReplaceAll(p[1], " ", "-"), "g", p[0], p[0], "c", p[1]))
				c.t = c.t.Add(time.Second)
			}
			_ = s // killed: no Close, so no checkpoint
			lostAppends(t, root, a, b, cc)
			damageJournal(t, root, "secret of b", tc.damage)
			// And the last write was torn: it was never acknowledged.
			jb := readFile(t, root, JournalName)
			end := len(bytes.TrimRight(jb, "\x00"))
			copy(jb[end:], `{"g":1,"person":"p-g_a.jsonl","subject":{"guildId":"g","userId":"a"},"facts":3,"change":{"seq":3,"put":[{"body":"torn`)
			if err := root.WriteFile(path.Join(Dir, JournalName), jb, 0o600); err != nil {
				t.Fatal(err)
			}

			core, logs := observer.New(zap.InfoLevel)
			s2, err := Open(root, zap.New(core), c.now, durable.Disk{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []struct {
				who   api.Subject
				facts string
			}{{a, "second of a,fact of a"}, {b, ""}, {cc, "second of c,first of c"}} {
				got, err := s2.Export(want.who)
				if err != nil || bodies(got.Facts) != want.facts {
					t.Errorf("after restart %s holds %q (%v), want %q", want.who.UserID, bodies(got.Facts), err, want.facts)
				}
			}
			if st := s2.Stats(); st.People != 2 || st.Facts != 4 {
				t.Errorf("counts after restart: %+v", st)
			}
			var warned bool
			for _, e := range logs.All() {
				if strings.Contains(fmt.Sprint(e.Message, e.Context), "secret") || strings.Contains(fmt.Sprint(e.Context), "p-g_") {
					t.Errorf("a log line names content: %s %v", e.Message, e.Context)
				}
				if e.Level == zap.WarnLevel && strings.Contains(e.Message, "corrupt") && e.ContextMap()["count"] == int64(1) {
					warned = true
				}
			}
			if !warned {
				t.Errorf("want one warning counting one skipped record, got %v", logs.All())
			}
			// The retry of the acknowledged proposals after the bad record
			// is recognised; the lost one is stored anew.
			if resp, _, err := s2.Propose(text, proposal("second-of-c", "g", "c", "c", "c", "second of c")); err != nil || !resp.Replayed {
				t.Errorf("retry after restart: %+v %v", resp, err)
			}
			// The restart zeroed the journal: nothing of the damaged record
			// stays, and a third start replays nothing.
			if jb := readFile(t, root, JournalName); bytes.Contains(jb, []byte("of b")) {
				t.Errorf("the damaged record outlived the restart's checkpoint")
			}
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestJournalWithoutChecksumsStillReplays(t *testing.T) {
	s, root, c := newStore(t)
	u := api.Subject{GuildID: "g", UserID: "u"}
	mustPropose(t, s, text, proposal("u1", "g", "u", "u", "c", "u one"))
	c.t = c.t.Add(time.Second)
	mustPropose(t, s, text, proposal("u2", "g", "u", "u", "c", "u two"))
	lostAppends(t, root, u)
	// As the previous release left a root: records without a checksum and
	// a catalog that names none.
	jb := readFile(t, root, JournalName)
	var old []byte
	for _, rec := range bytes.SplitAfter(bytes.TrimRight(jb, "\x00"), []byte("\n")) {
		if len(rec) == 0 {
			continue
		}
		body, ok := bytes.CutSuffix(rec, []byte("\n"))
		seal := len(`,"crc32c":"1a2b3c4d"}`)
		if !ok || len(body) < seal || !bytes.HasPrefix(body[len(body)-seal:], []byte(`,"crc32c":"`)) {
			t.Fatalf("a record without its checksum in the journal: %q", rec)
		}
		old = append(append(old, body[:len(body)-seal]...), "}\n"...)
	}
	copy(jb, old)
	clear(jb[len(old):])
	if err := root.WriteFile(path.Join(Dir, JournalName), jb, 0o600); err != nil {
		t.Fatal(err)
	}
	cat := readFile(t, root, CatalogName)
	cat = bytes.Replace(cat, []byte(`,"journal":"crc32c"`), nil, 1)
	if err := root.WriteFile(path.Join(Dir, CatalogName), cat, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, root, c)
	if got, _ := s2.Export(u); bodies(got.Facts) != "u two,u one" {
		t.Fatalf("after restart u holds %q", bodies(got.Facts))
	}
	if !bytes.Contains(readFile(t, root, CatalogName), []byte(`"journal":"crc32c"`)) {
		t.Fatalf("the restart's catalog does not say its records are sealed")
	}
}

// TestForgetBlanksOlderGenerationsToo forgets a fact whose journal record
// a checkpoint left behind (a checkpoint starts the journal over without
// zeroing it) and that the new generation has half overwritten, so what is
// left of it no longer names its person; and checks the records of others
// survive a restart after the forget.
func TestForgetBlanksOlderGenerationsToo(t *testing.T) {
	s, root, c := newStore(t)
	u := api.Subject{GuildID: "g", UserID: "u"}
	v := api.Subject{GuildID: "g", UserID: "v"}
	tick := func() { c.t = c.t.Add(time.Second) }
	for i := range 3 {
		mustPropose(t, s, text, proposal(fmt.Sprintf("v%d", i), "g", "v", "v", "c", fmt.Sprintf("v filler %d", i)))
		tick()
	}
	secret := strings.Repeat("topsecret ", 190)
	r := mustPropose(t, s, text, proposal("s", "g", "u", "u", "c", secret))
	tick()
	mustPropose(t, s, text, proposal("u-later", "g", "u", "u", "c", "u later"))
	tick()
	jb := readFile(t, root, JournalName)
	start := int64(bytes.Index(jb, []byte("topsecret")))
	if err := s.checkpointIfFullForTest(); err != nil {
		t.Fatal(err)
	}
	want := 3
	for i := 0; s.j.Used() <= start; i++ {
		mustPropose(t, s, text, proposal(fmt.Sprintf("w%d", i), "g", "v", "v", "c", fmt.Sprintf("v after the checkpoint %d", i)))
		tick()
		want++
	}
	jb = readFile(t, root, JournalName)
	if bytes.Contains(jb[:s.j.Used()], []byte("topsecret")) || !bytes.Contains(jb[s.j.Used():], []byte("topsecret")) {
		t.Fatalf("the test did not leave part of the secret's record after the new generation's end")
	}
	if _, err := s.Forget(text, u, r.Fact.FactID, "u"); err != nil {
		t.Fatal(err)
	}
	walk(t, root, Dir, func(name string, b []byte) {
		if bytes.Contains(b, []byte("topsecret")) {
			t.Errorf("%s still holds the forgotten body", name)
		}
	})
	s2 := reopen(t, root, c)
	if got, _ := s2.Export(v); got.Total != want {
		t.Errorf("after restart v holds %d facts, want %d", got.Total, want)
	}
	if got, _ := s2.Export(u); bodies(got.Facts) != "u later" {
		t.Errorf("after restart u holds %q", bodies(got.Facts))
	}
	if st := s2.Stats(); st.People != 2 || st.Facts != want+1 {
		t.Errorf("counts after restart: %+v", st)
	}
}

// TestJournalOfThePreviousReleaseReplays starts on what a kill -9 left of
// a root written by the release before memory/journal (testdata/journal-v1:
// its catalog and the used part of its journal; the person logs lost, as
// after a power cut): proposals, a supersede, a forget (its older records
// blanked) and a forget-person. Every acknowledged change is replayed from
// the journal, and the restart's checkpoint zeroes it.
func TestJournalOfThePreviousReleaseReplays(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile("testdata/journal-v1/journal")
	if err != nil {
		t.Fatal(err)
	}
	j := make([]byte, journalSize)
	copy(j, old)
	cat, err := os.ReadFile("testdata/journal-v1/catalog")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{JournalName: j, CatalogName: cat} {
		if err := root.WriteFile(path.Join(Dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s := reopen(t, root, c)
	for _, want := range []struct {
		user, facts string
	}{{"a", "a likes harbours,a likes tea"}, {"b", "b plays chess"}, {"c", ""}} {
		got, err := s.Export(api.Subject{GuildID: "g", UserID: want.user})
		if err != nil || bodies(got.Facts) != want.facts {
			t.Errorf("%s holds %q (%v), want %q", want.user, bodies(got.Facts), err, want.facts)
		}
	}
	if st := s.Stats(); st.People != 2 || st.Facts != 3 {
		t.Errorf("counts after the upgrade: %+v", st)
	}
	if jb := readFile(t, root, JournalName); len(bytes.TrimRight(jb, "\x00")) != 0 {
		t.Errorf("the restart's checkpoint left the old records in the journal")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, root, c)
	if got, _ := s.Export(api.Subject{GuildID: "g", UserID: "a"}); bodies(got.Facts) != "a likes harbours,a likes tea" {
		t.Errorf("after a second start a holds %q", bodies(got.Facts))
	}
}
