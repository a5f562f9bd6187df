package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
)

// The contract test runs the real service and checks every exchange of a
// realistic session, request and response, against the embedded OpenAPI
// document (api.OpenAPI), and checks that the document names exactly the
// routes Handler registers.

var contractTokens = config.Tokens{
	OperatorToken:    config.OperatorToken{Operator: "operator-token-0123456789"},
	TextBridgeToken:  config.TextBridgeToken{TextBridge: "text-token-0123456789ab"},
	VoiceBridgeToken: config.VoiceBridgeToken{VoiceBridge: "voice-token-0123456789ab"},
	GameplayToken:    config.GameplayToken{Gameplay: "gameplay-token-0123456789"},
}

// contractClock is the service's clock; the test moves it to expire facts.
type contractClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *contractClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *contractClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type contractExchange struct {
	name   string
	method string
	path   string // with the query
	token  string
	body   any // nil, []byte (sent as is) or a value sent as JSON
	// chunked sends the body without a Content-Length.
	chunked bool
	header  map[string]string
	want    int
	// docRejects says the request breaks the document too (bad JSON, an
	// unknown field, a missing bearer...): its validation must fail.
	docRejects bool
	// undocumented says no operation of the document matches the request
	// (an unknown route, a wrong method): only the Error shape is checked.
	undocumented bool
}

type contractClient struct {
	t      *testing.T
	base   string
	doc    *openapi3.T
	router routers.Router
	// seen records the statuses answered per documented operation.
	seen map[string]map[int]bool
}

func newContractDoc(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("api/openapi.yaml does not load: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("api/openapi.yaml declares openapi %q; the contract is OpenAPI 3.1", doc.OpenAPI)
	}
	return doc
}

// newContractServer runs the real service on a temp root over loopback.
func newContractServer(t *testing.T) (*httptest.Server, *contractClock) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memory")
	clock := &contractClock{t: time.Now().UTC().Truncate(time.Second)}
	srv := httptest.NewServer(newTestService(t, dir, contractTokens, zap.NewNop(), clock.now).handler)
	t.Cleanup(srv.Close)
	return srv, clock
}

func newContractClient(t *testing.T, doc *openapi3.T, base string) *contractClient {
	t.Helper()
	// Route against the test server rather than the documented default address.
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("no router for api/openapi.yaml: %v", err)
	}
	return &contractClient{t: t, base: base, doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// contractBearerAuth is the document's http bearer scheme: an Authorization
// header carrying a non-empty bearer token. Whether the token is known is the
// server's business (401), not the document's.
func contractBearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return fmt.Errorf("security scheme %q is not http bearer", in.SecuritySchemeName)
	}
	tok, ok := strings.CutPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return errors.New("no bearer token in Authorization")
	}
	return nil
}

func (c *contractClient) newRequest(ex contractExchange, raw []byte, chunked bool) *http.Request {
	c.t.Helper()
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
	}
	req, err := http.NewRequest(ex.method, c.base+ex.path, rd)
	if err != nil {
		c.t.Fatalf("%s: %v", ex.name, err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ex.token != "" {
		req.Header.Set("Authorization", "Bearer "+ex.token)
	}
	for k, v := range ex.header {
		req.Header.Set(k, v)
	}
	return req
}

// do sends one exchange to the real server, checks its status and validates
// the request and the response against the document. It returns the body.
func (c *contractClient) do(ex contractExchange) []byte {
	c.t.Helper()
	var raw []byte
	switch b := ex.body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatalf("%s: %v", ex.name, err)
		}
		raw = j
	}
	resp, err := http.DefaultClient.Do(c.newRequest(ex, raw, ex.chunked))
	if err != nil {
		c.t.Fatalf("%s: %v", ex.name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s: read answer: %v", ex.name, err)
	}
	where := fmt.Sprintf("%s (%s %s)", ex.name, ex.method, ex.path)
	if resp.StatusCode != ex.want {
		c.t.Errorf("%s: answered %d, want %d: %s", where, resp.StatusCode, ex.want, body)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		var e api.Error
		_ = json.Unmarshal(body, &e)
		if !strings.Contains(e.Message, "CLANKIE_") || !strings.Contains(e.Message, "minted") || strings.Contains(e.Message, BearersFile) || strings.Contains(e.Message, "/") {
			c.t.Errorf("%s: a 401 must say which credential is needed and where it comes from, and nothing of the server's files: %s", where, body)
		}
	}

	var problems []string
	vreq := c.newRequest(ex, raw, false)
	route, params, err := c.router.FindRoute(vreq)
	switch {
	case ex.undocumented:
		if err == nil {
			problems = append(problems, fmt.Sprintf("the document has an operation %s %s for a request the server does not route", route.Method, route.Path))
		}
		var v any
		if jerr := json.Unmarshal(body, &v); jerr != nil {
			problems = append(problems, fmt.Sprintf("answer is not JSON: %v", jerr))
		} else if verr := c.doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); verr != nil {
			problems = append(problems, fmt.Sprintf("answer is not an Error: %v", verr))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			problems = append(problems, fmt.Sprintf("answer Content-Type is %q", ct))
		}
	case err != nil:
		problems = append(problems, fmt.Sprintf("no operation of the document matches: %v", err))
	default:
		op := route.Method + " " + route.Path
		where = fmt.Sprintf("%s [%s]", where, op)
		if c.seen[op] == nil {
			c.seen[op] = map[int]bool{}
		}
		c.seen[op][resp.StatusCode] = true
		in := &openapi3filter.RequestValidationInput{
			Request:    vreq,
			PathParams: params,
			Route:      route,
			Options:    &openapi3filter.Options{AuthenticationFunc: contractBearerAuth, SkipSettingDefaults: true},
		}
		reqErr := openapi3filter.ValidateRequest(c.t.Context(), in)
		switch {
		case ex.docRejects && reqErr == nil:
			problems = append(problems, "the document accepts a request that should break it")
		case !ex.docRejects && reqErr != nil:
			problems = append(problems, fmt.Sprintf("request does not match the document: %v", reqErr))
		}
		respErr := openapi3filter.ValidateResponse(c.t.Context(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in,
			Status:                 resp.StatusCode,
			Header:                 resp.Header,
			Body:                   io.NopCloser(bytes.NewReader(body)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true},
		})
		if respErr != nil {
			problems = append(problems, fmt.Sprintf("response %d does not match the document: %v\nbody: %s", resp.StatusCode, respErr, body))
		}
	}
	for _, p := range problems {
		c.t.Errorf("%s: %s", where, p)
	}
	return body
}

func contractDecode[T any](t *testing.T, name string, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: decode %s: %v", name, b, err)
	}
	return v
}

func TestContractDocumentIsValid31(t *testing.T) {
	doc := newContractDoc(t)
	// Every wire type of package api has its schema.
	for _, name := range []string{
		"Error", "Subject", "Visibility", "Provenance", "Fact", "FactInput",
		"ProposalRequest", "ProposalResponse", "RecallResponse", "FactPatch",
		"FactResponse", "ForgetPersonResponse", "PersonSummary", "PeopleResponse",
		"BriefingRequest", "BriefingCounts", "BriefingResponse", "Catalog",
		"EpisodeProvenance", "Episode", "EpisodeRequest", "EpisodeResponse",
		"EpisodePatch", "Card",
	} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("components/schemas has no %s", name)
		}
	}
	if s := doc.Components.SecuritySchemes["bearer"]; s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" {
		t.Errorf("components/securitySchemes/bearer must be http bearer")
	}
}

// TestContractRoutesMatchHandler checks both directions between the
// service's route table (with its probes) and the document's operations,
// and that the live handler serves every pattern of the table with the
// security the document gives it.
func TestContractRoutesMatchHandler(t *testing.T) {
	doc := newContractDoc(t)
	svc := newTestService(t, filepath.Join(t.TempDir(), "memory"), contractTokens, zap.NewNop(), nil).svc
	code := map[string]bool{}
	for pattern := range svc.probes() {
		code[pattern] = true
	}
	for _, b := range svc.routes() {
		if code[b.Pattern()] {
			t.Errorf("route %q is in the table twice", b.Pattern())
		}
		code[b.Pattern()] = true
	}
	documented := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+path] = op
		}
	}
	for r := range code {
		if documented[r] == nil {
			t.Errorf("the route table has %q but api/openapi.yaml does not document it", r)
		}
	}
	for r := range documented {
		if !code[r] {
			t.Errorf("api/openapi.yaml documents %q but the route table does not have it", r)
		}
	}

	// The table's patterns are the ones the live handler serves, and a
	// route answers 401 without a bearer exactly when the document says it
	// needs one.
	srv, _ := newContractServer(t)
	param := regexp.MustCompile(`\{[^}]+\}`)
	for r := range code {
		method, path, _ := strings.Cut(r, " ")
		req, err := http.NewRequest(method, srv.URL+param.ReplaceAllString(path, "x1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.Error
		_ = json.Unmarshal(b, &e)
		if e.Code == "not_found" || e.Code == "method_not_allowed" {
			t.Errorf("%s: the live handler does not serve the table's pattern (%d %s)", r, resp.StatusCode, b)
			continue
		}
		op := documented[r]
		if op == nil {
			continue
		}
		security := doc.Security
		if op.Security != nil {
			security = *op.Security
		}
		if needs, got401 := len(security) > 0, resp.StatusCode == http.StatusUnauthorized; needs != got401 {
			t.Errorf("%s: the document says bearer required=%v but without a bearer the server answered %d", r, needs, resp.StatusCode)
		}
	}
}

// TestContractScenario drives a realistic session through every route and
// the main error statuses, validating each exchange against the document.
func TestContractScenario(t *testing.T) {
	doc := newContractDoc(t)
	srv, clock := newContractServer(t)
	c := newContractClient(t, doc, srv.URL)

	const (
		opTok    = "operator-token-0123456789"
		textTok  = "text-token-0123456789ab"
		voiceTok = "voice-token-0123456789ab"
		gameTok  = "gameplay-token-0123456789"
		guild    = "900100"
		alice    = "1001" // the subject
		bob      = "1002" // another member
		general  = "3101"
		quiet    = "3102"
	)
	person := "/v1/memory/discord-people/" + guild + "/" + alice
	proposal := func(id, proposer, channel, body string, vis api.Visibility) api.ProposalRequest {
		return api.ProposalRequest{
			SchemaVersion: api.SchemaVersion,
			ProposalID:    id,
			Fact: api.FactInput{
				Subject:    api.Subject{GuildID: guild, UserID: alice},
				Kind:       api.KindPreference,
				Body:       body,
				Visibility: vis,
				Confidence: 0.8,
				Provenance: api.Provenance{SourceEventID: "interaction-" + id, ProposerUserID: proposer, ChannelID: channel},
			},
		}
	}
	guildVis := api.Visibility{Scope: api.ScopeGuild}
	const proposals = "/v1/memory/discord-people/proposals"

	// Health, without a bearer.
	c.do(contractExchange{name: "healthz", method: "GET", path: "/healthz", want: 200})
	c.do(contractExchange{name: "readyz", method: "GET", path: "/readyz", want: 200})

	// Propose: 201, replay 200, conflict 409, invalid 400, forbidden 403,
	// unauthenticated 401, too large 413.
	p1 := proposal("prop-1", alice, general, "likes green tea", guildVis)
	created := contractDecode[api.ProposalResponse](t, "propose", c.do(contractExchange{
		name: "propose", method: "POST", path: proposals, token: textTok, body: p1, want: 201,
		header: map[string]string{"X-Correlation-Id": "corr-1"},
	}))
	if created.Fact == nil || created.Fact.FactID == "" {
		t.Fatalf("propose answered no fact: %+v", created)
	}
	tea := created.Fact.FactID
	c.do(contractExchange{name: "propose replay", method: "POST", path: proposals, token: textTok, body: p1, want: 200})
	conflicting := p1
	conflicting.Fact.Body = "likes black coffee"
	c.do(contractExchange{name: "propose conflict", method: "POST", path: proposals, token: textTok, body: conflicting, want: 409})
	badKind := proposal("prop-bad-kind", alice, general, "x", guildVis)
	badKind.Fact.Kind = "gossip"
	c.do(contractExchange{name: "propose bad kind", method: "POST", path: proposals, token: textTok, body: badKind, want: 400, docRejects: true})
	c.do(contractExchange{name: "propose unknown field", method: "POST", path: proposals, token: textTok, want: 400, docRejects: true,
		body: []byte(`{"schemaVersion":1,"proposalId":"prop-x","lane":"operator","fact":{}}`)})
	c.do(contractExchange{name: "propose wrong type", method: "POST", path: proposals, token: textTok, want: 400, docRejects: true,
		body: []byte(`{"schemaVersion":1,"proposalId":"prop-y","fact":{"subject":{"guildId":"900100","userId":"1001"},"kind":"preference","body":"x","visibility":{"scope":"guild"},"confidence":"high","provenance":{}}}`)})
	c.do(contractExchange{name: "propose not json", method: "POST", path: proposals, token: textTok, body: []byte(`{"schemaVersion":`), want: 400, docRejects: true})
	outOfRange := proposal("prop-conf", alice, general, "x", guildVis)
	outOfRange.Fact.Confidence = 1.5
	c.do(contractExchange{name: "propose confidence out of range", method: "POST", path: proposals, token: textTok, body: outOfRange, want: 400, docRejects: true})
	c.do(contractExchange{name: "propose operator_private from text bridge", method: "POST", path: proposals, token: textTok, want: 403,
		body: proposal("prop-private", bob, general, "is secretly planning a party", api.Visibility{Scope: api.ScopeOperatorPrivate})})
	c.do(contractExchange{name: "propose from gameplay", method: "POST", path: proposals, token: gameTok, want: 403,
		body: proposal("prop-game", alice, general, "plays chess", guildVis)})
	c.do(contractExchange{name: "propose without bearer", method: "POST", path: proposals, body: p1, want: 401, docRejects: true})
	c.do(contractExchange{name: "propose unknown bearer", method: "POST", path: proposals, token: "not-a-known-token-000000", body: p1, want: 401})
	huge := proposal("prop-huge", alice, general, strings.Repeat("a", 70<<10), guildVis)
	c.do(contractExchange{name: "propose 70 KiB", method: "POST", path: proposals, token: textTok, body: huge, want: 413, docRejects: true})
	c.do(contractExchange{name: "propose 70 KiB chunked", method: "POST", path: proposals, token: textTok, body: huge, chunked: true, want: 413, docRejects: true})

	// A person whose 128 operator-only notes fill their own bound: a Discord
	// proposal has room (the notes are bounded apart), and an edit that
	// would move its fact into the full class is refused with 422.
	for i := range api.MaxHiddenFactsPerPerson {
		hidden := proposal(fmt.Sprintf("prop-full-%03d", i), "", "", "operator note", api.Visibility{Scope: api.ScopeOperatorPrivate})
		hidden.Fact.Subject.UserID = "1009"
		c.do(contractExchange{name: "fill with operator notes", method: "POST", path: proposals, token: opTok, body: hidden, want: 201})
	}
	full := proposal("prop-full-discord", "1009", general, "likes tea", guildVis)
	full.Fact.Subject.UserID = "1009"
	stored := contractDecode[api.ProposalResponse](t, "propose over operator-only notes",
		c.do(contractExchange{name: "propose over operator-only notes", method: "POST", path: proposals, token: textTok, body: full, want: 201}))
	if stored.Fact != nil {
		c.do(contractExchange{name: "edit into the full operator-only class", method: "PATCH", path: "/v1/memory/discord-people/" + guild + "/1009/" + stored.Fact.FactID,
			token: opTok, body: []byte(`{"visibility":{"scope":"operator_private"}}`), want: 422})
	}
	c.do(contractExchange{name: "forget the full person", method: "DELETE", path: "/v1/memory/discord-people/" + guild + "/1009", token: opTok, want: 200})

	// A fact taken from a Discord message names it (provenance.sourceMessageId):
	// the answer, recall and mine carry it, and the document describes them.
	// A value the pattern refuses breaks the document too; 2^64 fits the
	// pattern's 20 digits but no snowflake, so only the service refuses it.
	fromMsg := proposal("prop-msg", "1008", general, "plays bass", guildVis)
	fromMsg.Fact.Subject.UserID = "1008"
	fromMsg.Fact.Provenance.SourceMessageID = "1300000000000000077"
	taken := contractDecode[api.ProposalResponse](t, "propose from a message", c.do(contractExchange{
		name: "propose from a message", method: "POST", path: proposals, token: textTok, body: fromMsg, want: 201}))
	if taken.Fact == nil || taken.Fact.Provenance.SourceMessageID != "1300000000000000077" {
		t.Errorf("propose from a message answered %+v", taken.Fact)
	}
	for _, ex := range []contractExchange{
		{name: "recall a fact from a message", path: "/v1/memory/discord-people/" + guild + "/1008?channelId=" + general},
		{name: "mine of a fact from a message", path: "/v1/memory/discord-people/" + guild + "/1008/mine?requesterUserId=1008"},
	} {
		ex.method, ex.token, ex.want = "GET", textTok, 200
		got := contractDecode[api.RecallResponse](t, ex.name, c.do(ex))
		if len(got.Facts) != 1 || got.Facts[0].Provenance.SourceMessageID != "1300000000000000077" {
			t.Errorf("%s: %+v", ex.name, got.Facts)
		}
	}
	for _, tc := range []struct {
		id         string
		docRejects bool
	}{{"abc", true}, {"123456789012345678901", true}, {"18446744073709551616", false}} {
		bad := fromMsg
		bad.ProposalID = "prop-msg-" + tc.id
		bad.Fact.Provenance.SourceMessageID = tc.id
		c.do(contractExchange{name: "propose from message " + tc.id, method: "POST", path: proposals, token: textTok, body: bad, want: 400, docRejects: tc.docRejects})
	}
	c.do(contractExchange{name: "forget the person with a fact from a message", method: "DELETE", path: "/v1/memory/discord-people/" + guild + "/1008", token: opTok, want: 200})

	// More facts: a channel fact reported by another member that expires, an
	// operator_private one, and supersedes that do and do not apply.
	expiring := proposal("prop-2", bob, quiet, "is learning the cello", api.Visibility{Scope: api.ScopeChannel, ChannelID: quiet})
	expiring.Fact.Kind = api.KindPersonFact
	in90 := clock.now().Add(90 * time.Minute)
	if onPostgres() {
		// PostgreSQL expires facts by the database's clock, which the
		// test cannot move: a short real expiry, waited for below.
		in90 = time.Now().Add(5 * time.Second).UTC()
	}
	expiring.Fact.ExpiresAt = &in90
	cello := contractDecode[api.ProposalResponse](t, "propose channel", c.do(contractExchange{
		name: "propose channel fact", method: "POST", path: proposals, token: voiceTok, body: expiring, want: 201}))
	if cello.Fact == nil {
		t.Fatal("no channel fact")
	}
	c.do(contractExchange{name: "propose operator_private", method: "POST", path: proposals, token: opTok, want: 201,
		body: proposal("prop-3", "", "", "asked not to be pinged at night", api.Visibility{Scope: api.ScopeOperatorPrivate})})
	sup := proposal("prop-4", alice, general, "likes jasmine tea", guildVis)
	sup.Fact.SupersedesFactID = tea
	superseding := contractDecode[api.ProposalResponse](t, "supersede", c.do(contractExchange{
		name: "propose supersede", method: "POST", path: proposals, token: textTok, body: sup, want: 201}))
	if !superseding.Superseded || superseding.Fact == nil {
		t.Fatalf("supersede did not apply: %+v", superseding)
	}
	jasmine := superseding.Fact.FactID
	missing := proposal("prop-5", alice, general, "likes oolong", guildVis)
	missing.Fact.SupersedesFactID = "fnothere"
	notSuperseded := contractDecode[api.ProposalResponse](t, "supersede missing", c.do(contractExchange{
		name: "propose supersede missing", method: "POST", path: proposals, token: textTok, body: missing, want: 201}))
	if notSuperseded.Superseded || notSuperseded.Reason == "" {
		t.Errorf("a supersede of a missing fact must say why nothing was replaced: %+v", notSuperseded)
	}
	oolong := notSuperseded.Fact.FactID

	// Recall.
	recalled := contractDecode[api.RecallResponse](t, "recall", c.do(contractExchange{
		name: "recall", method: "GET", path: person + "?channelId=" + general + "&query=tea&limit=5", token: textTok, want: 200}))
	if recalled.Total != 1 || len(recalled.Facts) != 1 || recalled.Facts[0].FactID != jasmine {
		t.Errorf("recall of tea in #general: %+v", recalled)
	}
	c.do(contractExchange{name: "recall in the quiet channel", method: "GET", path: person + "?channelId=" + quiet, token: voiceTok, want: 200})
	c.do(contractExchange{name: "recall by operator", method: "GET", path: person, token: opTok, want: 200})
	c.do(contractExchange{name: "recall without channel", method: "GET", path: person, token: textTok, want: 400})
	c.do(contractExchange{name: "recall limit 0", method: "GET", path: person + "?channelId=" + general + "&limit=0", token: textTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "recall limit 129", method: "GET", path: person + "?channelId=" + general + "&limit=129", token: textTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "recall query over 200 characters", method: "GET", path: person + "?channelId=" + general + "&query=" + strings.Repeat("t", api.MaxRecallQuery+1), token: textTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "recall from gameplay", method: "GET", path: person + "?channelId=" + general, token: gameTok, want: 403})
	c.do(contractExchange{name: "recall without bearer", method: "GET", path: person + "?channelId=" + general, want: 401, docRejects: true})
	c.do(contractExchange{name: "recall unknown person", method: "GET", path: "/v1/memory/discord-people/" + guild + "/4242?channelId=" + general, token: textTok, want: 200})

	// Let the channel fact expire: the subject's view and the export mark it.
	clock.advance(2 * time.Hour)
	if onPostgres() {
		time.Sleep(time.Until(in90) + 200*time.Millisecond)
	}
	mine := contractDecode[api.RecallResponse](t, "mine", c.do(contractExchange{
		name: "mine", method: "GET", path: person + "/mine?requesterUserId=" + alice, token: textTok, want: 200}))
	if mine.Capacity != api.MaxFactsPerPerson || len(mine.Facts) != 3 {
		t.Errorf("mine: %+v", mine)
	}
	for _, f := range mine.Facts {
		if f.Visibility.Scope == api.ScopeOperatorPrivate || (f.FactID == cello.Fact.FactID) != f.Expired {
			t.Errorf("mine shows %+v", f)
		}
	}
	c.do(contractExchange{name: "mine by another member", method: "GET", path: person + "/mine?requesterUserId=" + bob, token: voiceTok, want: 403})
	c.do(contractExchange{name: "mine from gameplay", method: "GET", path: person + "/mine?requesterUserId=" + alice, token: gameTok, want: 403})
	c.do(contractExchange{name: "mine without requester", method: "GET", path: person + "/mine", token: textTok, want: 400, docRejects: true})
	exported := contractDecode[api.RecallResponse](t, "export", c.do(contractExchange{
		name: "export", method: "GET", path: person + "/export", token: opTok, want: 200}))
	if len(exported.Facts) != 4 {
		t.Errorf("export holds %d facts, want 4 (operator_private and expired included)", len(exported.Facts))
	}
	c.do(contractExchange{name: "export from text bridge", method: "GET", path: person + "/export", token: textTok, want: 403})

	// Operator edit.
	inADay := clock.now().Add(24 * time.Hour).Format(time.RFC3339)
	edited := contractDecode[api.FactResponse](t, "edit", c.do(contractExchange{
		name: "edit fact", method: "PATCH", path: person + "/" + jasmine, token: opTok, want: 200,
		body: map[string]any{"body": "likes jasmine tea, no sugar", "confidence": 0.95, "expiresAt": inADay,
			"visibility": map[string]any{"scope": "channel", "channelId": general}}}))
	if edited.Fact.ExpiresAt == nil || edited.Fact.FactID != jasmine {
		t.Errorf("edit: %+v", edited)
	}
	cleared := contractDecode[api.FactResponse](t, "edit clear", c.do(contractExchange{
		name: "edit fact clears expiry", method: "PATCH", path: person + "/" + jasmine, token: opTok, want: 200,
		body: []byte(`{"expiresAt":null,"kind":"person-fact"}`)}))
	if cleared.Fact.ExpiresAt != nil {
		t.Errorf("expiresAt null did not clear: %+v", cleared.Fact)
	}
	c.do(contractExchange{name: "edit empty", method: "PATCH", path: person + "/" + jasmine, token: opTok, body: []byte(`{}`), want: 400, docRejects: true})
	c.do(contractExchange{name: "edit identity", method: "PATCH", path: person + "/" + jasmine, token: opTok, body: []byte(`{"factId":"fother"}`), want: 400, docRejects: true})
	c.do(contractExchange{name: "edit absent fact", method: "PATCH", path: person + "/fnothere", token: opTok, body: []byte(`{"confidence":0.5}`), want: 404})
	c.do(contractExchange{name: "edit from text bridge", method: "PATCH", path: person + "/" + jasmine, token: textTok, body: []byte(`{"confidence":0.5}`), want: 403})
	c.do(contractExchange{name: "edit 70 KiB", method: "PATCH", path: person + "/" + jasmine, token: opTok, want: 413, docRejects: true,
		body: map[string]string{"body": strings.Repeat("b", 70<<10)}})

	// Forget one fact: subject or proposer, else 403; absent 404.
	c.do(contractExchange{name: "forget by another member", method: "DELETE", path: person + "/" + oolong + "?requesterUserId=" + bob, token: textTok, want: 403})
	c.do(contractExchange{name: "forget without requester", method: "DELETE", path: person + "/" + oolong, token: textTok, want: 400})
	c.do(contractExchange{name: "forget from gameplay", method: "DELETE", path: person + "/" + oolong + "?requesterUserId=" + alice, token: gameTok, want: 403})
	c.do(contractExchange{name: "forget by subject", method: "DELETE", path: person + "/" + oolong + "?requesterUserId=" + alice, token: textTok, want: 204})
	c.do(contractExchange{name: "forget absent", method: "DELETE", path: person + "/" + oolong + "?requesterUserId=" + alice, token: textTok, want: 404})
	c.do(contractExchange{name: "forget by proposer", method: "DELETE", path: person + "/" + cello.Fact.FactID + "?requesterUserId=" + bob, token: voiceTok, want: 204})

	// A second person, for the list, the briefing and forget-person.
	c.do(contractExchange{name: "propose about bob", method: "POST", path: proposals, token: voiceTok, want: 201,
		body: api.ProposalRequest{SchemaVersion: 1, ProposalID: "prop-6", Fact: api.FactInput{
			Subject: api.Subject{GuildID: guild, UserID: bob}, Kind: api.KindRelationshipNote, Body: "is Alice's duet partner",
			Visibility: api.Visibility{Scope: api.ScopeChannel, ChannelID: general}, Confidence: 0.6,
			Provenance: api.Provenance{ProposerUserID: alice, ChannelID: general}}}})

	// Episodes: every lane writes its own; retry 200, conflict 409, another
	// lane 403, invalid 400, too large 413.
	const eps = "/v1/memory/captain-episodes"
	at := clock.now().Add(-time.Hour).UTC()
	gameEp := api.EpisodeRequest{SchemaVersion: 1, EpisodeID: "ep-game-1", Lane: api.LaneGameplay, Room: "the chess club",
		Summary: "Won a close endgame with a rook", OccurredAt: at,
		Provenance: api.EpisodeProvenance{CharacterID: "clankie", SessionID: "session-7", SelfAuthored: true}}
	recorded := contractDecode[api.EpisodeResponse](t, "record", c.do(contractExchange{
		name: "record episode", method: "POST", path: eps, token: gameTok, body: gameEp, want: 201}))
	if recorded.Episode.EpisodeID != "ep-game-1" || recorded.Episode.Visibility != api.EpisodeShareable {
		t.Errorf("record: %+v", recorded)
	}
	c.do(contractExchange{name: "record episode retry", method: "POST", path: eps, token: gameTok, body: gameEp, want: 200})
	other := gameEp
	other.Summary = "Lost a close endgame"
	c.do(contractExchange{name: "record episode conflict", method: "POST", path: eps, token: gameTok, body: other, want: 409})
	c.do(contractExchange{name: "record episode for another lane", method: "POST", path: eps, token: textTok, want: 403,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "#general", Summary: "not mine to write", OccurredAt: at}})
	c.do(contractExchange{name: "record episode raw transcript", method: "POST", path: eps, token: gameTok, want: 400, docRejects: true,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "r", Summary: "s", OccurredAt: at,
			Provenance: api.EpisodeProvenance{RawTranscript: true}}})
	c.do(contractExchange{name: "record episode empty summary", method: "POST", path: eps, token: gameTok, want: 400, docRejects: true,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "r", OccurredAt: at}})
	c.do(contractExchange{name: "record episode 70 KiB", method: "POST", path: eps, token: gameTok, want: 413, docRejects: true,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "r", Summary: strings.Repeat("s", 70<<10), OccurredAt: at}})
	c.do(contractExchange{name: "record episode without bearer", method: "POST", path: eps, body: gameEp, want: 401, docRejects: true})
	c.do(contractExchange{name: "record voice episode", method: "POST", path: eps, token: voiceTok, want: 201,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneDiscordVoice, Room: "voice #lounge", Summary: "Sang the duet with Alice and Bob",
			OccurredAt: at.Add(time.Minute), Provenance: api.EpisodeProvenance{SelfAuthored: true}}})
	kept := contractDecode[api.EpisodeResponse](t, "record kept", c.do(contractExchange{
		name: "record operator episode kept", method: "POST", path: eps, token: opTok, want: 201,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneOperator, Room: "the console", Summary: "Agreed to keep notes short",
			Retain: true, OccurredAt: at.Add(2 * time.Minute), Provenance: api.EpisodeProvenance{SelfAuthored: true}}}))
	if !kept.Retained || kept.Episode.Visibility != api.EpisodeOperatorPrivate {
		t.Errorf("operator record: %+v", kept)
	}
	corrected := contractDecode[api.EpisodeResponse](t, "correct", c.do(contractExchange{
		name: "record episode correction", method: "POST", path: eps, token: gameTok, want: 201,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "the chess club", Summary: "Won a close endgame with two rooks",
			Corrects: "ep-game-1", OccurredAt: at, Provenance: api.EpisodeProvenance{SelfAuthored: true}}}))
	if corrected.Corrected == nil || !*corrected.Corrected || corrected.Episode.CorrectedAt == nil {
		t.Errorf("correction: %+v", corrected)
	}
	refused := contractDecode[api.EpisodeResponse](t, "correct refused", c.do(contractExchange{
		name: "record episode correction refused", method: "POST", path: eps, token: gameTok, want: 201,
		body: api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "the chess club", Summary: "rewrite the console note",
			Corrects: kept.Episode.EpisodeID, OccurredAt: at.Add(3 * time.Minute), Provenance: api.EpisodeProvenance{SelfAuthored: true}}}))
	if refused.Corrected == nil || *refused.Corrected || refused.CorrectReason == "" {
		t.Errorf("a refused correction must say so: %+v", refused)
	}

	// Cards and search.
	card := contractDecode[api.Card](t, "card", c.do(contractExchange{name: "episode card", method: "GET", path: eps, token: gameTok, want: 200}))
	if card.Count != 3 || strings.Contains(card.Card, "Agreed to keep notes short") {
		t.Errorf("gameplay card: %+v", card)
	}
	c.do(contractExchange{name: "episode card operator", method: "GET", path: eps, token: opTok, want: 200})
	c.do(contractExchange{name: "episode search", method: "GET", path: eps + "?q=rooks+chess&limit=5", token: gameTok, want: 200})
	c.do(contractExchange{name: "episode search empty q", method: "GET", path: eps + "?q=", token: voiceTok, want: 200})
	c.do(contractExchange{name: "episode search limit 33", method: "GET", path: eps + "?q=rook&limit=33", token: gameTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "episode search limit not a number", method: "GET", path: eps + "?q=rook&limit=many", token: gameTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "episode card without bearer", method: "GET", path: eps, want: 401, docRejects: true})

	// The voice briefing: voice bridge only.
	brief := api.BriefingRequest{SchemaVersion: 1, GuildID: guild, ChannelID: general, ConsentedUserIDs: []string{alice, bob, "1003"}, CorrelationID: "brief-1"}
	briefed := contractDecode[api.BriefingResponse](t, "briefing", c.do(contractExchange{
		name: "voice briefing", method: "POST", path: "/v1/discord/voice-briefing", token: voiceTok, body: brief, want: 200}))
	if briefed.Counts.ConsentedUsers != 3 || briefed.Counts.UsersWithFacts != 2 || briefed.Counts.Episodes != 3 {
		t.Errorf("briefing counts: %+v", briefed.Counts)
	}
	c.do(contractExchange{name: "voice briefing from text bridge", method: "POST", path: "/v1/discord/voice-briefing", token: textTok, body: brief, want: 403})
	c.do(contractExchange{name: "voice briefing from operator", method: "POST", path: "/v1/discord/voice-briefing", token: opTok, body: brief, want: 403})
	tooMany := brief
	tooMany.ConsentedUserIDs = nil
	for i := range 26 {
		tooMany.ConsentedUserIDs = append(tooMany.ConsentedUserIDs, strconv.Itoa(2000+i))
	}
	c.do(contractExchange{name: "voice briefing 26 users", method: "POST", path: "/v1/discord/voice-briefing", token: voiceTok, body: tooMany, want: 400, docRejects: true})
	c.do(contractExchange{name: "voice briefing with content", method: "POST", path: "/v1/discord/voice-briefing", token: voiceTok, want: 400, docRejects: true,
		body: []byte(`{"schemaVersion":1,"guildId":"900100","channelId":"3101","consentedUserIds":["1001"],"transcript":"hello"}`)})
	c.do(contractExchange{name: "voice briefing names", method: "POST", path: "/v1/discord/voice-briefing", token: voiceTok, want: 400, docRejects: true,
		body: api.BriefingRequest{SchemaVersion: 1, GuildID: guild, ChannelID: general, ConsentedUserIDs: []string{"alice"}}})
	c.do(contractExchange{name: "voice briefing 70 KiB", method: "POST", path: "/v1/discord/voice-briefing", token: voiceTok, want: 413, docRejects: true,
		body: api.BriefingRequest{SchemaVersion: 1, GuildID: guild, ChannelID: strings.Repeat("c", 70<<10)}})

	// Operator episode edit, keep, release and forget.
	epPath := eps + "/ep-game-1"
	patched := contractDecode[api.Episode](t, "patch episode", c.do(contractExchange{
		name: "edit episode", method: "PATCH", path: epPath, token: opTok, want: 200,
		body: api.EpisodePatch{Summary: contractPtr("Won a close endgame with two rooks and a pawn"), Retained: contractPtr(true)}}))
	if !patched.Retained || patched.CorrectedAt == nil {
		t.Errorf("patched episode: %+v", patched)
	}
	c.do(contractExchange{name: "release episode", method: "PATCH", path: epPath, token: opTok, want: 200, body: api.EpisodePatch{Retained: contractPtr(false)}})
	c.do(contractExchange{name: "edit episode empty", method: "PATCH", path: epPath, token: opTok, body: []byte(`{}`), want: 400, docRejects: true})
	c.do(contractExchange{name: "edit episode bad visibility", method: "PATCH", path: epPath, token: opTok, body: []byte(`{"visibility":"public"}`), want: 400, docRejects: true})
	c.do(contractExchange{name: "edit episode lane", method: "PATCH", path: epPath, token: opTok, body: []byte(`{"lane":"operator"}`), want: 400, docRejects: true})
	c.do(contractExchange{name: "edit absent episode", method: "PATCH", path: eps + "/ep-nothere", token: opTok, body: api.EpisodePatch{Retained: contractPtr(true)}, want: 404})
	c.do(contractExchange{name: "edit episode from gameplay", method: "PATCH", path: epPath, token: gameTok, body: api.EpisodePatch{Retained: contractPtr(true)}, want: 403})
	c.do(contractExchange{name: "edit episode 70 KiB", method: "PATCH", path: epPath, token: opTok, want: 413, docRejects: true,
		body: api.EpisodePatch{Summary: contractPtr(strings.Repeat("s", 70<<10))}})
	c.do(contractExchange{name: "forget episode from gameplay", method: "DELETE", path: epPath, token: gameTok, want: 403})
	c.do(contractExchange{name: "forget episode", method: "DELETE", path: epPath, token: opTok, want: 204})
	c.do(contractExchange{name: "forget absent episode", method: "DELETE", path: epPath, token: opTok, want: 404})
	c.do(contractExchange{name: "forget episode without bearer", method: "DELETE", path: epPath, want: 401, docRejects: true})

	// Operator overview: people list (paged) and catalog.
	page := contractDecode[api.PeopleResponse](t, "list", c.do(contractExchange{
		name: "list people", method: "GET", path: "/v1/memory/discord-people?limit=1", token: opTok, want: 200}))
	if page.Total != 2 || len(page.People) != 1 || page.NextCursor == "" {
		t.Fatalf("people page: %+v", page)
	}
	c.do(contractExchange{name: "list people next page", method: "GET", path: "/v1/memory/discord-people?limit=1&cursor=" + page.NextCursor, token: opTok, want: 200})
	c.do(contractExchange{name: "list people bad cursor", method: "GET", path: "/v1/memory/discord-people?cursor=zzz", token: opTok, want: 400})
	c.do(contractExchange{name: "list people limit 1001", method: "GET", path: "/v1/memory/discord-people?limit=1001", token: opTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "list people from text bridge", method: "GET", path: "/v1/memory/discord-people", token: textTok, want: 403})
	cat := contractDecode[api.Catalog](t, "catalog", c.do(contractExchange{name: "catalog", method: "GET", path: "/v1/memory", token: opTok, want: 200}))
	if cat.People != 2 || cat.Facts != 3 || cat.Episodes != 3 || cat.Retained != 1 || cat.RingCapacity != api.EpisodeRingCapacity || cat.RetainedCapacity != api.RetainedCapacity {
		t.Errorf("catalog: %+v", cat)
	}
	c.do(contractExchange{name: "catalog from gameplay", method: "GET", path: "/v1/memory", token: gameTok, want: 403})
	c.do(contractExchange{name: "corrupt person files", method: "GET", path: "/v1/memory/discord-people/corrupt", token: opTok, want: 200})
	c.do(contractExchange{name: "corrupt person files from text", method: "GET", path: "/v1/memory/discord-people/corrupt", token: textTok, want: 403})
	c.do(contractExchange{name: "metrics", method: "GET", path: "/metrics", token: opTok, want: 200})
	c.do(contractExchange{name: "metrics from text", method: "GET", path: "/metrics", token: textTok, want: 403})
	c.do(contractExchange{name: "metrics without bearer", method: "GET", path: "/metrics", want: 401, docRejects: true})
	c.do(contractExchange{name: "catalog unknown bearer", method: "GET", path: "/v1/memory", token: "not-a-known-token-000000", want: 401})

	// Forget a person.
	forgot := contractDecode[api.ForgetPersonResponse](t, "forget person", c.do(contractExchange{
		name: "forget person", method: "DELETE", path: person, token: opTok, want: 200}))
	if len(forgot.Removed) != 2 {
		t.Errorf("forget person removed %v, want the 2 facts left", forgot.Removed)
	}
	c.do(contractExchange{name: "forget person from voice bridge", method: "DELETE", path: "/v1/memory/discord-people/" + guild + "/" + bob, token: voiceTok, want: 403})
	c.do(contractExchange{name: "forget person again", method: "DELETE", path: person, token: opTok, want: 200})
	c.do(contractExchange{name: "export forgotten person", method: "GET", path: person + "/export", token: opTok, want: 200})
	c.do(contractExchange{name: "mine forgotten person", method: "GET", path: person + "/mine?requesterUserId=" + alice, token: textTok, want: 200})

	// 401 without a bearer and 400 for an id the document and the service
	// both refuse, on the routes not covered above.
	long := strings.Repeat("9", 65)
	for _, ex := range []contractExchange{
		{method: "GET", path: "/v1/memory"},
		{method: "GET", path: "/v1/memory/discord-people"},
		{method: "GET", path: person + "/mine?requesterUserId=" + alice},
		{method: "GET", path: person + "/export"},
		{method: "PATCH", path: person + "/" + jasmine, body: []byte(`{"confidence":0.5}`)},
		{method: "DELETE", path: person + "/" + jasmine},
		{method: "DELETE", path: person},
		{method: "POST", path: "/v1/discord/voice-briefing", body: brief},
		{method: "PATCH", path: epPath, body: api.EpisodePatch{Retained: contractPtr(true)}},
	} {
		ex.name, ex.want, ex.docRejects = ex.method+" without bearer", 401, true
		c.do(ex)
	}
	c.do(contractExchange{name: "mine of a 65-character user id", method: "GET", path: "/v1/memory/discord-people/" + guild + "/" + long + "/mine?requesterUserId=" + long, token: textTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "export of a 65-character user id", method: "GET", path: "/v1/memory/discord-people/" + guild + "/" + long + "/export", token: opTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "forget a 65-character guild id", method: "DELETE", path: "/v1/memory/discord-people/" + long + "/" + alice, token: opTok, want: 400, docRejects: true})

	// Interaction claims: once, then already_claimed; a snowflake only.
	claim := "/v1/memory/interactions/1234567890123456789/claim"
	c.do(contractExchange{name: "claim interaction", method: "POST", path: claim, token: textTok, want: 201})
	c.do(contractExchange{name: "claim interaction again", method: "POST", path: claim, token: voiceTok, want: 409})
	c.do(contractExchange{name: "claim a non-snowflake", method: "POST", path: "/v1/memory/interactions/12ab/claim", token: textTok, want: 400, docRejects: true})
	c.do(contractExchange{name: "claim from gameplay", method: "POST", path: "/v1/memory/interactions/42/claim", token: gameTok, want: 403})
	c.do(contractExchange{name: "claim without bearer", method: "POST", path: claim, want: 401, docRejects: true})

	// The router's own answers: JSON too.
	c.do(contractExchange{name: "unknown route", method: "GET", path: "/v1/nothing-here", token: opTok, want: 404, undocumented: true})
	c.do(contractExchange{name: "wrong method", method: "PUT", path: "/v1/memory", token: opTok, want: 405, undocumented: true})

	// Every documented operation was exercised.
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			op := method + " " + path
			if len(c.seen[op]) == 0 {
				t.Errorf("the scenario never exercised %s", op)
			}
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	for _, op := range ops {
		var codes []int
		for code := range c.seen[op] {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		t.Logf("%-60s %v", op, codes)
	}
}

func contractPtr[T any](v T) *T { return &v }
