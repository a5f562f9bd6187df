package discordtest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/discordtest"
)

// TestFakeChecksCommandLocalizations: what Discord's description does not
// say of a localization map and Discord still refuses: keys that are not
// Discord locales, names outside the name rule (or not lowercase), two
// options of one level with one name in a locale, descriptions and
// choice names of the wrong length. (The description itself bounds the
// values' lengths, names 1–32, descriptions and choice names 1–100, and
// the map to 34 entries; it says nothing of keys, the name rule or
// uniqueness.)
func TestFakeChecksCommandLocalizations(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	opt := func(name, nameLoc string) string {
		return `{"type":3,"name":"` + name + `","description":"d","name_localizations":{"de":"` + nameLoc + `"}}`
	}
	for _, tc := range []struct {
		name string
		body string
		path []string
	}{
		{"a key that is no locale", `[{"name":"ping","description":"d","name_localizations":{"german":"ping"}}]`, []string{"0", "name_localizations", "german"}},
		{"a language without its region", `[{"name":"ping","description":"d","description_localizations":{"es":"d"}}]`, []string{"0", "description_localizations", "es"}},
		{"an upper-case name", `[{"name":"ping","description":"d","name_localizations":{"de":"Ping"}}]`, []string{"0", "name_localizations", "de"}},
		{"a name with a space", `[{"name":"ping","description":"d","name_localizations":{"ja":"人物 メモリー"}}]`, []string{"0", "name_localizations", "ja"}},
		{"an option's name with a dot", `[{"name":"ping","description":"d","options":[` + opt("a", "a.b") + `]}]`, []string{"0", "options", "0", "name_localizations", "de"}},
		{"two options one name in a locale", `[{"name":"ping","description":"d","options":[` + opt("a", "x") + `,` + opt("b", "x") + `]}]`,
			[]string{"0", "options", "1", "name_localizations", "de"}},
		{"a localized name equal to a sibling's default", `[{"name":"ping","description":"d","options":[` + opt("a", "b") + `,{"type":3,"name":"b","description":"d"}]}]`,
			[]string{"0", "options", "1", "name_localizations", "de"}},
		{"two commands one name in a locale", `[{"name":"ping","description":"d","name_localizations":{"fr":"pong"}},{"name":"pong","description":"d"}]`,
			[]string{"1", "name_localizations", "fr"}},
		{"an empty description", `[{"name":"ping","description":"d","description_localizations":{"fr":""}}]`, []string{"0", "description_localizations", "fr"}},
		{"a long description", `[{"name":"ping","description":"d","description_localizations":{"pt-BR":"` + strings.Repeat("d", 101) + `"}}]`,
			[]string{"0", "description_localizations", "pt-BR"}},
		{"a choice's name in no locale", `[{"name":"ping","description":"d","options":[{"type":3,"name":"a","description":"d","choices":[{"name":"x","value":"x","name_localizations":{"xx":"y"}}]}]}]`,
			[]string{"0", "options", "0", "choices", "0", "name_localizations", "xx"}},
	} {
		status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), tc.body, nil)
		if status != http.StatusBadRequest {
			t.Fatalf("%s: answered %d %v", tc.name, status, ans)
		}
		wantFormError(t, status, ans, tc.path...)
	}
	takeRefusals(t, f, 11)

	// Localized names in any script Discord takes, each locale's names
	// unique, are registered.
	good := `[{"name":"voice","description":"d","name_localizations":{"de":"sprachkanal","ja":"ボイス","hi":"आवाज़","th":"เสียง"},` +
		`"description_localizations":{"de":"d","ja":"説明"},"options":[` + opt("join", "beitreten") + `,` + opt("leave", "verlassen") + `]}]`
	if status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), good, nil); status != http.StatusOK {
		t.Fatalf("valid localizations: %d %v", status, ans)
	}
}

// TestFakeListsLocalizationsOnlyWhenAsked: Discord lists the localization
// maps with ?with_localizations=true only (which discordgo asks for), so a
// command sync that compares them sees what it registered.
func TestFakeListsLocalizationsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	body := `[{"name":"voice","description":"d","name_localizations":{"de":"sprachkanal"},"options":[{"type":1,"name":"join","description":"d","description_localizations":{"fr":"rejoindre"}}]}]`
	if status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), body, nil); status != http.StatusOK {
		t.Fatalf("%d %v", status, ans)
	}
	s := newSession(t, f)
	plain, err := s.Request(http.MethodGet, discordgo.EndpointApplicationGuildCommands(f.AppID(), guildID), nil)
	if err != nil || strings.Contains(string(plain), "localizations") || !strings.Contains(string(plain), `"voice"`) {
		t.Fatalf("listed without being asked: %s, %v", plain, err)
	}
	listed, err := s.ApplicationCommands(f.AppID(), guildID)
	if err != nil || len(listed) != 1 || listed[0].NameLocalizations == nil || (*listed[0].NameLocalizations)[discordgo.German] != "sprachkanal" ||
		listed[0].Options[0].DescriptionLocalizations[discordgo.French] != "rejoindre" {
		t.Fatalf("discordgo's listing %+v, %v", listed, err)
	}
}

// TestInteractionsCarryLocales: an interaction carries the invoker's
// locale and the server's (guild_locale and the guild object's locale),
// the Guild's Locale unless the spec names another; a DM has no
// guild_locale.
func TestInteractionsCarryLocales(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	g := testGuild()
	g.Locale = discordgo.Japanese
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(g))
	s := newSession(t, f)
	seen := make(chan *discordgo.Interaction, 1)
	r := newRouter(s)
	r.on("ping", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		seen <- ic.Interaction
		_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "ok", Flags: discordgo.MessageFlagsEphemeral}})
	})
	openSession(t, f, s)
	for _, tc := range []struct {
		name                string
		spec                discordtest.InteractionSpec
		locale, guildLocale string
	}{
		{"the guild's locale", discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "ping", Locale: discordgo.German}, "de", "ja"},
		{"the spec's guild locale", discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "ping", GuildLocale: discordgo.French}, "en-US", "fr"},
		{"a DM", discordtest.InteractionSpec{UserID: bobID, Command: "ping", Locale: discordgo.PortugueseBR}, "pt-BR", ""},
	} {
		f.Interact(ctx, tc.spec)
		in := recv(t, ctx, seen, tc.name)
		got := ""
		if in.GuildLocale != nil {
			got = string(*in.GuildLocale)
		}
		if string(in.Locale) != tc.locale || got != tc.guildLocale {
			t.Errorf("%s: locale %q, guild locale %q; want %q, %q", tc.name, in.Locale, got, tc.locale, tc.guildLocale)
		}
	}
}
