package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/voiceapi"
)

// discordName is Discord's rule for command, subcommand and option names,
// in every locale.
var discordName = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

// localized checks one level's localizations: every translated locale,
// names Discord takes, descriptions of 1–100 characters.
func localized(t *testing.T, what string, names, descs map[discordgo.Locale]string) {
	t.Helper()
	for _, l := range lang.Locales() {
		n, d := names[l], descs[l]
		if !discordName.MatchString(n) || strings.ToLower(n) != n {
			t.Errorf("%s: %s name %q", what, l, n)
		}
		if c := utf8.RuneCountInString(d); c < 1 || c > 100 {
			t.Errorf("%s: %s description %q has %d characters", what, l, d, c)
		}
	}
	if len(names) != len(lang.Locales()) || len(descs) != len(lang.Locales()) {
		t.Errorf("%s: %d names, %d descriptions; want the %d locales", what, len(names), len(descs), len(lang.Locales()))
	}
}

// Both commands carry de, fr, es-ES, pt-BR and ja on the command, every
// subcommand, option and choice, and no two options of one level share a
// name in any locale.
func TestCommandsCarryEveryLocale(t *testing.T) {
	cat := testCatalog(t)
	for _, def := range []*discordgo.ApplicationCommand{
		PersonMemory(&fakeMemory{}, Policy{}, fixedNow, cat).Definition,
		Voice(noVoice{}, VoicePolicy{}, cat).Definition,
	} {
		if def.NameLocalizations == nil || def.DescriptionLocalizations == nil {
			t.Fatalf("%s has no localizations", def.Name)
		}
		localized(t, def.Name, *def.NameLocalizations, *def.DescriptionLocalizations)
		var walk func(path string, opts []*discordgo.ApplicationCommandOption)
		walk = func(path string, opts []*discordgo.ApplicationCommandOption) {
			seen := map[discordgo.Locale]map[string]bool{}
			for _, o := range opts {
				localized(t, path+"."+o.Name, o.NameLocalizations, o.DescriptionLocalizations)
				for l, n := range o.NameLocalizations {
					if seen[l] == nil {
						seen[l] = map[string]bool{}
					}
					if seen[l][n] {
						t.Errorf("%s: two options named %q in %s", path, n, l)
					}
					seen[l][n] = true
				}
				for _, c := range o.Choices {
					if len(c.NameLocalizations) != len(lang.Locales()) || c.Name == "" {
						t.Errorf("%s.%s choice %v: %q %v", path, o.Name, c.Value, c.Name, c.NameLocalizations)
					}
					for l, n := range c.NameLocalizations {
						if k := utf8.RuneCountInString(n); k < 1 || k > 100 {
							t.Errorf("%s.%s choice %v: %s name %q", path, o.Name, c.Value, l, n)
						}
					}
				}
				walk(path+"."+o.Name, o.Options)
			}
		}
		walk(def.Name, def.Options)
	}
}

// A German invocation gets German replies and refusals, a Japanese one
// Japanese, and one in a locale the catalog does not translate English.
func TestRepliesAreInTheInvokersLanguage(t *testing.T) {
	cat := testCatalog(t)
	propose := func(locale string) interaction.Invocation {
		inv := invocation(subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "likes tea"})
		inv.Locale = locale
		return inv
	}
	for _, tc := range []struct {
		locale string
		inv    interaction.Invocation
		want   string
	}{
		{"de", propose("de"), "Gemerkt: `f-1` über dich (Personenfakt, hohe Sicherheit), auf diesem Server sichtbar, ohne Ablauf.\n> likes tea"},
		{"ja", propose("ja"), "あなたについて`f-1`を覚えました（人物の事実、確度：高）。このサーバー全体で表示、期限なし。\n> likes tea"},
		{"zh-CN", propose("zh-CN"), "Remembered `f-1` about you (person-fact, high confidence), visible in this server, no expiry.\n> likes tea"},
	} {
		t.Run(tc.locale, func(t *testing.T) {
			mem := &fakeMemory{proposeResp: api.ProposalResponse{Fact: &api.Fact{FactID: "f-1", Subject: api.Subject{GuildID: testGuild, UserID: testInvoker},
				Kind: api.KindPersonFact, Body: "likes tea", Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9}}}
			rep, err := handle(context.Background(), PersonMemory(mem, Policy{}, fixedNow, cat), tc.inv)
			if err != nil || rep.Content != tc.want {
				t.Fatalf("reply %q, %v\nwant %q", rep.Content, err, tc.want)
			}
		})
	}
	refusals := []struct {
		locale, sub string
		opts        map[string]any
		want        string
	}{
		{"de", subPropose, map[string]any{optPerson: interaction.User{ID: testOther}, optFact: "likes tea"}, "Du kannst nur Fakten über dich selbst vorschlagen."},
		{"ja", subPropose, map[string]any{optPerson: interaction.User{ID: testInvoker}, optFact: "x", optExpires: "soon"},
			"その期限は読み取れませんでした。90m、12h、7d、2wのような期間か、2026-04-01のような日付を使ってください（最大365日先まで）。"},
		{"fr", subForget, map[string]any{optFact: "no such id!"}, "Il n’y a aucun fait avec cet identifiant à propos de <@" + testInvoker + ">."},
		{"pt-BR", subRecall, map[string]any{optQuery: strings.Repeat("x", api.MaxRecallQuery+1)}, "Uma busca pode ter no máximo 200 caracteres."},
	}
	for _, tc := range refusals {
		t.Run(tc.locale+" refusal", func(t *testing.T) {
			inv := invocation(tc.sub, tc.opts)
			inv.Locale = tc.locale
			got, refused := run(t, &fakeMemory{}, Policy{}, inv)
			if !refused || got != tc.want {
				t.Fatalf("%q (refused %v), want %q", got, refused, tc.want)
			}
		})
	}
	// Outside a server, the refusal is in the invoker's language too.
	inv := invocation(subMine, nil)
	inv.GuildID, inv.Locale = "", "es-ES"
	if got, _ := run(t, &fakeMemory{}, Policy{}, inv); got != "Lo siento, la memoria de personas pertenece a un servidor." {
		t.Fatalf("DM refusal %q", got)
	}
}

// joinVoice records the locale /voice join hands the session.
type joinVoice struct {
	noVoice
	guildLocale *string
}

func (j joinVoice) Join(_ context.Context, _, _, _, guildLocale string) (string, error) {
	*j.guildLocale = guildLocale
	return "55", nil
}

// /voice join answers in the invoker's locale and gives the session the
// server's, in which it posts to the channel.
func TestVoiceJoinAnswersInTheInvokersLanguage(t *testing.T) {
	var got string
	c := Voice(joinVoice{guildLocale: &got}, VoicePolicy{UserIDs: []string{testInvoker}}, testCatalog(t))
	inv := interaction.Invocation{ID: "1", GuildID: testGuild, ChannelID: testChannel, User: interaction.User{ID: testInvoker},
		Command: "voice", Subcommand: "join", Locale: "ja", GuildLocale: "de"}
	rep, err := handle(context.Background(), c, inv)
	if err != nil || !strings.HasPrefix(rep.Content, "Clankieが<#55>で聞いています。") {
		t.Fatalf("%q %v", rep.Content, err)
	}
	if got != "de" {
		t.Fatalf("the session got the locale %q, want the server's", got)
	}
	inv.Subcommand, inv.Locale = "status", "fr"
	rep, _ = handle(context.Background(), c, inv)
	if rep.Content != "Il n’y a pas de session vocale dans ce serveur." {
		t.Fatalf("status %q", rep.Content)
	}
	budget := voiceSentence(testCatalog(t).Printer("pt-BR"), &voiceapi.BudgetSpentError{Budget: time.Hour, ResetsAt: time.Unix(1796256000, 0)})
	if ue, _ := interaction.AsUserError(budget); ue == nil || ue.Sentence != "O tempo de voz deste servidor para hoje (1h) acabou. Ele zera às 00:00 UTC (<t:1796256000:R>)." {
		t.Fatalf("budget %v", budget)
	}
}

// The catalog's command keys ("cmd.…") are exactly those the two
// definitions derive: a renamed option or choice cannot leave its
// translations behind, nor go without them.
func TestCatalogCommandKeysAreTheDefinitions(t *testing.T) {
	b, err := os.ReadFile("../lang/messages/en.json")
	if err != nil {
		t.Fatal(err)
	}
	var en map[string]any
	if err := json.Unmarshal(b, &en); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for k := range en {
		if strings.HasPrefix(k, "cmd.") {
			want[k] = true
		}
	}
	got := map[string]bool{}
	var walk func(key string, opts []*discordgo.ApplicationCommandOption)
	walk = func(key string, opts []*discordgo.ApplicationCommandOption) {
		got[key+".name"], got[key+".description"] = true, true
		for _, o := range opts {
			k := key + "." + o.Name
			for _, c := range o.Choices {
				got[string(lang.ChoiceID(k, fmt.Sprint(c.Value)))] = true
			}
			walk(k, o.Options)
		}
	}
	cat := testCatalog(t)
	for _, def := range []*discordgo.ApplicationCommand{PersonMemory(&fakeMemory{}, Policy{}, fixedNow, cat).Definition, Voice(noVoice{}, VoicePolicy{}, cat).Definition} {
		walk("cmd."+def.Name, def.Options)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("en.json has %s, which no definition uses", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("a definition uses %s, which en.json lacks", k)
		}
	}
}
