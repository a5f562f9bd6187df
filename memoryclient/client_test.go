package memoryclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// Hostile ids: each must arrive as one escaped path segment.
const (
	hGuild   = "g/1"
	hUser    = "a/b"
	hFact    = "f?#%x"
	hEpisode = "e p/1"
	// their escaped forms, written out rather than computed with PathEscape
	eGuild   = "g%2F1"
	eUser    = "a%2Fb"
	eFact    = "f%3F%23%25x"
	eEpisode = "e%20p%2F1"
	ePerson  = "/v1/memory/discord-people/" + eGuild + "/" + eUser
)

func TestBearerHeaderSent(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		reply(w, 200, api.Catalog{SchemaVersion: 1, People: 3})
	})
	cat, err := f.client(t).Catalog(context.Background())
	if err != nil {
		t.Fatalf("Catalog: %v", err)
	}
	if cat.People != 3 {
		t.Errorf("People = %d, want 3", cat.People)
	}
	got := f.calls()
	if len(got) != 1 || got[0].Auth != "Bearer "+testBearer {
		t.Fatalf("Authorization = %q, want the bearer scheme and token", got)
	}
}

func TestMethodsHitTheirRoutes(t *testing.T) {
	exp := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	body := "likes tea"
	tests := []struct {
		name      string
		invoke    func(ctx context.Context, c *Client) (any, error)
		method    string
		path      string
		query     url.Values
		status    int
		answer    any
		wantBody  map[string]any // top-level JSON fields the request body must hold
		wantValue any
	}{
		{
			name: "propose",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.Propose(ctx, api.ProposalRequest{ProposalID: "p1", Fact: api.FactInput{
					Subject: api.Subject{GuildID: hGuild, UserID: hUser}, Kind: api.KindPreference, Body: body,
					Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9}})
			},
			method: "POST", path: "/v1/memory/discord-people/proposals",
			status: 201, answer: api.ProposalResponse{SchemaVersion: 1, Fact: &api.Fact{FactID: "f1", Body: body}},
			wantBody:  map[string]any{"schemaVersion": 1.0, "proposalId": "p1"},
			wantValue: api.ProposalResponse{SchemaVersion: 1, Fact: &api.Fact{FactID: "f1", Body: body}},
		},
		{
			name: "recall",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.Recall(ctx, hGuild, hUser, api.RecallQuery{ChannelID: "c1", Query: "tea & cake", Limit: 5})
			},
			method: "GET", path: ePerson,
			query:  url.Values{"channelId": {"c1"}, "query": {"tea & cake"}, "limit": {"5"}},
			status: 200, answer: api.RecallResponse{SchemaVersion: 1, Total: 1, Facts: []api.Fact{{FactID: "f1"}}},
			wantValue: api.RecallResponse{SchemaVersion: 1, Total: 1, Facts: []api.Fact{{FactID: "f1"}}},
		},
		{
			name: "recall without options sends no empty parameters",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.Recall(ctx, hGuild, hUser, api.RecallQuery{})
			},
			method: "GET", path: ePerson, query: url.Values{},
			status: 200, answer: api.RecallResponse{SchemaVersion: 1},
			wantValue: api.RecallResponse{SchemaVersion: 1},
		},
		{
			name: "claim interaction",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.ClaimInteraction(ctx, "1234567890123456789")
			},
			method: "POST", path: "/v1/memory/interactions/1234567890123456789/claim",
			status: 201, wantValue: true,
		},
		{
			name: "claim interaction already claimed",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.ClaimInteraction(ctx, "1234567890123456789")
			},
			method: "POST", path: "/v1/memory/interactions/1234567890123456789/claim",
			status: 409, answer: api.Error{Code: "already_claimed", Message: "This interaction was already claimed."},
			wantValue: false,
		},
		{
			name: "mine",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.Mine(ctx, hGuild, hUser, "u9")
			},
			method: "GET", path: ePerson + "/mine", query: url.Values{"requesterUserId": {"u9"}},
			status: 200, answer: api.RecallResponse{Total: 2, Capacity: 128},
			wantValue: api.RecallResponse{Total: 2, Capacity: 128},
		},
		{
			name: "forget by requester",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.Forget(ctx, hGuild, hUser, hFact, "u9")
			},
			method: "DELETE", path: ePerson + "/" + eFact, query: url.Values{"requesterUserId": {"u9"}},
			status: 204,
		},
		{
			name: "forget by operator omits requester",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.Forget(ctx, hGuild, hUser, hFact, "")
			},
			method: "DELETE", path: ePerson + "/" + eFact, query: url.Values{},
			status: 204,
		},
		{
			name: "voice briefing",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.VoiceBriefing(ctx, api.BriefingRequest{GuildID: "1", ChannelID: "2"})
			},
			method: "POST", path: "/v1/discord/voice-briefing",
			status: 200, answer: api.BriefingResponse{SchemaVersion: 1, Briefing: "b", Counts: api.BriefingCounts{Facts: 2}},
			wantBody:  map[string]any{"schemaVersion": 1.0, "guildId": "1", "channelId": "2", "consentedUserIds": []any{}},
			wantValue: api.BriefingResponse{SchemaVersion: 1, Briefing: "b", Counts: api.BriefingCounts{Facts: 2}},
		},
		{
			name:   "catalog",
			invoke: func(ctx context.Context, c *Client) (any, error) { return c.Catalog(ctx) },
			method: "GET", path: "/v1/memory",
			status: 200, answer: api.Catalog{RingCapacity: 128, RetainedCapacity: 1024},
			wantValue: api.Catalog{RingCapacity: 128, RetainedCapacity: 1024},
		},
		{
			name:   "people",
			invoke: func(ctx context.Context, c *Client) (any, error) { return c.People(ctx, "cur/1", 50) },
			method: "GET", path: "/v1/memory/discord-people", query: url.Values{"cursor": {"cur/1"}, "limit": {"50"}},
			status: 200, answer: api.PeopleResponse{Total: 1, NextCursor: "n"},
			wantValue: api.PeopleResponse{Total: 1, NextCursor: "n"},
		},
		{
			name:   "export",
			invoke: func(ctx context.Context, c *Client) (any, error) { return c.Export(ctx, hGuild, hUser) },
			method: "GET", path: ePerson + "/export",
			status: 200, answer: api.RecallResponse{Total: 4},
			wantValue: api.RecallResponse{Total: 4},
		},
		{
			name: "edit fact",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.EditFact(ctx, hGuild, hUser, hFact, api.FactPatch{Body: &body, ExpiresAt: api.OptionalTime{Set: true}})
			},
			method: "PATCH", path: ePerson + "/" + eFact,
			status: 200, answer: api.FactResponse{SchemaVersion: 1, Fact: api.Fact{FactID: "f1", ExpiresAt: &exp}},
			wantBody:  map[string]any{"body": body, "expiresAt": nil},
			wantValue: api.Fact{FactID: "f1", ExpiresAt: &exp},
		},
		{
			name:   "forget person",
			invoke: func(ctx context.Context, c *Client) (any, error) { return c.ForgetPerson(ctx, hGuild, hUser) },
			method: "DELETE", path: ePerson,
			status: 200, answer: api.ForgetPersonResponse{Removed: []string{"f1", "f2"}},
			wantValue: api.ForgetPersonResponse{Removed: []string{"f1", "f2"}},
		},
		{
			name: "record episode",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				return c.RecordEpisode(ctx, api.EpisodeRequest{Lane: api.LaneDiscordPresence, Room: "r", Summary: "s", OccurredAt: exp})
			},
			method: "POST", path: "/v1/memory/captain-episodes",
			status: 201, answer: api.EpisodeResponse{Episode: api.Episode{EpisodeID: "e1"}, Retained: true},
			wantBody:  map[string]any{"schemaVersion": 1.0, "lane": string(api.LaneDiscordPresence), "room": "r"},
			wantValue: api.EpisodeResponse{Episode: api.Episode{EpisodeID: "e1"}, Retained: true},
		},
		{
			name:   "episodes search",
			invoke: func(ctx context.Context, c *Client) (any, error) { return c.Episodes(ctx, "dock fire", 3) },
			method: "GET", path: "/v1/memory/captain-episodes", query: url.Values{"q": {"dock fire"}, "limit": {"3"}},
			status: 200, answer: api.Card{Card: "card", Count: 1},
			wantValue: api.Card{Card: "card", Count: 1},
		},
		{
			name:   "episodes card",
			invoke: func(ctx context.Context, c *Client) (any, error) { return c.Episodes(ctx, "", 0) },
			method: "GET", path: "/v1/memory/captain-episodes", query: url.Values{},
			status: 200, answer: api.Card{Card: "card", Count: 8},
			wantValue: api.Card{Card: "card", Count: 8},
		},
		{
			name: "edit episode",
			invoke: func(ctx context.Context, c *Client) (any, error) {
				keep := true
				return c.EditEpisode(ctx, hEpisode, api.EpisodePatch{Retained: &keep})
			},
			method: "PATCH", path: "/v1/memory/captain-episodes/" + eEpisode,
			status: 200, answer: api.Episode{EpisodeID: "e1", Retained: true},
			wantBody:  map[string]any{"retained": true},
			wantValue: api.Episode{EpisodeID: "e1", Retained: true},
		},
		{
			name:   "forget episode",
			invoke: func(ctx context.Context, c *Client) (any, error) { return nil, c.ForgetEpisode(ctx, hEpisode) },
			method: "DELETE", path: "/v1/memory/captain-episodes/" + eEpisode,
			status: 204,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { reply(w, tt.status, tt.answer) })
			got, err := tt.invoke(context.Background(), f.client(t))
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			reqs := f.calls()
			if len(reqs) != 1 {
				t.Fatalf("service saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.method || r.Path != tt.path {
				t.Errorf("request = %s %s, want %s %s", r.Method, r.Path, tt.method, tt.path)
			}
			if tt.query != nil {
				q, err := url.ParseQuery(r.RawQuery)
				if err != nil {
					t.Fatalf("query %q: %v", r.RawQuery, err)
				}
				if !reflect.DeepEqual(q, tt.query) {
					t.Errorf("query = %v, want %v", q, tt.query)
				}
			}
			if tt.wantBody != nil {
				if r.ContentType != "application/json" {
					t.Errorf("Content-Type = %q", r.ContentType)
				}
				var sent map[string]any
				if err := json.Unmarshal(r.Body, &sent); err != nil {
					t.Fatalf("request body is not JSON: %v", err)
				}
				for k, want := range tt.wantBody {
					if v, ok := sent[k]; !ok || !reflect.DeepEqual(v, want) {
						t.Errorf("body[%q] = %#v (present %v), want %#v", k, v, ok, want)
					}
				}
			} else if len(r.Body) != 0 {
				t.Errorf("unexpected request body %q", r.Body)
			}
			if tt.wantValue != nil && !reflect.DeepEqual(got, tt.wantValue) {
				t.Errorf("answer = %+v, want %+v", got, tt.wantValue)
			}
		})
	}
}

func TestProposeDecodesNewAndReplay(t *testing.T) {
	for _, tt := range []struct {
		status       int
		wantReplayed bool
	}{{201, false}, {200, true}} {
		f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			// As the service does: a replay answers 200 and says so in the body.
			reply(w, tt.status, map[string]any{"schemaVersion": 1, "fact": map[string]any{"factId": "f7", "body": "x"},
				"superseded": true, "evicted": 2, "replayed": tt.wantReplayed})
		})
		got, err := f.client(t).Propose(context.Background(), api.ProposalRequest{ProposalID: "p"})
		if err != nil {
			t.Fatalf("%d: %v", tt.status, err)
		}
		if got.Fact == nil || got.Fact.FactID != "f7" || !got.Superseded || got.Evicted != 2 || got.Replayed != tt.wantReplayed {
			t.Errorf("%d: got %+v", tt.status, got)
		}
	}
}

func TestEditEpisodeDecodesTheEpisode(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		reply(w, 200, api.Episode{EpisodeID: "e2", Summary: "s"})
	})
	got, err := f.client(t).EditEpisode(context.Background(), "e2", api.EpisodePatch{})
	if err != nil || got.EpisodeID != "e2" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestErrorStatusesMapToKinds(t *testing.T) {
	tests := []struct {
		status int
		kind   Kind
	}{
		{400, KindInvalid}, {401, KindUnauthorized}, {403, KindForbidden}, {404, KindNotFound},
		{409, KindConflict}, {413, KindInvalid}, {422, KindInvalid}, {429, KindUnavailable},
		{500, KindInternal}, {501, KindInternal}, {502, KindUnavailable}, {503, KindUnavailable},
		{504, KindUnavailable}, {418, KindUnexpected}, {307, KindUnexpected},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				reply(w, tt.status, api.Error{Code: "some_code", Message: "A sentence for a person."})
			})
			_, err := f.client(t, WithRetries(0)).Recall(context.Background(), "g", "u", api.RecallQuery{ChannelID: "c"})
			e, ok := AsError(err)
			if !ok {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Kind != tt.kind || e.Status != tt.status || e.Code != "some_code" || e.Message != "A sentence for a person." {
				t.Errorf("got kind=%v status=%d code=%q message=%q", e.Kind, e.Status, e.Code, e.Message)
			}
			if !IsKind(err, tt.kind) {
				t.Errorf("IsKind(%v) = false", tt.kind)
			}
		})
	}
}

func TestNonJSONErrorBodyGivesGenericMessage(t *testing.T) {
	for _, tt := range []struct {
		name, contentType, body string
		status                  int
		kind                    Kind
	}{
		{"html gateway page", "text/html", "<html><body>Bad Gateway</body></html>", 502, KindUnavailable},
		{"plain text", "text/plain", "internal error", 500, KindInternal},
		{"empty body", "", "", 404, KindNotFound},
		{"json without fields", "application/json", `{"detail":"x"}`, 409, KindConflict},
		{"code with a foreign shape", "application/json", `{"error":"Not Snake Case!","message":"m"}`, 400, KindInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, replyRaw(tt.status, tt.contentType, tt.body))
			err := f.client(t).Forget(context.Background(), "g", "u", "f", "")
			e, ok := AsError(err)
			if !ok || e.Kind != tt.kind || e.Status != tt.status || e.Code != "" || e.Message == "" {
				t.Fatalf("got %#v", err)
			}
		})
	}
}

func TestUndecodableSuccessIsUnexpected(t *testing.T) {
	f := newFake(t, replyRaw(200, "text/html", "<html>a login page</html>"))
	_, err := f.client(t).Catalog(context.Background())
	if !IsKind(err, KindUnexpected) {
		t.Fatalf("err = %v, want unexpected", err)
	}
	if n := len(f.calls()); n != 1 {
		t.Errorf("a bad 2xx body was retried: %d calls", n)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	target := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { reply(w, 200, api.Catalog{}) })
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, target.srv.URL+"/v1/memory", http.StatusTemporaryRedirect)
	})
	_, err := f.client(t).Catalog(context.Background())
	if !IsKind(err, KindUnexpected) {
		t.Fatalf("err = %v, want unexpected", err)
	}
	if n := len(target.calls()); n != 0 {
		t.Fatalf("redirect target saw %d requests; the bearer must not follow a redirect", n)
	}
}

func TestInvalidIDsRefusedBeforeSending(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { reply(w, 200, map[string]any{}) })
	c := f.client(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"recall empty guild": func() error { _, err := c.Recall(ctx, "", "u", api.RecallQuery{}); return err },
		"mine dot user":      func() error { _, err := c.Mine(ctx, "g", ".", "u"); return err },
		"forget dotdot fact": func() error { return c.Forget(ctx, "g", "u", "..", "") },
		"export dotdot user": func() error { _, err := c.Export(ctx, "g", ".."); return err },
		"edit fact empty":    func() error { _, err := c.EditFact(ctx, "g", "u", "", api.FactPatch{}); return err },
		"forget person dot":  func() error { _, err := c.ForgetPerson(ctx, ".", "u"); return err },
		"edit episode empty": func() error { _, err := c.EditEpisode(ctx, "", api.EpisodePatch{}); return err },
		"forget episode dot": func() error { return c.ForgetEpisode(ctx, "..") },
	}
	for name, call := range calls {
		err := call()
		e, ok := AsError(err)
		if !ok || e.Kind != KindInvalid || e.Status != 0 || e.Code != "invalid_id" || e.Attempts != 0 {
			t.Errorf("%s: got %#v", name, err)
		}
	}
	if n := len(f.calls()); n != 0 {
		t.Errorf("service saw %d requests, want 0", n)
	}
}

func TestNewValidates(t *testing.T) {
	secretURL := "http://user:pw-SECRET@127.0.0.1:4310"
	tests := []struct{ name, url, bearer string }{
		{"empty url", "", testBearer},
		{"no scheme", "127.0.0.1:4310", testBearer},
		{"ftp scheme", "ftp://127.0.0.1", testBearer},
		{"credentials in url", secretURL, testBearer},
		{"query in url", "http://127.0.0.1:4310/?x=1", testBearer},
		{"unparsable url", "http://[::1", testBearer},
		{"empty bearer", "http://127.0.0.1:4310", ""},
		{"bearer with newline", "http://127.0.0.1:4310", testBearer + "\nX-Evil: 1"},
		{"bearer with space", "http://127.0.0.1:4310", "two " + testBearer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.url, tt.bearer)
			if err == nil || c != nil {
				t.Fatalf("New accepted it")
			}
			if strings.Contains(err.Error(), testBearer) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error quotes a secret: %q", err)
			}
		})
	}
	for _, opt := range []Option{WithTimeout(-1), WithAttemptTimeout(-1), WithRetries(-1),
		WithHTTPClient(nil), WithTransport(nil), WithLogger(nil)} {
		if _, err := New("http://127.0.0.1:4310", testBearer, opt); err == nil {
			t.Errorf("New accepted a bad option")
		}
	}
}

func TestBaseURLPathPrefixKept(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { reply(w, 200, api.Catalog{}) })
	c, err := New(f.srv.URL+"/memory/", testBearer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Catalog(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.calls()[0].Path; got != "/memory/v1/memory" {
		t.Errorf("path = %q", got)
	}
}

func TestCustomHTTPClientIsNotModified(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) { reply(w, 200, api.Catalog{}) })
	hc := &http.Client{}
	c := f.client(t, WithHTTPClient(hc))
	if _, err := c.Catalog(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hc.Transport != nil || hc.CheckRedirect != nil {
		t.Errorf("the caller's http.Client was modified")
	}
}

func TestHelpers(t *testing.T) {
	base := &Error{Op: "recall", Kind: KindTimeout, Message: "m"}
	wrapped := fmtWrap(base)
	if !IsKind(wrapped, KindTimeout) || KindOf(wrapped) != KindTimeout || !downOrSlow(wrapped) {
		t.Errorf("helpers do not look through wrapping")
	}
	if IsKind(nil, KindUnknown) || KindOf(nil) != KindUnknown || downOrSlow(nil) {
		t.Errorf("nil error misclassified")
	}
	if downOrSlow(&Error{Kind: KindForbidden}) {
		t.Errorf("forbidden is not unreachable")
	}
	for k := KindUnknown; k <= KindUnexpected; k++ {
		if s := k.String(); s == "" || strings.HasPrefix(s, "kind(") {
			t.Errorf("kind %d has no name", int(k))
		}
	}
	if got := Kind(99).String(); got != "kind(99)" {
		t.Errorf("Kind(99) = %q", got)
	}
	pauses := newBackoff()
	for i, want := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 450 * time.Millisecond, time.Second, time.Second} {
		if got := pauses.NextBackOff(); got != want {
			t.Errorf("pause %d = %v, want %v", i+1, got, want)
		}
	}
}

// TestClaimInteractionFailsAndIsNotRetried: a claim the service could not
// make is an error, sent once (a retry of a claim whose answer was lost
// would refuse the interaction that made it); an id that is not a
// snowflake is refused before sending.
func TestClaimInteractionFailsAndIsNotRetried(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		reply(w, 503, api.Error{Code: "store_unavailable", Message: "The memory database could not be reached."})
	})
	claimed, err := f.client(t).ClaimInteraction(context.Background(), "42")
	if claimed || KindOf(err) != KindUnavailable || len(f.calls()) != 1 {
		t.Fatalf("claimed %v, %v after %d requests; want an unavailable error after 1", claimed, err, len(f.calls()))
	}
	claimed, err = f.client(t).ClaimInteraction(context.Background(), "12/../34")
	if claimed || KindOf(err) != KindInvalid || len(f.calls()) != 1 {
		t.Fatalf("a non-snowflake: %v, %v, %d requests", claimed, err, len(f.calls()))
	}
}

// TestSourceMessageIDRoundTrip: a fact's source message id goes out in
// the proposal (on every attempt: a retry after 503 must be the same
// proposal, or the service answers 409) and comes back in the propose,
// recall and mine answers; the client copies api types and must drop
// nothing.
func TestSourceMessageIDRoundTrip(t *testing.T) {
	const msg = "1300000000000000077"
	stored := api.Fact{FactID: "f1", Body: "plays bass", Provenance: api.Provenance{ProposerUserID: "21", ChannelID: "30", SourceMessageID: msg}}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case n == 1:
			reply(w, 503, api.Error{Code: "unavailable", Message: "The memory service is starting."})
		case r.Method == http.MethodPost:
			reply(w, 201, api.ProposalResponse{SchemaVersion: 1, Fact: &stored})
		default:
			reply(w, 200, api.RecallResponse{SchemaVersion: 1, Total: 1, Facts: []api.Fact{stored}})
		}
	})
	c := f.client(t)
	ctx := context.Background()
	got, err := c.Propose(ctx, api.ProposalRequest{ProposalID: "p1", Fact: api.FactInput{Body: "plays bass",
		Provenance: api.Provenance{ProposerUserID: "21", ChannelID: "30", SourceMessageID: msg}}})
	if err != nil || got.Fact == nil || got.Fact.Provenance.SourceMessageID != msg {
		t.Fatalf("Propose: %+v, %v", got.Fact, err)
	}
	calls := f.calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %d, want 2 (a 503, then the retry)", len(calls))
	}
	for i, call := range calls {
		var sent api.ProposalRequest
		if err := json.Unmarshal(call.Body, &sent); err != nil || sent.Fact.Provenance.SourceMessageID != msg {
			t.Errorf("attempt %d sent %s (%v)", i+1, call.Body, err)
		}
	}
	recalled, err := c.Recall(ctx, "10", "20", api.RecallQuery{ChannelID: "30"})
	if err != nil || len(recalled.Facts) != 1 || recalled.Facts[0].Provenance.SourceMessageID != msg {
		t.Errorf("Recall: %+v, %v", recalled, err)
	}
	mine, err := c.Mine(ctx, "10", "20", "20")
	if err != nil || len(mine.Facts) != 1 || mine.Facts[0].Provenance.SourceMessageID != msg {
		t.Errorf("Mine: %+v, %v", mine, err)
	}
}
