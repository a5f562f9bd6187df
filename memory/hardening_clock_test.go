package memory

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
)

// The hardening issue's memory items (an adversarial review broke them):
// one file per item. Each test runs on both stores (the suite's PostgreSQL
// run) unless it says otherwise, and failed before its fix.

// passExpiry moves time past at: the harness's clock, which the file store
// expires facts by, and, on PostgreSQL, which expires them by the
// database's clock (item 12b), the real time: it waits. A test that expires
// a fact on both stores gives it a short real expiry on PostgreSQL.
func (h *harness) passExpiry(at time.Time) {
	if d := at.Sub(*h.now); d >= 0 {
		h.advance(d + time.Second)
	}
	if onPostgres() {
		time.Sleep(time.Until(at) + 200*time.Millisecond)
	}
}

// Item 12b: on PostgreSQL the database's clock, not each host's, orders
// facts for eviction and expires them. Two services share one database,
// one whose clock runs ten years ahead and one ten years behind: they
// accept the same expiries, agree on which fact is older, and agree on
// which has expired, all by the database's time.
func TestPostgresOrdersAndExpiresByTheDatabaseClock(t *testing.T) {
	requirePostgres(t)
	dir := filepath.Join(t.TempDir(), "memory")
	core, logs := observer.New(zap.DebugLevel)
	skew := 10 * 365 * 24 * time.Hour
	var hs []*harness
	for _, d := range []time.Duration{skew, -skew} {
		svc := newTestServiceOn(t, dir, testTokens, zap.New(core), func() time.Time { return time.Now().Add(d) }, true)
		srv := httptest.NewServer(svc.handler)
		t.Cleanup(srv.Close)
		hs = append(hs, &harness{t: t, url: srv.URL, dir: dir, logs: logs})
	}
	ahead, behind := hs[0], hs[1]

	// Creation times are the database's, and follow commit order.
	start := time.Now()
	for i := range api.MaxFactsPerPerson {
		h := hs[i%2]
		resp := h.propose(txt, fact(fmt.Sprintf("p%03d", i), "10", "20", "20", "30", fmt.Sprintf("fact %03d", i)))
		if at := resp.Fact.CreatedAt; at.Sub(start).Abs() > time.Hour {
			t.Fatalf("fact %d was created at %v by a host clock, not the database's (about %v)", i, at, start)
		}
	}
	// The bound is reached: the next proposal, from either host, evicts the
	// oldest committed fact, fact 000 (a host clock would have picked one
	// proposed through the service behind).
	for i, h := range []*harness{behind, ahead} {
		if resp := h.propose(txt, fact(fmt.Sprintf("q%d", i), "10", "20", "20", "30", fmt.Sprintf("later %d", i))); resp.Evicted != 1 {
			t.Fatalf("proposal at the bound evicted %d", resp.Evicted)
		}
	}
	exp := ahead.export("10", "20")
	bodies := map[string]bool{}
	for _, f := range exp.Facts {
		bodies[f.Body] = true
	}
	if bodies["fact 000"] || bodies["fact 001"] || !bodies["fact 002"] || !bodies["later 0"] || !bodies["later 1"] {
		t.Fatalf("eviction did not follow the database's order: kept fact 000 %v, fact 001 %v, fact 002 %v",
			bodies["fact 000"], bodies["fact 001"], bodies["fact 002"])
	}

	// An expiry two seconds ahead of the database's time: accepted through
	// the host behind (whose clock would call it nine years too far off),
	// visible through the host ahead until the database's time passes it,
	// then expired through the host behind.
	soon := time.Now().Add(2 * time.Second).UTC()
	req := fact("soon", "10", "21", "21", "30", "leaving in a moment")
	req.Fact.ExpiresAt = &soon
	if r := behind.do(txt, "POST", "/v1/memory/discord-people/proposals", req); r.status != http.StatusCreated {
		t.Fatalf("an expiry two seconds ahead through the host behind: %d %s", r.status, r.body)
	}
	if n := ahead.recall(txt, "10", "21", "?channelId=30").Total; n != 1 {
		t.Fatalf("through the host ahead the fact is not visible before the database's time reaches its expiry (%d)", n)
	}
	time.Sleep(time.Until(soon) + 500*time.Millisecond)
	if n := behind.recall(txt, "10", "21", "?channelId=30").Total; n != 0 {
		t.Fatalf("through the host behind the fact is still visible after the database's time passed its expiry (%d)", n)
	}
	if m := behind.mine("10", "21"); len(m.Facts) != 1 || !m.Facts[0].Expired {
		t.Fatalf("mine through the host behind does not mark the fact expired: %+v", m.Facts)
	}
}
