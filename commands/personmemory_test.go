package commands

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/memoryclient"
)

// run invokes the command's handler and returns the reply's content or the
// sentence of a refusal; a non-user error fails the test.
func run(t *testing.T, mem *fakeMemory, p Policy, inv interaction.Invocation) (content string, refused bool) {
	t.Helper()
	rep, err := handle(context.Background(), PersonMemory(mem, p, fixedNow, testCatalog(t)), inv)
	if err != nil {
		ue, ok := interaction.AsUserError(err)
		if !ok {
			t.Fatalf("handler error is not a sentence: %v", err)
		}
		return ue.Sentence, true
	}
	return rep.Content, false
}

// forbiddenWords are a review workflow's words; a fact applies on arrival.
var forbiddenWords = []string{"review", "approved", "submitted", "pending"}

func assertNoWorkflowWords(t *testing.T, content string) {
	t.Helper()
	lower := strings.ToLower(content)
	for _, w := range forbiddenWords {
		if strings.Contains(lower, w) {
			t.Fatalf("reply says %q: %q", w, content)
		}
	}
}

func TestPersonMemoryOutsideAServer(t *testing.T) {
	for _, sub := range []string{subPropose, subRecall, subMine, subForget} {
		t.Run(sub, func(t *testing.T) {
			mem := &fakeMemory{}
			inv := invocation(sub, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "likes tea"})
			inv.GuildID = ""
			got, refused := run(t, mem, Policy{}, inv)
			if !refused || got != "Sorry, person memory belongs to a server." {
				t.Fatalf("reply %q (refused %v)", got, refused)
			}
			if !strings.Contains(got, "person memory belongs to a server") {
				t.Fatalf("reply %q lacks the spec's words", got)
			}
			if mem.calls() != 0 {
				t.Fatalf("memory was called %d times", mem.calls())
			}
		})
	}
}

func TestProposeRefusesBotSubject(t *testing.T) {
	mem := &fakeMemory{}
	inv := invocation(subPropose, map[string]any{optPerson: interaction.User{ID: testOther, Bot: true}, optFact: "beeps"})
	inv.Permissions = discordgo.PermissionAdministrator
	got, refused := run(t, mem, Policy{}, inv)
	if !refused || got != inEnglish(t, lang.BotSubject, nil) || mem.calls() != 0 {
		t.Fatalf("reply %q refused %v calls %d", got, refused, mem.calls())
	}
}

func TestProposeAuthority(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		roles   []string
		perms   int64
		policy  Policy
		allowed bool
	}{
		{name: "about yourself", subject: testInvoker, allowed: true},
		{name: "about someone else, no right", subject: testOther},
		{name: "other role only", subject: testOther, roles: []string{"999"}, policy: Policy{MemoryRoleIDs: []string{testRole}}},
		{name: "unrelated permission", subject: testOther, perms: discordgo.PermissionSendMessages | discordgo.PermissionManageMessages},
		{name: "empty configured role matches nothing", subject: testOther, roles: []string{""}, policy: Policy{MemoryRoleIDs: []string{""}}},
		{name: "memory role", subject: testOther, roles: []string{"999", testRole}, policy: Policy{MemoryRoleIDs: []string{testRole}}, allowed: true},
		{name: "memory user", subject: testOther, policy: Policy{MemoryUserIDs: []string{"1", testInvoker}}, allowed: true},
		{name: "manage server", subject: testOther, perms: discordgo.PermissionManageGuild, allowed: true},
		{name: "administrator", subject: testOther, perms: discordgo.PermissionAdministrator, allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{}
			inv := invocation(subPropose, map[string]any{optPerson: interaction.User{ID: tt.subject}, optFact: "likes tea"})
			inv.RoleIDs, inv.Permissions = tt.roles, tt.perms
			got, refused := run(t, mem, tt.policy, inv)
			if tt.allowed {
				if refused || len(mem.proposals) != 1 {
					t.Fatalf("refused: %q", got)
				}
				return
			}
			if !refused || got != "You can only propose facts about yourself." || mem.calls() != 0 {
				t.Fatalf("reply %q refused %v calls %d", got, refused, mem.calls())
			}
		})
	}
}

func TestProposeRequest(t *testing.T) {
	day := func(y int, m time.Month, d int) *time.Time { t := time.Date(y, m, d, 0, 0, 0, 0, time.UTC); return &t }
	in90m := testNow.Add(90 * time.Minute)
	tests := []struct {
		name     string
		opts     map[string]any
		manage   bool
		wantFact api.FactInput
	}{
		{
			name: "about yourself, defaults",
			opts: map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "  likes green tea \n"},
			wantFact: api.FactInput{Subject: api.Subject{GuildID: testGuild, UserID: testInvoker}, Kind: api.KindPersonFact,
				Body: "likes green tea", Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9},
		},
		{
			name:   "about someone else, defaults",
			opts:   map[string]any{optPerson: interaction.User{ID: testOther}, optFact: "plays the cello"},
			manage: true,
			wantFact: api.FactInput{Subject: api.Subject{GuildID: testGuild, UserID: testOther}, Kind: api.KindPersonFact,
				Body: "plays the cello", Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.6},
		},
		{
			name: "every option",
			opts: map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "prefers tabs", optKind: string(api.KindPreference),
				optVisibility: string(api.ScopeChannel), optExpires: "90m", optConfidence: confidenceLow, optSupersedes: " fabc2345 "},
			wantFact: api.FactInput{Subject: api.Subject{GuildID: testGuild, UserID: testInvoker}, Kind: api.KindPreference,
				Body: "prefers tabs", Visibility: api.Visibility{Scope: api.ScopeChannel, ChannelID: testChannel}, Confidence: 0.3,
				ExpiresAt: &in90m, SupersedesFactID: "fabc2345"},
		},
		{
			name:   "medium about someone else, a date, a relationship note",
			opts:   map[string]any{optPerson: interaction.User{ID: testOther}, optFact: "is my sister", optKind: string(api.KindRelationshipNote), optConfidence: confidenceMedium, optExpires: "2027-01-31", optVisibility: string(api.ScopeGuild)},
			manage: true,
			wantFact: api.FactInput{Subject: api.Subject{GuildID: testGuild, UserID: testOther}, Kind: api.KindRelationshipNote,
				Body: "is my sister", Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.6, ExpiresAt: day(2027, 2, 1)},
		},
		{
			name:   "high about someone else",
			opts:   map[string]any{optPerson: interaction.User{ID: testOther}, optFact: "x", optConfidence: confidenceHigh},
			manage: true,
			wantFact: api.FactInput{Subject: api.Subject{GuildID: testGuild, UserID: testOther}, Kind: api.KindPersonFact,
				Body: "x", Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{}
			inv := invocation(subPropose, tt.opts)
			if tt.manage {
				inv.Permissions = discordgo.PermissionManageGuild
			}
			if got, refused := run(t, mem, Policy{}, inv); refused {
				t.Fatalf("refused: %q", got)
			}
			if len(mem.proposals) != 1 {
				t.Fatalf("%d proposals", len(mem.proposals))
			}
			req := mem.proposals[0]
			want := tt.wantFact
			want.Provenance = api.Provenance{SourceEventID: testInterID, ProposerUserID: testInvoker, ChannelID: testChannel}
			if req.SchemaVersion != 1 || req.ProposalID != "discord-interaction-"+testInterID {
				t.Fatalf("schemaVersion %d proposalId %q", req.SchemaVersion, req.ProposalID)
			}
			if !reflect.DeepEqual(req.Fact, want) {
				t.Fatalf("fact\n got %+v\nwant %+v", req.Fact, want)
			}
			if req.Fact.Provenance.SourceSurface != "" {
				t.Fatalf("the bridge set sourceSurface %q; the bearer decides it", req.Fact.Provenance.SourceSurface)
			}
		})
	}
}

// A redelivered interaction, seen a few seconds later, proposes exactly the
// same thing, so the service answers with the fact it stored the first time.
func TestProposeRedeliveryIsTheSameProposal(t *testing.T) {
	created := testNow.Add(-20 * time.Second)
	id := strconv.FormatUint(uint64(created.UnixMilli()-discordEpochMs)<<22, 10)
	var reqs []api.ProposalRequest
	for _, delay := range []time.Duration{0, 3 * time.Second} {
		mem := &fakeMemory{}
		now := func() time.Time { return testNow.Add(delay) }
		inv := invocation(subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "on holiday", optExpires: "7d"})
		inv.ID = id
		if _, err := handle(context.Background(), PersonMemory(mem, Policy{}, now, testCatalog(t)), inv); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, mem.proposals[0])
	}
	if !reflect.DeepEqual(reqs[0], reqs[1]) {
		t.Fatalf("a redelivery proposes something else:\n%+v\n%+v", reqs[0], reqs[1])
	}
	if want := created.Add(7 * 24 * time.Hour); !reqs[0].Fact.ExpiresAt.Equal(want) {
		t.Fatalf("expiresAt %v; want %v (counted from the interaction)", reqs[0].Fact.ExpiresAt, want)
	}
}

func TestProposeRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		opts map[string]any
		want string
	}{
		{"no person", map[string]any{optFact: "x"}, inEnglish(t, lang.ChoosePerson, nil)},
		{"empty fact", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: " \n\t "}, inEnglish(t, lang.EmptyFact, nil)},
		{"long fact", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: strings.Repeat("é", 2049)}, "A fact can be at most 2048 characters; this one has 2049."},
		{"bad expiry", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x", optExpires: "tomorrow"}, "I couldn't read that expiry."},
		{"bad supersedes", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x", optSupersedes: "fabc · likes tea"}, inEnglish(t, lang.BadSupersedes, nil)},
		{"unknown kind", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x", optKind: "rumour"}, inEnglish(t, lang.Stale, nil)},
		{"unknown visibility", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x", optVisibility: "operator_private"}, inEnglish(t, lang.Stale, nil)},
		{"unknown confidence", map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x", optConfidence: "certain"}, inEnglish(t, lang.Stale, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{}
			got, refused := run(t, mem, Policy{}, invocation(subPropose, tt.opts))
			if !refused || !strings.HasPrefix(got, tt.want) || mem.calls() != 0 {
				t.Fatalf("reply %q refused %v calls %d; want %q", got, refused, mem.calls(), tt.want)
			}
		})
	}
	mem := &fakeMemory{}
	if got, refused := run(t, mem, Policy{}, invocation(subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: strings.Repeat("é", 2048)})); refused {
		t.Fatalf("2048 characters refused: %q", got)
	}
}

func TestProposeReplies(t *testing.T) {
	expires := testNow.Add(7 * 24 * time.Hour)
	base := fact("fnew2345", testOther, testInvoker, "likes **tea** @everyone")
	withExpiry := base
	withExpiry.ExpiresAt = &expires
	channel := base
	channel.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: testChannel}
	replacing := base
	replacing.SupersedesFactID = "fold2345"
	tests := []struct {
		name    string
		resp    api.ProposalResponse
		want    []string
		notWant []string
	}{
		{"plain", api.ProposalResponse{Fact: &base},
			[]string{"Remembered `fnew2345` about <@" + testOther + ">", "visible in this server", "no expiry", `likes \*\*tea\*\* @` + zeroWidthSpace + "everyone"},
			[]string{"replaced", "room"}},
		{"expiry and channel", api.ProposalResponse{Fact: &withExpiry}, []string{fmt.Sprintf("expires <t:%d:R>", expires.Unix())}, nil},
		{"channel", api.ProposalResponse{Fact: &channel}, []string{"visible only in <#" + testChannel + ">"}, nil},
		{"superseded", api.ProposalResponse{Fact: &replacing, Superseded: true}, []string{"It replaced `fold2345`"}, []string{"Nothing was replaced"}},
		{"not superseded, with a reason", api.ProposalResponse{Fact: &base, Reason: "no visible fact fzzz2345 about this person"},
			[]string{"Nothing was replaced: No visible fact fzzz2345 about this person."}, []string{"It replaced"}},
		{"one evicted", api.ProposalResponse{Fact: &base, Evicted: 1}, []string{"The oldest fact about <@" + testOther + "> was forgotten to make room"}, nil},
		{"evicted", api.ProposalResponse{Fact: &base, Evicted: 3}, []string{"The oldest 3 facts about <@" + testOther + "> were forgotten to make room", "128"}, nil},
		{"replayed", api.ProposalResponse{Fact: &base, Replayed: true}, []string{"Remembered `fnew2345`"}, nil},
		{"replayed, since forgotten", api.ProposalResponse{Replayed: true, Reason: "this proposal was applied before and its fact has since been forgotten; nothing was stored"},
			[]string{"This proposal was applied before", "nothing was stored"}, []string{"Remembered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{proposeResp: tt.resp}
			inv := invocation(subPropose, map[string]any{optPerson: interaction.User{ID: testOther}, optFact: "likes **tea** @everyone"})
			inv.Permissions = discordgo.PermissionManageGuild
			got, refused := run(t, mem, Policy{}, inv)
			if refused {
				t.Fatalf("refused: %q", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("reply lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("reply has %q:\n%s", w, got)
				}
			}
			assertNoWorkflowWords(t, got)
			if strings.Contains(got, "@everyone") {
				t.Errorf("raw @everyone in %q", got)
			}
		})
	}
}

func TestProposeAboutYourselfSaysYou(t *testing.T) {
	got, _ := run(t, &fakeMemory{}, Policy{}, invocation(subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x"}))
	if !strings.HasPrefix(got, "Remembered `fnew2345` about you (person-fact, high confidence), visible in this server, no expiry.") {
		t.Fatalf("reply %q", got)
	}
}

func TestRecallFormatting(t *testing.T) {
	expires := testNow.Add(48 * time.Hour)
	newest := fact("fnew2345", testOther, testOther, "@everyone **bold** _x_ `code` > quote\n# heading\n- item")
	newest.ExpiresAt = &expires
	newest.Kind, newest.Confidence = api.KindPreference, 0.6
	huge := fact("fbig2345", testOther, testInvoker, strings.Repeat("@everyone ", 204)+"abcdefgh")
	if utf8.RuneCountInString(huge.Body) != 2048 {
		t.Fatalf("fixture body is %d characters", utf8.RuneCountInString(huge.Body))
	}
	oldest := fact("fold2345", testOther, testInvoker, "first fact")
	oldest.Confidence = 0.3
	mem := &fakeMemory{recallResp: api.RecallResponse{Facts: []api.Fact{newest, huge, huge, oldest}, Total: 4}}
	inv := invocation(subRecall, map[string]any{optPerson: interaction.User{ID: testOther}, optQuery: "  tea time "})
	got, refused := run(t, mem, Policy{}, inv)
	if refused {
		t.Fatalf("refused: %q", got)
	}
	wantCall := recallCall{testGuild, testOther, api.RecallQuery{ChannelID: testChannel, Query: "tea time", Limit: recallLimit}}
	if len(mem.recalls) != 1 || mem.recalls[0] != wantCall {
		t.Fatalf("recall calls %+v; want %+v", mem.recalls, wantCall)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "What I remember about <@"+testOther+"> that is visible here, newest first") {
		t.Fatalf("reply lines:\n%s", got)
	}
	for i, id := range []string{"fnew2345", "fbig2345", "fbig2345", "fold2345"} {
		if !strings.HasPrefix(lines[i+1], "• `"+id+"`") {
			t.Fatalf("line %d is not %s: %q", i+1, id, lines[i+1])
		}
		if n := utf8.RuneCountInString(lines[i+1]); n > 1800 {
			t.Fatalf("line %d has %d characters", i+1, n)
		}
	}
	wantFirst := fmt.Sprintf("• `fnew2345` · preference · medium confidence · expires <t:%d:R> — @%severyone \\*\\*bold\\*\\* \\_x\\_ \\`code\\` \\> quote ⏎ \\# heading ⏎ \\- item",
		expires.Unix(), zeroWidthSpace)
	if lines[1] != wantFirst {
		t.Fatalf("first line\n got %q\nwant %q", lines[1], wantFirst)
	}
	if !strings.Contains(lines[4], "low confidence · no expiry — first fact") {
		t.Fatalf("last line %q", lines[4])
	}
	fitted := bot.Fit(got, bot.MaxContent)
	if n := utf8.RuneCountInString(fitted); n > bot.MaxContent {
		t.Fatalf("fitted reply has %d characters", n)
	}
	if !strings.HasPrefix(fitted, lines[0]+"\n"+lines[1]+"\n") || !strings.Contains(fitted, "…and ") {
		t.Fatalf("the cut did not land on a line:\n%s", fitted)
	}
	if strings.Contains(got, "@everyone") {
		t.Fatal("raw @everyone in the reply")
	}
}

func TestRecallSaysWhenThereIsMore(t *testing.T) {
	mem := &fakeMemory{recallResp: api.RecallResponse{Facts: []api.Fact{fact("fa", testInvoker, testInvoker, "a")}, Total: 31}}
	got, _ := run(t, mem, Policy{}, invocation(subRecall, nil))
	if !strings.HasPrefix(got, "What I remember about you that is visible here: the newest 1 of 31") {
		t.Fatalf("reply %q", got)
	}
	if mem.recalls[0].UserID != testInvoker {
		t.Fatalf("recall without a person asked about %q", mem.recalls[0].UserID)
	}
}

func TestRecallNothingVisible(t *testing.T) {
	tests := []struct {
		name string
		opts map[string]any
		want string
	}{
		{"someone", map[string]any{optPerson: interaction.User{ID: testOther}}, "I don't remember anything about <@" + testOther + "> that is visible here."},
		{"yourself", nil, "I don't remember anything about you that is visible here."},
		{"search", map[string]any{optQuery: "tea"}, "I don't remember anything about you that matches that search and is visible here."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, refused := run(t, &fakeMemory{}, Policy{}, invocation(subRecall, tt.opts))
			if refused || got != tt.want {
				t.Fatalf("reply %q refused %v", got, refused)
			}
		})
	}
}

func TestMine(t *testing.T) {
	past := testNow.Add(-time.Hour)
	future := testNow.Add(time.Hour)
	byOther := fact("fone2345", testInvoker, testOther, "told by someone")
	byOther.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "777"}
	byOther.ExpiresAt = &future
	mine := fact("ftwo2345", testInvoker, testInvoker, "told by me")
	expired := fact("fold2345", testInvoker, "", "@here old news")
	expired.ExpiresAt, expired.Expired = &past, true
	mem := &fakeMemory{mineResp: api.RecallResponse{Facts: []api.Fact{byOther, mine, expired}, Total: 3, Capacity: 128}}
	got, refused := run(t, mem, Policy{}, invocation(subMine, nil))
	if refused {
		t.Fatalf("refused: %q", got)
	}
	if len(mem.mines) != 1 || mem.mines[0] != (mineCall{testGuild, testInvoker, testInvoker}) {
		t.Fatalf("mine calls %+v", mem.mines)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "3 of 128") {
		t.Fatalf("reply:\n%s", got)
	}
	for i, want := range []string{
		fmt.Sprintf("• `fone2345` · person-fact · high confidence · visible only in <#777> · proposed by <@%s> · expires <t:%d:R> — told by someone", testOther, future.Unix()),
		"• `ftwo2345` · person-fact · high confidence · visible in this server · proposed by you · no expiry — told by me",
		"• `fold2345` · person-fact · high confidence · visible in this server · added by the operator · expired — @" + zeroWidthSpace + "here old news",
	} {
		if lines[i+1] != want {
			t.Errorf("line %d\n got %q\nwant %q", i+1, lines[i+1], want)
		}
	}
	empty, _ := run(t, &fakeMemory{}, Policy{}, invocation(subMine, nil))
	if empty != "I keep nothing about you in this server (0 of 128)." {
		t.Fatalf("empty mine: %q", empty)
	}
}

func TestForget(t *testing.T) {
	tests := []struct {
		name     string
		opts     map[string]any
		err      error
		want     string
		refused  bool
		wantCall *forgetCall
	}{
		{"yourself, 204", map[string]any{optFact: " fabc2345 "}, nil, "Forgotten: `fabc2345` about you.", false,
			&forgetCall{testGuild, testInvoker, "fabc2345", testInvoker}},
		{"someone else, 204", map[string]any{optFact: "fabc2345", optPerson: interaction.User{ID: testOther}}, nil, "Forgotten: `fabc2345` about <@" + testOther + ">.", false,
			&forgetCall{testGuild, testOther, "fabc2345", testInvoker}},
		{"403", map[string]any{optFact: "fabc2345", optPerson: interaction.User{ID: testOther}}, memErr(memoryclient.KindForbidden, "x"),
			"You can only forget facts about you or facts you proposed.", true, &forgetCall{testGuild, testOther, "fabc2345", testInvoker}},
		{"404", map[string]any{optFact: "fabc2345", optPerson: interaction.User{ID: testOther}}, memErr(memoryclient.KindNotFound, "x"),
			"There is no fact with that id about <@" + testOther + ">.", true, &forgetCall{testGuild, testOther, "fabc2345", testInvoker}},
		{"not an id", map[string]any{optFact: "fabc · likes tea"}, nil, "There is no fact with that id about <@" + testInvoker + ">.", true, nil},
		{"unavailable", map[string]any{optFact: "fabc2345"}, memErr(memoryclient.KindUnavailable, "x"), inEnglish(t, lang.UnavailableWrite, nil), true,
			&forgetCall{testGuild, testInvoker, "fabc2345", testInvoker}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{forgetErr: tt.err}
			got, refused := run(t, mem, Policy{}, invocation(subForget, tt.opts))
			if got != tt.want || refused != tt.refused {
				t.Fatalf("reply %q refused %v; want %q", got, refused, tt.want)
			}
			switch {
			case tt.wantCall == nil && len(mem.forgets) != 0:
				t.Fatalf("forget was called: %+v", mem.forgets)
			case tt.wantCall != nil && (len(mem.forgets) != 1 || mem.forgets[0] != *tt.wantCall):
				t.Fatalf("forget calls %+v; want %+v", mem.forgets, *tt.wantCall)
			}
		})
	}
}

func TestMemoryOutOfReach(t *testing.T) {
	tests := []struct {
		name string
		sub  string
		opts map[string]any
		mem  *fakeMemory
		want string
	}{
		{"propose unavailable", subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x"},
			&fakeMemory{proposeErr: memErr(memoryclient.KindUnavailable, "x")}, "Sorry, memory is unavailable right now; nothing was saved."},
		{"propose timeout", subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x"},
			&fakeMemory{proposeErr: memErr(memoryclient.KindTimeout, "x")}, "Sorry, memory is unavailable right now; nothing was saved."},
		{"propose conflict", subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x"},
			&fakeMemory{proposeErr: memErr(memoryclient.KindConflict, "x")}, inEnglish(t, lang.Conflict, nil)},
		{"recall timeout", subRecall, nil, &fakeMemory{recallErr: memErr(memoryclient.KindTimeout, "x")},
			"Sorry, memory is unavailable right now; please try again shortly."},
		{"mine unavailable", subMine, nil, &fakeMemory{mineErr: memErr(memoryclient.KindUnavailable, "x")},
			"Sorry, memory is unavailable right now; please try again shortly."},
		{"forget timeout", subForget, map[string]any{optFact: "fabc2345"}, &fakeMemory{forgetErr: memErr(memoryclient.KindTimeout, "x")},
			"Sorry, memory is unavailable right now; nothing was saved."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, refused := run(t, tt.mem, Policy{}, invocation(tt.sub, tt.opts))
			if !refused || got != tt.want {
				t.Fatalf("reply %q refused %v; want %q", got, refused, tt.want)
			}
		})
	}
}

func TestUnknownErrorsReachTheRouterUnchanged(t *testing.T) {
	cause := memErr(memoryclient.KindInternal, "x")
	_, err := handle(context.Background(), PersonMemory(&fakeMemory{recallErr: cause}, Policy{}, fixedNow, testCatalog(t)), invocation(subRecall, nil))
	if err != cause {
		t.Fatalf("err = %v; want the client's error unchanged", err)
	}
}
