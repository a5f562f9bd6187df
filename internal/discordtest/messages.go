package discordtest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// RouteCreateMessage posts a message in a channel (a voice channel's own
// text chat included: its id is the channel's).
const RouteCreateMessage = "POST /channels/{channel}/messages"

// CodeMissingPermissions is Discord's JSON code for a 403 on an action the
// bot's permissions do not allow (Send Messages, here).
const CodeMissingPermissions = 50013

// ChannelMessage is one message the bot posted with RouteCreateMessage.
type ChannelMessage struct {
	ID        string
	ChannelID string
	Content   string
	// Components are the request's components (action rows of buttons),
	// as sent; nil when absent. Click finds a button's message by ID.
	Components json.RawMessage
	// AllowedMentions is the request's allowed_mentions, as sent (nil
	// when absent: Discord then pings whoever the content mentions).
	AllowedMentions json.RawMessage
	At              time.Time
}

// DenyMessages makes Discord refuse the bot's messages in channelID with
// 403 Missing Permissions, as for a channel where it lacks Send Messages.
func (f *Fake) DenyMessages(channelID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deniedPosts = append(f.deniedPosts, channelID)
}

// ChannelMessages returns the bot's messages in channelID, oldest first.
func (f *Fake) ChannelMessages(channelID string) []ChannelMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ChannelMessage
	for _, m := range f.posted {
		if m.ChannelID == channelID {
			out = append(out, m)
		}
	}
	return out
}

// WaitChannelMessages waits until channelID holds at least n of the bot's
// messages and returns them.
func (f *Fake) WaitChannelMessages(ctx context.Context, channelID string, n int) ([]ChannelMessage, error) {
	err := f.waitFor(ctx, func() bool {
		c := 0
		for _, m := range f.posted {
			if m.ChannelID == channelID {
				c++
			}
		}
		return c >= n
	})
	return f.ChannelMessages(channelID), err
}

// Discord's limits on a message's buttons. The OpenAPI description states
// the per-row, label and custom_id ones (checked again here for a fake
// without WithSpec); the row count and unique custom_ids it does not.
const (
	maxActionRows   = 5
	maxRowButtons   = 5
	maxButtonLabel  = 80
	maxCustomID     = 100
	buttonStyleLink = 5 // a link button has a url and no custom_id
)

// component is an action row or a button, as a message's body holds them.
type component struct {
	Type       discordgo.ComponentType `json:"type"`
	Style      int                     `json:"style"`
	Label      string                  `json:"label"`
	CustomID   *string                 `json:"custom_id"`
	Components []component             `json:"components"`
}

// validateComponents applies the limits on a message's buttons: at most
// five action rows of at most five buttons, each button's label at most 80
// characters and its custom_id 1–100 characters and unique in the message
// (a link button has none).
func validateComponents(rows []component) []fieldError {
	var errs []fieldError
	if len(rows) > maxActionRows {
		errs = append(errs, tooLong([]string{"components"}, maxActionRows))
	}
	seen := map[string]bool{}
	for i, row := range rows {
		p := []string{"components", strconv.Itoa(i)}
		if row.Type != discordgo.ActionsRowComponent {
			errs = append(errs, fieldError{sub(p, "type"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "A top-level component must be an action row."})
			continue
		}
		if len(row.Components) > maxRowButtons {
			errs = append(errs, fieldError{sub(p, "components"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width"})
		}
		for j, b := range row.Components {
			bp := sub(p, "components", strconv.Itoa(j))
			if b.Type != discordgo.ButtonComponent {
				continue // select menus and the like: not checked here
			}
			if utf8.RuneCountInString(b.Label) > maxButtonLabel {
				errs = append(errs, tooLong(sub(bp, "label"), maxButtonLabel))
			}
			if b.Style != buttonStyleLink {
				if e, ok := checkCustomID(sub(bp, "custom_id"), b.CustomID, seen); !ok {
					errs = append(errs, e)
				}
			}
		}
	}
	return errs
}

// postMessage answers as Discord does: 404 for a channel of no guild the
// bot is in, 403 where DenyMessages says, 400 for a message with neither
// content nor components, over-long content, or buttons past Discord's
// limits (the body's shape is checked against the spec before).
func (f *Fake) postMessage(r *http.Request, body []byte) reply {
	var p struct {
		Content         string          `json:"content"`
		AllowedMentions json.RawMessage `json:"allowed_mentions"`
		Components      json.RawMessage `json:"components"`
	}
	var rows []component
	if err := json.Unmarshal(body, &p); err != nil {
		return apiError(http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body")
	}
	if len(p.Components) > 0 && string(p.Components) != "null" {
		if err := json.Unmarshal(p.Components, &rows); err != nil {
			return apiError(http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body")
		}
		if errs := validateComponents(rows); len(errs) > 0 {
			return formError(errs)
		}
	} else {
		p.Components = nil
	}
	id := r.PathValue("channel")
	f.mu.Lock()
	defer f.mu.Unlock()
	var guildID string
	for _, gid := range f.guildOrder {
		for _, c := range f.guilds[gid].g.Channels {
			if c.ID == id {
				guildID = gid
			}
		}
	}
	switch n := utf8.RuneCountInString(p.Content); {
	case guildID == "":
		return apiError(http.StatusNotFound, CodeUnknownChannel, "Unknown Channel")
	case slices.Contains(f.deniedPosts, id):
		return apiError(http.StatusForbidden, CodeMissingPermissions, "Missing Permissions")
	case n == 0 && len(rows) == 0:
		return apiError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
	case n > 2000:
		return apiError(http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body")
	}
	m := ChannelMessage{ID: f.ids.next(), ChannelID: id, Content: p.Content, Components: slices.Clone(p.Components),
		AllowedMentions: p.AllowedMentions, At: time.Now()}
	f.posted = append(f.posted, m)
	f.notifyLocked()
	w := f.messageWire(m)
	w["guild_id"] = guildID
	return okJSON(w)
}

// messageWire is the message object Discord returns for m, and sends with
// a click on one of its buttons.
func (f *Fake) messageWire(m ChannelMessage) map[string]any {
	var components any = []any{}
	if m.Components != nil {
		components = m.Components
	}
	return map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "type": 0, "content": m.Content,
		"author": f.botUserWire(), "timestamp": m.At.UTC().Format(time.RFC3339Nano), "edited_timestamp": nil,
		"tts": false, "mention_everyone": false, "mentions": []any{}, "mention_roles": []any{},
		"attachments": []any{}, "embeds": []any{}, "pinned": false, "flags": 0, "components": components,
	}
}

// checkCustomID checks a component's custom_id as Discord does: present,
// at most maxCustomID characters, unique within its message or modal
// (seen, which it records the id in). ok is false with the field's error.
func checkCustomID(path []string, id *string, seen map[string]bool) (fieldError, bool) {
	switch {
	case id == nil || *id == "":
		return fieldError{path, "BASE_TYPE_REQUIRED", "This field is required"}, false
	case utf8.RuneCountInString(*id) > maxCustomID:
		return tooLong(path, maxCustomID), false
	case seen[*id]:
		return fieldError{path, "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated"}, false
	}
	seen[*id] = true
	return fieldError{}, true
}
