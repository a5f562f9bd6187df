package people

import (
	"fmt"
	"testing"

	"github.com/clankie/clankie/api"
)

func TestFileCacheCopiesAndStaysBounded(t *testing.T) {
	c := newFileCache()
	pf := &personFile{Facts: []api.Fact{{FactID: "fa", Body: "one"}}}
	c.put("p-1_2.json", pf, 100)
	got, ok := c.get("p-1_2.json", false)
	if !ok || got.Facts[0].Body != "one" {
		t.Fatalf("get: %v %v", got, ok)
	}
	got.Facts[0].Body = "changed by a caller"
	got.Facts = append(got.Facts, api.Fact{FactID: "fb"})
	again, _ := c.get("p-1_2.json", false)
	if again.Facts[0].Body != "one" || len(again.Facts) != 1 {
		t.Fatalf("a caller's change reached the cache: %+v", again.Facts)
	}
	// Taken, the entry is the caller's: the cache holds it no more.
	if taken, ok := c.get("p-1_2.json", true); !ok || taken != pf {
		t.Fatalf("take: %v %v", taken, ok)
	}
	if _, ok := c.get("p-1_2.json", false); ok || c.size != 0 {
		t.Fatalf("a taken entry is still cached (%d bytes)", c.size)
	}
	c.put("p-1_2.json", pf, 100)
	c.drop("p-1_2.json")
	if _, ok := c.get("p-1_2.json", false); ok {
		t.Fatal("dropped entry still cached")
	}
	for i := range 100 {
		c.put(fmt.Sprintf("p-%d.json", i), &personFile{}, cacheBytes/10)
	}
	if c.size > cacheBytes || len(c.items) != 10 {
		t.Fatalf("cache holds %d bytes in %d entries", c.size, len(c.items))
	}
	if _, ok := c.get("p-99.json", false); !ok {
		t.Fatal("the most recent entry was evicted")
	}
	if _, ok := c.get("p-0.json", false); ok {
		t.Fatal("the oldest entry was kept past the bound")
	}
}

// TestCachedReadsSeeEveryWrite goes through the store's paths that change a
// person and reads back after each: the cache must never answer stale.
func TestCachedReadsSeeEveryWrite(t *testing.T) {
	s, _, _ := newStore(t)
	subj := api.Subject{GuildID: "g", UserID: "u"}
	scope := RecallQuery{Who: operator, RecallQuery: api.RecallQuery{Limit: 128}}
	a := mustPropose(t, s, text, proposal("a", "g", "u", "u", "c", "one"))
	s.Recall(subj, scope) // cached now
	mustPropose(t, s, text, proposal("b", "g", "u", "u", "c", "two"))
	if r, _ := s.Recall(subj, scope); r.Total != 2 {
		t.Fatalf("after a proposal: %d", r.Total)
	}
	body := "edited"
	if _, err := s.Edit(subj, a.Fact.FactID, api.FactPatch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Recall(subj, RecallQuery{Who: scope.Who, RecallQuery: api.RecallQuery{ChannelID: scope.ChannelID, Query: "edited", Limit: 8}}); r.Total != 1 {
		t.Fatalf("after an edit: %+v", r)
	}
	if _, err := s.Forget(text, subj, a.Fact.FactID, "u"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Recall(subj, scope); r.Total != 1 {
		t.Fatalf("after a forget: %d", r.Total)
	}
	if _, err := s.ForgetPerson(subj); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Recall(subj, scope); r.Total != 0 {
		t.Fatalf("after forget-person: %d", r.Total)
	}
}

// BenchmarkFileCache is the cache's own cost: a reader's copy of a hit, a
// take and put back, and a put of a new person that evicts the oldest, over
// more people than fit.
func BenchmarkFileCache(b *testing.B) {
	const people, size = 4096, cacheBytes / 1024 // a quarter of them fit
	names := make([]string, people)
	for i := range names {
		names[i] = fmt.Sprintf("p-%d.jsonl", i)
	}
	facts := make([]api.Fact, 16)
	c := newFileCache()
	for i := 0; b.Loop(); i++ {
		name := names[i%people]
		pf, ok := c.get(name, i%2 == 0)
		if !ok {
			pf = &personFile{Facts: facts}
		}
		c.put(name, pf, size)
		c.get(names[(i+people-1)%people], false)
	}
}
