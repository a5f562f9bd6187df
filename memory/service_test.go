package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/personfiles"
)

var testTokens = config.Tokens{
	OperatorToken:    config.OperatorToken{Operator: "operator-secret-token-0001"},
	TextBridgeToken:  config.TextBridgeToken{TextBridge: "text-bridge-secret-token-02"},
	VoiceBridgeToken: config.VoiceBridgeToken{VoiceBridge: "voice-bridge-secret-token-03"},
	GameplayToken:    config.GameplayToken{Gameplay: "gameplay-secret-token-00004"},
}

type harness struct {
	t    *testing.T
	url  string
	dir  string
	logs *observer.ObservedLogs
	now  *time.Time
	dump func() map[string]string // the PostgreSQL rows, nil on files
	// allow503 lets do answer 503 (the database-outage tests); any other
	// 5xx still fails.
	allow503 bool
}

// newHarness runs the real service over loopback on a temp dir, logging
// every level into an observer so tests can read what would be logged.
func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memory")
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	clock := time.Now().UTC()
	h := &harness{t: t, dir: dir, logs: logs, now: &clock}
	now := func() time.Time { return *h.now }
	svc := newTestService(t, dir, testTokens, log, now)
	srv := httptest.NewServer(svc.handler)
	t.Cleanup(srv.Close)
	h.url, h.dump = srv.URL, svc.dump
	return h
}

func (h *harness) advance(d time.Duration) { *h.now = h.now.Add(d) }

type result struct {
	status int
	body   []byte
}

func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r result) errorCode(t *testing.T) string {
	t.Helper()
	var e api.Error
	r.decode(t, &e)
	if e.Message == "" {
		t.Fatalf("error without a sentence: %s", r.body)
	}
	return e.Code
}

func (h *harness) do(token, method, path string, body any) result {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 && !(h.allow503 && resp.StatusCode == http.StatusServiceUnavailable) {
		h.t.Fatalf("%s %s answered %d: %s", method, path, resp.StatusCode, b)
	}
	if resp.StatusCode >= 400 && !json.Valid(b) {
		h.t.Fatalf("%s %s answered %d without JSON: %s", method, path, resp.StatusCode, b)
	}
	return result{resp.StatusCode, b}
}

const (
	op    = "operator-secret-token-0001"
	txt   = "text-bridge-secret-token-02"
	voice = "voice-bridge-secret-token-03"
	game  = "gameplay-secret-token-00004"
)

func fact(proposalID, guild, user, proposer, channel, body string) api.ProposalRequest {
	return api.ProposalRequest{SchemaVersion: 1, ProposalID: proposalID, Fact: api.FactInput{
		Subject: api.Subject{GuildID: guild, UserID: user}, Kind: api.KindPersonFact, Body: body,
		Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9,
		Provenance: api.Provenance{SourceEventID: "evt-" + proposalID, ProposerUserID: proposer, ChannelID: channel},
	}}
}

func (h *harness) propose(token string, req api.ProposalRequest) api.ProposalResponse {
	h.t.Helper()
	r := h.do(token, "POST", "/v1/memory/discord-people/proposals", req)
	if r.status != http.StatusCreated {
		h.t.Fatalf("propose %s: %d %s", req.ProposalID, r.status, r.body)
	}
	var resp api.ProposalResponse
	r.decode(h.t, &resp)
	return resp
}

func (h *harness) recall(token, guild, user, query string) api.RecallResponse {
	h.t.Helper()
	r := h.do(token, "GET", "/v1/memory/discord-people/"+guild+"/"+user+query, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("recall: %d %s", r.status, r.body)
	}
	var resp api.RecallResponse
	r.decode(h.t, &resp)
	return resp
}

// snapshot reads every file under the data dir, to prove a refused request
// changed nothing byte for byte.
func (h *harness) snapshot() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	filepath.WalkDir(h.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "LOCK" {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	if h.dump != nil {
		for k, v := range h.dump() {
			out["db:"+k] = v
		}
	}
	return out
}

func TestProposeRecallAndVisibility(t *testing.T) {
	h := newHarness(t)
	self := h.propose(txt, fact("i1", "10", "20", "20", "30", "likes green tea"))
	if self.Fact == nil || self.Fact.Provenance.SourceSurface != api.SurfaceDiscordText || self.Superseded || self.Evicted != 0 {
		t.Fatalf("propose answer %+v", self)
	}
	chanOnly := fact("i2", "10", "20", "20", "30", "only here")
	chanOnly.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "30"}
	h.propose(txt, chanOnly)

	in30 := h.recall(txt, "10", "20", "?channelId=30")
	in31 := h.recall(voice, "10", "20", "?channelId=31")
	if in30.Total != 2 || in31.Total != 1 || in31.Facts[0].Body != "likes green tea" {
		t.Fatalf("channel fact visibility: in 30 %d, in 31 %+v", in30.Total, in31.Facts)
	}
	if other := h.recall(txt, "11", "20", "?channelId=30"); other.Total != 0 {
		t.Fatal("a fact crossed guilds")
	}
	if q := h.recall(txt, "10", "20", "?channelId=30&query=TEA+green"); q.Total != 1 {
		t.Fatalf("query: %+v", q)
	}
	if r := h.do(txt, "GET", "/v1/memory/discord-people/10/20", nil); r.status != 400 || r.errorCode(t) != "channel_required" {
		t.Fatalf("discord read without a room: %d %s", r.status, r.body)
	}
	if all := h.recall(op, "10", "20", ""); all.Total != 2 {
		t.Fatalf("operator recall without a room sees %d", all.Total)
	}
}

func TestExpiredFactHiddenButExported(t *testing.T) {
	h := newHarness(t)
	req := fact("e1", "10", "20", "20", "30", "on holiday")
	soon := h.now.Add(time.Hour)
	if onPostgres() {
		soon = time.Now().Add(2 * time.Second).UTC() // see passExpiry
	}
	req.Fact.ExpiresAt = &soon
	h.propose(txt, req)
	if h.recall(txt, "10", "20", "?channelId=30").Total != 1 {
		t.Fatal("fact not visible before expiry")
	}
	h.passExpiry(soon)
	if h.recall(txt, "10", "20", "?channelId=30").Total != 0 {
		t.Fatal("expired fact still visible")
	}
	var exp api.RecallResponse
	h.do(op, "GET", "/v1/memory/discord-people/10/20/export", nil).decode(t, &exp)
	if exp.Total != 1 || !exp.Facts[0].Expired {
		t.Fatalf("export: %+v", exp)
	}
	past := h.now.Add(-time.Minute)
	req = fact("e2", "10", "20", "20", "30", "in the past")
	req.Fact.ExpiresAt = &past
	if r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req); r.status != 400 {
		t.Fatalf("past expiry: %d", r.status)
	}
}

func TestThe129thFactEvictsTheOldest(t *testing.T) {
	h := newHarness(t)
	for i := range 129 {
		resp := h.propose(txt, fact(fmt.Sprintf("p%03d", i), "10", "20", "20", "30", fmt.Sprintf("fact number %03d", i)))
		if want := 0; i < 128 && resp.Evicted != want {
			t.Fatalf("evicted early at %d", i)
		} else if i == 128 && resp.Evicted != 1 {
			t.Fatalf("129th evicted %d", resp.Evicted)
		}
		h.advance(time.Second)
	}
	var exp api.RecallResponse
	h.do(op, "GET", "/v1/memory/discord-people/10/20/export", nil).decode(t, &exp)
	if exp.Total != 128 || exp.Facts[127].Body != "fact number 001" {
		t.Fatalf("after 129: %d facts, oldest %q", exp.Total, exp.Facts[len(exp.Facts)-1].Body)
	}
	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	if cat.People != 1 || cat.Facts != 128 {
		t.Fatalf("catalog %+v", cat)
	}
}

func TestRetryStoresNothingNew(t *testing.T) {
	h := newHarness(t)
	req := fact("same-id", "10", "20", "20", "30", "likes tea")
	first := h.propose(txt, req)
	before := h.snapshot()
	r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
	var again api.ProposalResponse
	r.decode(t, &again)
	if r.status != 200 || again.Fact.FactID != first.Fact.FactID {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	req.Fact.Body = "likes coffee"
	if r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req); r.status != 409 {
		t.Fatalf("changed retry: %d", r.status)
	}
	if after := h.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("a retry changed the data directory")
	}
}

func TestBearerDecidesAndRefuses(t *testing.T) {
	h := newHarness(t)
	priv := fact("x1", "10", "20", "20", "30", "private")
	priv.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	otherSurface := fact("x2", "10", "20", "20", "30", "claims to be the operator")
	otherSurface.Fact.Provenance.SourceSurface = api.SurfaceOperator
	for _, tc := range []struct {
		name, token, method, path string
		body                      any
		status                    int
	}{
		{"no bearer", "", "GET", "/v1/memory", nil, 401},
		{"unknown bearer", "not-a-token-at-all-xx", "GET", "/v1/memory", nil, 401},
		{"text bridge on the catalog", txt, "GET", "/v1/memory", nil, 403},
		{"text bridge writes operator_private", txt, "POST", "/v1/memory/discord-people/proposals", priv, 403},
		{"text bridge names another surface", txt, "POST", "/v1/memory/discord-people/proposals", otherSurface, 403},
		{"gameplay on person facts", game, "POST", "/v1/memory/discord-people/proposals", fact("x3", "1", "2", "2", "3", "b"), 403},
		{"operator on the voice briefing", op, "POST", "/v1/discord/voice-briefing", api.BriefingRequest{SchemaVersion: 1, GuildID: "1", ChannelID: "2"}, 403},
		{"text bridge on the voice briefing", txt, "POST", "/v1/discord/voice-briefing", api.BriefingRequest{SchemaVersion: 1, GuildID: "1", ChannelID: "2"}, 403},
		{"text bridge exports", txt, "GET", "/v1/memory/discord-people/10/20/export", nil, 403},
		{"voice bridge forgets a person", voice, "DELETE", "/v1/memory/discord-people/10/20", nil, 403},
	} {
		before := h.snapshot()
		r := h.do(tc.token, tc.method, tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
			continue
		}
		r.errorCode(t)
		if fmt.Sprint(h.snapshot()) != fmt.Sprint(before) {
			t.Errorf("%s changed the data directory", tc.name)
		}
	}
	r := h.do("", "GET", "/v1/memory", nil)
	if !strings.Contains(string(r.body), "CLANKIE_OPERATOR_TOKEN") || strings.Contains(string(r.body), BearersFile) || strings.Contains(string(r.body), h.dir) {
		t.Fatalf("401 does not name the credential: %s", r.body)
	}
	p := h.propose(op, priv)
	if p.Fact.Provenance.SourceSurface != api.SurfaceOperator {
		t.Fatal("operator proposal lost its surface")
	}
	if h.recall(txt, "10", "20", "?channelId=30").Total != 0 {
		t.Fatal("operator_private reached a Discord read")
	}
}

func TestBadInputIs4xxAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.propose(txt, fact("ok", "10", "20", "20", "30", "baseline"))
	valid, _ := json.Marshal(fact("b1", "10", "20", "20", "30", "x"))
	unknown := strings.Replace(string(valid), `"proposalId"`, `"surprise":1,"proposalId"`, 1)
	wrongType := strings.Replace(string(valid), `"confidence":0.9`, `"confidence":"high"`, 1)
	huge := fact("b2", "10", "20", "20", "30", strings.Repeat("a", 70<<10))
	long := strings.Repeat("1", 65)
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
	}{
		{"invalid JSON", "POST", "/v1/memory/discord-people/proposals", `{"schemaVersion":1,`, 400},
		{"not an object", "POST", "/v1/memory/discord-people/proposals", `[]`, 400},
		{"two objects", "POST", "/v1/memory/discord-people/proposals", string(valid) + string(valid), 400},
		{"unknown field", "POST", "/v1/memory/discord-people/proposals", unknown, 400},
		{"wrong type", "POST", "/v1/memory/discord-people/proposals", wrongType, 400},
		{"70 KiB body", "POST", "/v1/memory/discord-people/proposals", huge, 413},
		{"65-character guild id", "POST", "/v1/memory/discord-people/proposals", fact("b3", long, "20", "20", "30", "x"), 400},
		{"control character id", "POST", "/v1/memory/discord-people/proposals", fact("b4", "1\x002", "20", "20", "30", "x"), 400},
		{"empty body after trim", "POST", "/v1/memory/discord-people/proposals", fact("b5", "10", "20", "20", "30", "   "), 400},
		{"2049-character fact", "POST", "/v1/memory/discord-people/proposals", fact("b6", "10", "20", "20", "30", strings.Repeat("é", 2049)), 400},
		{"bell in fact", "POST", "/v1/memory/discord-people/proposals", fact("b7", "10", "20", "20", "30", "ding\a"), 400},
		{"hostile path id", "GET", "/v1/memory/discord-people/..%2F..%2Fetc/passwd?channelId=30", nil, 0},
		{"65-character user in path", "GET", "/v1/memory/discord-people/10/" + long + "?channelId=30", nil, 400},
		{"limit zero", "GET", "/v1/memory/discord-people/10/20?channelId=30&limit=0", nil, 400},
		{"limit 129", "GET", "/v1/memory/discord-people/10/20?channelId=30&limit=129", nil, 400},
		{"unknown route", "GET", "/v1/nothing", nil, 404},
		{"wrong method", "PUT", "/v1/memory/discord-people/proposals", nil, 405},
	} {
		before := h.snapshot()
		r := h.do(txt, tc.method, tc.path, tc.body)
		if tc.status != 0 && r.status != tc.status || r.status < 400 && tc.status != 0 {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
		if fmt.Sprint(h.snapshot()) != fmt.Sprint(before) {
			t.Errorf("%s changed the data directory", tc.name)
		}
	}
}

// TestMalformedFactIDIs400: a fact id that api.ValidFactID refuses (a space,
// a control character, "..", more than 64 characters) can name no fact, so
// supersedesFactId and the factId path segment are refused with 400
// invalid_request naming the field, and nothing changes; the slash command
// refuses the same ids first.
func TestMalformedFactIDIs400(t *testing.T) {
	h := newHarness(t)
	kept := h.propose(txt, fact("ok", "10", "20", "20", "30", "baseline"))
	person := "/v1/memory/discord-people/10/20/"
	for _, tc := range []struct {
		name, token, method, path string
		body                      any
		field                     string
	}{
		{"supersedes with a space", txt, "POST", "/v1/memory/discord-people/proposals", func() any {
			req := fact("s1", "10", "20", "20", "30", "corrected")
			req.Fact.SupersedesFactID = kept.Fact.FactID + " likes tea"
			return req
		}(), "supersedesFactId"},
		{"supersedes of 65 characters", txt, "POST", "/v1/memory/discord-people/proposals", func() any {
			req := fact("s2", "10", "20", "20", "30", "corrected")
			req.Fact.SupersedesFactID = strings.Repeat("f", 65)
			return req
		}(), "supersedesFactId"},
		{"forget a spaced id", txt, "DELETE", person + "f%20x?requesterUserId=20", nil, "factId"},
		{"forget a tab", txt, "DELETE", person + "f%09x?requesterUserId=20", nil, "factId"},
		{"edit a dot-dot id", op, "PATCH", person + "%2E%2E", `{"body":"x"}`, "factId"},
	} {
		before := h.snapshot()
		r := h.do(tc.token, tc.method, tc.path, tc.body)
		var e api.Error
		r.decode(t, &e)
		if r.status != http.StatusBadRequest || e.Code != "invalid_request" || !strings.HasPrefix(e.Message, tc.field+" is not a fact id") {
			t.Errorf("%s: %d %s; want 400 invalid_request naming %s", tc.name, r.status, r.body, tc.field)
		}
		if fmt.Sprint(h.snapshot()) != fmt.Sprint(before) {
			t.Errorf("%s changed the data directory", tc.name)
		}
	}
	if got := h.recall(txt, "10", "20", "?channelId=30"); len(got.Facts) != 1 || got.Facts[0].FactID != kept.Fact.FactID {
		t.Fatalf("after refusals: %+v", got.Facts)
	}
}

func TestSubjectRightsAndOperatorRoutes(t *testing.T) {
	h := newHarness(t)
	mineFact := h.propose(txt, fact("m1", "10", "20", "20", "30", "about me"))
	reported := fact("m2", "10", "20", "99", "31", "reported in 31")
	reported.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "31"}
	rep := h.propose(voice, reported)
	priv := fact("m3", "10", "20", "", "", "operator note")
	priv.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	h.propose(op, priv)

	var mine api.RecallResponse
	r := h.do(txt, "GET", "/v1/memory/discord-people/10/20/mine?requesterUserId=20", nil)
	r.decode(t, &mine)
	if r.status != 200 || mine.Total != 2 || mine.Capacity != 128 || strings.Contains(string(r.body), "operator note") {
		t.Fatalf("mine: %d %s", r.status, r.body)
	}
	if r := h.do(txt, "GET", "/v1/memory/discord-people/10/20/mine?requesterUserId=21", nil); r.status != 403 {
		t.Fatalf("mine for someone else: %d", r.status)
	}
	del := func(token, factID, requester string) int {
		q := ""
		if requester != "" {
			q = "?requesterUserId=" + requester
		}
		return h.do(token, "DELETE", "/v1/memory/discord-people/10/20/"+factID+q, nil).status
	}
	if s := del(txt, rep.Fact.FactID, "55"); s != 403 {
		t.Fatalf("stranger forgets: %d", s)
	}
	if s := del(txt, rep.Fact.FactID, ""); s != 400 {
		t.Fatalf("discord forget without requester: %d", s)
	}
	if s := del(txt, rep.Fact.FactID, "99"); s != 204 {
		t.Fatalf("proposer forgets: %d", s)
	}
	if s := del(txt, rep.Fact.FactID, "99"); s != 404 {
		t.Fatalf("forget twice: %d", s)
	}

	// Operator: edit, list, forget person.
	patch := `{"body":"edited","expiresAt":null,"confidence":0.5}`
	var edited api.FactResponse
	r = h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+mineFact.Fact.FactID, patch)
	r.decode(t, &edited)
	if r.status != 200 || edited.Fact.Body != "edited" || edited.Fact.Confidence != 0.5 ||
		edited.Fact.FactID != mineFact.Fact.FactID || !edited.Fact.CreatedAt.Equal(mineFact.Fact.CreatedAt) ||
		edited.Fact.Provenance != mineFact.Fact.Provenance {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	if r := h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+mineFact.Fact.FactID, `{"factId":"other"}`); r.status != 400 {
		t.Fatalf("edit of identity: %d", r.status)
	}
	var list api.PeopleResponse
	h.do(op, "GET", "/v1/memory/discord-people", nil).decode(t, &list)
	if list.Total != 1 || list.People[0].Facts != 2 {
		t.Fatalf("people: %+v", list)
	}
	var gone api.ForgetPersonResponse
	r = h.do(op, "DELETE", "/v1/memory/discord-people/10/20", nil)
	r.decode(t, &gone)
	if r.status != 200 || len(gone.Removed) != 2 {
		t.Fatalf("forget person: %d %s", r.status, r.body)
	}
	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	if cat.People != 0 || cat.Facts != 0 {
		t.Fatalf("catalog after forget: %+v", cat)
	}
	if _, err := os.Stat(filepath.Join(h.dir, personfiles.Dir, personfiles.FileName(api.Subject{GuildID: "10", UserID: "20"}))); !os.IsNotExist(err) {
		t.Fatal("the person file survived forget-person")
	}
}

func TestVoiceBriefingRoute(t *testing.T) {
	h := newHarness(t)
	h.propose(txt, fact("v1", "10", "20", "20", "30", "self said"))
	other := fact("v2", "10", "21", "20", "30", "reported")
	h.propose(txt, other)
	chanOnly := fact("v3", "10", "21", "21", "30", "text channel only")
	chanOnly.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "30"}
	h.propose(txt, chanOnly)
	r := h.do(voice, "POST", "/v1/discord/voice-briefing", api.BriefingRequest{SchemaVersion: 1, GuildID: "10", ChannelID: "40", ConsentedUserIDs: []string{"20", "21", "22"}, CorrelationID: "corr-1"})
	var b api.BriefingResponse
	r.decode(t, &b)
	if r.status != 200 || b.Counts != (api.BriefingCounts{ConsentedUsers: 3, UsersWithFacts: 2, Facts: 2}) {
		t.Fatalf("briefing: %d %s", r.status, r.body)
	}
	if strings.Contains(b.Briefing, "text channel only") || !strings.Contains(b.Briefing, `"self said"`) {
		t.Fatalf("briefing text wrong")
	}
	if r := h.do(voice, "POST", "/v1/discord/voice-briefing", `{"schemaVersion":1,"guildId":"10","channelId":"40","consentedUserIds":[],"facts":"x"}`); r.status != 400 {
		t.Fatalf("unknown field: %d", r.status)
	}
	receipts := h.logs.FilterField(zap.String("receipt", "voice.briefing")).All()
	if len(receipts) != 2 {
		t.Fatalf("want a receipt per briefing request, got %d", len(receipts))
	}
	if m := receipts[0].ContextMap(); m["correlationId"] != "corr-1" || m["facts"] != int64(2) || m["outcome"] != "ok" || m["briefingLength"] != int64(len(b.Briefing)) {
		t.Fatalf("receipt %v", m)
	}
	if m := receipts[1].ContextMap(); m["outcome"] != "invalid_json" {
		t.Fatalf("refused briefing receipt %v", m)
	}
}

// TestLogsHoldNoContent runs a full scenario and reads every log line at
// every level: no fact body, summary, briefing or token may appear.
func TestLogsHoldNoContent(t *testing.T) {
	h := newHarness(t)
	secret := "zebra-marmalade-7731"
	req := fact("l1", "10", "20", "20", "30", "my "+secret+" fact")
	h.propose(txt, req)
	h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
	req.Fact.Body = "changed " + secret
	h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
	h.recall(txt, "10", "20", "?channelId=30&query="+secret)
	h.do(voice, "POST", "/v1/discord/voice-briefing", api.BriefingRequest{SchemaVersion: 1, GuildID: "10", ChannelID: "30", ConsentedUserIDs: []string{"20"}})
	h.do(txt, "POST", "/v1/memory/captain-episodes", api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneDiscordPresence, Room: "room", Summary: "saw " + secret, OccurredAt: time.Now()})
	h.do(txt, "GET", "/v1/memory/captain-episodes?q="+secret, nil)
	// The briefing again, now quoting the note, and cutting a fact too long for its share.
	h.propose(txt, fact("l2", "10", "21", "21", "30", secret+strings.Repeat("\u200b", 2000)))
	h.do(voice, "POST", "/v1/discord/voice-briefing", api.BriefingRequest{SchemaVersion: 1, GuildID: "10", ChannelID: "30", ConsentedUserIDs: []string{"20", "21"}})
	// A Discord proposal refused because only operator-only notes could make room.
	for i := range 128 {
		h.propose(op, privateFact(fmt.Sprintf("lp%03d", i), "10", "22", "note "+secret))
	}
	h.do(txt, "POST", "/v1/memory/discord-people/proposals", fact("l3", "10", "22", "22", "30", "refused "+secret))
	h.do(txt, "GET", "/v1/memory/discord-people/10/20?channelId=30&query="+strings.Repeat(secret, 20), nil)
	h.do(txt, "POST", "/v1/memory/discord-people/proposals", `{"schemaVersion":1,"proposalId":"`+secret+`"`)
	h.do("wrong-"+secret, "GET", "/v1/memory", nil)
	var exp api.RecallResponse
	h.do(op, "GET", "/v1/memory/discord-people/10/20/export", nil).decode(t, &exp)
	h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+exp.Facts[0].FactID, `{"body":"edited `+secret+`"}`)
	h.do(op, "DELETE", "/v1/memory/discord-people/10/20", nil)
	if h.logs.Len() == 0 {
		t.Fatal("no receipts were logged")
	}
	for _, e := range h.logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		for _, bad := range []string{secret, op, txt, voice, game} {
			if strings.Contains(line, bad) {
				t.Fatalf("log line holds content or a token: %s", line)
			}
		}
	}
}

func TestFilesAre0700And0600(t *testing.T) {
	fileOnly(t)
	h := newHarness(t)
	h.propose(txt, fact("f1", "10", "20", "20", "30", "x"))
	h.do(txt, "POST", "/v1/memory/captain-episodes", api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneDiscordPresence, Room: "r", Summary: "s", OccurredAt: time.Now()})
	n := 0
	filepath.WalkDir(h.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		st, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, st.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if n < 5 {
		t.Fatalf("only %d paths checked", n)
	}
}

// TestBodyHoldsExactlyOneObject: whitespace may follow the request's one
// JSON object; anything else is refused and nothing is stored.
func TestBodyHoldsExactlyOneObject(t *testing.T) {
	h := newHarness(t)
	one, err := json.Marshal(fact("once-1", "10", "20", "20", "30", "plays bass"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tail string
		status     int
	}{
		{"whitespace", " \n\t\r\n", 201},
		{"a second object", `{"proposalId":"x"}`, 400},
		{"a second object after a newline", "\n{}", 400},
		{"a stray brace", "}", 400},
		{"garbage", " x", 400},
		{"null", "null", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Replace(one, []byte(`"once-1"`), []byte(fmt.Sprintf("%q", "once-"+strings.ReplaceAll(tc.name, " ", "-"))), 1)
			r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", append(body, tc.tail...))
			if r.status != tc.status {
				t.Fatalf("%q after the object: %d %s", tc.tail, r.status, r.body)
			}
			if tc.status == 400 && !strings.Contains(string(r.body), "exactly one JSON object") {
				t.Fatalf("%q after the object: %s", tc.tail, r.body)
			}
		})
	}
	if got := h.recall(txt, "10", "20", "?channelId=30"); got.Total != 1 {
		t.Fatalf("%d facts stored, want the one with whitespace after it", got.Total)
	}
}

// TestCatalogNamesTheStore: GET /v1/memory says where memory lives, so
// `clankie memory status` names the store (and shows the corrupt-file count
// only where there are person files).
func TestCatalogNamesTheStore(t *testing.T) {
	h := newHarness(t)
	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	want := api.StoreFile
	if onPostgres() {
		want = api.StorePostgres
	}
	if cat.Store != want {
		t.Fatalf("the catalog names the store %q, want %q", cat.Store, want)
	}
}
