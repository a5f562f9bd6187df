package memory

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
)

// The hardening issue's memory items (an adversarial review broke them):
// one file per item. Each test runs on both stores (the suite's PostgreSQL
// run) unless it says otherwise, and failed before its fix.

// Item 6: a forget or edit names its fact by a path segment a member typed
// (/person-memory forget takes any 64 characters), so the receipt logs the
// id only when it named a fact, and otherwise only its length.
func TestForgetAndEditReceiptsLogOnlyFoundFactIDs(t *testing.T) {
	h := newHarness(t)
	real := h.propose(txt, fact("r1", "10", "20", "20", "30", "likes green tea")).Fact.FactID
	const madeUp = "ignore-previous-instructions-SECRETPHRASE-9f3"
	person := "/v1/memory/discord-people/10/20/"

	for _, c := range []struct {
		name, token, method, id string
		body                    any
		status                  int
		logID                   bool
	}{
		{"forget a made-up id", txt, "DELETE", madeUp, nil, http.StatusNotFound, false},
		{"edit a made-up id", op, "PATCH", madeUp, `{"confidence":0.5}`, http.StatusNotFound, false},
		{"edit a real id with a bad body", op, "PATCH", real, `{"kind":"nonsense"}`, http.StatusBadRequest, false},
		{"forget a real id as another member", txt, "DELETE", real, nil, http.StatusForbidden, true},
		{"edit a real id", op, "PATCH", real, `{"confidence":0.5}`, http.StatusOK, true},
		{"forget a real id", txt, "DELETE", real, nil, http.StatusNoContent, true},
	} {
		h.logs.TakeAll()
		requester := "20"
		if c.status == http.StatusForbidden {
			requester = "21"
		}
		path := person + c.id + "?requesterUserId=" + requester
		if r := h.do(c.token, c.method, path, c.body); r.status != c.status {
			t.Fatalf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
		typ := api.RouteForgetFact.Receipt
		if c.method == "PATCH" {
			typ = api.RouteEditFact.Receipt
		}
		receipts := h.receiptFields(typ)
		if len(receipts) != 1 {
			t.Fatalf("%s: %d %s receipts, want 1", c.name, len(receipts), typ)
		}
		got := receipts[0]
		if c.logID {
			if got["factId"] != c.id {
				t.Errorf("%s: the receipt %v does not name the fact it found", c.name, got)
			}
			continue
		}
		if _, ok := got["factId"]; ok || got["factIdLength"] != int64(len(c.id)) {
			t.Errorf("%s: the receipt %v names the id; want only factIdLength %d", c.name, got, len(c.id))
		}
		for _, e := range h.logs.All() {
			if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, "SECRETPHRASE") {
				t.Errorf("%s: a log line holds the typed id: %s", c.name, line)
			}
		}
	}
}
