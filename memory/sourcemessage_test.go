package memory

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
)

// A fact proposed from a Discord message ("Remember this") names the
// message in provenance.sourceMessageId, so recall and mine can link to it.
// These run on both stores (the suite's PostgreSQL run repeats them).

const (
	proposals = "/v1/memory/discord-people/proposals"
	fromMsg   = "1300000000000000077"
)

// fromMessage is fact() taken from a message.
func fromMessage(proposalID, body, messageID string) api.ProposalRequest {
	req := fact(proposalID, "10", "20", "21", "30", body)
	req.Fact.Provenance.SourceMessageID = messageID
	return req
}

// TestSourceMessageIDKeptAndReturned: the propose answer, an operator's
// edit, recall, mine and export all return the message id, a fact without one answers without
// the field (an empty string is absent), and both survive a restart of the
// service on the same data (the file store replays its journal and logs).
func TestSourceMessageIDKeptAndReturned(t *testing.T) {
	h := newHarness(t)
	r := h.do(txt, "POST", proposals, fromMessage("from-msg", "plays bass", fromMsg))
	var created api.ProposalResponse
	r.decode(t, &created)
	if r.status != http.StatusCreated || created.Fact == nil || created.Fact.Provenance.SourceMessageID != fromMsg {
		t.Fatalf("propose from a message: %d %s", r.status, r.body)
	}
	// "" is absent: accepted, and no field in the answer.
	plain, _ := json.Marshal(fromMessage("no-msg", "likes tea", ""))
	plain = []byte(strings.Replace(string(plain), `"channelId":"30"}`, `"channelId":"30","sourceMessageId":""}`, 1))
	if !strings.Contains(string(plain), `"sourceMessageId":""`) {
		t.Fatalf("the test's body has no empty sourceMessageId: %s", plain)
	}
	r = h.do(txt, "POST", proposals, plain)
	if r.status != http.StatusCreated || strings.Contains(string(r.body), "sourceMessageId") {
		t.Fatalf("propose with an empty sourceMessageId: %d %s", r.status, r.body)
	}

	// An operator's edit changes the fact, not where it came from.
	r = h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+created.Fact.FactID, `{"confidence":0.5}`)
	var edited api.FactResponse
	r.decode(t, &edited)
	if r.status != http.StatusOK || edited.Fact.Confidence != 0.5 || edited.Fact.Provenance.SourceMessageID != fromMsg {
		t.Fatalf("edit of a fact from a message: %d %s", r.status, r.body)
	}

	reads := []struct {
		name, token, path string
	}{
		{"recall", txt, "/v1/memory/discord-people/10/20?channelId=30"},
		{"mine", txt, "/v1/memory/discord-people/10/20/mine?requesterUserId=20"},
		{"export", op, "/v1/memory/discord-people/10/20/export"},
	}
	check := func(when, url string) {
		t.Helper()
		h := &harness{t: t, url: url}
		for _, rd := range reads {
			r := h.do(rd.token, "GET", rd.path, nil)
			var got api.RecallResponse
			r.decode(t, &got)
			if r.status != http.StatusOK {
				t.Errorf("%s, %s: %d %s", when, rd.name, r.status, r.body)
				continue
			}
			ids := map[string]string{}
			for _, f := range got.Facts {
				ids[f.FactID] = f.Provenance.SourceMessageID
			}
			if len(ids) != 2 || ids[created.Fact.FactID] != fromMsg || strings.Count(string(r.body), `"sourceMessageId"`) != 1 {
				t.Errorf("%s, %s: want the message id on its fact only: %s", when, rd.name, r.body)
			}
		}
	}
	check("at once", h.url)

	// A second service on the same data: a restart after kill -9 (the
	// first is never closed), on the same root or schema.
	restarted := httptest.NewServer(newTestService(t, h.dir, testTokens, zap.NewNop(), func() time.Time { return *h.now }).handler)
	t.Cleanup(restarted.Close)
	check("after a restart", restarted.URL)
}

// TestSourceMessageIDInvalidIs400: a source message id that is not a
// Discord snowflake (digits only, 1–20 of them, below 2^64) is refused
// like a bad provenance.channelId: 400 invalid_request, a sentence naming
// the field and not echoing the value, and nothing changes.
func TestSourceMessageIDInvalidIs400(t *testing.T) {
	h := newHarness(t)
	h.propose(txt, fact("ok", "10", "20", "20", "30", "baseline"))
	badChannel := fact("bad-channel", "10", "20", "20", strings.Repeat("3", 65), "x")
	for _, tc := range []struct {
		name  string
		req   api.ProposalRequest
		field string
		value string
	}{
		{"a bad channelId, for comparison", badChannel, "provenance.channelId", ""},
		{"letters", fromMessage("m1", "x", "abc"), "provenance.sourceMessageId", "abc"},
		{"21 digits", fromMessage("m2", "x", "123456789012345678901"), "provenance.sourceMessageId", "123456789012345678901"},
		{"2^64", fromMessage("m3", "x", "18446744073709551616"), "provenance.sourceMessageId", "18446744073709551616"},
		{"20 nines", fromMessage("m4", "x", "99999999999999999999"), "provenance.sourceMessageId", "99999999999999999999"},
		{"a sign", fromMessage("m5", "x", "-1"), "provenance.sourceMessageId", "-1"},
		{"full-width digits", fromMessage("m6", "x", "１２３"), "provenance.sourceMessageId", "１２３"},
		{"a space", fromMessage("m7", "x", "13 00"), "provenance.sourceMessageId", "13 00"},
		{"from the operator too", func() api.ProposalRequest {
			req := fromMessage("m8", "x", "1e9")
			req.Fact.Provenance.ProposerUserID, req.Fact.Provenance.ChannelID = "", ""
			return req
		}(), "provenance.sourceMessageId", "1e9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := txt
			if tc.req.Fact.Provenance.ChannelID == "" {
				token = op
			}
			before := h.snapshot()
			r := h.do(token, "POST", proposals, tc.req)
			var e api.Error
			r.decode(t, &e)
			if r.status != http.StatusBadRequest || e.Code != "invalid_request" || !strings.HasPrefix(e.Message, tc.field+" must ") || !strings.HasSuffix(e.Message, ".") {
				t.Errorf("%d %s; want 400 invalid_request naming %s", r.status, r.body, tc.field)
			}
			if tc.value != "" && strings.Contains(e.Message, tc.value) {
				t.Errorf("the sentence echoes the value: %s", e.Message)
			}
			if fmt.Sprint(h.snapshot()) != fmt.Sprint(before) {
				t.Error("a refused proposal changed the stored data")
			}
		})
	}
	if got := h.recall(txt, "10", "20", "?channelId=30"); got.Total != 1 {
		t.Fatalf("after the refusals: %+v", got.Facts)
	}
}

// TestSourceMessageIDRetry: the message id is part of what a proposal
// asks for, so a retry naming another message (or dropping or adding one)
// is a different use of the proposal id (409), and the same one replays.
func TestSourceMessageIDRetry(t *testing.T) {
	h := newHarness(t)
	first := h.propose(txt, fromMessage("with-msg", "plays bass", fromMsg))
	h.propose(txt, fromMessage("without-msg", "likes tea", ""))
	before := h.snapshot()
	for _, tc := range []struct {
		name string
		req  api.ProposalRequest
		want int
	}{
		{"the same message", fromMessage("with-msg", "plays bass", fromMsg), http.StatusOK},
		{"another message", fromMessage("with-msg", "plays bass", "1300000000000000078"), http.StatusConflict},
		{"no message", fromMessage("with-msg", "plays bass", ""), http.StatusConflict},
		{"a message added", fromMessage("without-msg", "likes tea", fromMsg), http.StatusConflict},
		{"still none", fromMessage("without-msg", "likes tea", ""), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(txt, "POST", proposals, tc.req)
			if r.status != tc.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.want)
			}
			if tc.want == http.StatusConflict {
				if code := r.errorCode(t); code != "proposal_conflict" {
					t.Errorf("code %q, want proposal_conflict", code)
				}
				return
			}
			var again api.ProposalResponse
			r.decode(t, &again)
			if !again.Replayed || again.Fact == nil || again.Fact.Provenance.SourceMessageID != tc.req.Fact.Provenance.SourceMessageID {
				t.Errorf("replay: %s", r.body)
			}
			if tc.req.ProposalID == "with-msg" && again.Fact.FactID != first.Fact.FactID {
				t.Errorf("replay answered %s, want %s", again.Fact.FactID, first.Fact.FactID)
			}
		})
	}
	if fmt.Sprint(h.snapshot()) != fmt.Sprint(before) {
		t.Fatal("a retry changed the stored data")
	}
}
