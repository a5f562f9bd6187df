package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// msgBody is the message part of a callback, an edit or a follow-up.
type msgBody struct {
	Content         *string                                     `json:"content"`
	Embeds          *[]*discordgo.MessageEmbed                  `json:"embeds"`
	Components      json.RawMessage                             `json:"components"`
	AllowedMentions *discordgo.MessageAllowedMentions           `json:"allowed_mentions"`
	Flags           *discordgo.MessageFlags                     `json:"flags"`
	Choices         []*discordgo.ApplicationCommandOptionChoice `json:"choices"`
	Poll            json.RawMessage                             `json:"poll"`
	CustomID        string                                      `json:"custom_id"`
	Title           string                                      `json:"title"`
}

type callbackBody struct {
	Type discordgo.InteractionResponseType `json:"type"`
	Data *msgBody                          `json:"data"`
}

func hasJSON(raw json.RawMessage) bool {
	s := string(raw)
	return s != "" && s != "null" && s != "[]" && s != "{}"
}

func (b *msgBody) empty() bool {
	return (b.Content == nil || *b.Content == "") && (b.Embeds == nil || len(*b.Embeds) == 0) &&
		!hasJSON(b.Components) && !hasJSON(b.Poll)
}

// Discord's message limits.
const (
	maxContent          = 2000
	maxEmbeds           = 10
	maxEmbedTotal       = 6000
	maxEmbedTitle       = 256
	maxEmbedDescription = 4096
	maxEmbedFields      = 25
	maxFieldName        = 256
	maxFieldValue       = 1024
	maxFooterText       = 2048
	maxAuthorName       = 256
	maxAutocomplete     = 25
)

func tooLong(path []string, max int) fieldError {
	return fieldError{path, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", max)}
}

// validateMessage applies Discord's content, embed and allowed_mentions limits.
func validateMessage(path []string, b *msgBody) []fieldError {
	var errs []fieldError
	if b.Content != nil && utf8.RuneCountInString(*b.Content) > maxContent {
		errs = append(errs, tooLong(sub(path, "content"), maxContent))
	}
	if b.Embeds != nil {
		embeds := *b.Embeds
		if len(embeds) > maxEmbeds {
			errs = append(errs, tooLong(sub(path, "embeds"), maxEmbeds))
		}
		total := 0
		for i, e := range embeds {
			if e == nil {
				continue
			}
			p := sub(path, "embeds", strconv.Itoa(i))
			n := utf8.RuneCountInString
			check := func(s string, max int, field ...string) {
				total += n(s)
				if n(s) > max {
					errs = append(errs, tooLong(sub(p, field...), max))
				}
			}
			check(e.Title, maxEmbedTitle, "title")
			check(e.Description, maxEmbedDescription, "description")
			if e.Footer != nil {
				check(e.Footer.Text, maxFooterText, "footer", "text")
			}
			if e.Author != nil {
				check(e.Author.Name, maxAuthorName, "author", "name")
			}
			if len(e.Fields) > maxEmbedFields {
				errs = append(errs, tooLong(sub(p, "fields"), maxEmbedFields))
			}
			for j, fl := range e.Fields {
				if fl == nil {
					continue
				}
				fp := []string{"fields", strconv.Itoa(j)}
				if fl.Name == "" {
					errs = append(errs, fieldError{sub(p, append(fp, "name")...), "BASE_TYPE_REQUIRED", "This field is required"})
				}
				if fl.Value == "" {
					errs = append(errs, fieldError{sub(p, append(fp, "value")...), "BASE_TYPE_REQUIRED", "This field is required"})
				}
				check(fl.Name, maxFieldName, append(fp, "name")...)
				check(fl.Value, maxFieldValue, append(fp, "value")...)
			}
		}
		if total > maxEmbedTotal {
			errs = append(errs, fieldError{sub(path, "embeds"), "MAX_EMBED_SIZE_EXCEEDED", fmt.Sprintf("Embed size exceeds maximum size of %d", maxEmbedTotal)})
		}
	}
	if am := b.AllowedMentions; am != nil {
		for i, p := range am.Parse {
			switch p {
			case discordgo.AllowedMentionTypeRoles, discordgo.AllowedMentionTypeUsers, discordgo.AllowedMentionTypeEveryone:
			default:
				errs = append(errs, fieldError{sub(path, "allowed_mentions", "parse", strconv.Itoa(i)), "BASE_TYPE_CHOICES", "Value must be one of ('roles', 'users', 'everyone')."})
			}
		}
		if slices.Contains(am.Parse, discordgo.AllowedMentionTypeUsers) && len(am.Users) > 0 {
			errs = append(errs, fieldError{sub(path, "allowed_mentions"), "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", "parse:[\"users\"] and users: [ids...] are mutually exclusive."})
		}
		if slices.Contains(am.Parse, discordgo.AllowedMentionTypeRoles) && len(am.Roles) > 0 {
			errs = append(errs, fieldError{sub(path, "allowed_mentions"), "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", "parse:[\"roles\"] and roles: [ids...] are mutually exclusive."})
		}
	}
	return errs
}

// messageFlagsAllowed are the flags a bot may set on an interaction
// response or follow-up: SUPPRESS_EMBEDS, EPHEMERAL, SUPPRESS_NOTIFICATIONS
// and IS_COMPONENTS_V2.
const messageFlagsAllowed = discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsEphemeral |
	discordgo.MessageFlagsSuppressNotifications | discordgo.MessageFlags(1<<15)

func checkMessageFlags(path []string, flags *discordgo.MessageFlags) []fieldError {
	if flags == nil || *flags&^messageFlagsAllowed == 0 {
		return nil
	}
	return []fieldError{{sub(path, "flags"), "MESSAGE_FLAGS_INVALID",
		"Only SUPPRESS_EMBEDS, EPHEMERAL, SUPPRESS_NOTIFICATIONS and IS_COMPONENTS_V2 can be set."}}
}

func validateChoices(path []string, choices []*discordgo.ApplicationCommandOptionChoice) []fieldError {
	var errs []fieldError
	if len(choices) > maxAutocomplete {
		errs = append(errs, tooLong(sub(path, "choices"), maxAutocomplete))
	}
	for i, c := range choices {
		if c == nil {
			continue
		}
		p := sub(path, "choices", strconv.Itoa(i))
		if n := utf8.RuneCountInString(c.Name); n < 1 || n > 100 {
			errs = append(errs, badLength(sub(p, "name"), 1, 100))
		}
		if s, ok := c.Value.(string); ok && utf8.RuneCountInString(s) > 100 {
			errs = append(errs, tooLong(sub(p, "value"), 100))
		}
	}
	return errs
}

func badJSON() reply {
	return apiError(http.StatusBadRequest, CodeInvalidJSON, "The request body contains invalid JSON.")
}

func emptyMessage() reply {
	return apiError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
}

// ---- interaction callback ----

func (f *Fake) postCallback(r *http.Request, body []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.interactions[r.PathValue("interaction")]
	if in == nil || in.Token != r.PathValue("token") {
		return apiError(http.StatusNotFound, CodeUnknownInteraction, "Unknown interaction")
	}
	// The deadline counts to when the request arrived: checking it against
	// Discord's description takes the fake time Discord does not charge.
	cb := Callback{Raw: slices.Clone(json.RawMessage(body)), After: arrivedAt(r).Sub(in.created)}
	rep := f.callbackLocked(in, body, uploaded(r), &cb, invalidReply(r))
	cb.Status = rep.status
	if rep.body != nil {
		cb.Answer = mustJSON(rep.body)
	}
	in.callbacks = append(in.callbacks, cb)
	if cb.Accepted() {
		in.acked = len(in.callbacks) - 1
	}
	f.notifyLocked()
	return rep
}

func (f *Fake) callbackLocked(in *Interaction, body []byte, files []File, cb *Callback, invalid *reply) reply {
	var p callbackBody
	if err := json.Unmarshal(body, &p); err != nil {
		return badJSON()
	}
	cb.Type = p.Type
	d := p.Data
	if d == nil {
		d = &msgBody{}
	}
	if d.Content != nil {
		cb.Content = *d.Content
	}
	if d.Embeds != nil {
		cb.Embeds = *d.Embeds
	}
	if d.Flags != nil {
		cb.Flags = *d.Flags
	}
	cb.AllowedMentions = d.AllowedMentions
	cb.Choices = d.Choices
	cb.Files = files

	if in.acked >= 0 {
		return apiError(http.StatusBadRequest, CodeAlreadyAcknowledged, "Interaction has already been acknowledged.")
	}
	if in.deadline > 0 && cb.After > in.deadline {
		return apiError(http.StatusNotFound, CodeUnknownInteraction, "Unknown interaction")
	}
	if invalid != nil {
		return *invalid
	}
	var allowed []discordgo.InteractionResponseType
	switch in.Type {
	case discordgo.InteractionApplicationCommandAutocomplete:
		allowed = []discordgo.InteractionResponseType{discordgo.InteractionApplicationCommandAutocompleteResult}
	case discordgo.InteractionModalSubmit:
		// A modal cannot answer a modal.
		allowed = []discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource,
			discordgo.InteractionResponseDeferredChannelMessageWithSource}
	default:
		allowed = []discordgo.InteractionResponseType{discordgo.InteractionResponseChannelMessageWithSource,
			discordgo.InteractionResponseDeferredChannelMessageWithSource, discordgo.InteractionResponseModal}
	}
	if !slices.Contains(allowed, p.Type) {
		return formError([]fieldError{{[]string{"type"}, "INTERACTION_RESPONSE_TYPE_INVALID",
			fmt.Sprintf("Interaction response type %d is not valid for interaction type %d", p.Type, in.Type)}})
	}
	now := time.Now()
	switch p.Type {
	case discordgo.InteractionResponseChannelMessageWithSource:
		if errs := append(validateMessage([]string{"data"}, d), checkMessageFlags([]string{"data"}, d.Flags)...); len(errs) > 0 {
			return formError(errs)
		}
		if d.empty() && len(files) == 0 {
			return emptyMessage()
		}
		in.original = &Message{ID: f.ids.next(), Content: cb.Content, Embeds: cb.Embeds, Components: slices.Clone(d.Components),
			Files: files, Flags: cb.Flags, AllowedMentions: d.AllowedMentions, Via: ViaCallback, CreatedAt: now}
	case discordgo.InteractionResponseDeferredChannelMessageWithSource:
		if cb.Flags&^discordgo.MessageFlagsEphemeral != 0 {
			// A deferral only says whether the coming reply is ephemeral.
			return formError([]fieldError{{[]string{"data", "flags"}, "INTERACTION_RESPONSE_FLAGS_INVALID",
				"A deferred response may only set the EPHEMERAL flag (64)."}})
		}
		in.original = &Message{ID: f.ids.next(), Flags: cb.Flags | discordgo.MessageFlagsLoading, CreatedAt: now}
	case discordgo.InteractionApplicationCommandAutocompleteResult:
		if errs := validateChoices([]string{"data"}, d.Choices); len(errs) > 0 {
			return formError(errs)
		}
	case discordgo.InteractionResponseModal:
		if len(files) > 0 {
			return formError([]fieldError{{[]string{"data", "attachments"}, "INTERACTION_RESPONSE_FILES_INVALID", "A modal carries no files."}})
		}
		m, errs := validateModal(d)
		cb.Modal = m
		if len(errs) > 0 {
			return formError(errs)
		}
	}
	return noContent()
}

// ---- webhook (original response and follow-ups) ----

func (f *Fake) webhookInteraction(r *http.Request) (*Interaction, *reply) {
	in := f.byToken[r.PathValue("token")]
	if in == nil || r.PathValue("app") != f.cfg.appID {
		rep := apiError(http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook")
		return nil, &rep
	}
	return in, nil
}

// messageLocked finds the message a webhook route names: @original (no
// {message} value) or a message id.
func (in *Interaction) messageLocked(r *http.Request) (*Message, *reply) {
	unknown := apiError(http.StatusNotFound, CodeUnknownMessage, "Unknown Message")
	id := r.PathValue("message")
	if id == "" || id == "@original" {
		if in.original == nil || in.original.Deleted {
			return nil, &unknown
		}
		return in.original, nil
	}
	if in.original != nil && in.original.ID == id && !in.original.Deleted {
		return in.original, nil
	}
	for _, m := range in.followups {
		if m.ID == id && !m.Deleted {
			return m, nil
		}
	}
	return nil, &unknown
}

// webhookMessageLocked finds the interaction and the message a webhook
// message route names, or the error reply Discord would give. f.mu is held.
func (f *Fake) webhookMessageLocked(r *http.Request) (*Interaction, *Message, *reply) {
	in, bad := f.webhookInteraction(r)
	if bad != nil {
		return nil, nil, bad
	}
	m, bad := in.messageLocked(r)
	if bad != nil {
		return nil, nil, bad
	}
	return in, m, nil
}

func (f *Fake) getMessage(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, m, bad := f.webhookMessageLocked(r)
	if bad != nil {
		return *bad
	}
	return okJSON(f.messageJSON(in, m))
}

func (f *Fake) editMessage(r *http.Request, body []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, m, bad := f.webhookMessageLocked(r)
	if bad != nil {
		return *bad
	}
	if bad := invalidReply(r); bad != nil {
		return *bad
	}
	var b msgBody
	if err := json.Unmarshal(body, &b); err != nil {
		return badJSON()
	}
	if errs := validateMessage(nil, &b); len(errs) > 0 {
		return formError(errs)
	}
	next := copyMessage(m)
	if b.Content != nil {
		next.Content = *b.Content
	}
	if b.Embeds != nil {
		next.Embeds = *b.Embeds
	}
	if b.Components != nil {
		next.Components = slices.Clone(b.Components)
	}
	if files := uploaded(r); files != nil {
		next.Files = files
	}
	check := msgBody{Content: &next.Content, Embeds: &next.Embeds, Components: next.Components}
	if check.empty() && len(next.Files) == 0 {
		return emptyMessage()
	}
	next.AllowedMentions = b.AllowedMentions
	if next.Loading() {
		next.Flags &^= discordgo.MessageFlagsLoading
		next.Via = ViaEdit
	}
	next.Edits++
	next.EditedAt = time.Now()
	*m = next
	f.notifyLocked()
	return okJSON(f.messageJSON(in, m))
}

func (f *Fake) deleteMessage(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, m, bad := f.webhookMessageLocked(r)
	if bad != nil {
		return *bad
	}
	m.Deleted = true
	f.notifyLocked()
	return noContent()
}

func (f *Fake) postFollowup(r *http.Request, body []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, bad := f.webhookInteraction(r)
	if bad != nil {
		return *bad
	}
	if in.acked < 0 || in.original == nil {
		// The interaction webhook exists only once the interaction was
		// acknowledged with a message or a defer.
		return apiError(http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook")
	}
	if bad := invalidReply(r); bad != nil {
		return *bad
	}
	var b msgBody
	if err := json.Unmarshal(body, &b); err != nil {
		return badJSON()
	}
	if errs := append(validateMessage(nil, &b), checkMessageFlags(nil, b.Flags)...); len(errs) > 0 {
		return formError(errs)
	}
	files := uploaded(r)
	if b.empty() && len(files) == 0 {
		return emptyMessage()
	}
	now := time.Now()
	m := &Message{AllowedMentions: b.AllowedMentions, Components: slices.Clone(b.Components), Files: files, Via: ViaFollowup, CreatedAt: now}
	if b.Content != nil {
		m.Content = *b.Content
	}
	if b.Embeds != nil {
		m.Embeds = *b.Embeds
	}
	if o := in.original; o.Loading() && !o.Deleted {
		// Discord shows the first follow-up after a defer in place of the
		// loading message; its ephemerality is the defer's.
		m.ID = o.ID
		m.Flags = o.Flags &^ discordgo.MessageFlagsLoading
		m.CreatedAt = o.CreatedAt
		m.EditedAt = now
		*o = *m
		m = o
	} else {
		m.ID = f.ids.next()
		if b.Flags != nil {
			m.Flags = *b.Flags & (discordgo.MessageFlagsEphemeral | discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsSuppressNotifications)
		}
		in.followups = append(in.followups, m)
	}
	f.notifyLocked()
	if r.URL.Query().Get("wait") != "true" {
		return noContent()
	}
	return okJSON(f.messageJSON(in, m))
}

// messageJSON is a message as the webhook routes answer it.
func (f *Fake) messageJSON(in *Interaction, m *Message) map[string]any {
	embeds := m.Embeds
	if embeds == nil {
		embeds = []*discordgo.MessageEmbed{}
	}
	components := json.RawMessage("[]")
	if hasJSON(m.Components) {
		components = m.Components
	}
	var edited any
	if !m.EditedAt.IsZero() {
		edited = m.EditedAt.UTC().Format(time.RFC3339Nano)
	}
	typ := 20 // CHAT_INPUT_COMMAND
	if m.Via == ViaFollowup && m != in.original {
		typ = 0
	}
	var invoker any
	var pl map[string]any
	if json.Unmarshal(in.payload, &pl) == nil {
		if mem, ok := pl["member"].(map[string]any); ok {
			invoker = mem["user"]
		} else {
			invoker = pl["user"]
		}
	}
	return map[string]any{
		"id": m.ID, "type": typ, "content": m.Content, "channel_id": in.ChannelID,
		"author": f.botUserWire(), "attachments": []any{}, "embeds": embeds, "mentions": []any{},
		"mention_roles": []any{}, "pinned": false, "mention_everyone": false, "tts": false,
		"timestamp": m.CreatedAt.UTC().Format(time.RFC3339Nano), "edited_timestamp": edited,
		"flags": m.Flags, "components": components, "application_id": f.cfg.appID, "webhook_id": f.cfg.appID,
		"interaction_metadata": map[string]any{"id": in.ID, "type": int(in.Type), "user": invoker,
			"authorizing_integration_owners": map[string]any{"0": in.GuildID}},
	}
}
