package discordtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/discordtest"
)

// buttons is one action row per entry of rows, each holding that many
// primary buttons with distinct custom_ids.
func buttons(rows ...int) []discordgo.MessageComponent {
	var out []discordgo.MessageComponent
	for i, n := range rows {
		var row discordgo.ActionsRow
		for j := range n {
			row.Components = append(row.Components, discordgo.Button{Label: "b", Style: discordgo.PrimaryButton, CustomID: fmt.Sprintf("demo:%d-%d", i, j)})
		}
		out = append(out, row)
	}
	return out
}

// TestMessagesWithButtonsAreKeptWithinDiscordsLimits: a message with a row
// of buttons passes the spec and is kept with its components; buttons past
// the limits Discord enforces beyond its spec are refused 400.
func TestMessagesWithButtonsAreKeptWithinDiscordsLimits(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	m, err := s.ChannelMessageSendComplex(textID, &discordgo.MessageSend{Content: "choose", Components: buttons(2)})
	if err != nil {
		t.Fatal(err)
	}
	got := f.ChannelMessages(textID)
	var rows []struct {
		Type       int `json:"type"`
		Components []struct {
			Type     int    `json:"type"`
			CustomID string `json:"custom_id"`
		} `json:"components"`
	}
	if len(got) != 1 || got[0].ID != m.ID || json.Unmarshal(got[0].Components, &rows) != nil ||
		len(rows) != 1 || rows[0].Type != 1 || len(rows[0].Components) != 2 || rows[0].Components[1].CustomID != "demo:0-1" {
		t.Fatalf("kept %+v (sent %s)", got, m.ID)
	}
	if len(m.Components) != 1 {
		t.Fatalf("the answer lost the components: %+v", m.Components)
	}

	long := buttons(1)
	long[0].(discordgo.ActionsRow).Components[0] = discordgo.Button{Label: "b", Style: discordgo.PrimaryButton, CustomID: strings.Repeat("x", 101)}
	label := buttons(1)
	label[0].(discordgo.ActionsRow).Components[0] = discordgo.Button{Label: strings.Repeat("l", 81), Style: discordgo.PrimaryButton, CustomID: "demo"}
	dup := []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.Button{Label: "a", Style: discordgo.PrimaryButton, CustomID: "demo"},
		discordgo.Button{Label: "b", Style: discordgo.SecondaryButton, CustomID: "demo"},
	}}}
	for _, tc := range []struct {
		name       string
		components []discordgo.MessageComponent
	}{
		{"six buttons in a row", buttons(6)},
		{"six rows", buttons(1, 1, 1, 1, 1, 1)},
		{"a 101-character custom_id", long},
		{"an 81-character label", label},
		{"a custom_id twice", dup},
	} {
		_, err := s.ChannelMessageSendComplex(textID, &discordgo.MessageSend{Content: tc.name, Components: tc.components})
		if st, _ := restCode(err); st != http.StatusBadRequest {
			t.Errorf("%s: answered %v, want 400", tc.name, err)
		}
	}
	if n := len(f.ChannelMessages(textID)); n != 1 {
		t.Fatalf("%d messages kept, want 1", n)
	}
	f.TakeViolations()
}

// TestAClickCarriesTheButtonAndItsMessage: a click on a posted message's
// button reaches the bot as Discord sends it (type 3, the custom_id, the
// message it is on, the member), and the bot's ephemeral answer is the
// click's reply.
func TestAClickCarriesTheButtonAndItsMessage(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	posted, err := s.ChannelMessageSendComplex(textID, &discordgo.MessageSend{Content: "choose", Components: buttons(2)})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan *discordgo.Interaction, 1)
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		seen <- ic.Interaction
		_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "clicked", Flags: discordgo.MessageFlagsEphemeral}})
	})
	openSession(t, f, s)
	ctx := timeout(t)
	in := f.Click(ctx, discordtest.ClickSpec{GuildID: guildID, UserID: bobID, MessageID: posted.ID, CustomID: "demo:0-1"})
	m, err := in.WaitReply(ctx)
	if err != nil || m.Content != "clicked" || !m.Ephemeral() {
		t.Fatalf("reply %+v, %v", m, err)
	}
	got := recv(t, ctx, seen, "the click")
	data, ok := got.Data.(discordgo.MessageComponentInteractionData)
	if got.Type != discordgo.InteractionMessageComponent || !ok || data.CustomID != "demo:0-1" || data.ComponentType != discordgo.ButtonComponent ||
		got.Member == nil || got.Member.User.ID != bobID || got.GuildID != guildID || got.ChannelID != textID ||
		got.Message == nil || got.Message.ID != posted.ID || got.Message.Content != "choose" || len(got.Message.Components) != 1 ||
		got.AppPermissions == 0 || got.Token == "" || got.Version != 1 {
		t.Fatalf("the click arrived as %+v (data %+v)", got, got.Data)
	}
}

// TestAClickOverHTTPIsAnsweredByTheResponse: ClickHTTP signs the click and
// takes the endpoint's response as the callback.
func TestAClickOverHTTPIsAnsweredByTheResponse(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	ctx := timeout(t)
	in := f.ClickHTTP(ctx, endpoint(t, f, false), discordtest.ClickSpec{GuildID: guildID, UserID: bobID, CustomID: "demo:abc"})
	m, err := in.WaitReply(ctx)
	if err != nil || m.Content != "hello" || !m.Ephemeral() {
		t.Fatalf("reply %+v, %v", m, err)
	}
	var p struct {
		Type int `json:"type"`
		Data struct {
			CustomID      string `json:"custom_id"`
			ComponentType int    `json:"component_type"`
		} `json:"data"`
		Message struct {
			ID         string            `json:"id"`
			Components []json.RawMessage `json:"components"`
		} `json:"message"`
	}
	if err := json.Unmarshal(in.Payload(), &p); err != nil || p.Type != 3 || p.Data.CustomID != "demo:abc" || p.Data.ComponentType != 2 ||
		p.Message.ID == "" || len(p.Message.Components) != 1 || in.CustomID != "demo:abc" {
		t.Fatalf("payload %s (%v)", in.Payload(), err)
	}
}
