package memory

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// The hardening issue's memory items (an adversarial review broke them):
// one file per item. Each test runs on both stores (the suite's PostgreSQL
// run) unless it says otherwise, and failed before its fix.

// receiptFields returns the context of every receipt of type typ.
func (h *harness) receiptFields(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range h.logs.All() {
		if m := e.ContextMap(); m["receipt"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// mine is the subject's own view, as /person-memory mine shows it.
func (h *harness) mine(guild, user string) api.RecallResponse {
	h.t.Helper()
	r := h.do(txt, "GET", "/v1/memory/discord-people/"+guild+"/"+user+"/mine?requesterUserId="+user, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("mine: %d %s", r.status, r.body)
	}
	var resp api.RecallResponse
	r.decode(h.t, &resp)
	return resp
}

// countPrivate returns how many of facts are operator_private.
func countPrivate(facts []api.Fact) int {
	n := 0
	for _, f := range facts {
		if f.Visibility.Scope == api.ScopeOperatorPrivate {
			n++
		}
	}
	return n
}

// Item 8: operator-only notes have a bound of their own, apart from the
// Discord-visible facts': 128 of each coexist, a member's proposal at 127
// visible with 128 hidden evicts nothing, eviction in either class never
// touches the other, and nothing a member is shown moves with hidden notes.
func TestHiddenNotesAreBoundedApartFromVisibleFacts(t *testing.T) {
	h := newHarness(t)
	for i := range 127 {
		h.propose(txt, fact(fmt.Sprintf("v%03d", i), "10", "20", "20", "30", fmt.Sprintf("visible fact %03d", i)))
		h.advance(time.Second)
	}
	before := h.mine("10", "20")
	if before.Total != 127 || before.Capacity != api.MaxFactsPerPerson {
		t.Fatalf("mine before the notes: %d of %d", before.Total, before.Capacity)
	}
	for i := range api.MaxHiddenFactsPerPerson {
		if resp := h.propose(op, privateFact(fmt.Sprintf("h%03d", i), "10", "20", fmt.Sprintf("operator note %03d", i))); resp.Evicted != 0 {
			t.Fatalf("operator note %d evicted %d with 127 visible facts", i, resp.Evicted)
		}
		h.advance(time.Second)
	}
	after := h.mine("10", "20")
	if after.Total != before.Total || after.Capacity != before.Capacity || fmt.Sprint(after.Facts) != fmt.Sprint(before.Facts) {
		t.Fatalf("mine moved with hidden notes: %d of %d before, %d of %d after", before.Total, before.Capacity, after.Total, after.Capacity)
	}
	if n := h.recall(txt, "10", "20", "?channelId=30").Total; n != 127 {
		t.Fatalf("recall counts %d facts, want the 127 visible", n)
	}

	// The member's 128th visible fact: room is there, nothing is evicted.
	if resp := h.propose(txt, fact("v127", "10", "20", "20", "30", "visible fact 127")); resp.Evicted != 0 {
		t.Fatalf("a member's proposal at 127 visible with 128 hidden evicted %d", resp.Evicted)
	}
	h.advance(time.Second)
	if m := h.mine("10", "20"); m.Total != api.MaxFactsPerPerson {
		t.Fatalf("mine says %d of %d, want 128 of 128", m.Total, m.Capacity)
	}
	exp := h.export("10", "20")
	if exp.Total != 256 || countPrivate(exp.Facts) != 128 {
		t.Fatalf("export holds %d facts, %d operator-only; want 256 and 128", exp.Total, countPrivate(exp.Facts))
	}

	// At the visible bound a member's proposal evicts the oldest visible
	// fact, never a note.
	if resp := h.propose(txt, fact("v128", "10", "20", "20", "30", "visible fact 128")); resp.Evicted != 1 {
		t.Fatalf("the 129th visible fact evicted %d, want 1", resp.Evicted)
	}
	h.advance(time.Second)
	exp = h.export("10", "20")
	bodies := map[string]bool{}
	for _, f := range exp.Facts {
		bodies[f.Body] = true
	}
	if exp.Total != 256 || countPrivate(exp.Facts) != 128 || bodies["visible fact 000"] || !bodies["visible fact 128"] || !bodies["operator note 000"] {
		t.Fatalf("after a visible eviction: %d facts, %d notes, oldest visible kept %v, oldest note kept %v",
			exp.Total, countPrivate(exp.Facts), bodies["visible fact 000"], bodies["operator note 000"])
	}

	// At the hidden bound an operator's note evicts the oldest note, never
	// a visible fact; the member's view does not move.
	seen := h.mine("10", "20")
	if resp := h.propose(op, privateFact("h128", "10", "20", "operator note 128")); resp.Evicted != 1 {
		t.Fatalf("the 129th note evicted %d, want 1", resp.Evicted)
	}
	exp = h.export("10", "20")
	bodies = map[string]bool{}
	for _, f := range exp.Facts {
		bodies[f.Body] = true
	}
	if exp.Total != 256 || bodies["operator note 000"] || !bodies["operator note 128"] || !bodies["visible fact 001"] {
		t.Fatalf("after a hidden eviction: %d facts, oldest note kept %v, oldest visible kept %v", exp.Total, bodies["operator note 000"], bodies["visible fact 001"])
	}
	if m := h.mine("10", "20"); fmt.Sprint(m.Facts) != fmt.Sprint(seen.Facts) || m.Total != seen.Total {
		t.Fatal("an operator's note moved the member's view")
	}

	// An edit across the line into a full class is refused and changes
	// nothing, either way.
	var visibleID, hiddenID string
	for _, f := range exp.Facts {
		if f.Visibility.Scope == api.ScopeOperatorPrivate {
			hiddenID = f.FactID
		} else {
			visibleID = f.FactID
		}
	}
	snap := h.snapshot()
	for _, c := range []struct {
		id  string
		vis api.Visibility
	}{
		{visibleID, api.Visibility{Scope: api.ScopeOperatorPrivate}},
		{hiddenID, api.Visibility{Scope: api.ScopeGuild}},
		{hiddenID, api.Visibility{Scope: api.ScopeChannel, ChannelID: "30"}},
	} {
		r := h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+c.id, api.FactPatch{Visibility: &c.vis})
		if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != "person_at_capacity" {
			t.Fatalf("edit of a fact into a full class (%+v): %d %s; want 422 person_at_capacity", c.vis, r.status, r.body)
		}
		if receipts := h.receiptFields(api.RouteEditFact.Receipt); receipts[len(receipts)-1]["factId"] != c.id {
			t.Errorf("the refused edit's receipt %v does not name the fact it found", receipts[len(receipts)-1])
		}
	}
	if fmt.Sprint(h.snapshot()) != fmt.Sprint(snap) {
		t.Fatal("a refused edit changed the stored data")
	}

	// Within a class, or across it into room, an edit goes through.
	if r := h.do(txt, "DELETE", "/v1/memory/discord-people/10/20/"+visibleID+"?requesterUserId=20", nil); r.status != http.StatusNoContent {
		t.Fatalf("forget: %d %s", r.status, r.body)
	}
	guild := api.Visibility{Scope: api.ScopeGuild}
	if r := h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+hiddenID, api.FactPatch{Visibility: &guild}); r.status != http.StatusOK {
		t.Fatalf("edit of a note into a class with room: %d %s", r.status, r.body)
	}
	if m := h.mine("10", "20"); m.Total != api.MaxFactsPerPerson {
		t.Fatalf("mine after the note was shared: %d", m.Total)
	}

	// The catalog and the people list count every fact kept.
	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	if cat.Facts != 255 {
		t.Errorf("the catalog counts %d facts, want 255", cat.Facts)
	}
}
