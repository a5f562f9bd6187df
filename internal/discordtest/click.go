package discordtest

import (
	"context"
	"errors"
	"time"

	"github.com/bwmarrin/discordgo"
)

// ClickSpec describes a click on a button of one of the bot's messages, as
// Discord delivers it: a MESSAGE_COMPONENT (type 3) interaction carrying
// the button's custom_id and the message it is on.
type ClickSpec struct {
	// GuildID, ChannelID, UserID, Username, Roles, Permissions, Locale,
	// GuildLocale and Deadline are as in InteractionSpec; UserID is
	// required.
	GuildID     string
	ChannelID   string
	UserID      string
	Username    string
	Roles       []string
	Permissions *int64
	Locale      discordgo.Locale
	GuildLocale discordgo.Locale
	Deadline    time.Duration
	// MessageID names the message the button is on: one the bot posted
	// (RouteCreateMessage) is sent as it was posted, in its channel. Any
	// other id (or none) stands for a message the fake does not hold
	// (an interaction's reply, say), sent with one row holding the button.
	MessageID string
	// CustomID is the button's custom_id, sent as it is (a test may send
	// one no message could carry, as a tampering client would).
	CustomID string
}

// Click delivers a button click over the gateway as Interact delivers a
// command; WaitReply and the other waits work as for a command.
func (f *Fake) Click(ctx context.Context, spec ClickSpec) *Interaction {
	f.t.Helper()
	in, err := f.newClick(spec)
	return f.dispatch(ctx, "Click", in, err)
}

// ClickHTTP delivers a button click to an Interactions Endpoint URL as
// InteractHTTP delivers a command, signed, its response checked as a
// callback.
func (f *Fake) ClickHTTP(ctx context.Context, endpoint string, spec ClickSpec) *Interaction {
	f.t.Helper()
	in, err := f.newClick(spec)
	return f.postInteraction(ctx, "ClickHTTP", endpoint, in, err)
}

func (f *Fake) newClick(spec ClickSpec) (*Interaction, error) {
	if spec.UserID == "" {
		return nil, errors.New("ClickSpec.UserID is required")
	}
	is := InteractionSpec{GuildID: spec.GuildID, ChannelID: spec.ChannelID, UserID: spec.UserID, Username: spec.Username,
		Roles: spec.Roles, Permissions: spec.Permissions, Locale: spec.Locale, GuildLocale: spec.GuildLocale, Deadline: spec.Deadline}
	f.mu.Lock()
	defer f.mu.Unlock()
	var msg *ChannelMessage
	for i := range f.posted {
		if spec.MessageID != "" && f.posted[i].ID == spec.MessageID {
			msg = &f.posted[i]
		}
	}
	if msg != nil {
		is.ChannelID = msg.ChannelID
	}
	in := f.startLocked(discordgo.InteractionMessageComponent, is)
	in.CustomID = spec.CustomID
	if msg == nil {
		id := spec.MessageID
		if id == "" {
			id = f.ids.next()
		}
		msg = &ChannelMessage{ID: id, ChannelID: in.ChannelID, At: time.Now(), Components: mustJSON([]any{map[string]any{
			"type": int(discordgo.ActionsRowComponent), "components": []any{map[string]any{
				"type": int(discordgo.ButtonComponent), "style": int(discordgo.PrimaryButton), "label": "Button", "custom_id": spec.CustomID,
			}},
		}})}
	}
	data := map[string]any{"custom_id": spec.CustomID, "component_type": int(discordgo.ButtonComponent)}
	f.finishLocked(in, is, data, f.messageWire(*msg))
	return in, nil
}
