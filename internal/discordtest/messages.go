package discordtest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// RouteCreateMessage posts a message in a channel (a voice channel's own
// text chat included: its id is the channel's).
const RouteCreateMessage = "POST /channels/{channel}/messages"

// CodeMissingPermissions is Discord's JSON code for a 403 on an action the
// bot's permissions do not allow (Send Messages, here).
const CodeMissingPermissions = 50013

// ChannelMessage is one message the bot posted with RouteCreateMessage.
type ChannelMessage struct {
	ChannelID string
	Content   string
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

// postMessage answers as Discord does: 404 for a channel of no guild the
// bot is in, 403 where DenyMessages says, 400 for empty or over-long
// content (the body's shape is checked against the spec before).
func (f *Fake) postMessage(r *http.Request, body []byte) reply {
	var p struct {
		Content         string          `json:"content"`
		AllowedMentions json.RawMessage `json:"allowed_mentions"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return apiError(http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body")
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
	case n == 0:
		return apiError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
	case n > 2000:
		return apiError(http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body")
	}
	now := time.Now()
	f.posted = append(f.posted, ChannelMessage{ChannelID: id, Content: p.Content, AllowedMentions: p.AllowedMentions, At: now})
	f.notifyLocked()
	return okJSON(map[string]any{
		"id": f.ids.next(), "channel_id": id, "guild_id": guildID, "type": 0, "content": p.Content,
		"author": f.botUserWire(), "timestamp": now.UTC().Format(time.RFC3339Nano), "edited_timestamp": nil,
		"tts": false, "mention_everyone": false, "mentions": []any{}, "mention_roles": []any{},
		"attachments": []any{}, "embeds": []any{}, "pinned": false, "flags": 0, "components": []any{},
	})
}
