package bot

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/interaction"
)

// answers is a Responder that counts every answer the router gives.
type answers struct {
	mu        sync.Mutex
	responses []*discordgo.InteractionResponse
	edits     []*discordgo.WebhookEdit
}

func (a *answers) InteractionRespond(_ *discordgo.Interaction, resp *discordgo.InteractionResponse, _ ...discordgo.RequestOption) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.responses = append(a.responses, resp)
	return nil
}

func (a *answers) InteractionResponseEdit(_ *discordgo.Interaction, e *discordgo.WebhookEdit, _ ...discordgo.RequestOption) (*discordgo.Message, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.edits = append(a.edits, e)
	return &discordgo.Message{}, nil
}

// fuzzOptions declares one option of every type the router reads.
func fuzzOptions() []*discordgo.ApplicationCommandOption {
	return []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionString, Name: "text", Description: "d", Autocomplete: true},
		{Type: discordgo.ApplicationCommandOptionInteger, Name: "n", Description: "d", Autocomplete: true},
		{Type: discordgo.ApplicationCommandOptionBoolean, Name: "flag", Description: "d"},
		{Type: discordgo.ApplicationCommandOptionUser, Name: "who", Description: "d"},
	}
}

var (
	fuzzSubDef = &discordgo.ApplicationCommand{Name: "fz", Description: "d", Options: []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "sub", Description: "d", Options: fuzzOptions()},
		{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "bare", Description: "d"},
	}}
	fuzzFlatDef = &discordgo.ApplicationCommand{Name: "flat", Description: "d", Options: fuzzOptions()}
)

// fuzzEcho replies with every option it was given, so a value of any length
// reaches the reply and the router has to fit it.
func fuzzEcho(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	var b strings.Builder
	b.WriteString(inv.Command + " " + inv.Subcommand + " by " + inv.User.ID + "\n")
	if s, ok := inv.Options.String("text"); ok {
		b.WriteString("text: " + s + "\n")
	}
	if n, ok := inv.Options.Int("n"); ok {
		b.WriteString("n: " + strconv.FormatInt(n, 10) + "\n")
	}
	if u, ok := inv.Options.User("who"); ok {
		b.WriteString("who: <@" + u.ID + "> bot=" + strconv.FormatBool(u.Bot) + "\n")
	}
	if s, _ := inv.Options.String("text"); s == "sorry" {
		return interaction.Reply{}, &interaction.UserError{Sentence: "no " + s}
	}
	return interaction.Reply{Content: b.String()}, nil
}

func fuzzSuggest(_ context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
	s, _ := inv.Options.String(inv.Focused)
	var out []interaction.Choice
	for i := range 30 {
		out = append(out, interaction.Choice{Name: strings.Repeat(s, i+1), Value: s + strconv.Itoa(i)})
	}
	return out, nil
}

// hasNilOption reports a JSON null among the options. Discord never sends
// one, and parseInvocation dereferences it: the router recovers from that
// panic with its generic sentence (one answer, as required), which is
// tolerated for such input only. Every other recovered panic fails.
func hasNilOption(opts []*discordgo.ApplicationCommandInteractionDataOption) bool {
	for _, o := range opts {
		if o == nil || hasNilOption(o.Options) {
			return true
		}
	}
	return false
}

// FuzzInteractionOptions decodes the fuzz input as the data of an
// application command (what Discord would send as interaction.data), wraps
// it in a command or autocomplete interaction from a member, a DM user or
// nobody, and serves it through the router. The router must not panic
// (neither out of Serve nor a panic it recovers from, but see
// hasNilOption), and must give
// exactly one answer of the right kind: a reply (ephemeral, no mentions,
// within 2000 characters), a deferral plus one edit, or one autocomplete
// result within Discord's limits. The corpus is in
// testdata/fuzz/FuzzInteractionOptions.
func FuzzInteractionOptions(f *testing.F) {
	f.Add(byte(0), []byte(`{"name":"fz","options":[{"name":"sub","type":1,"options":[{"name":"text","type":3,"value":"hi"}]}]}`))
	f.Add(byte(1), []byte(`{"name":"flat","options":[{"name":"n","type":4,"value":"12","focused":true}]}`))
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		var d discordgo.ApplicationCommandInteractionData
		if err := json.Unmarshal(data, &d); err != nil {
			return // not something discordgo would hand the router
		}
		in := &discordgo.Interaction{ID: "1", Type: discordgo.InteractionApplicationCommand, ChannelID: "c", Data: d}
		if kind&1 != 0 {
			in.Type = discordgo.InteractionApplicationCommandAutocomplete
		}
		switch kind >> 1 & 3 {
		case 0:
			in.GuildID = "g"
			in.Member = &discordgo.Member{User: &discordgo.User{ID: "u"}, Roles: []string{"r"}}
		case 1:
			in.User = &discordgo.User{ID: "u"}
		case 2:
			in.GuildID = "g"
			in.Member = &discordgo.Member{} // a member without a user
		}
		core, logs := observer.New(zap.ErrorLevel)
		r := NewRouter(zap.New(core), Config{},
			interaction.Command{Definition: fuzzSubDef,
				Handlers:     map[string]interaction.Handler{"sub": fuzzEcho, "bare": fuzzEcho},
				Autocomplete: map[string]interaction.Autocompleter{"sub": fuzzSuggest, "bare": fuzzSuggest}},
			interaction.Command{Definition: fuzzFlatDef,
				Handlers:     map[string]interaction.Handler{"": fuzzEcho},
				Autocomplete: map[string]interaction.Autocompleter{"": fuzzSuggest}})
		got := &answers{}
		r.Serve(context.Background(), got, in)
		r.Wait()

		for _, e := range logs.All() {
			if strings.Contains(e.Message, "panicked") && !hasNilOption(d.Options) {
				t.Fatalf("the router recovered from a panic (%s: %v) for data %s", e.Message, e.ContextMap(), data)
			}
		}
		if len(got.responses) != 1 {
			t.Fatalf("%d answers, want exactly 1 (edits: %d)", len(got.responses), len(got.edits))
		}
		resp := got.responses[0]
		if in.Type == discordgo.InteractionApplicationCommandAutocomplete {
			if resp.Type != discordgo.InteractionApplicationCommandAutocompleteResult || resp.Data == nil || len(got.edits) != 0 {
				t.Fatalf("autocomplete answered type %d with %d edits", resp.Type, len(got.edits))
			}
			if len(resp.Data.Choices) > 25 {
				t.Fatalf("%d choices", len(resp.Data.Choices))
			}
			for _, c := range resp.Data.Choices {
				v, _ := c.Value.(string)
				if n, m := utf8.RuneCountInString(c.Name), utf8.RuneCountInString(v); n > 100 || m > 100 {
					t.Fatalf("choice of %d/%d characters", n, m)
				}
			}
			return
		}
		var content string
		var mentions *discordgo.MessageAllowedMentions
		switch resp.Type {
		case discordgo.InteractionResponseChannelMessageWithSource:
			if len(got.edits) != 0 || resp.Data == nil {
				t.Fatalf("a reply plus %d edits", len(got.edits))
			}
			if resp.Data.Flags&discordgo.MessageFlagsEphemeral == 0 {
				t.Fatal("reply is not ephemeral")
			}
			content, mentions = resp.Data.Content, resp.Data.AllowedMentions
		case discordgo.InteractionResponseDeferredChannelMessageWithSource:
			if len(got.edits) != 1 || got.edits[0].Content == nil {
				t.Fatalf("a deferral plus %d edits", len(got.edits))
			}
			content, mentions = *got.edits[0].Content, got.edits[0].AllowedMentions
		default:
			t.Fatalf("command answered with type %d", resp.Type)
		}
		if content == "" || utf8.RuneCountInString(content) > MaxContent {
			t.Fatalf("reply of %d characters", utf8.RuneCountInString(content))
		}
		if mentions == nil || len(mentions.Parse) != 0 {
			t.Fatal("reply allows mentions")
		}
	})
}
