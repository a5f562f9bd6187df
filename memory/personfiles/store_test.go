package personfiles

import (
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newStore(t *testing.T) (*Store, *os.Root, *clock) {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	s, err := Open(root, zap.NewNop(), c.now, durable.Disk{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, root, c
}

var text = api.Principal{Lane: api.LaneDiscordPresence}
var operator = api.Principal{Lane: api.LaneOperator}

func proposal(id, guild, user, proposer, channel, body string) api.ProposalRequest {
	return api.ProposalRequest{SchemaVersion: 1, ProposalID: id, Fact: api.FactInput{
		Subject: api.Subject{GuildID: guild, UserID: user}, Kind: api.KindPersonFact, Body: body,
		Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9,
		Provenance: api.Provenance{SourceEventID: id, ProposerUserID: proposer, ChannelID: channel},
	}}
}

func mustPropose(t *testing.T, s *Store, c api.Principal, req api.ProposalRequest) api.ProposalResponse {
	t.Helper()
	resp, _, err := s.Propose(c, req)
	if err != nil {
		t.Fatalf("propose %s: %v", req.ProposalID, err)
	}
	return resp
}

func TestEvictionKeeps128ExpiredFirstThenOldest(t *testing.T) {
	s, _, c := newStore(t)
	soon := c.t.Add(time.Hour)
	for i := range 128 {
		req := proposal(fmt.Sprintf("p%d", i), "g", "u", "u", "c", fmt.Sprintf("fact %d", i))
		if i == 5 {
			req.Fact.ExpiresAt = &soon
		}
		mustPropose(t, s, text, req)
		c.t = c.t.Add(time.Second)
	}
	c.t = c.t.Add(2 * time.Hour) // fact 5 has expired
	resp := mustPropose(t, s, text, proposal("p128", "g", "u", "u", "c", "fact 128"))
	if resp.Evicted != 1 {
		t.Fatalf("evicted %d, want 1", resp.Evicted)
	}
	all, _ := s.Export(api.Subject{GuildID: "g", UserID: "u"})
	if all.Total != 128 || has(all.Facts, "fact 5") || !has(all.Facts, "fact 0") {
		t.Fatalf("after the 129th: total %d, expired kept %v, oldest kept %v", all.Total, has(all.Facts, "fact 5"), has(all.Facts, "fact 0"))
	}
	mustPropose(t, s, text, proposal("p129", "g", "u", "u", "c", "fact 129"))
	all, _ = s.Export(api.Subject{GuildID: "g", UserID: "u"})
	if all.Total != 128 || has(all.Facts, "fact 0") || !has(all.Facts, "fact 1") {
		t.Fatalf("the oldest was not the one evicted")
	}
	if st := s.Stats(); st.People != 1 || st.Facts != 128 {
		t.Fatalf("stats %+v", st)
	}
}

func has(facts []api.Fact, body string) bool {
	for _, f := range facts {
		if f.Body == body {
			return true
		}
	}
	return false
}

func TestVisibility(t *testing.T) {
	now := time.Now()
	past := now.Add(-time.Minute)
	guild := api.Fact{Visibility: api.Visibility{Scope: api.ScopeGuild}}
	channel := api.Fact{Visibility: api.Visibility{Scope: api.ScopeChannel, ChannelID: "c1"}}
	private := api.Fact{Visibility: api.Visibility{Scope: api.ScopeOperatorPrivate}}
	expired := api.Fact{Visibility: api.Visibility{Scope: api.ScopeGuild}, ExpiresAt: &past}
	for _, tc := range []struct {
		name string
		f    api.Fact
		who  api.Principal
		room string
		want bool
	}{
		{"guild fact in any room", guild, text, "c9", true},
		{"channel fact in its channel", channel, text, "c1", true},
		{"channel fact elsewhere", channel, text, "c2", false},
		{"channel fact with no room", channel, text, "", false},
		{"operator_private to discord", private, text, "c1", false},
		{"operator_private to operator", private, operator, "", true},
		{"channel fact to operator without room", channel, operator, "", true},
		{"expired to discord", expired, text, "c1", false},
		{"expired to operator", expired, operator, "", false},
	} {
		if got := people.Visible(&tc.f, tc.who, tc.room, now); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}

func TestSupersedeRules(t *testing.T) {
	s, _, _ := newStore(t)
	old := mustPropose(t, s, text, proposal("a", "g", "u", "u", "c", "likes tea"))
	chanFact := proposal("b", "g", "u", "u", "c", "in channel c only")
	chanFact.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "c"}
	inC := mustPropose(t, s, text, chanFact)

	for _, tc := range []struct {
		name       string
		c          api.Principal
		proposer   string
		channel    string
		target     string
		superseded bool
	}{
		{"stranger may not", text, "x", "c", old.Fact.FactID, false},
		{"unknown id", text, "u", "c", "fnope", false},
		{"not visible in this channel", text, "u", "d", inC.Fact.FactID, false},
		{"subject may", text, "u", "c", old.Fact.FactID, true},
	} {
		req := proposal("s-"+strings.ReplaceAll(tc.name, " ", "-"), "g", "u", tc.proposer, tc.channel, "likes coffee")
		req.Fact.SupersedesFactID = tc.target
		resp := mustPropose(t, s, tc.c, req)
		if resp.Superseded != tc.superseded {
			t.Errorf("%s: superseded=%v reason=%q", tc.name, resp.Superseded, resp.Reason)
		}
		if !tc.superseded && (resp.Reason == "" || resp.Fact.SupersedesFactID != "") {
			t.Errorf("%s: want a reason and no supersedes link, got %q / %q", tc.name, resp.Reason, resp.Fact.SupersedesFactID)
		}
		if tc.superseded && resp.Fact.SupersedesFactID != tc.target {
			t.Errorf("%s: new fact does not name the old one", tc.name)
		}
	}
	all, _ := s.Export(api.Subject{GuildID: "g", UserID: "u"})
	if has(all.Facts, "likes tea") {
		t.Error("superseded fact still stored")
	}
}

func TestProposalIdempotency(t *testing.T) {
	s, root, _ := newStore(t)
	req := proposal("same", "g", "u", "u", "c", "likes tea")
	first := mustPropose(t, s, text, req)
	before, _ := root.ReadFile(path.Join(Dir, FileName(req.Fact.Subject)))
	again, _, err := s.Propose(text, req)
	if err != nil || !again.Replayed || again.Fact.FactID != first.Fact.FactID {
		t.Fatalf("retry: %v %+v", err, again)
	}
	changed := req
	changed.Fact.Body = "likes coffee"
	_, _, err = s.Propose(text, changed)
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Conflict {
		t.Fatalf("changed retry: %v", err)
	}
	after, _ := root.ReadFile(path.Join(Dir, FileName(req.Fact.Subject)))
	if string(before) != string(after) {
		t.Fatal("a retry changed the file")
	}
	if _, err := s.Forget(text, req.Fact.Subject, first.Fact.FactID, "u"); err != nil {
		t.Fatal(err)
	}
	b, _ := root.ReadFile(path.Join(Dir, FileName(req.Fact.Subject)))
	if strings.Contains(string(b), "likes tea") || strings.Contains(string(b), "digest") {
		t.Fatalf("forgotten content or its digest is still on disk: %s", b)
	}
	resp, _, err := s.Propose(text, req)
	if err != nil || resp.Fact != nil || !resp.Replayed {
		t.Fatalf("retry after forget must not resurrect the fact: %+v %v", resp, err)
	}
}

func TestForgetAuthority(t *testing.T) {
	s, _, _ := newStore(t)
	subj := api.Subject{GuildID: "g", UserID: "u"}
	a := mustPropose(t, s, text, proposal("a", "g", "u", "p", "c", "one"))
	b := mustPropose(t, s, text, proposal("b", "g", "u", "p", "c", "two"))
	priv := proposal("c", "g", "u", "", "", "secret")
	priv.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	cp := mustPropose(t, s, operator, priv)

	if _, err := s.Forget(text, subj, a.Fact.FactID, "stranger"); kind(err) != fault.Forbidden {
		t.Errorf("stranger: %v", err)
	}
	if _, err := s.Forget(text, subj, a.Fact.FactID, "u"); err != nil {
		t.Errorf("subject: %v", err)
	}
	if _, err := s.Forget(text, subj, b.Fact.FactID, "p"); err != nil {
		t.Errorf("proposer: %v", err)
	}
	if _, err := s.Forget(text, subj, cp.Fact.FactID, "u"); kind(err) != fault.NotFound {
		t.Errorf("operator_private via discord: %v", err)
	}
	if _, err := s.Forget(text, subj, "fnothere", "u"); kind(err) != fault.NotFound {
		t.Errorf("absent: %v", err)
	}
	if _, err := s.Forget(operator, subj, cp.Fact.FactID, ""); err != nil {
		t.Errorf("operator: %v", err)
	}
}

func kind(err error) fault.Kind {
	if fe, ok := fault.As(err); ok {
		return fe.Kind
	}
	return 0
}

func TestCorruptFileIsMovedAsideNotOverwritten(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	core, logs := observer.New(zap.InfoLevel)
	subj := api.Subject{GuildID: "g", UserID: "u"}
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	garbage := []byte(`{"schemaVersion":1,"facts":[{"body":"half a secr`)
	if err := root.WriteFile(path.Join(Dir, FileName(subj)), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(root, zap.New(core), time.Now, durable.Disk{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.People != 0 {
		t.Fatalf("a corrupt file counted: %+v", st)
	}
	d, _ := root.Open(Dir)
	names, _ := d.Readdirnames(-1)
	d.Close()
	var aside string
	for _, n := range names {
		if strings.Contains(n, ".corrupt-") {
			aside = n
		}
	}
	if aside == "" {
		t.Fatalf("nothing moved aside: %v", names)
	}
	b, _ := root.ReadFile(path.Join(Dir, aside))
	st, _ := root.Stat(path.Join(Dir, aside))
	if string(b) != string(garbage) || st.Mode().Perm() != 0o600 {
		t.Fatalf("moved-aside file changed: mode %v", st.Mode())
	}
	if logs.Len() != 1 || strings.Contains(fmt.Sprint(logs.All()[0].Context), "secr") {
		t.Fatalf("want one content-free warning, got %v", logs.All())
	}
	mustPropose(t, s, text, proposal("a", "g", "u", "u", "c", "fresh"))
	if st := s.Stats(); st.People != 1 || st.Facts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRecallQueryAndOrder(t *testing.T) {
	s, _, c := newStore(t)
	for i, body := range []string{"Likes green tea", "likes coffee", "plays chess on Tuesdays"} {
		mustPropose(t, s, text, proposal(fmt.Sprint(i), "g", "u", "u", "c", body))
		c.t = c.t.Add(time.Minute)
	}
	subj := api.Subject{GuildID: "g", UserID: "u"}
	r, err := s.Recall(subj, people.RecallQuery{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c", Query: "LIKES tea"}})
	if err != nil || r.Total != 1 || r.Facts[0].Body != "Likes green tea" {
		t.Fatalf("query: %+v %v", r, err)
	}
	r, _ = s.Recall(subj, people.RecallQuery{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c", Limit: 2}})
	if r.Total != 3 || len(r.Facts) != 2 || r.Facts[0].Body != "plays chess on Tuesdays" {
		t.Fatalf("order/limit: %+v", r)
	}
	r, _ = s.Recall(subj, people.RecallQuery{Who: text, RecallQuery: api.RecallQuery{ChannelID: "c", Query: "person-fact chess"}})
	if r.Total != 1 {
		t.Fatalf("kind term: %+v", r)
	}
}

func TestBriefingBoundsAndMarks(t *testing.T) {
	s, _, c := newStore(t)
	big := strings.Repeat("x", 2000)
	var ids []string
	for u := range 25 {
		uid := fmt.Sprint(1000 + u)
		ids = append(ids, uid)
		for i := range 9 {
			proposer := uid
			if i%2 == 1 {
				proposer = "42"
			}
			mustPropose(t, s, text, proposal(fmt.Sprintf("%s-%d", uid, i), "7", uid, proposer, "9", fmt.Sprintf("%s %d %s", uid, i, big[:100])))
			c.t = c.t.Add(time.Second)
		}
	}
	chanOnly := proposal("chan", "7", "1000", "1000", "8", "only in text channel 8")
	chanOnly.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "8"}
	mustPropose(t, s, text, chanOnly)

	text, counts, err := s.Briefing(api.BriefingRequest{SchemaVersion: 1, GuildID: "7", ChannelID: "9", ConsentedUserIDs: ids}, []api.Episode{{EpisodeID: "ep-1", Lane: api.LaneDiscordVoice, Room: "voice", Summary: "note one", OccurredAt: c.t}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(text)); n > api.MaxBriefingChars {
		t.Fatalf("briefing is %d characters", n)
	}
	if strings.Contains(text, "only in text channel 8") {
		t.Fatal("a channel fact from another channel reached the voice briefing")
	}
	lines := strings.Split(text, "\n")
	facts := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "- (") {
			facts++
			if !strings.HasSuffix(l, `"`) {
				t.Fatalf("a line was cut: %q", l)
			}
		}
	}
	if facts != counts.Facts || counts.Episodes != 1 || counts.ConsentedUsers != 25 {
		t.Fatalf("counts %+v, fact lines %d", counts, facts)
	}
	if counts.UsersWithFacts == 0 || counts.Facts > counts.UsersWithFacts*api.BriefingFactsPerUser {
		t.Fatalf("counts %+v", counts)
	}
	// A small briefing holds every fact, 8 per person.
	smallText, small, _ := s.Briefing(api.BriefingRequest{SchemaVersion: 1, GuildID: "7", ChannelID: "9", ConsentedUserIDs: ids[:2]}, nil)
	if small.Facts != 16 || small.UsersWithFacts != 2 || small.Episodes != 0 {
		t.Fatalf("small briefing counts %+v", small)
	}
	if !strings.Contains(smallText, "said about themselves") || !strings.Contains(smallText, "reported by another member") {
		t.Fatal("facts are not marked self-stated or reported")
	}
	// The full briefing shares the bound: every speaker is in it.
	if counts.UsersWithFacts != 25 {
		t.Fatalf("%d of 25 speakers made it into the briefing", counts.UsersWithFacts)
	}
}

func TestBriefingValidation(t *testing.T) {
	ids := make([]string, 26)
	for i := range ids {
		ids[i] = fmt.Sprint(i + 1)
	}
	for _, tc := range []struct {
		name string
		req  api.BriefingRequest
	}{
		{"26 ids", api.BriefingRequest{SchemaVersion: 1, GuildID: "1", ChannelID: "2", ConsentedUserIDs: ids}},
		{"non-numeric id", api.BriefingRequest{SchemaVersion: 1, GuildID: "1", ChannelID: "2", ConsentedUserIDs: []string{"bob"}}},
		{"repeated id", api.BriefingRequest{SchemaVersion: 1, GuildID: "1", ChannelID: "2", ConsentedUserIDs: []string{"3", "3"}}},
		{"no channel", api.BriefingRequest{SchemaVersion: 1, GuildID: "1", ConsentedUserIDs: []string{"3"}}},
		{"schema", api.BriefingRequest{SchemaVersion: 2, GuildID: "1", ChannelID: "2"}},
	} {
		if err := people.ValidateBriefing(tc.req); kind(err) != fault.Invalid {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestProposalRecordsStayBounded(t *testing.T) {
	s, root, c := newStore(t)
	for i := range 300 {
		mustPropose(t, s, text, proposal(fmt.Sprintf("r%d", i), "g", "u", "u", "c", fmt.Sprintf("fact %d", i)))
		c.t = c.t.Add(time.Second)
	}
	b, _ := root.ReadFile(path.Join(Dir, FileName(api.Subject{GuildID: "g", UserID: "u"})))
	pf, _, err := decodeLog(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(pf.Facts) != 128 || len(pf.Proposals) != 128+people.MaxGoneRecords {
		t.Fatalf("%d facts, %d proposal records", len(pf.Facts), len(pf.Proposals))
	}
	// The newest retry of an evicted fact is still recognised, not stored again.
	resp, _, err := s.Propose(text, proposal("r200", "g", "u", "u", "c", "fact 200"))
	if err != nil || !resp.Replayed || resp.Fact == nil {
		t.Fatalf("retry of a live fact: %+v %v", resp, err)
	}
	resp, _, err = s.Propose(text, proposal("r150", "g", "u", "u", "c", "fact 150"))
	if err != nil || !resp.Replayed || resp.Fact != nil || resp.Reason == "" {
		t.Fatalf("retry of an evicted fact: %+v %v", resp, err)
	}
}
