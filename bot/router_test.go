package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/interaction"
)

// recorder is a Responder that remembers what the router sent.
type recorder struct {
	mu        sync.Mutex
	responses []*discordgo.InteractionResponse
	edits     []string
	at        []time.Duration
	start     time.Time
}

func (r *recorder) InteractionRespond(_ *discordgo.Interaction, resp *discordgo.InteractionResponse, _ ...discordgo.RequestOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.responses = append(r.responses, resp)
	r.at = append(r.at, time.Since(r.start))
	return nil
}

func (r *recorder) InteractionResponseEdit(_ *discordgo.Interaction, e *discordgo.WebhookEdit, _ ...discordgo.RequestOption) (*discordgo.Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.edits = append(r.edits, *e.Content)
	if e.AllowedMentions == nil || len(e.AllowedMentions.Parse) != 0 {
		panic("edit without empty allowed mentions")
	}
	return &discordgo.Message{}, nil
}

var echoDef = &discordgo.ApplicationCommand{Name: "echo", Description: "d", Options: []*discordgo.ApplicationCommandOption{
	{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "say", Description: "d", Options: []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionString, Name: "text", Description: "d"},
		{Type: discordgo.ApplicationCommandOptionUser, Name: "who", Description: "d"},
	}},
}}

// echo is the /echo command: h handles "echo/say" and a suggests for it
// (either may be nil).
func echo(h interaction.Handler, a interaction.Autocompleter) interaction.Command {
	c := interaction.Command{Definition: echoDef, Handlers: map[string]interaction.Handler{}, Autocomplete: map[string]interaction.Autocompleter{}}
	if h != nil {
		c.Handlers["say"] = h
	}
	if a != nil {
		c.Autocomplete["say"] = a
	}
	return c
}

func echoIn(opts ...*discordgo.ApplicationCommandInteractionDataOption) *discordgo.Interaction {
	return &discordgo.Interaction{
		ID: "1", Type: discordgo.InteractionApplicationCommand, GuildID: "g", ChannelID: "c",
		Member: &discordgo.Member{User: &discordgo.User{ID: "u"}, Roles: []string{"r"}, Permissions: discordgo.PermissionManageGuild},
		Data: discordgo.ApplicationCommandInteractionData{Name: "echo", Options: []*discordgo.ApplicationCommandInteractionDataOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "say", Options: opts},
		}, Resolved: &discordgo.ApplicationCommandInteractionDataResolved{Users: map[string]*discordgo.User{"b": {ID: "b", Bot: true}}}},
	}
}

func TestRouterRepliesDefersAndMapsErrors(t *testing.T) {
	text := &discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: "hi"}
	for _, tc := range []struct {
		name      string
		handler   interaction.Handler
		in        *discordgo.Interaction
		wantType  []discordgo.InteractionResponseType
		wantText  string
		wantEdit  bool
		wantError bool
	}{
		{"fast reply", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			s, _ := inv.Options.String("text")
			return interaction.Reply{Content: "said " + s + " in " + inv.Subcommand}, nil
		}, echoIn(text), []discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, "said hi in say", false, false},
		{"slow reply is deferred then edited", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			time.Sleep(120 * time.Millisecond)
			return interaction.Reply{Content: "late"}, nil
		}, echoIn(text), []discordgo.InteractionResponseType{discordgo.InteractionResponseDeferredChannelMessageWithSource}, "late", true, false},
		{"user error is the sentence", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{}, &interaction.UserError{Sentence: "You can only do that here."}
		}, echoIn(text), []discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, "You can only do that here.", false, false},
		{"other error is generic and logged", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{}, errors.New("secret body text in an error")
		}, echoIn(text), []discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, genericFailure, false, true},
		{"panic is recovered", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			panic("secret body text in a panic")
		}, echoIn(text), []discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, genericFailure, false, true},
		{"wrong option type is refused", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{Content: "must not run"}, nil
		}, echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionInteger, Name: "text", Value: 3.0}),
			[]discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, interaction.StaleSentence, false, false},
		{"unknown option is refused", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{Content: "must not run"}, nil
		}, echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "nope", Value: "x"}),
			[]discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, interaction.StaleSentence, false, false},
		{"user option carries the bot flag", func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			u, _ := inv.Options.User("who")
			if !u.Bot || inv.User.ID != "u" || !inv.HasPermission(discordgo.PermissionManageGuild) || !inv.HasRole([]string{"x", "r"}) {
				return interaction.Reply{Content: "wrong"}, nil
			}
			return interaction.Reply{Content: "ok"}, nil
		}, echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionUser, Name: "who", Value: "b"}),
			[]discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource}, "ok", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			r := NewRouter(zap.New(core), Config{DeferAfter: 40 * time.Millisecond}, echo(tc.handler, nil))
			rec := &recorder{start: time.Now()}
			r.Serve(context.Background(), rec, tc.in)
			if len(rec.responses) != len(tc.wantType) || rec.responses[0].Type != tc.wantType[0] {
				t.Fatalf("responses %+v", rec.responses)
			}
			resp := rec.responses[0]
			if resp.Data == nil || resp.Data.Flags&discordgo.MessageFlagsEphemeral == 0 {
				t.Fatal("reply is not ephemeral")
			}
			got := resp.Data.Content
			if tc.wantEdit {
				if len(rec.edits) != 1 {
					t.Fatalf("edits %v", rec.edits)
				}
				got = rec.edits[0]
			} else if resp.Data.AllowedMentions == nil || len(resp.Data.AllowedMentions.Parse) != 0 {
				t.Fatal("reply allows mentions")
			}
			if got != tc.wantText {
				t.Fatalf("reply %q, want %q", got, tc.wantText)
			}
			if tc.wantError != (logs.FilterLevelExact(zap.ErrorLevel).Len() > 0) {
				t.Fatalf("error logs: %v", logs.All())
			}
			for _, e := range logs.All() {
				for _, v := range e.ContextMap() {
					if s, ok := v.(string); ok && strings.Contains(s, "secret body") {
						t.Fatalf("log holds error text: %v", e.ContextMap())
					}
				}
			}
		})
	}
}

func TestRouterRefusesOtherGuilds(t *testing.T) {
	r := NewRouter(zap.NewNop(), Config{Guilds: []string{"other"}}, echo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		return interaction.Reply{Content: "ran"}, nil
	}, nil))
	rec := &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, echoIn())
	if rec.responses[0].Data.Content != interaction.NotServedSentence {
		t.Fatalf("got %q", rec.responses[0].Data.Content)
	}
}

func TestAutocompleteAnswersChoicesWithinLimits(t *testing.T) {
	r := NewRouter(zap.NewNop(), Config{}, echo(nil, func(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
		if inv.Focused != "text" {
			return nil, errors.New("wrong focus")
		}
		var out []interaction.Choice
		for range 30 {
			out = append(out, interaction.Choice{Name: strings.Repeat("n", 150), Value: "v"})
		}
		return out, nil
	}))
	in := echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: "pa", Focused: true})
	in.Type = discordgo.InteractionApplicationCommandAutocomplete
	rec := &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, in)
	resp := rec.responses[0]
	if resp.Type != discordgo.InteractionApplicationCommandAutocompleteResult || len(resp.Data.Choices) != 25 || len([]rune(resp.Data.Choices[0].Name)) != 100 {
		t.Fatalf("autocomplete %+v", resp)
	}
}

func TestFit(t *testing.T) {
	var lines []string
	for range 100 {
		lines = append(lines, strings.Repeat("x", 49))
	}
	long := strings.Join(lines, "\n")
	got := Fit(long, MaxContent)
	if n := len([]rune(got)); n > MaxContent {
		t.Fatalf("%d characters", n)
	}
	if !strings.HasSuffix(got, "…and 61 more") {
		t.Fatalf("tail %q", got[len(got)-20:])
	}
	if Fit("short", MaxContent) != "short" {
		t.Fatal("short content changed")
	}
	one := Fit(strings.Repeat("é", 3000), MaxContent)
	if n := len([]rune(one)); n != MaxContent || !strings.HasSuffix(one, "…") {
		t.Fatalf("single line: %d", n)
	}
}

type fakeCommands struct {
	have   map[string][]*discordgo.ApplicationCommand
	writes map[string]int
}

func (f *fakeCommands) ApplicationCommands(appID, guildID string, _ ...discordgo.RequestOption) ([]*discordgo.ApplicationCommand, error) {
	return f.have[guildID], nil
}

func (f *fakeCommands) ApplicationCommandBulkOverwrite(appID, guildID string, cmds []*discordgo.ApplicationCommand, _ ...discordgo.RequestOption) ([]*discordgo.ApplicationCommand, error) {
	f.writes[guildID]++
	var stored []*discordgo.ApplicationCommand
	for _, c := range cmds {
		cp := *c
		cp.ID, cp.ApplicationID, cp.Version, cp.GuildID = "123", appID, "1", guildID
		cp.Type = discordgo.ChatApplicationCommand
		stored = append(stored, &cp)
	}
	f.have[guildID] = stored
	return stored, nil
}

func TestSyncWritesOnlyWhatDiffers(t *testing.T) {
	f := &fakeCommands{have: map[string][]*discordgo.ApplicationCommand{}, writes: map[string]int{}}
	ctx := context.Background()
	defs := []*discordgo.ApplicationCommand{echoDef}
	if _, err := SyncCommands(ctx, f, "app", []string{"g1", "g2"}, defs); err != nil {
		t.Fatal(err)
	}
	res, err := SyncCommands(ctx, f, "app", []string{"g1", "g2"}, defs)
	if err != nil || res["g1"] || res["g2"] || f.writes["g1"] != 1 || f.writes["g2"] != 1 {
		t.Fatalf("second sync wrote: %v %v", res, f.writes)
	}
	changed := *echoDef
	changed.Description = "new words"
	if res, _ := SyncCommands(ctx, f, "app", []string{"g1"}, []*discordgo.ApplicationCommand{&changed}); !res["g1"] || f.writes["g1"] != 2 {
		t.Fatalf("changed definition not written: %v", res)
	}
	if res, _ := SyncCommands(ctx, f, "app", nil, defs); !res[""] || f.writes[""] != 1 {
		t.Fatalf("global scope: %v", res)
	}
}

func TestAutocompletePanicStillAnswersChoices(t *testing.T) {
	r := NewRouter(zap.NewNop(), Config{}, echo(nil, func(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
		panic("boom")
	}))
	in := echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: "pa", Focused: true})
	in.Type = discordgo.InteractionApplicationCommandAutocomplete
	rec := &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, in)
	if len(rec.responses) != 1 || rec.responses[0].Type != discordgo.InteractionApplicationCommandAutocompleteResult {
		t.Fatalf("responses %+v", rec.responses)
	}
}

// TestAutocompleteAnswersNoChoicesOutsideServedGuilds: commands refuse a
// server not in DISCORD_GUILD_IDS, so its suggestions must not run either
// (they would read memory for a server the bridge does not serve).
func TestAutocompleteAnswersNoChoicesOutsideServedGuilds(t *testing.T) {
	called := false
	suggest := func(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
		called = true
		return []interaction.Choice{{Name: "suggestion from memory", Value: "v"}}, nil
	}
	r := NewRouter(zap.NewNop(), Config{Guilds: []string{"other"}}, echo(nil, suggest))
	in := echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: "pa", Focused: true})
	in.Type = discordgo.InteractionApplicationCommandAutocomplete
	rec := &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, in)
	if len(rec.responses) != 1 || rec.responses[0].Type != discordgo.InteractionApplicationCommandAutocompleteResult {
		t.Fatalf("responses %+v", rec.responses)
	}
	if called || len(rec.responses[0].Data.Choices) != 0 {
		t.Fatalf("suggested %+v in an unlisted server (handler ran: %v)", rec.responses[0].Data.Choices, called)
	}
	r = NewRouter(zap.NewNop(), Config{Guilds: []string{"g"}}, echo(nil, suggest))
	in.ID = "2"
	rec = &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, in)
	if !called || len(rec.responses[0].Data.Choices) != 1 {
		t.Fatalf("a listed server got no suggestions: %+v", rec.responses)
	}
}

// TestRouterAnswersARedeliveredInteractionOnce: Discord may deliver the same
// INTERACTION_CREATE twice (a resumed gateway replays it); it refuses a
// second callback with 40060, and a handler must not run twice.
func TestRouterAnswersARedeliveredInteractionOnce(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	var runs sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	r := NewRouter(zap.New(core), Config{}, echo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		return interaction.Reply{Content: "once"}, nil
	}, nil))
	rec := &recorder{start: time.Now()}
	in := echoIn()
	for range 3 {
		runs.Add(1)
		go func() { defer runs.Done(); r.Serve(context.Background(), rec, in) }()
	}
	runs.Wait()
	if calls != 1 || len(rec.responses) != 1 || len(rec.edits) != 0 {
		t.Fatalf("handler ran %d times; %d callbacks, %d edits", calls, len(rec.responses), len(rec.edits))
	}
	if n := logs.FilterMessage("interaction already answered").Len(); n != 2 {
		t.Fatalf("%d redeliveries logged, want 2: %v", n, logs.All())
	}
	other := echoIn()
	other.ID = "2"
	r.Serve(context.Background(), rec, other)
	if calls != 2 || len(rec.responses) != 2 {
		t.Fatalf("a new interaction was not answered: %d calls", calls)
	}
}

// TestAnsweredIDsForgetAfterATokenLifeAndStayBounded: an interaction token
// lives 15 minutes, so an id need not be remembered longer; and however
// many arrive, the memory stays bounded.
func TestAnsweredIDsForgetAfterATokenLifeAndStayBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	a := newAnswered(3, func() time.Time { return now })
	if !a.claim("1") || a.claim("1") {
		t.Fatal("the first claim must win and the second lose")
	}
	now = now.Add(interactionTokenLife - time.Second)
	if a.claim("1") {
		t.Fatal("forgot an id within the token's life")
	}
	now = now.Add(2 * time.Second)
	if !a.claim("1") {
		t.Fatal("an id is remembered past the token's life")
	}
	for _, id := range []string{"2", "3", "4", "5"} {
		a.claim(id)
	}
	if n := a.at.Len(); n > 3 {
		t.Fatalf("remembers %d ids; the bound is 3", n)
	}
	if a.claim("5") {
		t.Fatal("the newest id was dropped instead of the oldest")
	}
}

// TestRepliesNeutraliseBidiControls: an embedding, override or isolate
// control in a fact body or an operator-set id would reorder what a reader
// sees (a "gpj.exe" spoof, or text that seems to belong to the bot's own
// words). Every reply and every suggestion passes through one function that
// removes them.
func TestRepliesNeutraliseBidiControls(t *testing.T) {
	bidi := []rune{'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'}
	spoof := "likes \u202Etxt.exe\u202C and \u2067تست\u2069 done"
	for _, r := range bidi {
		if got := interaction.Neutralize("a" + string(r) + "b"); got != "ab" {
			t.Errorf("Neutralize kept U+%04X: %q", r, got)
		}
	}
	if got := interaction.Neutralize("plain, مرحبا, \u200fmark, <@123>"); got != "plain, مرحبا, \u200fmark, <@123>" {
		t.Errorf("Neutralize changed text without bidi controls: %q", got)
	}
	clean := func(s string) bool { return !strings.ContainsAny(s, string(bidi)) }

	r := NewRouter(zap.NewNop(), Config{}, echo(
		func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{Content: spoof}, nil
		},
		func(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
			return []interaction.Choice{{Name: spoof, Value: "f1"}, {Name: "\u202e\u2066", Value: "f2"}}, nil
		}))
	rec := &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, echoIn())
	if got := rec.responses[0].Data.Content; !clean(got) || got != "likes txt.exe and تست done" {
		t.Fatalf("reply %q", got)
	}
	ac := echoIn(&discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: "l", Focused: true})
	ac.ID, ac.Type = "2", discordgo.InteractionApplicationCommandAutocomplete
	r.Serve(context.Background(), rec, ac)
	if ch := rec.responses[1].Data.Choices; len(ch) != 1 || !clean(ch[0].Name) || ch[0].Value != "f1" { // a name of controls alone is dropped
		t.Fatalf("suggestion %+v", ch)
	}

	// A deferred reply is completed by an edit, which is neutralised too.
	slow := NewRouter(zap.NewNop(), Config{DeferAfter: 10 * time.Millisecond}, echo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		time.Sleep(80 * time.Millisecond)
		return interaction.Reply{Content: spoof}, nil
	}, nil))
	rec = &recorder{start: time.Now()}
	slow.Serve(context.Background(), rec, echoIn())
	if len(rec.edits) != 1 || !clean(rec.edits[0]) {
		t.Fatalf("edits %q", rec.edits)
	}
}

// TestRouterMiddlewareAsUsersSeeIt: the middleware chain the router builds,
// seen from Discord's side.
func TestRouterMiddlewareAsUsersSeeIt(t *testing.T) {
	text := &discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionString, Name: "text", Value: "hi"}
	wrongType := &discordgo.ApplicationCommandInteractionDataOption{Type: discordgo.ApplicationCommandOptionInteger, Name: "text", Value: 3.0}
	for _, tc := range []struct {
		name     string
		cfg      Config
		cmd      interaction.Command
		in       *discordgo.Interaction
		want     string
		deferred bool
	}{
		{"a declared subcommand nobody routed is a sentence, not silence", Config{},
			interaction.Command{Definition: echoDef}, echoIn(text), interaction.StaleSentence, false},
		{"a panic after the deferral is the failure sentence, by edit", Config{DeferAfter: 10 * time.Millisecond},
			echo(func(context.Context, interaction.Invocation) (interaction.Reply, error) {
				time.Sleep(60 * time.Millisecond)
				panic("late")
			}, nil), echoIn(text), genericFailure, true},
		{"stale options in an unlisted server: it is not served", Config{Guilds: []string{"other"}},
			echo(nil, nil), echoIn(wrongType), interaction.NotServedSentence, false},
		{"the handler's context ends at the timeout", Config{HandlerTimeout: 20 * time.Millisecond, DeferAfter: time.Second},
			echo(func(ctx context.Context, _ interaction.Invocation) (interaction.Reply, error) {
				<-ctx.Done()
				return interaction.Reply{Content: "gave up: " + ctx.Err().Error()}, nil
			}, nil), echoIn(text), "gave up: context deadline exceeded", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRouter(zap.NewNop(), tc.cfg, tc.cmd)
			rec := &recorder{start: time.Now()}
			r.Serve(context.Background(), rec, tc.in)
			if len(rec.responses) != 1 {
				t.Fatalf("%d callbacks", len(rec.responses))
			}
			got := rec.responses[0].Data.Content
			if tc.deferred {
				if rec.responses[0].Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || len(rec.edits) != 1 {
					t.Fatalf("not deferred then edited: %+v, edits %q", rec.responses[0], rec.edits)
				}
				got = rec.edits[0]
			}
			if got != tc.want {
				t.Fatalf("reply %q, want %q", got, tc.want)
			}
		})
	}
}
