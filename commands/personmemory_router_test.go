package commands

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/lang"
)

// responder records what the router answers.
type responder struct {
	mu    sync.Mutex
	resps []*discordgo.InteractionResponse
}

func (r *responder) InteractionRespond(_ *discordgo.Interaction, resp *discordgo.InteractionResponse, _ ...discordgo.RequestOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resps = append(r.resps, resp)
	return nil
}

func (r *responder) InteractionResponseEdit(*discordgo.Interaction, *discordgo.WebhookEdit, ...discordgo.RequestOption) (*discordgo.Message, error) {
	return &discordgo.Message{}, nil
}

func (r *responder) last(t *testing.T) *discordgo.InteractionResponseData {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.resps) == 0 || r.resps[len(r.resps)-1].Data == nil {
		t.Fatal("no answer")
	}
	return r.resps[len(r.resps)-1].Data
}

// interaction is a /person-memory <sub> interaction as Discord delivers it.
func discordInteraction(kind discordgo.InteractionType, guildID, sub string, opts ...*discordgo.ApplicationCommandInteractionDataOption) *discordgo.Interaction {
	in := &discordgo.Interaction{ID: testInterID, Type: kind, GuildID: guildID, ChannelID: testChannel,
		Data: discordgo.ApplicationCommandInteractionData{Name: personMemoryName,
			Options: []*discordgo.ApplicationCommandInteractionDataOption{
				{Name: sub, Type: discordgo.ApplicationCommandOptionSubCommand, Options: opts}},
			Resolved: &discordgo.ApplicationCommandInteractionDataResolved{Users: map[string]*discordgo.User{
				testOther: {ID: testOther}, "600000000000000006": {ID: "600000000000000006", Bot: true}}}}}
	if guildID == "" {
		in.User = &discordgo.User{ID: testInvoker}
	} else {
		in.Member = &discordgo.Member{User: &discordgo.User{ID: testInvoker}, Permissions: discordgo.PermissionManageGuild}
	}
	return in
}

func option(name string, t discordgo.ApplicationCommandOptionType, v any) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: t, Value: v}
}

// The definition and the handlers agree with the router's option checks:
// what Discord sends for the registered definition reaches the handlers.
func TestPersonMemoryThroughTheRouter(t *testing.T) {
	user, str := discordgo.ApplicationCommandOptionUser, discordgo.ApplicationCommandOptionString
	tests := []struct {
		name      string
		in        *discordgo.Interaction
		want      string
		proposals int
	}{
		{"propose", discordInteraction(discordgo.InteractionApplicationCommand, testGuild, subPropose,
			option(optPerson, user, testOther), option(optFact, str, "likes tea"), option(optExpires, str, "2w"),
			option(optVisibility, str, string(api.ScopeChannel)), option(optKind, str, string(api.KindPreference))),
			"Remembered `fnew2345` about <@" + testOther + "> (preference, medium confidence), visible only in <#" + testChannel + ">", 1},
		{"a bot subject", discordInteraction(discordgo.InteractionApplicationCommand, testGuild, subPropose,
			option(optPerson, user, "600000000000000006"), option(optFact, str, "beeps")), inEnglish(t, lang.BotSubject, nil), 0},
		{"in a DM", discordInteraction(discordgo.InteractionApplicationCommand, "", subMine), "Sorry, person memory belongs to a server.", 0},
		{"forget", discordInteraction(discordgo.InteractionApplicationCommand, testGuild, subForget,
			option(optFact, str, "fabc2345"), option(optPerson, user, testOther)), "Forgotten: `fabc2345` about <@" + testOther + ">.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{}
			r := bot.NewRouter(zap.NewNop(), bot.Config{}, PersonMemory(mem, Policy{}, fixedNow, testCatalog(t)))
			resp := &responder{}
			r.Serve(context.Background(), resp, tt.in)
			r.Wait()
			data := resp.last(t)
			if !strings.HasPrefix(data.Content, tt.want) {
				t.Fatalf("answer %q; want %q", data.Content, tt.want)
			}
			if data.Flags&discordgo.MessageFlagsEphemeral == 0 || data.AllowedMentions == nil || len(data.AllowedMentions.Parse) != 0 {
				t.Fatalf("answer is not ephemeral without mentions: %+v", data)
			}
			if len(mem.proposals) != tt.proposals {
				t.Fatalf("%d proposals", len(mem.proposals))
			}
		})
	}
}

func TestPersonMemoryAutocompleteThroughTheRouter(t *testing.T) {
	mem := &fakeMemory{mineResp: api.RecallResponse{Facts: manyFacts(40, testInvoker), Total: 40}}
	r := bot.NewRouter(zap.NewNop(), bot.Config{}, PersonMemory(mem, Policy{}, fixedNow, testCatalog(t)))
	resp := &responder{}
	focused := option(optFact, discordgo.ApplicationCommandOptionString, "f00000")
	focused.Focused = true
	r.Serve(context.Background(), resp, discordInteraction(discordgo.InteractionApplicationCommandAutocomplete, testGuild, subForget, focused))
	r.Wait()
	choices := resp.last(t).Choices
	if len(choices) != 25 {
		t.Fatalf("%d choices", len(choices))
	}
	for _, c := range choices {
		if len([]rune(c.Name)) > 100 || !strings.HasPrefix(c.Name, c.Value.(string)+" · ") {
			t.Fatalf("choice %+v", c)
		}
	}
}
