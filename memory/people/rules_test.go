package people

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// TestNewestFirstAgreesWithAStableSort holds the reverse-then-check order
// to what a stable sort of the stored order gives, for the orders a person's
// facts come in: as stored (oldest first), already newest first, shuffled,
// and with creation times shared, where the id breaks the tie.
func TestNewestFirstAgreesWithAStableSort(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	facts := func(n int, at func(i int) time.Time) []api.Fact {
		out := make([]api.Fact, n)
		for i := range out {
			out[i] = api.Fact{FactID: fmt.Sprintf("f%07d", (i*7919)%10007), CreatedAt: at(i)}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name  string
		facts []api.Fact
	}{
		{"none", nil},
		{"one", facts(1, func(int) time.Time { return base })},
		{"as stored, oldest first", facts(128, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })},
		{"newest first already", facts(128, func(i int) time.Time { return base.Add(-time.Duration(i) * time.Second) })},
		{"one out of place", func() []api.Fact {
			fs := facts(128, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })
			fs[40].CreatedAt = base.Add(time.Hour)
			return fs
		}()},
		{"shuffled", func() []api.Fact {
			fs := facts(128, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })
			rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
			return fs
		}()},
		{"shared creation times", facts(128, func(i int) time.Time { return base.Add(time.Duration(i/10) * time.Second) })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := slices.Clone(tc.facts)
			sort.SliceStable(want, func(a, b int) bool {
				fa, fb := want[a], want[b]
				if !fa.CreatedAt.Equal(fb.CreatedAt) {
					return fa.CreatedAt.After(fb.CreatedAt)
				}
				return fa.FactID > fb.FactID
			})
			got := slices.Clone(tc.facts)
			NewestFirst(got)
			ptrs := make([]*api.Fact, len(tc.facts))
			for i := range tc.facts {
				ptrs[i] = &tc.facts[i]
			}
			newestFirst(ptrs)
			for i := range want {
				if got[i].FactID != want[i].FactID || ptrs[i].FactID != want[i].FactID {
					t.Fatalf("position %d: NewestFirst gave %s, the pointer form %s, a stable sort %s", i, got[i].FactID, ptrs[i].FactID, want[i].FactID)
				}
			}
		})
	}
}

// TestIDKeysTellIDsApart: idKey is only a key compared before an id's
// bytes, so a collision costs a comparison, not a wrong answer; but keys
// that collide often would make every scan compare bytes, and factSet
// takes a probe's first slot from a key's low bits, so ids that differ
// only in a few characters must not share them. Ids of every shape the
// store sees (fact ids, sequential ones as the benchmarks seed them,
// snowflakes, proposal ids of 38 bytes) get distinct keys, and 128 of one
// shape, the ids of one person, spread over a table of 256 about as random
// keys would (about 101 distinct first slots).
func TestIDKeysTellIDsApart(t *testing.T) {
	shapes := map[string]func(i int) string{
		"fact id":           func(i int) string { return fmt.Sprintf("f%07d", i) },
		"random fact id":    func(i int) string { return newFactID(nil) },
		"snowflake":         func(i int) string { return fmt.Sprint(1300000000000000000 + i) },
		"proposal id":       func(i int) string { return fmt.Sprintf("discord-interaction-%d", 1300000000000000000+i) },
		"short":             func(i int) string { return fmt.Sprint(i) },
		"bench proposal id": func(i int) string { return fmt.Sprintf("bench-%d", i) },
	}
	seen := map[uint64]string{}
	for name, id := range shapes {
		for i := range 100000 {
			s := id(i)
			k := idKey(s)
			if other, ok := seen[k]; ok && other != s {
				t.Fatalf("%s: %q and %q share a key", name, s, other)
			}
			seen[k] = s
		}
		for start := 0; start < 100000; start += 12345 {
			table := factSet{keys: make([]uint64, 256)}
			first := map[int]bool{}
			for i := range 128 {
				first[table.first(idKey(id(start+i)))] = true
			}
			if len(first) < 85 {
				t.Fatalf("%s from %d: 128 ids start their probes in only %d of 256 slots", name, start, len(first))
			}
		}
	}
}
