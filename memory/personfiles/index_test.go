package personfiles

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

// TestIndexMatchesAMap drives the front-coded index and a plain map with
// the same changes (new people, changed counts, people removed, rebuilds,
// names of every shape) and checks every answer against the map's.
func TestIndexMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var names []string
	for i := range 3000 {
		var subj api.Subject
		switch i % 5 {
		case 0:
			subj = api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprint(200000000000000000 + rng.IntN(1e6))}
		case 1:
			subj = api.Subject{GuildID: fmt.Sprint(rng.IntN(50)), UserID: fmt.Sprint(rng.IntN(1e9))}
		case 2:
			subj = api.Subject{GuildID: "g", UserID: fmt.Sprintf("u-%d_x", rng.IntN(1e4))}
		case 3:
			subj = api.Subject{GuildID: "g", UserID: fmt.Sprintf("%0190d", rng.IntN(1e6))} // a hashed name
		default:
			subj = api.Subject{GuildID: "g", UserID: fmt.Sprint(rng.IntN(100))}
		}
		names = append(names, FileName(subj))
	}
	var x peopleIndex
	model := map[string]int{}
	check := func(step int) {
		t.Helper()
		if x.len() != len(model) {
			t.Fatalf("step %d: %d people, want %d", step, x.len(), len(model))
		}
		var want []string
		for n := range model {
			want = append(want, n)
		}
		sort.Strings(want)
		for _, cursor := range []string{"", want[len(want)/3], want[len(want)-1], "p-5", "zzz"} {
			var got []string
			x.each(cursor, func(key []byte, count int) bool {
				if model[nameOf(key)] != count {
					t.Fatalf("step %d: %s counts %d, want %d", step, nameOf(key), count, model[nameOf(key)])
				}
				got = append(got, nameOf(key))
				return true
			})
			i := sort.SearchStrings(want, cursor)
			if i < len(want) && want[i] == cursor {
				i++
			}
			if !slices.Equal(got, want[i:]) {
				t.Fatalf("step %d: after %q the index lists %d names, want %d", step, cursor, len(got), len(want[i:]))
			}
		}
		for _, n := range names[:200] {
			if x.count(n) != model[n] {
				t.Fatalf("step %d: count(%s) = %d, want %d", step, n, x.count(n), model[n])
			}
		}
	}
	for step := range 12000 {
		n := names[rng.IntN(len(names))]
		c := rng.IntN(api.MaxFactsPerPerson + 1)
		if rng.IntN(4) == 0 {
			c = 0
		}
		x.set(n, c)
		if c == 0 {
			delete(model, n)
		} else {
			model[n] = c
		}
		if step%3000 == 2999 {
			check(step)
			x.rebuild()
			check(step)
		}
	}
	// Stopping early stops.
	seen := 0
	x.each("", func([]byte, int) bool { seen++; return seen < 5 })
	if seen != 5 {
		t.Fatalf("each went on after false: %d calls", seen)
	}
}

// seedPeople writes n person logs of facts facts each (and, with legacy,
// schema-1 files instead) with no catalog, as an upgrade or a seeding tool
// leaves a root, and returns their subjects.
func seedPeople(t testing.TB, root *os.Root, n, facts int, legacy bool) []api.Subject {
	t.Helper()
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var subjects []api.Subject
	for p := range n {
		s := api.Subject{GuildID: fmt.Sprint(p % 3), UserID: fmt.Sprint(1000 + p)}
		var fs []api.Fact
		for i := range facts {
			fs = append(fs, api.Fact{FactID: fmt.Sprintf("f%07d", i), Subject: s, Kind: api.KindPersonFact,
				Body: fmt.Sprintf("fact %d of person %d", i, p), Visibility: api.Visibility{Scope: api.ScopeGuild},
				Confidence: 0.5, CreatedAt: base, UpdatedAt: base,
				Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: fmt.Sprint(p*100 + i), ProposerUserID: s.UserID, ChannelID: "c"}})
		}
		name, encode := FileName(s), EncodeFile
		if legacy {
			name, encode = LegacyFileName(s), encodeLegacyFile
		}
		b, err := encode(s, fs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WriteFile(path.Join(Dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, s)
	}
	return subjects
}

func TestListAndEachPageThroughManyPeople(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	subjects := seedPeople(t, root, 1100, 2, false)
	var want []string
	for _, s := range subjects {
		want = append(want, FileName(s))
	}
	sort.Strings(want)
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	for round := range 2 { // the first start scans, the second reads the catalog
		s := reopen(t, root, c)
		if round == 1 {
			// One person more than the catalog holds, one fewer: the index
			// merges what changed since it was built.
			mustPropose(t, s, text, proposal("new", "9", "1", "1", "c", "a newcomer"))
			if _, err := s.ForgetPerson(subjects[0]); err != nil {
				t.Fatal(err)
			}
			want = append(want[:0:0], want...)
			want = append(want, FileName(api.Subject{GuildID: "9", UserID: "1"}))
			want = slices.DeleteFunc(want, func(n string) bool { return n == FileName(subjects[0]) })
			sort.Strings(want)
		}
		var listed []string
		for cursor := ""; ; {
			page, err := s.List(context.Background(), cursor, 300)
			if err != nil || page.Total != len(want) {
				t.Fatalf("round %d: page after %q: total %d (%v), want %d", round, cursor, page.Total, err, len(want))
			}
			for _, p := range page.People {
				listed = append(listed, FileName(p.Subject))
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if !slices.Equal(listed, want) {
			t.Fatalf("round %d: List pages hold %d names, want %d in order", round, len(listed), len(want))
		}
		var each []string
		if err := s.Each(context.Background(), func(p *people.Person) error {
			each = append(each, FileName(p.Subject))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(each, want) {
			t.Fatalf("round %d: Each visits %d people, want %d in order", round, len(each), len(want))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeMigratesManyPeopleInBatches starts on a root of schema-1 files
// spanning several of the scan's batches, one of them with a log cut short
// beside it (a migration a crash interrupted before the schema-1 file was
// removed): every person is migrated from their schema-1 file, none is
// left, and the log says how many, never who or what.
func TestUpgradeMigratesManyPeopleInBatches(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	n := 2*scanBatch + 100
	subjects := seedPeople(t, root, n, 3, true)
	torn := subjects[7]
	if err := root.WriteFile(path.Join(Dir, FileName(torn)), []byte(`{"schemaVersion":2,"subject":{"guildId":"1","userId":"1007"},"seq":0}`+"\n"+`{"fact":{"factId":"fx","body":"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	s, err := Open(root, zap.New(core), c.now, durable.Disk{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.People != n || st.Facts != 3*n {
		t.Fatalf("counts after the upgrade: %+v, want %d people", st, n)
	}
	if names := dirNames(t, root); strings.Contains(names, ".json ") || strings.HasSuffix(names, ".json") {
		t.Fatalf("schema-1 files survived the upgrade")
	}
	if got, _ := s.Export(torn); got.Total != 3 || !strings.Contains(bodies(got.Facts), "fact 2 of person 7") {
		t.Fatalf("the person whose log was cut short holds %q", bodies(got.Facts))
	}
	var counted bool
	for _, e := range logs.All() {
		text := fmt.Sprint(e.Message, e.Context)
		if strings.Contains(text, "fact ") || strings.Contains(text, "p-") || strings.Contains(text, "1007") {
			t.Errorf("a log line names a person or a fact: %s", text)
		}
		if e.Message == "migrated person files to logs" && e.ContextMap()["count"] == int64(n) {
			counted = true
		}
	}
	if !counted {
		t.Errorf("no log line counts the %d migrated files: %v", n, logs.All())
	}
}

// encodeLegacyFile writes a person as the schema-1 store did (one JSON
// document), for the migration tests.
func encodeLegacyFile(subject api.Subject, facts []api.Fact, proposalIDs []string) ([]byte, error) {
	lf := legacyFile{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts}
	for i, id := range proposalIDs {
		lf.Proposals = append(lf.Proposals, people.ProposalRecord{ProposalID: id, Digest: "d", FactID: facts[i].FactID})
	}
	return json.Marshal(lf)
}

// count returns a person's fact count (0: none); the store asks set and
// Each, so only the tests need it.
func (x *peopleIndex) count(name string) int {
	if n, ok := x.extra[name]; ok {
		return int(n)
	}
	if at := x.base.find(indexKey(name)); at >= 0 {
		return int(x.base.data[at])
	}
	return 0
}
