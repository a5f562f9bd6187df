package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory"
	"github.com/clankie/clankie/memoryclient"
)

// These tests run the operator commands through run(), as the binary does,
// against a real memory service on a temporary root. They set environment
// variables, so none of them is parallel.

// fixture is a running memory service and the clients that seed it.
type fixture struct {
	url, dir string
	op       *memoryclient.Client // operator lane
	text     *memoryclient.Client // text bridge, discord_presence lane
	secrets  []string             // must never appear in any output
}

// cleanEnv points the CLI at url and dir with no operator token in the
// environment, so it must read the minted one.
func cleanEnv(t *testing.T, url, dir string) {
	t.Helper()
	t.Setenv("CLANKIE_MEMORY_URL", url)
	t.Setenv("CLANKIE_MEMORY_DIR", dir)
	t.Setenv("CLANKIE_OPERATOR_TOKEN", "")
	t.Setenv("CLANKIE_LOG_LEVEL", "info")
	t.Setenv("CLANKIE_LOG_FORMAT", "json")
}

func startMemory(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	srv, err := memory.Start(config.Memory{Addr: "127.0.0.1:0", MemoryRoot: config.MemoryRoot{Dir: dir}, Log: config.Log{Level: "info", Format: "json"}}, zap.NewNop())
	if err != nil {
		t.Fatalf("start memory service: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("memory service stopped with %v", err)
		}
	})

	f := &fixture{url: "http://" + srv.Addr, dir: dir}
	for _, lane := range []api.Lane{api.LaneOperator, api.LaneDiscordPresence, api.LaneDiscordVoice, api.LaneGameplay} {
		tok, err := config.ResolveBearer("", dir, lane)
		if err != nil {
			t.Fatalf("minted %s token: %v", lane, err)
		}
		f.secrets = append(f.secrets, tok)
	}
	if f.op, err = memoryclient.New(f.url, f.secrets[0], memoryclient.WithTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if f.text, err = memoryclient.New(f.url, f.secrets[1], memoryclient.WithTimeout(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	cleanEnv(t, f.url, dir)
	return f
}

// run runs `clankie memory ARGS…` and fails the test if any output holds a
// secret.
func (f *fixture) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runChecked(t, f.secrets, args...)
}

func runChecked(t *testing.T, secrets []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"memory"}, args...), &out, &errb)
	for i, s := range secrets {
		if s == "" {
			continue
		}
		if strings.Contains(out.String(), s) || strings.Contains(errb.String(), s) {
			t.Fatalf("memory %s: the output holds secret #%d", strings.Join(args, " "), i)
		}
	}
	return code, out.String(), errb.String()
}

// mustRun runs and requires exit code 0.
func (f *fixture) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := f.run(t, args...)
	if code != 0 {
		t.Fatalf("memory %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// propose stores a fact through the text bridge (channel c1, proposer p1).
func (f *fixture) propose(t *testing.T, guild, user, body string, mod func(*api.FactInput)) api.Fact {
	t.Helper()
	in := api.FactInput{
		Subject:    api.Subject{GuildID: guild, UserID: user},
		Kind:       api.KindPersonFact,
		Body:       body,
		Visibility: api.Visibility{Scope: api.ScopeGuild},
		Confidence: 0.9,
		Provenance: api.Provenance{ProposerUserID: "p1", ChannelID: "c1"},
	}
	c := f.text
	if mod != nil {
		mod(&in)
		if in.Visibility.Scope == api.ScopeOperatorPrivate {
			c = f.op
		}
	}
	resp, err := c.Propose(context.Background(), api.ProposalRequest{ProposalID: fmt.Sprintf("p-%d", time.Now().UnixNano()), Fact: in})
	if err != nil || resp.Fact == nil {
		t.Fatalf("propose: %v", err)
	}
	return *resp.Fact
}

// record stores an episode through the text bridge's lane.
func (f *fixture) record(t *testing.T, room, summary string) api.Episode {
	t.Helper()
	resp, err := f.text.RecordEpisode(context.Background(), api.EpisodeRequest{
		Lane: api.LaneDiscordPresence, Room: room, Summary: summary,
		OccurredAt: time.Now().UTC(), Provenance: api.EpisodeProvenance{SelfAuthored: true},
	})
	if err != nil {
		t.Fatalf("record episode: %v", err)
	}
	return resp.Episode
}

func (f *fixture) export(t *testing.T, guild, user string) api.RecallResponse {
	t.Helper()
	r, err := f.op.Export(context.Background(), guild, user)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	return r
}

func mustMatch(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("%s: no match for %q in:\n%s", what, p, out)
		}
	}
}

func decodeJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("--json output does not parse as %T: %v\n%s", v, err, out)
	}
	return v
}

func TestStatusPrintsCatalogAndBounds(t *testing.T) {
	f := startMemory(t)
	f.propose(t, "100000000000000011", "200000000000000021", "likes tea", nil)
	f.propose(t, "100000000000000011", "200000000000000021", "plays bass", nil)
	f.propose(t, "100000000000000012", "200000000000000022", "lives by the sea", nil)
	kept := f.record(t, "#general", "helped fix the lighthouse lamp")
	f.record(t, "#general", "sang a sea shanty")
	f.mustRun(t, "episode", "keep", kept.EpisodeID)

	out := f.mustRun(t, "status")
	mustMatch(t, "status", out,
		`People\s+2\n`, `Facts\s+3\n`, `Episodes\s+2\n`,
		`unretained\s+1 of 128\b`, `retained\s+1 of 1024\b`, `headroom\s+1023\b`,
		`discord_presence\s+2\n`, `operator\s+0\n`, `gameplay\s+0\n`)
	if strings.Contains(out, "Warning") {
		t.Errorf("status warns with headroom left:\n%s", out)
	}

	c := decodeJSON[api.Catalog](t, f.mustRun(t, "status", "--json"))
	if c.People != 2 || c.Facts != 3 || c.Episodes != 2 || c.Retained != 1 || c.Unretained != 1 ||
		c.RingCapacity != 128 || c.RetainedCapacity != 1024 || c.EpisodesPerLane[api.LaneDiscordPresence] != 2 {
		t.Errorf("status --json: %+v", c)
	}
}

func TestStatusWarnsWhenNoHeadroom(t *testing.T) {
	var b bytes.Buffer
	if err := renderStatus(&b, "http://127.0.0.1:4310", api.Catalog{Episodes: 1030, Unretained: 6, RingCapacity: 128,
		Retained: 1024, RetainedCapacity: 1024, EpisodesPerLane: map[api.Lane]int{"gameplay": 1030, "future_lane": 0}}); err != nil {
		t.Fatal(err)
	}
	mustMatch(t, "status at capacity", b.String(), `retained\s+1024 of 1024`, `headroom\s+0\b`,
		`Warning: 1024 of 1024 episodes are kept`, `refused`, `future_lane\s+0\n`)
}

// columnStarts returns where each column of a tabwriter header begins.
func columnStarts(header string) []int {
	starts := []int{0}
	for i := 1; i < len(header); i++ {
		if header[i-1] == ' ' && header[i] != ' ' {
			starts = append(starts, i)
		}
	}
	return starts
}

// assertAligned checks that every row of the table starting at the header
// line has a cell starting exactly where each header column starts.
func assertAligned(t *testing.T, out, header string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, header) {
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("no table headed %q in:\n%s", header, out)
	}
	starts := columnStarts(lines[at])
	rows := 0
	for _, row := range lines[at+1:] {
		if row == "" {
			break
		}
		rows++
		for _, s := range starts[1:] {
			if len(row) <= s || row[s-1] != ' ' || row[s] == ' ' {
				t.Errorf("row %q does not line up with header %q at column %d", row, lines[at], s)
			}
		}
	}
	if rows == 0 {
		t.Errorf("table %q has no rows:\n%s", header, out)
	}
}

func TestPeopleTableAlignedJSONAndPaging(t *testing.T) {
	f := startMemory(t)
	f.propose(t, "1", "22", "short ids", nil)
	f.propose(t, "333333333333333333", "4", "a long guild id", nil)
	f.propose(t, "333333333333333333", "4", "and a second fact", nil)
	f.propose(t, "55", "666666666666666666", "a long user id", nil)

	out := f.mustRun(t, "people")
	assertAligned(t, out, "GUILD")
	mustMatch(t, "people", out, `333333333333333333\s+4\s+2\n`, `\n3 of 3 people shown`)
	if strings.Contains(out, "--cursor") {
		t.Errorf("one page prints a paging hint:\n%s", out)
	}

	all := decodeJSON[api.PeopleResponse](t, f.mustRun(t, "people", "--json"))
	if len(all.People) != 3 || all.Total != 3 || all.NextCursor != "" {
		t.Fatalf("people --json: %+v", all)
	}

	out = f.mustRun(t, "people", "--limit", "2")
	mustMatch(t, "people page 1", out, `2 of 3 people shown`, `More: clankie memory people --cursor \S+ --limit 2`)
	page := decodeJSON[api.PeopleResponse](t, f.mustRun(t, "people", "--limit", "2", "--json"))
	if len(page.People) != 2 || page.NextCursor == "" {
		t.Fatalf("people page 1 --json: %+v", page)
	}
	if !strings.Contains(out, page.NextCursor) {
		t.Errorf("the hint does not carry the next cursor %q:\n%s", page.NextCursor, out)
	}
	rest := decodeJSON[api.PeopleResponse](t, f.mustRun(t, "people", "--limit", "2", "--cursor", page.NextCursor, "--json"))
	if len(rest.People) != 1 || rest.NextCursor != "" {
		t.Fatalf("people page 2 --json: %+v", rest)
	}

	out = f.mustRun(t, "people", "--all", "--limit", "1")
	assertAligned(t, out, "GUILD")
	mustMatch(t, "people --all", out, `3 of 3 people shown`)
	if strings.Contains(out, "More:") {
		t.Errorf("--all prints a paging hint:\n%s", out)
	}
}

func TestPersonExportShowsPrivateAndMarksExpired(t *testing.T) {
	f := startMemory(t)
	expires := time.Now().Add(time.Second)
	soon := f.propose(t, "100000000000000011", "200000000000000021", "is visiting this week", func(in *api.FactInput) { in.ExpiresAt = &expires })
	private := f.propose(t, "100000000000000011", "200000000000000021", "asked not to be pinged", func(in *api.FactInput) {
		in.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	})
	long := strings.Repeat("word ", 30) + "\nsecond line"
	multi := f.propose(t, "100000000000000011", "200000000000000021", long, func(in *api.FactInput) {
		in.Kind = api.KindPreference
		in.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "c1"}
	})
	time.Sleep(time.Until(expires) + 100*time.Millisecond)

	out := f.mustRun(t, "person", "100000000000000011", "200000000000000021")
	assertAligned(t, out, "ID")
	mustMatch(t, "person", out,
		`3 of 256 facts \(1 expired, 1 operator_private\)`,
		regexp.QuoteMeta(private.FactID)+`\s+person-fact\s+operator_private\s+0\.90\s+-\s`,
		regexp.QuoteMeta(soon.FactID)+`\s+person-fact\s+guild\s+0\.90\s+expired:\d{4}-\d\d-\d\dT\d\d:\d\dZ\s`,
		regexp.QuoteMeta(multi.FactID)+`\s+preference\s+channel:c1\s`)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, multi.FactID) {
			if !strings.HasSuffix(line, "…") || strings.Contains(line, "\t") || len([]rune(line)) > 160 {
				t.Errorf("a long body is not flattened and cut: %q", line)
			}
		}
	}
	if strings.Contains(out, "second") {
		t.Errorf("the table carries a body's second line:\n%s", out)
	}

	r := decodeJSON[api.RecallResponse](t, f.mustRun(t, "person", "100000000000000011", "200000000000000021", "--json"))
	if len(r.Facts) != 3 {
		t.Fatalf("person --json: %+v", r)
	}
	for _, fact := range r.Facts {
		switch fact.FactID {
		case soon.FactID:
			if !fact.Expired {
				t.Errorf("the expired fact is not marked in --json")
			}
		case multi.FactID:
			if fact.Body != strings.TrimSpace(long) {
				t.Errorf("--json body is not whole: %q", fact.Body)
			}
		}
	}

	out = f.mustRun(t, "person", "100000000000000011", "300000000000000033")
	mustMatch(t, "person with no facts", out, `^No facts are kept about user 300000000000000033 in guild 100000000000000011\.\n$`)
}

func TestFactEditAndForget(t *testing.T) {
	f := startMemory(t)
	expires := time.Now().Add(time.Hour)
	fact := f.propose(t, "100000000000000011", "200000000000000021", "likes tea", func(in *api.FactInput) { in.ExpiresAt = &expires })
	other := f.propose(t, "100000000000000011", "200000000000000021", "plays bass", nil)

	out := f.mustRun(t, "fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--body", "likes green tea")
	mustMatch(t, "fact edit", out, `Updated fact `+regexp.QuoteMeta(fact.FactID), `likes green tea`)
	got := f.export(t, "100000000000000011", "200000000000000021")
	if body := findFact(got.Facts, fact.FactID).Body; body != "likes green tea" {
		t.Fatalf("after edit the body is %q", body)
	}

	resp := decodeJSON[api.FactResponse](t, f.mustRun(t, "fact", "edit", "100000000000000011", "200000000000000021", fact.FactID,
		"--visibility", "channel:c9", "--confidence", "0.5", "--kind", "preference", "--no-expiry", "--json"))
	if resp.Fact.Visibility != (api.Visibility{Scope: api.ScopeChannel, ChannelID: "c9"}) || resp.Fact.Confidence != 0.5 ||
		resp.Fact.Kind != api.KindPreference || resp.Fact.ExpiresAt != nil || resp.Fact.Body != "likes green tea" {
		t.Fatalf("fact edit --json: %+v", resp.Fact)
	}
	// --expires takes the slash command's forms: 2d is two days from now.
	before := time.Now().Add(48 * time.Hour)
	f.mustRun(t, "fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", "2d", "--visibility", "operator_private")
	after := time.Now().Add(48 * time.Hour)
	e := findFact(f.export(t, "100000000000000011", "200000000000000021").Facts, fact.FactID)
	if e.ExpiresAt == nil || e.ExpiresAt.Before(before.Add(-time.Second)) || e.ExpiresAt.After(after) || e.Visibility.Scope != api.ScopeOperatorPrivate {
		t.Fatalf("after --expires: %+v", e)
	}
	// A date means through that day: the table shows the date typed, not
	// the next midnight it is stored as.
	day := time.Now().UTC().AddDate(0, 0, 30).Format("2006-01-02")
	f.mustRun(t, "fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", day)
	mustMatch(t, "person after --expires DATE", f.mustRun(t, "person", "100000000000000011", "200000000000000021"),
		`(?m)^`+regexp.QuoteMeta(fact.FactID)+`\s.*\s`+day+`\s`)

	out = f.mustRun(t, "fact", "forget", "100000000000000011", "200000000000000021", fact.FactID)
	mustMatch(t, "fact forget", out, `Forgot fact `+regexp.QuoteMeta(fact.FactID))
	got = f.export(t, "100000000000000011", "200000000000000021")
	if findFact(got.Facts, fact.FactID) != nil || findFact(got.Facts, other.FactID) == nil {
		t.Fatalf("after forget: %+v", got.Facts)
	}
	ff := decodeJSON[forgottenFact](t, f.mustRun(t, "fact", "forget", "100000000000000011", "200000000000000021", other.FactID, "--json"))
	if !ff.Forgotten || ff.FactID != other.FactID {
		t.Errorf("fact forget --json: %+v", ff)
	}

	for _, args := range [][]string{
		{"fact", "forget", "100000000000000011", "200000000000000021", fact.FactID},
		{"fact", "edit", "100000000000000011", "200000000000000021", "no-such-fact", "--body", "x"},
		{"fact", "forget", "100000000000000011", "200000000000000021", "no-such-fact"},
	} {
		code, stdout, stderr := f.run(t, args...)
		if code != exitNotFound || stdout != "" || stderr != "clankie: no fact with that id is kept about this person.\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3 and the service's sentence", args, code, stdout, stderr)
		}
	}
}

func findFact(facts []api.Fact, id string) *api.Fact {
	for i := range facts {
		if facts[i].FactID == id {
			return &facts[i]
		}
	}
	return nil
}

func TestForgetPersonNeedsYes(t *testing.T) {
	f := startMemory(t)
	f.propose(t, "100000000000000011", "200000000000000021", "likes tea", nil)
	f.propose(t, "100000000000000011", "200000000000000021", "plays bass", nil)

	code, stdout, stderr := f.run(t, "forget-person", "100000000000000011", "200000000000000021")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "add --yes") && !strings.Contains(stderr, "Add --yes") ||
		!strings.Contains(stderr, "cannot be undone") {
		t.Fatalf("without --yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := len(f.export(t, "100000000000000011", "200000000000000021").Facts); n != 2 {
		t.Fatalf("a refused forget-person removed facts: %d left", n)
	}

	out := f.mustRun(t, "forget-person", "100000000000000011", "200000000000000021", "--yes")
	mustMatch(t, "forget-person", out, `Forgot user 200000000000000021 in guild 100000000000000011: 2 facts removed\.`)
	if n := len(f.export(t, "100000000000000011", "200000000000000021").Facts); n != 0 {
		t.Fatalf("after forget-person %d facts are left", n)
	}
	mustMatch(t, "status after forget-person", f.mustRun(t, "status"), `People\s+0\n`, `Facts\s+0\n`)

	f.propose(t, "100000000000000012", "200000000000000022", "one", nil)
	r := decodeJSON[api.ForgetPersonResponse](t, f.mustRun(t, "forget-person", "100000000000000012", "200000000000000022", "--yes", "--json"))
	if len(r.Removed) != 1 || r.Subject.UserID != "200000000000000022" {
		t.Errorf("forget-person --json: %+v", r)
	}
}

func TestEpisodesSearchAndEpisodeCommands(t *testing.T) {
	f := startMemory(t)
	lamp := f.record(t, "#lighthouse", "fixed the lamp during the storm")
	song := f.record(t, "#tavern", "sang a sea shanty badly")

	out := f.mustRun(t, "episodes")
	if !strings.Contains(out, lamp.EpisodeID) || !strings.Contains(out, song.EpisodeID) {
		t.Fatalf("episodes card lacks an episode:\n%s", out)
	}
	for _, args := range [][]string{
		{"episodes", "--search", "storm lamp"},
		{"episodes", "search", "storm", "lamp"},
		{"episodes", "--search", "LIGHTHOUSE", "--limit", "5"},
	} {
		out := f.mustRun(t, args...)
		if !strings.Contains(out, lamp.EpisodeID) || strings.Contains(out, song.EpisodeID) {
			t.Errorf("%v:\n%s", args, out)
		}
	}
	mustMatch(t, "no match", f.mustRun(t, "episodes", "--search", "dragon"), `^No episodes match that search\.\n$`)
	recs := decodeJSON[[]api.Episode](t, f.mustRun(t, "episodes", "--search", "shanty", "--json"))
	if len(recs) != 1 || recs[0].EpisodeID != song.EpisodeID || recs[0].Summary != song.Summary {
		t.Errorf("episodes --json: %+v", recs)
	}

	mustMatch(t, "keep", f.mustRun(t, "episode", "keep", lamp.EpisodeID), `Kept episode`, `kept\s+yes`)
	mustMatch(t, "status after keep", f.mustRun(t, "status"), `retained\s+1 of 1024`, `unretained\s+1 of 128`)
	mustMatch(t, "card after keep", f.mustRun(t, "episodes"), regexp.QuoteMeta(lamp.EpisodeID)+`, kept\)`)

	ep := decodeJSON[api.Episode](t, f.mustRun(t, "episode", "release", lamp.EpisodeID, "--json"))
	if ep.Retained || ep.EpisodeID != lamp.EpisodeID {
		t.Errorf("release --json: %+v", ep)
	}
	mustMatch(t, "status after release", f.mustRun(t, "status"), `retained\s+0 of 1024`, `unretained\s+2 of 128`)

	out = f.mustRun(t, "episode", "edit", lamp.EpisodeID, "--summary", "relit the lighthouse lamp in the storm")
	mustMatch(t, "edit", out, `Edited episode`, `summary\s+relit the lighthouse lamp`)
	mustMatch(t, "card after edit", f.mustRun(t, "episodes", "--search", "relit"), regexp.QuoteMeta(lamp.EpisodeID)+`, corrected\)`)
	ep = decodeJSON[api.Episode](t, f.mustRun(t, "episode", "edit", lamp.EpisodeID, "--visibility", "operator_private", "--json"))
	if ep.Visibility != api.EpisodeOperatorPrivate || ep.Summary != "relit the lighthouse lamp in the storm" {
		t.Errorf("edit --json: %+v", ep)
	}
	// The text bridge's lane no longer sees it; the operator still does.
	if c, err := f.text.Episodes(context.Background(), "relit", 0); err != nil || c.Count != 0 {
		t.Errorf("the text lane still sees an operator_private episode: %+v %v", c, err)
	}

	mustMatch(t, "forget", f.mustRun(t, "episode", "forget", lamp.EpisodeID), `Forgot episode `+regexp.QuoteMeta(lamp.EpisodeID))
	if out := f.mustRun(t, "episodes"); strings.Contains(out, lamp.EpisodeID) {
		t.Errorf("a forgotten episode is still on the card:\n%s", out)
	}
	fe := decodeJSON[forgottenEpisode](t, f.mustRun(t, "episode", "forget", song.EpisodeID, "--json"))
	if !fe.Forgotten || fe.EpisodeID != song.EpisodeID {
		t.Errorf("episode forget --json: %+v", fe)
	}
	mustMatch(t, "empty card", f.mustRun(t, "episodes"), `^No episodes are kept yet\.\n$`)

	for _, args := range [][]string{
		{"episode", "forget", lamp.EpisodeID},
		{"episode", "keep", "no-such-episode"},
		{"episode", "release", "no-such-episode"},
		{"episode", "edit", "no-such-episode", "--summary", "x"},
	} {
		code, stdout, stderr := f.run(t, args...)
		if code != exitNotFound || stdout != "" || !strings.Contains(stderr, "no episode has that id") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3", args, code, stdout, stderr)
		}
	}
}

// readCommands touch memory without changing it.
var readCommands = [][]string{
	{"status"},
	{"people"},
	{"person", "100000000000000011", "200000000000000021"},
	{"episodes"},
	{"episodes", "--search", "lamp"},
	{"status", "--json"},
}

func TestMissingCredentialSaysSoAndShowsNoMemory(t *testing.T) {
	dir := t.TempDir() // no bearers.json: no service ever ran here
	cleanEnv(t, "http://127.0.0.1:4310", dir)
	for _, args := range append(readCommands, []string{"fact", "forget", "1", "2", "f"}, []string{"episode", "keep", "e"}) {
		code, stdout, stderr := runChecked(t, nil, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if stdout != "" {
			t.Errorf("%v printed something without a credential:\n%s", args, stdout)
		}
		for _, want := range []string{"operator credential is missing", "CLANKIE_OPERATOR_TOKEN", dir} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr %q lacks %q", args, stderr, want)
			}
		}
	}
}

// TestWrongTokenSaysWhichToken: a 401 tells the person at the CLI which
// token was refused and where it came from, not the HTTP header to send.
func TestWrongTokenSaysWhichToken(t *testing.T) {
	f := startMemory(t)
	f.propose(t, "100000000000000011", "200000000000000021", "likes tea", nil)
	wrong := "not-the-operator-token-0123456789"
	t.Setenv("CLANKIE_OPERATOR_TOKEN", wrong)
	secrets := append([]string{wrong}, f.secrets...)
	for _, args := range readCommands {
		code, stdout, stderr := runChecked(t, secrets, args...)
		if code != exitRefused || stdout != "" || strings.Contains(stderr, "Authorization") ||
			!strings.Contains(stderr, "did not accept the operator token from CLANKIE_OPERATOR_TOKEN") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 4 and which token was refused", args, code, stdout, stderr)
		}
	}

	// At debug the client's calls are logged on stderr: routes, never tokens.
	t.Setenv("CLANKIE_LOG_LEVEL", "debug")
	code, _, stderr := runChecked(t, secrets, "person", "100000000000000011", "200000000000000021")
	if code != exitRefused || !strings.Contains(stderr, "memory call failed") || !strings.Contains(stderr, "{guildId}") {
		t.Errorf("debug: exit %d, stderr %q; want the call logged by route template", code, stderr)
	}
	t.Setenv("CLANKIE_LOG_LEVEL", "info")

	// The text bridge's token is known to the service but not an operator's.
	t.Setenv("CLANKIE_OPERATOR_TOKEN", f.secrets[1])
	code, stdout, stderr := runChecked(t, secrets, "status")
	if code != exitRefused || stdout != "" || !strings.Contains(stderr, "may not use this route") {
		t.Errorf("a bridge token: exit %d, stdout %q, stderr %q; want exit 4 (403)", code, stdout, stderr)
	}

	// A token the settings refuse before any call: bad configuration.
	t.Setenv("CLANKIE_OPERATOR_TOKEN", "short")
	code, _, stderr = runChecked(t, append(secrets, "short"), "status")
	if code != exitUsage || !strings.Contains(stderr, "CLANKIE_OPERATOR_TOKEN must be at least 16 characters") {
		t.Errorf("a short token: exit %d, stderr %q; want exit 2", code, stderr)
	}
}

func TestServiceDownExitsOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	token := "an-operator-token-for-a-dead-service"
	cleanEnv(t, url, t.TempDir())
	t.Setenv("CLANKIE_OPERATOR_TOKEN", token)
	want := "memory service is not reachable at " + url + "; is `clankie memory serve` running?"
	for _, args := range append(readCommands, []string{"fact", "forget", "1", "2", "f"}, []string{"forget-person", "1", "2", "--yes"}) {
		code, stdout, stderr := runChecked(t, []string{token}, args...)
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, stdout, stderr, want)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	f := startMemory(t)
	fact := f.propose(t, "100000000000000011", "200000000000000021", "likes tea", nil)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"status", "extra"}, "takes no arguments"},
		{[]string{"status", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"status", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"people", "--limit", "-1"}, "--limit must be 1 to 1000 (got -1)"},
		{[]string{"people", "--limit", "0"}, "--limit must be 1 to 1000 (got 0)"},
		{[]string{"people", "--limit", "x"}, `invalid argument "x"`},
		{[]string{"person", "100000000000000011"}, "needs GUILD USER (got 1 argument)"},
		{[]string{"person", "", "200000000000000021"}, `GUILD must be a Discord id, digits only such as 123456789012345678 (got "")`},
		{[]string{"person", "abc", "def"}, `GUILD must be a Discord id, digits only such as 123456789012345678 (got "abc")`},
		{[]string{"forget-person", "100000000000000011", "u-1", "--yes"}, `USER must be a Discord id`},
		{[]string{"fact"}, ""}, // help, exit 0: checked below
		{[]string{"fact", "bogus"}, `unknown command "bogus"`},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021"}, "needs GUILD USER FACTID"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID}, "nothing to change"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--body", "  "}, "--body must not be empty"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--kind", "rumour"}, "--kind must be person-fact, preference or relationship-note"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--visibility", "everyone"}, "--visibility must be guild, channel:<id> or operator_private"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--visibility", "channel:"}, "--visibility must be"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--confidence", "1.5"}, "--confidence must be between 0 and 1"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", "tomorrow"}, `--expires "tomorrow" is not a duration or a date. Use a duration like 90m, 12h, 7d or 2w`},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", "400d"}, "at most 365 days ahead"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", "2020-01-31"}, "must be in the future"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", past, "--no-expiry"}, "not both"},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--expires", past}, `--expires "` + past + `" is not a duration or a date`},
		{[]string{"fact", "edit", "100000000000000011", "200000000000000021", fact.FactID, "--body", strings.Repeat("x", 3000)}, "the memory service rejected the request"},
		{[]string{"forget-person", "100000000000000011", "200000000000000021"}, "--yes"},
		{[]string{"episodes", "--limit", "5"}, "--limit applies to a search"},
		{[]string{"episodes", "--search", " "}, "at least one term"},
		{[]string{"episodes", "--search", "x", "--limit", "33"}, "--limit must be 1 to 32"},
		{[]string{"episodes", "lamp"}, `unexpected argument "lamp"`},
		{[]string{"episodes", "search", "a", "--search", "b"}, "give the search terms once"},
		{[]string{"episode", "keep"}, "needs ID (got 0 arguments)"},
		{[]string{"episode", "edit", "e1"}, "nothing to change: give --summary or --visibility"},
		{[]string{"episode", "edit", "e1", "--visibility", "public"}, "--visibility must be operator_private or shareable"},
	}
	for _, c := range cases {
		code, stdout, stderr := f.run(t, c.args...)
		if c.want == "" {
			if code != 0 || !strings.Contains(stdout, "Usage:") {
				t.Errorf("%v: exit %d, stdout %q; want help and exit 0", c.args, code, stdout)
			}
			continue
		}
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%v printed on stdout: %q", c.args, stdout)
		}
	}
	if got := f.export(t, "100000000000000011", "200000000000000021"); len(got.Facts) != 1 || got.Facts[0].Body != "likes tea" {
		t.Errorf("a refused command changed memory: %+v", got.Facts)
	}
}

func TestExplainMapsKindsToExitCodes(t *testing.T) {
	s := &session{url: "http://127.0.0.1:4310", timeout: 10 * time.Second, tokenSource: "from CLANKIE_OPERATOR_TOKEN"}
	cases := []struct {
		kind    memoryclient.Kind
		status  int
		code    int
		want    string
		errCode string
	}{
		{memoryclient.KindUnavailable, 0, exitFailed, "not reachable at http://127.0.0.1:4310", ""},
		{memoryclient.KindUnavailable, 503, exitFailed, "unavailable (HTTP 503): the sentence", ""},
		{memoryclient.KindTimeout, 0, exitFailed, "did not answer within 10s", ""},
		{memoryclient.KindCanceled, 0, exitFailed, "canceled", ""},
		{memoryclient.KindInternal, 500, exitFailed, "failed: the sentence", ""},
		{memoryclient.KindUnexpected, 302, exitFailed, "the sentence", ""},
		{memoryclient.KindInvalid, 400, exitUsage, "rejected the request: the sentence", ""},
		{memoryclient.KindNotFound, 404, exitNotFound, "the sentence", "fact_not_found"},
		{memoryclient.KindNotFound, 404, exitUsage, "http://127.0.0.1:4310 does not answer as a clankie memory service", "not_found"},
		{memoryclient.KindNotFound, 404, exitUsage, "check CLANKIE_MEMORY_URL", ""},
		{memoryclient.KindUnauthorized, 401, exitRefused, "did not accept the operator token from CLANKIE_OPERATOR_TOKEN", ""},
		{memoryclient.KindForbidden, 403, exitRefused, "refused: the sentence", ""},
		{memoryclient.KindConflict, 409, exitRefused, "refused: the sentence", ""},
	}
	for _, c := range cases {
		err := s.explain(fmt.Errorf("wrapped: %w", &memoryclient.Error{Op: "x", Kind: c.kind, Status: c.status, Code: c.errCode, Message: "the sentence"}))
		ee, ok := err.(*exitError)
		if !ok || ee.code != c.code || !strings.Contains(ee.Error(), c.want) {
			t.Errorf("%v %d: %v; want exit %d and %q", c.kind, c.status, err, c.code, c.want)
		}
	}
	if s.explain(nil) != nil {
		t.Error("explain(nil) is not nil")
	}
}

func TestOneLineAndCut(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                        "plain",
		"  two\nlines\t\tand tabs  ":   "two lines and tabs",
		"esc\x1b[31mred":               "esc [31mred",
		"bidi\u202eevil":               "bidi evil",
		"line\u2028sep\r\nwindows\x00": "line sep windows",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
	if got := cut("abcdef", 4); got != "abc…" {
		t.Errorf("cut = %q", got)
	}
	if got := cut("äöü", 3); got != "äöü" {
		t.Errorf("cut of a short string = %q", got)
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote = %q", got)
	}
}

func TestLoadOperatorExpandsTheDefaultRoot(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	t.Setenv("CLANKIE_MEMORY_DIR", "")
	t.Setenv("CLANKIE_MEMORY_URL", "")
	t.Setenv("CLANKIE_OPERATOR_TOKEN", "")
	t.Setenv("CLANKIE_LOG_LEVEL", "")
	t.Setenv("CLANKIE_LOG_FORMAT", "")
	cfg, err := config.LoadOperator()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Memory.Dir != "/home/op/.clankie/memory" || cfg.Memory.URL != "http://127.0.0.1:4310" {
		t.Errorf("defaults: %+v", cfg.Memory)
	}
	seen := map[string]int{}
	for _, v := range config.All() {
		seen[v.Name]++
	}
	if seen["CLANKIE_OPERATOR_TOKEN"] != 1 || seen["CLANKIE_MEMORY_URL"] != 1 {
		t.Errorf("clankie env lists the operator's variables %v", seen)
	}
}

// TestStatusOnPostgresHasNoCorruptFileRow: the corrupt-file count is about
// person files, which PostgreSQL does not keep; status names the store.
func TestStatusOnPostgresHasNoCorruptFileRow(t *testing.T) {
	var b strings.Builder
	if err := renderStatus(&b, "http://127.0.0.1:4310", api.Catalog{Store: api.StorePostgres}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Corrupt person files") || !regexp.MustCompile(`Store\s+PostgreSQL`).MatchString(b.String()) {
		t.Fatalf("status on PostgreSQL:\n%s", b.String())
	}
}

// TestErrorLinesAreOneShapeOfSentence: every error line reads the same way
// after "clankie: ", whoever wrote the sentence.
func TestErrorLinesAreOneShapeOfSentence(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"No fact with that id is kept about this person.", "no fact with that id is kept about this person."},
		{"memory service is not reachable at http://127.0.0.1:4310; is `clankie memory serve` running?", "memory service is not reachable at http://127.0.0.1:4310; is `clankie memory serve` running?"},
		{"CLANKIE_MEMORY_ADDR must be host:port, such as 127.0.0.1:4310", "CLANKIE_MEMORY_ADDR must be host:port, such as 127.0.0.1:4310."},
		{"I could not do it", "I could not do it."},
		{"TLS: the server did not speak TLS", "TLS: the server did not speak TLS."},
		{"the operator credential is missing\n", "the operator credential is missing."},
	} {
		if got := oneSentence(tc.in); got != tc.want {
			t.Errorf("oneSentence(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
