package memory

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/personfiles"
)

// Issue 10: what an adversarial review broke on the memory service. One test
// (or table) per item; each failed on main before its fix.

func privateFact(proposalID, guild, user, body string) api.ProposalRequest {
	req := fact(proposalID, guild, user, "", "", body)
	req.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	return req
}

func (h *harness) export(guild, user string) api.RecallResponse {
	h.t.Helper()
	var exp api.RecallResponse
	r := h.do(op, "GET", "/v1/memory/discord-people/"+guild+"/"+user+"/export", nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("export: %d %s", r.status, r.body)
	}
	r.decode(h.t, &exp)
	return exp
}

// Item 1: a Discord proposal at the bound evicts the oldest fact the Discord
// lanes can see; the operator's older private note survives and the answer
// counts only the visible fact it evicted. (Since the hardening issue's item
// 8 the note is outside the visible bound altogether: the bound is reached
// at 128 visible facts, and the 129th evicts.)
func TestDiscordEvictionSparesOperatorPrivate(t *testing.T) {
	h := newHarness(t)
	h.propose(op, privateFact("hidden", "10", "20", "operator-only note"))
	h.advance(time.Second)
	for i := range 129 {
		resp := h.propose(txt, fact(fmt.Sprintf("p%03d", i), "10", "20", "20", "30", fmt.Sprintf("fact number %03d", i)))
		want := 0
		if i == 128 {
			want = 1
		}
		if resp.Evicted != want {
			t.Fatalf("proposal %d evicted %d, want %d", i, resp.Evicted, want)
		}
		h.advance(time.Second)
	}
	exp := h.export("10", "20")
	if exp.Total != 129 {
		t.Fatalf("export holds %d facts, want 129", exp.Total)
	}
	bodies := map[string]bool{}
	for _, f := range exp.Facts {
		bodies[f.Body] = true
	}
	if !bodies["operator-only note"] {
		t.Fatal("a Discord proposal evicted the operator's private note")
	}
	if bodies["fact number 000"] || !bodies["fact number 001"] || !bodies["fact number 128"] {
		t.Fatal("the oldest visible fact was not the one evicted")
	}
	var mine api.RecallResponse
	h.do(txt, "GET", "/v1/memory/discord-people/10/20/mine?requesterUserId=20", nil).decode(t, &mine)
	if mine.Total != 128 {
		t.Fatalf("the subject's view counts %d facts, want the 128 visible ones", mine.Total)
	}
}

// Item 1, revisited by the hardening issue's item 8: a person whose 128
// facts are all operator-only has room for every Discord proposal (the
// notes are bounded apart), so nothing is refused or evicted and the
// answer names nothing hidden. The operator's visible fact evicts nothing
// either.
func TestDiscordProposalOverHiddenNotesIsStored(t *testing.T) {
	h := newHarness(t)
	for i := range 128 {
		h.propose(op, privateFact(fmt.Sprintf("h%03d", i), "10", "20", fmt.Sprintf("secret note %03d", i)))
		h.advance(time.Second)
	}
	for _, token := range []string{txt, voice} {
		r := h.do(token, "POST", "/v1/memory/discord-people/proposals", fact("d1-"+token[:4], "10", "20", "20", "30", "likes tea"))
		var resp api.ProposalResponse
		r.decode(t, &resp)
		if r.status != http.StatusCreated || resp.Evicted != 0 || strings.Contains(string(r.body), "secret") {
			t.Fatalf("Discord proposal over hidden notes: %d %s", r.status, r.body)
		}
	}
	if resp := h.propose(op, fact("o1", "10", "20", "20", "30", "operator fact")); resp.Evicted != 0 {
		t.Fatalf("operator's visible proposal over hidden notes evicted %d", resp.Evicted)
	}
	if exp := h.export("10", "20"); exp.Total != 131 {
		t.Fatalf("export holds %d facts, want 131", exp.Total)
	}
}

// Item 1: a Discord supersede naming a hidden fact answers exactly as for a
// fact that does not exist, and replaces nothing.
func TestDiscordSupersedeOfHiddenFactAnswersAsMissing(t *testing.T) {
	h := newHarness(t)
	hidden := h.propose(op, privateFact("hidden", "10", "20", "operator-only note"))
	try := func(id, supersedes string) api.ProposalResponse {
		req := fact(id, "10", "20", "20", "30", "corrected "+id)
		req.Fact.SupersedesFactID = supersedes
		return h.propose(txt, req)
	}
	missing := try("s1", "fzzzzzzz")
	got := try("s2", hidden.Fact.FactID)
	if got.Superseded || got.Reason != missing.Reason {
		t.Fatalf("supersede of a hidden fact answered %+v; a missing one %q", got, missing.Reason)
	}
	exp := h.export("10", "20")
	if exp.Total != 3 {
		t.Fatalf("export holds %d facts, want 3", exp.Total)
	}
}

// Item 3: a retried proposal whose fact the operator has since made
// operator_private answers nothing of that fact to a Discord bearer.
func TestReplayAfterOperatorHidesFactRevealsNothing(t *testing.T) {
	h := newHarness(t)
	req := fact("r1", "10", "20", "20", "30", "likes tea")
	first := h.propose(txt, req)
	patch := `{"body":"operator rewrote this","visibility":{"scope":"operator_private"}}`
	if r := h.do(op, "PATCH", "/v1/memory/discord-people/10/20/"+first.Fact.FactID, patch); r.status != 200 {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
	if r.status != http.StatusOK {
		t.Fatalf("replay: %d %s", r.status, r.body)
	}
	var resp api.ProposalResponse
	r.decode(t, &resp)
	if resp.Fact != nil || !resp.Replayed || resp.Reason == "" {
		t.Fatalf("replay answered %s", r.body)
	}
	for _, bad := range []string{"operator rewrote", "operator_private", first.Fact.FactID} {
		if strings.Contains(string(r.body), bad) {
			t.Fatalf("replay reveals %q: %s", bad, r.body)
		}
	}
	if exp := h.export("10", "20"); exp.Total != 1 || exp.Facts[0].Body != "operator rewrote this" {
		t.Fatalf("the replay changed the stored fact: %+v", exp.Facts)
	}
}

// Item 9: concurrent readiness probes all answer 200.
func TestReadyzUnderConcurrentProbes(t *testing.T) {
	h := newHarness(t)
	client := testClient(t)
	const probes = 64
	var wg sync.WaitGroup
	statuses := make([]int, probes)
	for round := range 5 {
		start := make(chan struct{})
		for i := range probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp, err := client.Get(h.url + "/readyz")
				if err != nil {
					statuses[i] = -1
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}()
		}
		close(start)
		wg.Wait()
		for i, s := range statuses {
			if s != http.StatusOK {
				t.Fatalf("round %d probe %d answered %d", round, i, s)
			}
		}
	}
	entries, _ := os.ReadDir(h.dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("a probe left %s behind", e.Name())
		}
	}
}

// Item 10: the service bounds a recall query.
func TestRecallQueryLengthIsBounded(t *testing.T) {
	h := newHarness(t)
	h.propose(txt, fact("q1", "10", "20", "20", "30", "likes tea"))
	ok := strings.Repeat("é", api.MaxRecallQuery)
	if r := h.do(txt, "GET", "/v1/memory/discord-people/10/20?channelId=30&query="+ok, nil); r.status != 200 {
		t.Fatalf("a %d-character query: %d %s", api.MaxRecallQuery, r.status, r.body)
	}
	for _, q := range []string{ok + "a", strings.Repeat("tea ", 3500)} {
		r := h.do(txt, "GET", "/v1/memory/discord-people/10/20?channelId=30&query="+strings.ReplaceAll(q, " ", "+"), nil)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "invalid_parameter" {
			t.Fatalf("a %d-character query: %d %s", utf8.RuneCountInString(q), r.status, r.body)
		}
		var e api.Error
		r.decode(t, &e)
		if !strings.Contains(e.Message, strconv.Itoa(api.MaxRecallQuery)) || strings.Contains(e.Message, "tea") {
			t.Fatalf("the refusal must name the limit and not echo the query: %q", e.Message)
		}
	}
}

// Item 11: a 401 names the credential and nothing of the server's files.
func TestUnauthorizedRevealsNoDataPath(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/v1/memory", "/v1/discord/voice-briefing", "/v1/memory/captain-episodes"} {
		method := "GET"
		if strings.Contains(path, "briefing") {
			method = "POST"
		}
		for _, token := range []string{"", "not-a-token-at-all-xx"} {
			r := h.do(token, method, path, nil)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("%s %s: %d", method, path, r.status)
			}
			var e api.Error
			r.decode(t, &e)
			if !strings.Contains(e.Message, "CLANKIE_") || !strings.Contains(e.Message, "Authorization: Bearer") {
				t.Fatalf("401 does not name the credential: %q", e.Message)
			}
			for _, bad := range []string{h.dir, "/", BearersFile, "CLANKIE_MEMORY_DIR"} {
				if strings.Contains(strings.ReplaceAll(e.Message, "Authorization: Bearer", ""), bad) {
					t.Fatalf("401 reveals %q of the filesystem: %q", bad, e.Message)
				}
			}
		}
	}
}

// Item 12: forget-person removes the person's copies moved aside as corrupt.
func TestForgetPersonRemovesCorruptCopies(t *testing.T) {
	fileOnly(t)
	h := newHarness(t)
	subject := api.Subject{GuildID: "10", UserID: "20"}
	name := personfiles.FileName(subject)
	dir := filepath.Join(h.dir, personfiles.Dir)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"facts":[{"body":"half-written secret`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.recall(txt, "10", "20", "?channelId=30") // moves the unreadable file aside
	h.advance(2 * time.Second)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(`not json either`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.recall(txt, "10", "20", "?channelId=30")
	other := personfiles.FileName(api.Subject{GuildID: "10", UserID: "2"})
	if err := os.WriteFile(filepath.Join(dir, other+".corrupt-1"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.propose(txt, fact("c1", "10", "20", "20", "30", "a fresh fact"))
	corrupt := func() []string {
		var out []string
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), name) {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if got := corrupt(); len(got) != 3 {
		t.Fatalf("before forgetting: %v, want the file and two corrupt copies", got)
	}
	r := h.do(op, "DELETE", "/v1/memory/discord-people/10/20", nil)
	if r.status != 200 {
		t.Fatalf("forget person: %d %s", r.status, r.body)
	}
	if got := corrupt(); len(got) != 0 {
		t.Fatalf("forget-person left %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, other+".corrupt-1")); err != nil {
		t.Fatalf("forget-person removed another person's file: %v", err)
	}
}

// Item 6 (memory side): tokens read from bearers.json are checked like the
// variables' (length, no whitespace) and the four lanes' tokens must differ;
// the refusal names the file and the lane, never a token.
func TestBearersFileTokensAreCheckedAtStart(t *testing.T) {
	good := map[api.Lane]string{
		api.LaneOperator:        "stored-operator-token-0001",
		api.LaneDiscordPresence: "stored-text-token-00000002",
		api.LaneDiscordVoice:    "stored-voice-token-0000003",
		api.LaneGameplay:        "stored-gameplay-token-0004",
	}
	with := func(lane api.Lane, tok string) map[api.Lane]string {
		m := map[api.Lane]string{}
		for k, v := range good {
			m[k] = v
		}
		m[lane] = tok
		return m
	}
	for _, tc := range []struct {
		name   string
		stored map[api.Lane]string
		env    config.Tokens
		want   []string // in the error
		secret string   // never in the error
	}{
		{"short", with(api.LaneDiscordVoice, "short-tok"), config.Tokens{}, []string{BearersFile, string(api.LaneDiscordVoice), "16"}, "short-tok"},
		{"whitespace", with(api.LaneGameplay, "has a space in the token"), config.Tokens{}, []string{BearersFile, string(api.LaneGameplay)}, "has a space"},
		{"text equals voice", with(api.LaneDiscordVoice, good[api.LaneDiscordPresence]), config.Tokens{}, []string{BearersFile, string(api.LaneDiscordPresence), string(api.LaneDiscordVoice)}, good[api.LaneDiscordPresence]},
		{"stored equals a variable", good, config.Tokens{OperatorToken: config.OperatorToken{Operator: good[api.LaneDiscordPresence]}}, []string{BearersFile, "CLANKIE_OPERATOR_TOKEN", string(api.LaneDiscordPresence)}, good[api.LaneDiscordPresence]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "memory")
			root, err := openRootForTest(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			b, _ := json.Marshal(tc.stored)
			if err := os.WriteFile(filepath.Join(dir, BearersFile), b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err = LoadBearers(root, tc.env)
			if err == nil {
				t.Fatal("started with unusable tokens in bearers.json")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error %q echoes the token", err)
			}
		})
	}
	// The same file with good tokens loads.
	dir := filepath.Join(t.TempDir(), "memory")
	root, err := openRootForTest(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	b, _ := json.Marshal(good)
	os.WriteFile(filepath.Join(dir, BearersFile), b, 0o600)
	if _, _, err := LoadBearers(root, config.Tokens{}); err != nil {
		t.Fatal(err)
	}
}

// The minimum length of a stored token is the configuration's.
func TestBearersFileMinimumMatchesConfig(t *testing.T) {
	short, ok := strings.Repeat("a", minTokenLength-1), strings.Repeat("a", minTokenLength)
	if (config.Tokens{OperatorToken: config.OperatorToken{Operator: short}}).Validate() == nil || (config.Tokens{OperatorToken: config.OperatorToken{Operator: ok}}).Validate() != nil {
		t.Fatalf("config's token minimum is no longer %d; keep memory's minTokenLength in step", minTokenLength)
	}
}

// Info: an episodeId already held by a note the recording lane cannot see
// answers the same 409 as any reused id, without echoing the id.
func TestEpisodeIDCollisionEchoesNothing(t *testing.T) {
	h := newHarness(t)
	at := time.Now().UTC()
	r := h.do(op, "POST", "/v1/memory/captain-episodes", api.EpisodeRequest{SchemaVersion: 1, EpisodeID: "op-secret-note-7",
		Lane: api.LaneOperator, Room: "console", Summary: "private", OccurredAt: at})
	if r.status != http.StatusCreated {
		t.Fatalf("operator record: %d %s", r.status, r.body)
	}
	own := api.EpisodeRequest{SchemaVersion: 1, EpisodeID: "presence-note-1", Lane: api.LaneDiscordPresence, Room: "r", Summary: "a", OccurredAt: at}
	if r := h.do(txt, "POST", "/v1/memory/captain-episodes", own); r.status != http.StatusCreated {
		t.Fatalf("record: %d %s", r.status, r.body)
	}
	own.Summary = "b"
	visible := h.do(txt, "POST", "/v1/memory/captain-episodes", own)
	hidden := h.do(txt, "POST", "/v1/memory/captain-episodes", api.EpisodeRequest{SchemaVersion: 1, EpisodeID: "op-secret-note-7",
		Lane: api.LaneDiscordPresence, Room: "r", Summary: "a", OccurredAt: at})
	if hidden.status != http.StatusConflict || visible.status != http.StatusConflict {
		t.Fatalf("reused ids: hidden %d, visible %d", hidden.status, visible.status)
	}
	if string(hidden.body) != string(visible.body) {
		t.Fatalf("a hidden note's id answers differently from any reused id: %s vs %s", hidden.body, visible.body)
	}
	if strings.Contains(string(hidden.body), "op-secret-note-7") {
		t.Fatalf("409 echoes the id: %s", hidden.body)
	}
}

// Info: forgetting a fact a Discord lane cannot see answers byte for byte as
// for a fact that does not exist.
func TestForgetOfHiddenFactAnswersAsMissing(t *testing.T) {
	h := newHarness(t)
	hidden := h.propose(op, privateFact("hidden", "10", "20", "operator-only note"))
	for _, requester := range []string{"20", "55"} {
		got := h.do(txt, "DELETE", "/v1/memory/discord-people/10/20/"+hidden.Fact.FactID+"?requesterUserId="+requester, nil)
		missing := h.do(txt, "DELETE", "/v1/memory/discord-people/10/20/fzzzzzzz?requesterUserId="+requester, nil)
		if got.status != http.StatusNotFound || got.status != missing.status || string(got.body) != string(missing.body) {
			t.Fatalf("hidden: %d %s; missing: %d %s", got.status, got.body, missing.status, missing.body)
		}
	}
	if h.export("10", "20").Total != 1 {
		t.Fatal("a Discord forget removed an operator-only note")
	}
}
