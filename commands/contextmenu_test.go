package commands

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

const (
	testMessage = "700000000000000007"
	testAuthor  = testOther
	otherChan   = "200000000000000099"
)

// testFormKey seals the forms menus opens and form builds.
const testFormKey = "test form key"

// menus returns the context menus by name over mem, with testRole as the
// memory role.
func menus(mem *fakeMemory) map[string]interaction.Command {
	cat, err := lang.Load()
	if err != nil {
		panic(err)
	}
	out := map[string]interaction.Command{}
	for _, c := range ContextMenus(mem, Policy{MemoryRoleIDs: []string{testRole}}, []byte(testFormKey), fixedNow, cat) {
		out[c.Definition.Name] = c
	}
	return out
}

// onMessage is "Remember this" by testInvoker on a message in channel.
func onMessage(author interaction.User, channel, content string) interaction.Invocation {
	return interaction.Invocation{ID: testInterID, GuildID: testGuild, ChannelID: testChannel, User: interaction.User{ID: testInvoker},
		Command: nameRememberThis, TargetID: testMessage,
		TargetMessage: &interaction.Message{ID: testMessage, ChannelID: channel, Author: author, Content: content}}
}

// onUser is a user command by testInvoker on target.
func onUser(name string, target interaction.User) interaction.Invocation {
	return interaction.Invocation{ID: testInterID, GuildID: testGuild, ChannelID: testChannel, User: interaction.User{ID: testInvoker},
		Command: name, TargetID: target.ID, TargetUser: &target}
}

// say is a message in English, as the tests expect replies.
func say(id lang.ID) string { return sayWith(id, nil) }

// sayWith is a message with args in English.
func sayWith(id lang.ID, args lang.Args) string {
	cat, err := lang.Load()
	if err != nil {
		panic(err)
	}
	return cat.English().Say(id, args)
}

// form is the custom_id of a form with ids that Clankie opened for
// testInvoker in testChannel, as its handler seals it.
func form(prefix string, ids ...string) string {
	cm := contextMenus{seal: newFormSeal([]byte(testFormKey))}
	return cm.formID(submit("", nil), prefix, ids...)
}

// submit is testInvoker submitting a form with customID and values.
func submit(customID string, values map[string]any) interaction.Invocation {
	return interaction.Invocation{ID: "900000000000000009", GuildID: testGuild, ChannelID: testChannel, User: interaction.User{ID: testInvoker},
		CustomID: customID, Options: interaction.NewOptions(values)}
}

func sentenceOf(t *testing.T, err error) string {
	t.Helper()
	ue, ok := interaction.AsUserError(err)
	if !ok {
		t.Fatalf("error %v is not a sentence", err)
	}
	return ue.Sentence
}

func TestRememberThisOpensAFormPrefilledWithTheMessage(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"a short message", "I like green tea", "I like green tea"},
		{"a message past the fact limit", strings.Repeat("a", 3000), strings.Repeat("a", api.MaxFactBody)},
		// Discord counts a text input in UTF-16 units: 1500 emoji are 3000.
		{"astral characters", strings.Repeat("🍵", 1500), strings.Repeat("🍵", api.MaxFactBody/2)},
		{"an empty message (an image)", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{}
			c := menus(mem)[nameRememberThis]
			inv := onMessage(interaction.User{ID: testAuthor}, testChannel, tc.content)
			inv.RoleIDs = []string{testRole}
			rep, err := c.Handlers[""](context.Background(), inv)
			if err != nil {
				t.Fatal(err)
			}
			m := rep.Modal
			if m == nil || m.Title != "Remember this" || m.CustomID != form(prefixRememberMessage, testMessage, testAuthor) ||
				len(m.Inputs) != 2 {
				t.Fatalf("reply %+v", rep)
			}
			fact, expires := m.Inputs[0], m.Inputs[1]
			if fact.Value != tc.want || fact.CustomID != inputFact || !fact.Required || fact.MaxLength != api.MaxFactBody ||
				fact.Style != interaction.TextParagraph {
				t.Fatalf("fact input %+v (value of %d characters)", fact, utf8.RuneCountInString(fact.Value))
			}
			if expires.CustomID != inputExpires || expires.Required || expires.Style != interaction.TextShort {
				t.Fatalf("expires input %+v", expires)
			}
			if !c.OpensModal || mem.calls() != 0 {
				t.Fatalf("OpensModal %v; %d memory calls before the submit", c.OpensModal, mem.calls())
			}
		})
	}
}

func TestRememberThisRefusesWhatCouldNotBeStored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		inv   interaction.Invocation
		roles []string
		says  string
	}{
		{"a bot's message", onMessage(interaction.User{ID: testAuthor, Bot: true}, testChannel, "beep"), nil, say(lang.BotMessage)},
		{"a webhook's message", func() interaction.Invocation {
			inv := onMessage(interaction.User{ID: testAuthor}, testChannel, "hook")
			inv.TargetMessage.Webhook = true
			return inv
		}(), nil, say(lang.BotMessage)},
		{"someone else's without the role", onMessage(interaction.User{ID: testAuthor}, testChannel, "x"), nil, say(lang.OnlyYourOwnMessages)},
		{"a message in another channel", onMessage(interaction.User{ID: testInvoker}, otherChan, "x"), nil, sayWith(lang.MessageElsewhere, lang.Args{"Menu": "Remember this"})},
		{"no resolved message", func() interaction.Invocation {
			inv := onMessage(interaction.User{ID: testInvoker}, testChannel, "x")
			inv.TargetMessage = nil
			return inv
		}(), nil, interaction.StaleSentence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{}
			tc.inv.RoleIDs = tc.roles
			rep, err := menus(mem)[nameRememberThis].Handlers[""](context.Background(), tc.inv)
			if rep.Modal != nil || sentenceOf(t, err) != tc.says || mem.calls() != 0 {
				t.Fatalf("reply %+v, %v; want %q and no memory call", rep, err, tc.says)
			}
		})
	}
	t.Run("someone else's with the role opens the form", func(t *testing.T) {
		inv := onMessage(interaction.User{ID: testAuthor}, testChannel, "x")
		inv.RoleIDs = []string{testRole}
		rep, err := menus(&fakeMemory{})[nameRememberThis].Handlers[""](context.Background(), inv)
		if err != nil || rep.Modal == nil {
			t.Fatalf("reply %+v, %v", rep, err)
		}
	})
}

func TestRememberThisSubmitStoresAFactAboutTheAuthor(t *testing.T) {
	mem := &fakeMemory{}
	inv := submit(form(prefixRememberMessage, testMessage, testInvoker),
		map[string]any{inputFact: "  I like green tea, edited  ", inputExpires: "7d"})
	rep, err := menus(mem)[nameRememberThis].Modals[prefixRememberMessage](context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	if len(mem.proposals) != 1 {
		t.Fatalf("%d proposals", len(mem.proposals))
	}
	req := mem.proposals[0]
	f := req.Fact
	want := api.Provenance{SourceEventID: inv.ID, ProposerUserID: testInvoker, ChannelID: testChannel, SourceMessageID: testMessage}
	if f.Subject != (api.Subject{GuildID: testGuild, UserID: testInvoker}) || f.Body != "I like green tea, edited" ||
		f.Visibility != (api.Visibility{Scope: api.ScopeChannel, ChannelID: testChannel}) || f.Provenance != want ||
		f.Kind != api.KindPersonFact || f.Confidence != confidenceHighValue || f.ExpiresAt == nil ||
		req.ProposalID != "discord-interaction-"+inv.ID {
		t.Fatalf("proposed %+v", req)
	}
	if !strings.HasPrefix(rep.Content, "Remembered `fnew2345` about you") {
		t.Fatalf("reply %q", rep.Content)
	}
	t.Run("about someone else with the role", func(t *testing.T) {
		mem := &fakeMemory{}
		inv := submit(form(prefixRememberMessage, testMessage, testAuthor), map[string]any{inputFact: "plays chess"})
		inv.RoleIDs = []string{testRole}
		if _, err := menus(mem)[nameRememberThis].Modals[prefixRememberMessage](context.Background(), inv); err != nil {
			t.Fatal(err)
		}
		if len(mem.proposals) != 1 || mem.proposals[0].Fact.Subject.UserID != testAuthor ||
			mem.proposals[0].Fact.Provenance.ProposerUserID != testInvoker || mem.proposals[0].Fact.Confidence != confidenceMedValue {
			t.Fatalf("proposed %+v", mem.proposals)
		}
	})
}

// TestForgedFormsStoreNothing: a custom_id is whatever a client sends, so
// every submit is checked again: its seal must cover its ids and the
// server, channel and member Discord names, its ids must be snowflakes,
// and the submitter must have authority over the subject; anything else
// is a sentence and no call to memory.
func TestForgedFormsStoreNothing(t *testing.T) {
	values := map[string]any{inputFact: "forged", inputKind: "person-fact"}
	sealedFor := func(guild, channel, user, prefix string, ids ...string) string {
		cm := contextMenus{seal: newFormSeal([]byte(testFormKey))}
		return cm.formID(interaction.Invocation{GuildID: guild, ChannelID: channel, User: interaction.User{ID: user}}, prefix, ids...)
	}
	mine := form(prefixRememberMessage, testMessage, testInvoker)
	otherKey := contextMenus{seal: newFormSeal([]byte("another key"))}
	for _, tc := range []struct {
		name, menu, prefix, customID, says string
	}{
		{"someone else as author", nameRememberThis, prefixRememberMessage, form(prefixRememberMessage, testMessage, testAuthor),
			say(lang.OnlyYourOwnMessages)},
		{"opened in another channel", nameRememberThis, prefixRememberMessage,
			sealedFor(testGuild, otherChan, testInvoker, prefixRememberMessage, testMessage, testInvoker), say(lang.StaleForm)},
		{"opened by another member", nameRememberThis, prefixRememberMessage,
			sealedFor(testGuild, testChannel, testAuthor, prefixRememberMessage, testMessage, testInvoker), say(lang.StaleForm)},
		{"opened in another server", nameRememberThis, prefixRememberMessage,
			sealedFor("100000000000000042", testChannel, testInvoker, prefixRememberMessage, testMessage, testInvoker), say(lang.StaleForm)},
		{"signed with another key", nameRememberThis, prefixRememberMessage,
			otherKey.formID(submit("", nil), prefixRememberMessage, testMessage, testInvoker), say(lang.StaleForm)},
		{"another message under the seal", nameRememberThis, prefixRememberMessage,
			strings.Replace(mine, testMessage, "700000000000000008", 1), say(lang.StaleForm)},
		{"no seal", nameRememberThis, prefixRememberMessage, "remember-msg:" + testMessage + ":" + testInvoker, say(lang.StaleForm)},
		{"a non-snowflake author", nameRememberThis, prefixRememberMessage, form(prefixRememberMessage, testMessage, "<@"+testInvoker+">"),
			say(lang.StaleForm)},
		{"a missing id", nameRememberThis, prefixRememberMessage, form(prefixRememberMessage, testMessage), say(lang.StaleForm)},
		{"an extra id", nameRememberThis, prefixRememberMessage, form(prefixRememberMessage, testChannel, testMessage, testInvoker),
			say(lang.StaleForm)},
		{"someone else as subject", nameRememberAboutThem, prefixRememberUser, form(prefixRememberUser, testAuthor), say(lang.OnlyYourself)},
		{"a non-snowflake subject", nameRememberAboutThem, prefixRememberUser, form(prefixRememberUser, "everyone"), say(lang.StaleForm)},
		{"another prefix", nameRememberAboutThem, prefixRememberUser, form(prefixRememberMessage, testInvoker), say(lang.StaleForm)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{}
			rep, err := menus(mem)[tc.menu].Modals[tc.prefix](context.Background(), submit(tc.customID, values))
			if sentenceOf(t, err) != tc.says || rep.Content != "" || mem.calls() != 0 {
				t.Fatalf("reply %+v, %v; want %q and nothing stored", rep, err, tc.says)
			}
		})
	}
}

func TestRememberAboutThem(t *testing.T) {
	t.Run("opens a form naming the kinds", func(t *testing.T) {
		mem := &fakeMemory{}
		rep, err := menus(mem)[nameRememberAboutThem].Handlers[""](context.Background(), onUser(nameRememberAboutThem, interaction.User{ID: testInvoker}))
		if err != nil || rep.Modal == nil {
			t.Fatalf("reply %+v, %v", rep, err)
		}
		m := rep.Modal
		if m.CustomID != form(prefixRememberUser, testInvoker) || m.Title != "Remember about them" || len(m.Inputs) != 3 ||
			m.Inputs[1].CustomID != inputKind || m.Inputs[1].Label != "person-fact, preference or relationship-note" || m.Inputs[1].Value != string(api.KindPersonFact) || mem.calls() != 0 {
			t.Fatalf("modal %+v", m)
		}
	})
	for _, tc := range []struct {
		name   string
		target interaction.User
		says   string
	}{
		{"a bot", interaction.User{ID: testAuthor, Bot: true}, say(lang.BotSubject)},
		{"someone else without the role", interaction.User{ID: testAuthor}, say(lang.OnlyYourself)},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			rep, err := menus(&fakeMemory{})[nameRememberAboutThem].Handlers[""](context.Background(), onUser(nameRememberAboutThem, tc.target))
			if rep.Modal != nil || sentenceOf(t, err) != tc.says {
				t.Fatalf("reply %+v, %v", rep, err)
			}
		})
	}
	t.Run("an unknown kind is refused and nothing stored", func(t *testing.T) {
		mem := &fakeMemory{}
		_, err := menus(mem)[nameRememberAboutThem].Modals[prefixRememberUser](context.Background(),
			submit(form(prefixRememberUser, testInvoker), map[string]any{inputFact: "likes tea", inputKind: "secret"}))
		if sentenceOf(t, err) != sayWith(lang.UnknownKind, lang.Args{"A": "person-fact", "B": "preference", "C": "relationship-note"}) || mem.calls() != 0 {
			t.Fatalf("%v, %d calls", err, mem.calls())
		}
	})
	t.Run("a known kind is stored about them, visible in the server", func(t *testing.T) {
		mem := &fakeMemory{}
		inv := submit(form(prefixRememberUser, testAuthor), map[string]any{inputFact: "likes tea", inputKind: " Preference "})
		inv.RoleIDs = []string{testRole}
		if _, err := menus(mem)[nameRememberAboutThem].Modals[prefixRememberUser](context.Background(), inv); err != nil {
			t.Fatal(err)
		}
		f := mem.proposals[0].Fact
		if len(mem.proposals) != 1 || f.Kind != api.KindPreference || f.Subject.UserID != testAuthor || f.Body != "likes tea" ||
			f.Visibility.Scope != api.ScopeGuild || f.Provenance.SourceMessageID != "" || f.Provenance.ProposerUserID != testInvoker {
			t.Fatalf("proposed %+v", mem.proposals)
		}
	})
}

// TestWhatClankieKnowsIsMineOrRecall: on yourself the reply is mine's, on
// anyone else recall's about them here.
func TestWhatClankieKnowsIsMineOrRecall(t *testing.T) {
	facts := api.RecallResponse{Facts: []api.Fact{fact("f1", testInvoker, testInvoker, "likes tea")}, Total: 1}
	mem := &fakeMemory{mineResp: facts, recallResp: facts}
	pm := PersonMemory(mem, Policy{}, fixedNow, testCatalog(t))
	menu := menus(mem)[nameWhatClankieKnows].Handlers[""]

	got, err := menu(context.Background(), onUser(nameWhatClankieKnows, interaction.User{ID: testInvoker}))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := handle(context.Background(), pm, invocation(subMine, nil))
	if got.Content != want.Content || len(mem.mines) != 2 || len(mem.recalls) != 0 {
		t.Fatalf("on yourself %q, want mine's %q", got.Content, want.Content)
	}

	got, err = menu(context.Background(), onUser(nameWhatClankieKnows, interaction.User{ID: testOther}))
	if err != nil {
		t.Fatal(err)
	}
	want, _ = handle(context.Background(), pm, invocation(subRecall, map[string]any{optPerson: interaction.User{ID: testOther}}))
	if got.Content != want.Content || len(mem.recalls) != 2 || !reflect.DeepEqual(mem.recalls[0], mem.recalls[1]) ||
		mem.recalls[0].UserID != testOther || mem.recalls[0].Query.ChannelID != testChannel {
		t.Fatalf("on someone else %q, want recall's %q (calls %+v)", got.Content, want.Content, mem.recalls)
	}
}

func TestExportIsAFileOfMineFacts(t *testing.T) {
	f := fact("f1", testInvoker, testOther, "likes tea")
	f.Provenance.SourceMessageID = testMessage
	for _, tc := range []struct {
		name  string
		facts []api.Fact
		says  string
	}{
		{"none", nil, "I keep nothing about you in this server; `clankie-memory-" + testGuild + ".json` holds an empty list."},
		{"one", []api.Fact{f}, "Here is the one fact I keep about you in this server, in `clankie-memory-" + testGuild + ".json`."},
		{"two", []api.Fact{f, fact("f2", testInvoker, testInvoker, "plays go")}, "Here are the 2 facts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{mineResp: api.RecallResponse{Facts: tc.facts, Total: len(tc.facts)}}
			rep, err := handle(context.Background(), PersonMemory(mem, Policy{}, fixedNow, testCatalog(t)), invocation(subExport, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(rep.Content, tc.says) || len(rep.Files) != 1 {
				t.Fatalf("reply %+v", rep)
			}
			file := rep.Files[0]
			var got []api.Fact
			if file.Name != "clankie-memory-"+testGuild+".json" || file.ContentType != "application/json" || json.Unmarshal(file.Data, &got) != nil {
				t.Fatalf("file %s %s %s", file.Name, file.ContentType, file.Data)
			}
			want := tc.facts
			if want == nil {
				want = []api.Fact{}
			}
			if !reflect.DeepEqual(got, want) || len(want) > 0 && !strings.Contains(string(file.Data), "\n  {") {
				t.Fatalf("file holds %s", file.Data)
			}
			if len(mem.mines) != 1 || mem.mines[0] != (mineCall{testGuild, testInvoker, testInvoker}) || len(mem.recalls) != 0 {
				t.Fatalf("asked memory %+v %+v", mem.mines, mem.recalls)
			}
		})
	}
}

// TestRecallAndMineShowTheSourceMessage: a fact taken from a message shows
// its jump link, before the text so that cutting a long fact keeps it; a
// fact whose ids could not form a link shows none.
func TestRecallAndMineShowTheSourceMessage(t *testing.T) {
	f := fact("f1", testInvoker, testInvoker, strings.Repeat("long ", 500))
	f.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: testChannel}
	f.Provenance.SourceMessageID = testMessage
	link := "https://discord.com/channels/" + testGuild + "/" + testChannel + "/" + testMessage
	for name, line := range map[string]string{"recall": factLine(english(t), f, testNow), "mine": mineLine(english(t), testInvoker, f, testNow)} {
		if !strings.Contains(line, " · "+link+" — ") {
			t.Errorf("%s shows %q, want the link %s", name, line, link)
		}
	}
	guildWide := f
	guildWide.Visibility = api.Visibility{Scope: api.ScopeGuild}
	if !strings.Contains(factLine(english(t), guildWide, testNow), link) {
		t.Errorf("a guild-wide fact links to its provenance channel: %q", factLine(english(t), guildWide, testNow))
	}
	for name, bad := range map[string]func(*api.Fact){
		"no message":       func(f *api.Fact) { f.Provenance.SourceMessageID = "" },
		"a forged message": func(f *api.Fact) { f.Provenance.SourceMessageID = "1)[x](https://evil" },
	} {
		g := f
		bad(&g)
		if line := factLine(english(t), g, testNow); strings.Contains(line, "discord.com") {
			t.Errorf("%s: %q", name, line)
		}
	}
}

// TestContextMenusFitDiscord: names 1–32 characters in every language, no
// description or options; forms' titles and labels at most 45 characters
// and hints at most 100 in every language; the kind label and the unknown
// kind's refusal name every kind, in every language, as the form reads it.
func TestContextMenusFitDiscord(t *testing.T) {
	cat := testCatalog(t)
	for _, c := range ContextMenus(&fakeMemory{}, Policy{}, nil, nil, cat) {
		d := c.Definition
		if n := utf8.RuneCountInString(d.Name); n < 1 || n > 32 || d.Description != "" || len(d.Options) != 0 ||
			(d.Type != discordgo.UserApplicationCommand && d.Type != discordgo.MessageApplicationCommand) || c.Handlers[""] == nil {
			t.Errorf("context menu %+v", d)
		}
		if d.NameLocalizations == nil || len(*d.NameLocalizations) != len(lang.Locales()) {
			t.Errorf("context menu %q localized in %v", d.Name, d.NameLocalizations)
		}
	}
	for _, l := range append([]discordgo.Locale{discordgo.EnglishUS}, lang.Locales()...) {
		say := cat.Printer(string(l))
		for _, s := range []string{say.Say(lang.FormRememberThis, nil), say.Say(lang.FormRememberAboutThem, nil),
			say.Say(lang.FormFact, nil), say.Say(lang.FormExpires, nil), say.Say(lang.FormKinds, kindArgs(say))} {
			if n := utf8.RuneCountInString(s); n < 1 || n > interaction.MaxModalTitle {
				t.Errorf("%s: %q has %d characters", l, s, n)
			}
		}
		if n := utf8.RuneCountInString(say.Say(lang.FormExpiresHint, nil)); n > 100 {
			t.Errorf("%s: the expiry hint has %d characters", l, n)
		}
		label, refusal := say.Say(lang.FormKinds, kindArgs(say)), say.Say(lang.UnknownKind, kindArgs(say))
		for _, k := range api.Kinds() {
			word := kindWord(say, k)
			if got, ok := formKind(say, strings.ToUpper(word)); !ok || got != k {
				t.Errorf("%s: the form reads %q as %q", l, word, got)
			}
			if got, ok := formKind(say, string(k)); !ok || got != k {
				t.Errorf("%s: the form reads %q as %q", l, k, got)
			}
			if !strings.Contains(label, word) || !strings.Contains(refusal, word) {
				t.Errorf("%s: the kind label %q or refusal %q does not name %s", l, label, refusal, word)
			}
		}
	}
}
