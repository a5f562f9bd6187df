package personfiles

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// The hardening issue's item 8 on the file store: with operator-only notes
// bounded apart, a person holds up to 256 facts (128 Discord-visible, 128
// operator-only). The catalog, its index (a count per person), the journal's
// replay and compaction must all hold that many, across a clean restart and
// across a crash (a store abandoned without Close replays its journal).
func TestFileStoreHolds256FactsAcrossRestartAndReplay(t *testing.T) {
	s, root, c := newStore(t)
	full := api.Subject{GuildID: "g", UserID: "u"}
	mustPropose(t, s, text, proposal("other", "g", "a", "a", "c", "a neighbour in the index"))
	for i := range api.MaxHiddenFactsPerPerson {
		req := proposal(fmt.Sprintf("h%03d", i), "g", "u", "", "", fmt.Sprintf("note %03d", i))
		req.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
		mustPropose(t, s, operator, req)
		c.t = c.t.Add(1e9)
	}
	for i := range api.MaxFactsPerPerson {
		if resp := mustPropose(t, s, text, proposal(fmt.Sprintf("v%03d", i), "g", "u", "u", "c", fmt.Sprintf("fact %03d", i))); resp.Evicted != 0 {
			t.Fatalf("visible fact %d evicted %d", i, resp.Evicted)
		}
		c.t = c.t.Add(1e9)
	}
	check := func(where string, s *Store) {
		t.Helper()
		if st := s.Stats(); st.People != 2 || st.Facts != 257 {
			t.Fatalf("%s: stats %+v, want 2 people and 257 facts", where, st)
		}
		page, err := s.List(context.Background(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.People) != 2 || page.People[1].Subject != full || page.People[1].Facts != 256 {
			t.Fatalf("%s: people %+v, want u with 256 facts", where, page.People)
		}
		exp, err := s.Export(full)
		if err != nil {
			t.Fatal(err)
		}
		if exp.Total != 256 || exp.Capacity != 256 {
			t.Fatalf("%s: export holds %d of %d", where, exp.Total, exp.Capacity)
		}
	}
	check("before restart", s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(root, zap.NewNop(), c.now, durable.Disk{}, Options{})
	if err != nil {
		t.Fatalf("reopen with a person of 256 facts: %v", err)
	}
	check("after restart", s2)
	// Changes after the checkpoint live only in the journal: abandon the
	// store without Close, as a crash would, and replay them.
	for i := range 8 {
		if resp := mustPropose(t, s2, text, proposal(fmt.Sprintf("w%03d", i), "g", "u", "u", "c", fmt.Sprintf("later %03d", i))); resp.Evicted != 1 {
			t.Fatalf("a visible fact at the bound evicted %d", resp.Evicted)
		}
		c.t = c.t.Add(1e9)
	}
	s3, err := Open(root, zap.NewNop(), c.now, durable.Disk{}, Options{})
	if err != nil {
		t.Fatalf("replay with a person of 256 facts: %v", err)
	}
	t.Cleanup(func() { s3.Close() })
	check("after replay", s3)
	mine, err := s3.Mine(full, "u")
	if err != nil {
		t.Fatal(err)
	}
	if mine.Total != api.MaxFactsPerPerson || mine.Capacity != api.MaxFactsPerPerson {
		t.Fatalf("mine: %d of %d", mine.Total, mine.Capacity)
	}
}
