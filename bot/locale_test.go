package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

// The router's own sentences are in the invoker's locale (English for one
// the catalog does not translate), and a handler sees both locales as
// Discord sent them.
func TestRouterSpeaksTheInvokersLanguage(t *testing.T) {
	cat, err := lang.Load()
	if err != nil {
		t.Fatal(err)
	}
	de, ja := cat.Printer("de"), cat.Printer("ja")
	var seen interaction.Invocation
	ok := func(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		seen = inv
		return interaction.Reply{}, nil
	}
	failing := func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		return interaction.Reply{}, errors.New("boom")
	}
	panicking := func(context.Context, interaction.Invocation) (interaction.Reply, error) { panic("boom") }
	unknown := func(in *discordgo.Interaction) *discordgo.Interaction {
		in.Data = discordgo.ApplicationCommandInteractionData{Name: "gone"}
		return in
	}
	guildLocale := discordgo.Locale("fr")
	for _, tc := range []struct {
		name    string
		guilds  []string
		handler interaction.Handler
		locale  discordgo.Locale
		edit    func(*discordgo.Interaction) *discordgo.Interaction
		want    string
	}{
		{"an empty reply", nil, ok, "de", nil, de.Say(lang.Done, nil)},
		{"a failure", nil, failing, "de", nil, de.Say(lang.GenericFailure, nil)},
		{"a panic", nil, panicking, "ja", nil, ja.Say(lang.GenericFailure, nil)},
		{"a stale command", nil, ok, "de", unknown, de.Say(lang.Stale, nil)},
		{"a server not served", []string{"other"}, ok, "ja", nil, ja.Say(lang.NotServed, nil)},
		{"a locale not translated", nil, failing, "zh-CN", nil, genericFailure},
		{"no locale", []string{"other"}, ok, "", nil, interaction.NotServedSentence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRouter(zap.NewNop(), Config{Guilds: tc.guilds, Catalog: cat}, echo(tc.handler, nil))
			in := echoIn()
			in.Locale, in.GuildLocale = tc.locale, &guildLocale
			if tc.edit != nil {
				in = tc.edit(in)
			}
			rec := &recorder{start: time.Now()}
			r.Serve(context.Background(), rec, in)
			if len(rec.responses) != 1 || rec.responses[0].Data.Content != tc.want {
				t.Fatalf("answered %+v, want %q", rec.responses, tc.want)
			}
		})
	}
	r := NewRouter(zap.NewNop(), Config{Catalog: cat}, echo(ok, nil))
	in := echoIn()
	in.Locale, in.GuildLocale = "pt-BR", &guildLocale
	r.Serve(context.Background(), &recorder{start: time.Now()}, in)
	if seen.Locale != "pt-BR" || seen.GuildLocale != "fr" {
		t.Fatalf("the handler saw locale %q, guild locale %q", seen.Locale, seen.GuildLocale)
	}
	// The English of the stale and not-served refusals is the catalog's.
	en := cat.English()
	if en.Say(lang.Stale, nil) != interaction.StaleSentence || en.Say(lang.NotServed, nil) != interaction.NotServedSentence {
		t.Fatal("interaction's English sentences differ from the catalog's")
	}
}

// An interaction over HTTP carries its locale in the body: the sentence
// that memory is out of reach is in it.
func TestEndpointAnswersInTheInvokersLanguage(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	c := newClaims()
	c.down = true
	f := newEndpoint(t, pub, c, zap.NewNop(), func() time.Time { return now })
	var in discordgo.Interaction
	if err := json.Unmarshal([]byte(commandBody("3001", "x", false)), &in); err != nil {
		t.Fatal(err)
	}
	in.Locale = discordgo.German
	body, _ := json.Marshal(&in)
	w := httptest.NewRecorder()
	f.e.ServeHTTP(w, signed(t, priv, string(body), now, false))
	var got discordgo.InteractionResponse
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Data == nil {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	cat, _ := lang.Load()
	if want := cat.Printer("de").Say(lang.MemoryUnreachable, nil); got.Data.Content != want {
		t.Fatalf("answered %q, want %q", got.Data.Content, want)
	}
}

// Command sync compares localizations: unchanged translations write
// nothing, a changed one on the command, an option or a choice is
// registered again.
func TestSyncRewritesAChangedTranslation(t *testing.T) {
	def := func(edit func(*discordgo.ApplicationCommand)) *discordgo.ApplicationCommand {
		c := &discordgo.ApplicationCommand{Name: "echo", Description: "d",
			NameLocalizations:        &map[discordgo.Locale]string{discordgo.German: "echo"},
			DescriptionLocalizations: &map[discordgo.Locale]string{discordgo.German: "d auf Deutsch"},
			Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "tone", Description: "d",
				NameLocalizations:        map[discordgo.Locale]string{discordgo.German: "ton"},
				DescriptionLocalizations: map[discordgo.Locale]string{discordgo.German: "d"},
				Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "loud", Value: "loud",
					NameLocalizations: map[discordgo.Locale]string{discordgo.German: "laut"}}}}},
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	f := &fakeCommands{have: map[string][]*discordgo.ApplicationCommand{}, writes: map[string]int{}}
	ctx := context.Background()
	sync := func(c *discordgo.ApplicationCommand) bool {
		t.Helper()
		res, err := SyncCommands(ctx, f, "app", []string{"g"}, []*discordgo.ApplicationCommand{c})
		if err != nil {
			t.Fatal(err)
		}
		return res["g"]
	}
	if !sync(def(nil)) || sync(def(nil)) {
		t.Fatalf("first sync must write and the second not: %v", f.writes)
	}
	for name, edit := range map[string]func(*discordgo.ApplicationCommand){
		"the command's description": func(c *discordgo.ApplicationCommand) {
			(*c.DescriptionLocalizations)[discordgo.German] = "neu"
		},
		"an option's name": func(c *discordgo.ApplicationCommand) { c.Options[0].NameLocalizations[discordgo.German] = "klang" },
		"a new locale": func(c *discordgo.ApplicationCommand) {
			c.Options[0].DescriptionLocalizations[discordgo.Japanese] = "説明"
		},
		"a choice's name": func(c *discordgo.ApplicationCommand) {
			c.Options[0].Choices[0].NameLocalizations[discordgo.German] = "leise"
		},
		"a dropped translation": func(c *discordgo.ApplicationCommand) { c.NameLocalizations = nil },
	} {
		if !sync(def(edit)) {
			t.Errorf("%s changed and was not registered", name)
		}
		sync(def(nil))
	}
}
