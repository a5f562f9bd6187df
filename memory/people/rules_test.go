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
// that collide often would make every scan compare bytes. Ids of every
// length the store sees (fact ids, snowflakes, proposal ids of 38 bytes)
// get distinct keys, and factSet's probes start in every slot.
func TestIDKeysTellIDsApart(t *testing.T) {
	seen := map[uint64]string{}
	slots := factSet{keys: make([]uint64, 1024)}
	used := map[int]bool{}
	for i := range 100000 {
		for _, id := range []string{fmt.Sprintf("f%07d", i), fmt.Sprint(1300000000000000000 + i),
			fmt.Sprintf("discord-interaction-%d", 1300000000000000000+i), fmt.Sprint(i)} {
			k := idKey(id)
			if other, ok := seen[k]; ok && other != id {
				t.Fatalf("%q and %q share a key", id, other)
			}
			seen[k] = id
			used[slots.first(k)] = true
		}
	}
	if len(used) != len(slots.keys) {
		t.Fatalf("probes start in %d of %d slots", len(used), len(slots.keys))
	}
}
