package bot

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/clankie/clankie/interaction"
)

// demo is /echo declaring the button prefix "demo" with h.
func demo(h interaction.Handler) interaction.Command {
	c := echo(nil, nil)
	c.Components = map[string]interaction.Handler{"demo": h}
	return c
}

// clickIn is a click by member u in server g on a button whose custom_id
// is customID.
func clickIn(id, customID string) *discordgo.Interaction {
	return &discordgo.Interaction{
		ID: id, Type: discordgo.InteractionMessageComponent, GuildID: "g", ChannelID: "c",
		Member:  &discordgo.Member{User: &discordgo.User{ID: "u"}, Roles: []string{"r"}},
		Message: &discordgo.Message{ID: "m", ChannelID: "c"},
		Data:    discordgo.MessageComponentInteractionData{CustomID: customID, ComponentType: discordgo.ButtonComponent},
	}
}

// TestClicksAreRoutedLikeCommands: a click reaches the handler its prefix
// names through the commands' middleware, and is answered as a command is:
// a new ephemeral reply mentioning nobody, deferred when slow; a custom_id
// no command declared, or none a message could carry, hears the stale
// sentence without running anything.
func TestClicksAreRoutedLikeCommands(t *testing.T) {
	clicked := func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		if inv.CustomID != "demo:abc" || inv.User.ID != "u" || inv.GuildID != "g" || inv.ChannelID != "c" ||
			!inv.HasRole([]string{"r"}) || inv.Command != "" {
			return interaction.Reply{Content: "wrong invocation"}, nil
		}
		return interaction.Reply{Content: "clicked @everyone"}, nil
	}
	select3 := clickIn("1", "demo:abc")
	select3.Data = discordgo.MessageComponentInteractionData{CustomID: "demo:abc", ComponentType: discordgo.SelectMenuComponent}
	for _, tc := range []struct {
		name     string
		cfg      Config
		handler  interaction.Handler
		in       *discordgo.Interaction
		want     string
		deferred bool
		runs     int32
		label    string
		outcome  Outcome
	}{
		{"a click reaches its prefix's handler", Config{}, clicked, clickIn("1", "demo:abc"), "clicked @everyone", false, 1, "component:demo", OutcomeOK},
		{"a prefix alone routes", Config{}, func(context.Context, interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{Content: "bare"}, nil
		}, clickIn("1", "demo"), "bare", false, 1, "component:demo", OutcomeOK},
		{"an unknown prefix is stale", Config{}, clicked, clickIn("1", "other:abc"), interaction.StaleSentence, false, 0, "component:unknown", OutcomeStale},
		{"a 101-character custom_id is stale", Config{}, clicked, clickIn("1", "demo:"+strings.Repeat("a", 96)), interaction.StaleSentence, false, 0, "component:unknown", OutcomeStale},
		{"an empty custom_id is stale", Config{}, clicked, clickIn("1", ""), interaction.StaleSentence, false, 0, "component:unknown", OutcomeStale},
		{"a control character is stale", Config{}, clicked, clickIn("1", "demo:a\nb"), interaction.StaleSentence, false, 0, "component:unknown", OutcomeStale},
		{"a select menu is not a button", Config{}, clicked, select3, interaction.StaleSentence, false, 0, "component:demo", OutcomeStale},
		{"a panic is recovered as for commands", Config{}, func(context.Context, interaction.Invocation) (interaction.Reply, error) {
			panic("secret text in a click")
		}, clickIn("1", "demo:abc"), genericFailure, false, 1, "component:demo", OutcomePanicked},
		{"a slow click is deferred, then its reply edited in", Config{DeferAfter: 20 * time.Millisecond}, func(context.Context, interaction.Invocation) (interaction.Reply, error) {
			time.Sleep(100 * time.Millisecond)
			return interaction.Reply{Content: "late"}, nil
		}, clickIn("1", "demo:abc"), "late", true, 1, "component:demo", OutcomeOK},
		{"a server off the allow-list is refused", Config{Guilds: []string{"other"}}, clicked, clickIn("1", "demo:abc"), interaction.NotServedSentence, false, 0, "component:demo", OutcomeNotServed},
		{"an unknown prefix off the allow-list is not served", Config{Guilds: []string{"other"}}, clicked, clickIn("1", "nope:abc"), interaction.NotServedSentence, false, 0, "component:unknown", OutcomeNotServed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			h := tc.handler
			tc.cfg.Metrics = NewMetrics(prometheus.NewRegistry(), "text")
			r := NewRouter(zap.NewNop(), tc.cfg, demo(func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
				runs.Add(1)
				return h(ctx, inv)
			}))
			rec := &recorder{start: time.Now()}
			r.Serve(context.Background(), rec, tc.in)
			if len(rec.responses) != 1 {
				t.Fatalf("%d callbacks", len(rec.responses))
			}
			resp := rec.responses[0]
			if resp.Data == nil || resp.Data.Flags != discordgo.MessageFlagsEphemeral {
				t.Fatalf("the answer is not a new ephemeral message: %+v", resp)
			}
			got := resp.Data.Content
			if tc.deferred {
				if resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || len(rec.edits) != 1 {
					t.Fatalf("not deferred then edited: %+v, edits %q", resp, rec.edits)
				}
				got = rec.edits[0]
			} else if resp.Type != discordgo.InteractionResponseChannelMessageWithSource ||
				resp.Data.AllowedMentions == nil || len(resp.Data.AllowedMentions.Parse) != 0 || len(rec.edits) != 0 {
				t.Fatalf("not a new message mentioning nobody: %+v, edits %q", resp, rec.edits)
			}
			if got != tc.want {
				t.Fatalf("reply %q, want %q", got, tc.want)
			}
			if n := runs.Load(); n != tc.runs {
				t.Fatalf("handler ran %d times, want %d", n, tc.runs)
			}
			var m dto.Metric
			if err := tc.cfg.Metrics.interactions.WithLabelValues(tc.label, "component", string(tc.outcome)).Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
				t.Fatalf("interactions{command=%q,kind=component,outcome=%q} = %v, %v", tc.label, tc.outcome, m.GetCounter().GetValue(), err)
			}
		})
	}
}

// TestAClickRedeliveredIsAnsweredOnce: a click's id is claimed as a
// command's is.
func TestAClickRedeliveredIsAnsweredOnce(t *testing.T) {
	var runs atomic.Int32
	r := NewRouter(zap.NewNop(), Config{}, demo(func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		runs.Add(1)
		return interaction.Reply{Content: "once"}, nil
	}))
	rec := &recorder{start: time.Now()}
	in := clickIn("7", "demo:abc")
	r.Serve(context.Background(), rec, in)
	r.Serve(context.Background(), rec, in)
	if runs.Load() != 1 || len(rec.responses) != 1 {
		t.Fatalf("handler ran %d times; %d callbacks", runs.Load(), len(rec.responses))
	}
}

// TestComponentPrefixesAreCheckedAtConstruction: a button's or a modal's
// prefix no custom_id can route to, a nil handler, a prefix two commands
// claim, or a command declared twice is a programming error.
func TestComponentPrefixesAreCheckedAtConstruction(t *testing.T) {
	ok := func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		return interaction.Reply{}, nil
	}
	other := &discordgo.ApplicationCommand{Name: "other", Description: "d"}
	for _, tc := range []struct {
		name     string
		commands []interaction.Command
	}{
		{"a prefix with a colon", []interaction.Command{{Definition: echoDef, Components: map[string]interaction.Handler{"demo:x": ok}}}},
		{"an empty prefix", []interaction.Command{{Definition: echoDef, Components: map[string]interaction.Handler{"": ok}}}},
		{"a nil handler", []interaction.Command{{Definition: echoDef, Components: map[string]interaction.Handler{"demo": nil}}}},
		{"a prefix declared twice", []interaction.Command{demo(ok), {Definition: other, Components: map[string]interaction.Handler{"demo": ok}}}},
		{"a modal prefix with a colon", []interaction.Command{{Definition: echoDef, Modals: map[string]interaction.Handler{"form:x": ok}}}},
		{"a nil modal handler", []interaction.Command{{Definition: echoDef, Modals: map[string]interaction.Handler{"form": nil}}}},
		{"a modal prefix declared twice", []interaction.Command{{Definition: echoDef, Modals: map[string]interaction.Handler{"form": ok}},
			{Definition: other, Modals: map[string]interaction.Handler{"form": ok}}}},
		{"a command declared twice", []interaction.Command{{Definition: echoDef}, {Definition: echoDef}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("NewRouter accepted it")
				}
			}()
			NewRouter(zap.NewNop(), Config{}, tc.commands...)
		})
	}
}
