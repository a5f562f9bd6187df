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
