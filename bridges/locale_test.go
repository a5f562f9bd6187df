package bridges

import (
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/lang"
)

// in sets an interaction's locale.
func in(locale discordgo.Locale, spec discordtest.InteractionSpec) discordtest.InteractionSpec {
	spec.Locale = locale
	return spec
}

// The text bridge answers each member in their Discord language, real
// discordgo against the fake Discord and the real memory service: German
// for de, Japanese for ja, English for a locale the catalog does not
// translate; and the commands it registered (as the fake received them)
// carry all five locales on every name and description.
func TestTextBridgeSpeaksTheMembersLanguage(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	startText(t, fake, mem.url, l)

	puts := fake.CommandPuts(guildID)
	if len(puts) != 1 || len(puts[0].Commands) != 4 {
		t.Fatalf("registered %+v", puts)
	}
	for _, c := range puts[0].Commands {
		if c.Type == discordgo.ChatApplicationCommand {
			assertLocalized(t, c)
			continue
		}
		// A context menu has a name and nothing else to translate.
		for _, l := range lang.Locales() {
			if c.NameLocalizations == nil || (*c.NameLocalizations)[l] == "" {
				t.Errorf("the context menu %q lacks %s: %v", c.Name, l, c.NameLocalizations)
			}
		}
	}

	for _, tc := range []struct {
		locale             discordgo.Locale
		proposed, recalled string
		refused            string
	}{
		{discordgo.German, "Gemerkt: `", "Was ich über dich weiß und hier sichtbar ist, das Neueste zuerst:",
			"Du kannst nur Fakten über dich selbst vorschlagen."},
		{discordgo.Japanese, "あなたについて`", "あなたについて覚えていて、ここで見られること（新しい順）：",
			"提案できるのは自分自身についての事実だけです。"},
		{discordgo.ChineseCN, "Remembered `", "What I remember about you that is visible here, newest first:",
			"You can only propose facts about yourself."},
	} {
		t.Run(string(tc.locale), func(t *testing.T) {
			user := map[discordgo.Locale]string{discordgo.German: alice, discordgo.Japanese: bob, discordgo.ChineseCN: carol}[tc.locale]
			got := reply(t, fake, in(tc.locale, pm(guildID, textA, user, "propose", person(user), str("fact", "likes green tea"))))
			if !strings.HasPrefix(got, tc.proposed) || !strings.Contains(got, "likes green tea") {
				t.Fatalf("propose: %q", got)
			}
			if got := reply(t, fake, in(tc.locale, pm(guildID, textA, user, "recall"))); !strings.HasPrefix(got, tc.recalled+"\n") {
				t.Fatalf("recall: %q", got)
			}
			if got := reply(t, fake, in(tc.locale, pm(guildID, textA, user, "propose", person(admin), str("fact", "x")))); got != tc.refused {
				t.Fatalf("refusal: %q", got)
			}
		})
	}

	// Remember this, in German: the form's words, the kind words a form
	// reads and the answer to its submit.
	t.Run("Remember this in German", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		open := fake.Interact(ctx, in(discordgo.German, onMessage(carol, carol, "mag grünen Tee")))
		modal, err := open.WaitModal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if modal.Title != "Das merken" || modal.Inputs[0].Label != "Was ich mir merken soll" || modal.Inputs[1].Label != "Vergessen nach (optional)" {
			t.Fatalf("modal %+v", modal)
		}
		sub, err := open.SubmitSpec(map[string]string{"fact": "mag grünen Tee"})
		if err != nil {
			t.Fatal(err)
		}
		if got := answer(t, fake.Submit(ctx, sub)).Content; !strings.HasPrefix(got, "Gemerkt: `") || !strings.Contains(got, "mag grünen Tee") {
			t.Fatalf("submit answered %q", got)
		}
		member := fake.Interact(ctx, in(discordgo.German, onMember(carol, "Remember about them", carol)))
		modal, err = member.WaitModal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if modal.Title != "Über diese Person merken" || modal.Inputs[1].Label != "Personenfakt, Vorliebe oder Beziehungsnotiz" ||
			modal.Inputs[1].Value != "Personenfakt" {
			t.Fatalf("modal %+v", modal)
		}
		sub, err = member.SubmitSpec(map[string]string{"fact": "trinkt Kaffee", "kind": "vorliebe"})
		if err != nil {
			t.Fatal(err)
		}
		if got := answer(t, fake.Submit(ctx, sub)).Content; !strings.Contains(got, "(Vorliebe, ") {
			t.Fatalf("submit answered %q", got)
		}
	})
}

// assertLocalized checks that a registered command carries the five
// locales on its name and description, and on every subcommand's and
// option's, and each choice's name.
func assertLocalized(t *testing.T, c *discordgo.ApplicationCommand) {
	t.Helper()
	five := func(what string, m map[discordgo.Locale]string) {
		t.Helper()
		for _, l := range lang.Locales() {
			if m[l] == "" {
				t.Errorf("%s lacks %s: %v", what, l, m)
			}
		}
	}
	if c.NameLocalizations == nil || c.DescriptionLocalizations == nil {
		t.Fatalf("%s carries no localizations", c.Name)
	}
	five(c.Name+" name", *c.NameLocalizations)
	five(c.Name+" description", *c.DescriptionLocalizations)
	var walk func(path string, opts []*discordgo.ApplicationCommandOption)
	walk = func(path string, opts []*discordgo.ApplicationCommandOption) {
		for _, o := range opts {
			p := path + " " + o.Name
			five(p+" name", o.NameLocalizations)
			five(p+" description", o.DescriptionLocalizations)
			for _, ch := range o.Choices {
				five(p+" choice "+ch.Name, ch.NameLocalizations)
			}
			walk(p, o.Options)
		}
	}
	walk(c.Name, c.Options)
}

// The voice bridge registers /voice localized too, answers /voice join in
// the invoker's language, and posts the disclosure, read by everyone in
// the channel, in the server's (the join's guild_locale).
func TestVoiceDisclosureInTheServersLanguage(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover)...)
	var voiceCmd *discordgo.ApplicationCommand
	for _, c := range e.fake.Commands(guildID) {
		assertLocalized(t, c)
		if c.Name == "voice" {
			voiceCmd = c
		}
	}
	if voiceCmd == nil || (*voiceCmd.NameLocalizations)[discordgo.German] != "sprachkanal" {
		t.Fatalf("registered %+v", e.fake.Commands(guildID))
	}
	got := reply(t, e.fake, discordtest.InteractionSpec{GuildID: guildID, ChannelID: textA, UserID: mover, Command: "voice", Subcommand: "join",
		Locale: discordgo.Japanese, GuildLocale: discordgo.German})
	if !strings.HasPrefix(got, "Clankieが<#"+voiceRoom+">で聞いています。") {
		t.Fatalf("join reply %q", got)
	}
	d := e.messages(voiceRoom, 1)[0]
	for _, want := range []string{"**Clankie, ein KI-Sprachassistent, ist in diesem Sprachkanal.**", "Nur wer zustimmt, wird gehört",
		"Sprachmodell bei 127.0.0.1", "`/sprachkanal verlassen`"} {
		if !strings.Contains(d.Content, want) {
			t.Errorf("disclosure lacks %q: %q", want, d.Content)
		}
	}
	if !strings.Contains(string(d.Components), `"label":"Zustimmen"`) || !strings.Contains(string(d.Components), `"label":"Ablehnen"`) {
		t.Errorf("buttons %s", d.Components)
	}
	if v := e.fake.Violations(); len(v) != 0 {
		t.Fatalf("Discord refused: %+v", v)
	}
}
