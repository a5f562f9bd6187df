package memory

import (
	"net/http"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
)

// The hardening issue's memory items (an adversarial review broke them):
// one file per item. Each test runs on both stores (the suite's PostgreSQL
// run) unless it says otherwise, and failed before its fix.

// Item 7: a replayed proposal answers only what a recall from its channel
// would show: once the operator moves the fact to another channel or makes
// it operator-only, the replay from the first channel holds neither its
// body nor its id.
func TestProposalReplayAnswersOnlyWhatItsChannelMaySee(t *testing.T) {
	h := newHarness(t)
	req := fact("moved", "10", "20", "20", "30", "plays the oboe at midnight")
	first := h.propose(txt, req)
	id := first.Fact.FactID
	path := "/v1/memory/discord-people/10/20/" + id

	for _, vis := range []api.Visibility{
		{Scope: api.ScopeChannel, ChannelID: "31"},
		{Scope: api.ScopeOperatorPrivate},
	} {
		if r := h.do(op, "PATCH", path, api.FactPatch{Visibility: &vis}); r.status != http.StatusOK {
			t.Fatalf("edit to %+v: %d %s", vis, r.status, r.body)
		}
		if n := h.recall(txt, "10", "20", "?channelId=30").Total; n != 0 {
			t.Fatalf("recall from channel 30 after the move to %+v shows %d facts", vis, n)
		}
		r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
		if r.status != http.StatusOK {
			t.Fatalf("replay after the move to %+v: %d %s", vis, r.status, r.body)
		}
		if strings.Contains(string(r.body), "oboe") || strings.Contains(string(r.body), id) {
			t.Errorf("the replay from channel 30 after the move to %+v answers what channel 30 may not see: %s", vis, r.body)
		}
		var resp api.ProposalResponse
		r.decode(t, &resp)
		if !resp.Replayed || resp.Fact != nil || resp.Reason == "" {
			t.Errorf("replay after the move to %+v: %+v; want replayed, no fact, a reason", vis, resp)
		}
	}

	// Back in channel 30 the replay answers it again, as recall there would.
	back := api.Visibility{Scope: api.ScopeChannel, ChannelID: "30"}
	if r := h.do(op, "PATCH", path, api.FactPatch{Visibility: &back}); r.status != http.StatusOK {
		t.Fatalf("edit back: %d %s", r.status, r.body)
	}
	r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
	var resp api.ProposalResponse
	r.decode(t, &resp)
	if r.status != http.StatusOK || resp.Fact == nil || resp.Fact.FactID != id {
		t.Fatalf("replay from the fact's own channel: %d %s", r.status, r.body)
	}
}
