package memory

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
)

// TestTwoServicesSeeEachOthersChanges: each PostgreSQL service keeps the
// people it read or wrote in memory, checked against the person row's
// version at every access; whatever one service changes (a proposal, an
// edit, a forget of the whole person and a new start) is what the other
// answers next, though it holds the person from before.
func TestTwoServicesSeeEachOthersChanges(t *testing.T) {
	if !onPostgres() {
		t.Skip("two services share only a PostgreSQL store")
	}
	a, urls := newTickingHarnesses(t, 2)
	b := &harness{t: t, url: urls[1], dir: a.dir, now: a.now}
	const person = "/v1/memory/discord-people/10/20"
	recall := func(h *harness, who string) []string {
		t.Helper()
		var resp api.RecallResponse
		r := h.do(txt, "GET", person+"?channelId=30", nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s recall: %d %s", who, r.status, r.body)
		}
		r.decode(t, &resp)
		bodies := []string{}
		for _, f := range resp.Facts {
			bodies = append(bodies, f.Body)
		}
		return bodies
	}
	want := func(h *harness, who string, bodies ...string) {
		t.Helper()
		if got := recall(h, who); !slices.Equal(got, append([]string{}, bodies...)) {
			t.Fatalf("%s recalls %q, want %q", who, got, bodies)
		}
	}
	propose := func(h *harness, id, body string) api.Fact {
		t.Helper()
		var resp api.ProposalResponse
		r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", fact(id, "10", "20", "20", "30", body))
		if r.status != http.StatusCreated {
			t.Fatalf("proposal %s: %d %s", id, r.status, r.body)
		}
		r.decode(t, &resp)
		return *resp.Fact
	}

	first := propose(a, "p1", "first")
	want(a, "a", "first")
	want(b, "b", "first")
	// b read the person for a recall, their facts alone: a retry through
	// b must still find p1's record and answer the fact it made.
	var replay api.ProposalResponse
	if r := b.do(txt, "POST", "/v1/memory/discord-people/proposals", fact("p1", "10", "20", "20", "30", "first")); r.status != http.StatusOK {
		t.Fatalf("a retry through b after its recall: %d %s", r.status, r.body)
	} else if r.decode(t, &replay); !replay.Replayed || replay.Fact == nil || replay.Fact.FactID != first.FactID {
		t.Fatalf("a retry through b after its recall answered %+v", replay)
	}
	want(a, "a, after b's retry", "first")
	propose(b, "p2", "second")
	want(a, "a, after b's proposal", "second", "first")
	if r := a.do(op, "PATCH", person+"/"+first.FactID, map[string]any{"body": "first, corrected"}); r.status != http.StatusOK {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	want(b, "b, after a's edit", "second", "first, corrected")
	if r := b.do(op, "DELETE", person, nil); r.status != http.StatusOK {
		t.Fatalf("forget the person: %d %s", r.status, r.body)
	}
	want(a, "a, after b forgot the person")
	// a held the person: its next change finds their row gone and makes it
	// again, and a retry of a forgotten proposal is new.
	propose(a, "p1", "again")
	want(b, "b, after a started over", "again")
	want(a, "a, after starting over", "again")
	want(a, "a, again", "again")

	// The cache shows in a's metrics: the last recall was a hit, the ones
	// after b's changes misses, and a holds the person.
	r := a.do(op, "GET", "/metrics", nil)
	for _, name := range []string{"clankie_memory_people_cache_hits_total", "clankie_memory_people_cache_misses_total", "clankie_memory_people_cache_bytes"} {
		var v float64
		for _, line := range strings.Split(string(r.body), "\n") {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				v, _ = strconv.ParseFloat(rest, 64)
			}
		}
		if v <= 0 {
			t.Errorf("%s is %v on a, want more than 0", name, v)
		}
	}
}
