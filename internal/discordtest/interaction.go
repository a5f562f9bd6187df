package discordtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

// InteractionSpec describes a slash command invocation (or an autocomplete
// request) as Discord would deliver it.
type InteractionSpec struct {
	// Autocomplete makes an APPLICATION_COMMAND_AUTOCOMPLETE (type 4)
	// interaction instead of APPLICATION_COMMAND (type 2). Mark the option
	// being typed with OptionValue.Focus.
	Autocomplete bool
	// GuildID is where the command was run; "" means a DM with the bot, in
	// which case the interaction carries "user" instead of "member".
	GuildID string
	// ChannelID defaults to the guild's first text channel (or a fresh id).
	ChannelID string
	// UserID is the invoker (required). In a guild, a configured Member with
	// this id supplies username, bot flag and roles.
	UserID   string
	Username string
	// Roles overrides the invoker's role ids when non-nil.
	Roles []string
	// Permissions overrides the member's computed permissions (the
	// "permissions" string Discord sends) when non-nil.
	Permissions *int64
	// Command is the top-level command name (required). CommandID defaults
	// to the id the fake assigned when the command was registered.
	Command         string
	CommandID       string
	SubcommandGroup string
	Subcommand      string
	Options         []OptionValue
	// Locale is the invoker's (the interaction's locale); en-US when
	// empty. GuildLocale is the server's (guild_locale, and the guild
	// object's locale); the Guild's Locale when empty.
	Locale      discordgo.Locale
	GuildLocale discordgo.Locale
	// Deadline overrides the fake's 3 s deadline for this interaction, so a
	// test of a late answer need not slow every other interaction's test;
	// negative disables it.
	Deadline time.Duration
	// TargetUser makes a user command (a context menu, application
	// command type 2) invoked on this user: data carries target_id and
	// resolved.users (and resolved.members for a member of the guild), as
	// Discord sends them. Options are not sent with a context menu.
	TargetUser string
	// TargetMessage makes a message command (type 3) invoked on this
	// message: data carries target_id and resolved.messages, the
	// message's content included (Discord sends it to a message command
	// without the Message Content intent). The interaction's channel is
	// the message's unless ChannelID says otherwise.
	TargetMessage *TargetMessage
}

// TargetMessage is the message a message command is invoked on.
type TargetMessage struct {
	ID        string // a fresh id when empty
	ChannelID string // the interaction's channel when empty
	// AuthorID wrote it; a configured member supplies username and bot
	// flag, AuthorBot sets the flag for anyone else.
	AuthorID  string
	AuthorBot bool
	// WebhookID marks a message a webhook posted (its author is the
	// webhook, flagged as a bot).
	WebhookID string
	Content   string
}

// OptionValue is one option the invoker filled in.
type OptionValue struct {
	Name string
	// Type defaults from Value's Go type: string 3, int/int64 4, bool 5,
	// float64 10.
	Type    discordgo.ApplicationCommandOptionType
	Value   any
	Focused bool
}

// Focus marks the option as the one being typed in an autocomplete request.
func (o OptionValue) Focus() OptionValue {
	o.Focused = true
	return o
}

// StringOption is a string option (type 3).
func StringOption(name, v string) OptionValue {
	return OptionValue{Name: name, Type: discordgo.ApplicationCommandOptionString, Value: v}
}

// IntegerOption is an integer option (type 4).
func IntegerOption(name string, v int64) OptionValue {
	return OptionValue{Name: name, Type: discordgo.ApplicationCommandOptionInteger, Value: v}
}

// UserOption is a user option (type 6); the interaction's resolved.users
// (and resolved.members, for a configured member of the guild) describe it.
func UserOption(name, userID string) OptionValue {
	return OptionValue{Name: name, Type: discordgo.ApplicationCommandOptionUser, Value: userID}
}

// Where a visible message came from, in Message.Via.
const (
	ViaCallback = "callback" // callback type 4
	ViaEdit     = "edit"     // PATCH @original (after a defer, or changing a reply)
	ViaFollowup = "followup" // POST /webhooks/{app}/{token}
)

// Callback is one POST /interactions/{id}/{token}/callback the bot made,
// accepted or not.
type Callback struct {
	Type            discordgo.InteractionResponseType
	Content         string
	Embeds          []*discordgo.MessageEmbed
	Flags           discordgo.MessageFlags
	AllowedMentions *discordgo.MessageAllowedMentions
	Choices         []*discordgo.ApplicationCommandOptionChoice
	// Modal is a type 9 callback's form, as sent.
	Modal *Modal
	// Files are the attachments uploaded with the callback
	// (multipart/form-data), in part order.
	Files  []File
	Raw    json.RawMessage // the request body (payload_json for multipart)
	Status int             // 204 when accepted
	Answer json.RawMessage // the error body when rejected
	After  time.Duration   // since the interaction was first dispatched
}

// Accepted reports whether Discord (the fake) took this callback.
func (c Callback) Accepted() bool { return c.Status/100 == 2 }

// Ephemeral reports whether the response asked to be visible only to the
// invoker (flag 64).
func (c Callback) Ephemeral() bool { return c.Flags&discordgo.MessageFlagsEphemeral != 0 }

// Message is a message the bot made visible through an interaction: the
// original response or a follow-up.
type Message struct {
	ID      string
	Content string
	Embeds  []*discordgo.MessageEmbed
	// Flags include 64 (ephemeral) and, for a deferred response not yet
	// completed, 128 (loading).
	Flags discordgo.MessageFlags
	// AllowedMentions as sent with the request that last set the content;
	// nil means the bot sent none (so Discord would parse every mention).
	AllowedMentions *discordgo.MessageAllowedMentions
	Components      json.RawMessage
	// Files are the attachments uploaded with the request that last set
	// them (multipart/form-data).
	Files     []File
	Via       string // ViaCallback, ViaEdit or ViaFollowup
	Edits     int
	Deleted   bool
	CreatedAt time.Time
	EditedAt  time.Time
}

// Ephemeral reports flag 64.
func (m Message) Ephemeral() bool { return m.Flags&discordgo.MessageFlagsEphemeral != 0 }

// Loading reports a deferred response that has not been completed yet.
func (m Message) Loading() bool { return m.Flags&discordgo.MessageFlagsLoading != 0 }

// Interaction is a handle on one interaction the fake dispatched: it records
// the bot's callbacks, the original response and follow-ups. Methods are safe
// for concurrent use.
type Interaction struct {
	ID        string
	Token     string
	Type      discordgo.InteractionType
	GuildID   string
	ChannelID string
	UserID    string
	Command   string // empty for a click
	CustomID  string // a click's custom_id; empty for a command

	f       *Fake
	spec    InteractionSpec // who, where: a modal's submit comes from the same
	payload json.RawMessage
	err     error // set when Interact failed; every wait answers it

	// guarded by f.mu
	deadline   time.Duration // 0: none
	created    time.Time
	deliveries int
	callbacks  []Callback
	acked      int // index of the accepted callback, -1 for none
	original   *Message
	followups  []*Message
}

// Interact builds an interaction from spec with a fresh id and token, waits
// (bounded by ctx) for an identified gateway session, and dispatches
// INTERACTION_CREATE.
//
// When the spec is unusable or no session is ready it reports the problem
// with Errorf on the fake's test and returns a handle whose waits fail at
// once; Errorf rather than Fatalf keeps Interact safe to call from subtests
// and other goroutines.
func (f *Fake) Interact(ctx context.Context, spec InteractionSpec) *Interaction {
	f.t.Helper()
	in, err := f.newInteraction(spec)
	return f.dispatch(ctx, "Interact", in, err)
}

// dispatch delivers in (unless err says it could not be built) over the
// gateway, as Interact describes; caller names the method in errors.
func (f *Fake) dispatch(ctx context.Context, caller string, in *Interaction, err error) *Interaction {
	f.t.Helper()
	if err == nil {
		if err = f.WaitReady(ctx); err != nil {
			err = fmt.Errorf("no identified gateway session: %w", err)
		}
	}
	if err == nil && in.Redeliver() == 0 {
		err = errors.New("INTERACTION_CREATE reached no connected session")
	}
	if err != nil {
		err = fmt.Errorf("discordtest: %s: %w", caller, err)
		f.t.Errorf("%v", err)
		if in == nil {
			in = &Interaction{f: f, acked: -1}
		}
		in.err = err
	}
	return in
}

// Redeliver dispatches the same INTERACTION_CREATE again (same id and token),
// as Discord occasionally does, so a test can check the bot answers once. It
// returns how many connected sessions received it.
func (in *Interaction) Redeliver() int {
	f := in.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.payload == nil {
		return 0 // a handle from a failed Interact
	}
	if in.created.IsZero() {
		in.created = time.Now()
	}
	in.deliveries++
	n := 0
	for _, s := range f.sessionList() {
		if in.GuildID != "" && !s.inShard(in.GuildID) {
			continue
		}
		if in.GuildID == "" && s.shard != nil && s.shard[0] != 0 {
			continue // DMs go to shard 0
		}
		f.dispatchLocked(s, "INTERACTION_CREATE", in.payload)
		if s.conn != nil {
			n++
		}
	}
	f.notifyLocked()
	return n
}

// Payload returns the INTERACTION_CREATE data the bot received.
func (in *Interaction) Payload() json.RawMessage { return slices.Clone(in.payload) }

// Callbacks returns every callback attempt, accepted or rejected, in order.
func (in *Interaction) Callbacks() []Callback {
	in.f.mu.Lock()
	defer in.f.mu.Unlock()
	return slices.Clone(in.callbacks)
}

// WaitCallback waits for the accepted callback (the first one Discord takes)
// and returns it. On timeout the error lists rejected attempts, if any.
func (in *Interaction) WaitCallback(ctx context.Context) (Callback, error) {
	if in.err != nil {
		return Callback{}, in.err
	}
	var cb Callback
	var state string
	err := in.f.waitFor(ctx, func() bool {
		if in.acked >= 0 {
			cb = in.callbacks[in.acked]
			return true
		}
		state = in.describeLocked()
		return false
	})
	if err != nil {
		return Callback{}, fmt.Errorf("waiting for a callback on interaction %s: %w (%s)", in.ID, err, state)
	}
	return cb, nil
}

// WaitReply waits for the response the invoker finally sees: the content of a
// type 4 callback, or the original response once a type 5 defer has been
// completed (by PATCH @original, or by a first follow-up, which Discord shows
// in place of the loading message). It returns the original response at that
// moment; use Original for later edits.
func (in *Interaction) WaitReply(ctx context.Context) (Message, error) {
	if in.err != nil {
		return Message{}, in.err
	}
	var m Message
	var state string
	var fail error
	err := in.f.waitFor(ctx, func() bool {
		if in.acked >= 0 && in.callbacks[in.acked].Type == discordgo.InteractionApplicationCommandAutocompleteResult {
			fail = errors.New("interaction was answered with autocomplete choices, not a message")
			return true
		}
		if o := in.original; o != nil && !o.Loading() {
			m = copyMessage(o)
			return true
		}
		if o := in.original; o != nil && o.Deleted {
			fail = errors.New("the deferred response was deleted before it was completed")
			return true
		}
		state = in.describeLocked()
		return false
	})
	if fail != nil {
		return Message{}, fail
	}
	if err != nil {
		return Message{}, fmt.Errorf("waiting for a reply on interaction %s: %w (%s)", in.ID, err, state)
	}
	return m, nil
}

// Original returns the original response as it is now (possibly still
// loading), and false when there is none.
func (in *Interaction) Original() (Message, bool) {
	in.f.mu.Lock()
	defer in.f.mu.Unlock()
	if in.original == nil {
		return Message{}, false
	}
	return copyMessage(in.original), true
}

// WaitFollowups waits until at least n follow-ups exist and returns them.
func (in *Interaction) WaitFollowups(ctx context.Context, n int) ([]Message, error) {
	if in.err != nil {
		return nil, in.err
	}
	var out []Message
	err := in.f.waitFor(ctx, func() bool {
		if len(in.followups) < n {
			return false
		}
		out = make([]Message, len(in.followups))
		for i, m := range in.followups {
			out[i] = copyMessage(m)
		}
		return true
	})
	return out, err
}

func copyMessage(m *Message) Message {
	c := *m
	c.Embeds = slices.Clone(m.Embeds)
	c.Components = slices.Clone(m.Components)
	c.Files = slices.Clone(m.Files)
	return c
}

// describeLocked summarises the interaction's state for timeout errors.
func (in *Interaction) describeLocked() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("delivered %d time(s)", in.deliveries))
	for _, c := range in.callbacks {
		parts = append(parts, fmt.Sprintf("callback type %d answered %d %s", c.Type, c.Status, strings.TrimSpace(string(c.Answer))))
	}
	if in.original != nil && in.original.Loading() {
		parts = append(parts, "deferred, not yet completed")
	}
	if len(in.callbacks) == 0 {
		parts = append(parts, "no callback")
	}
	return strings.Join(parts, "; ")
}

// ---- building the interaction ----

func (f *Fake) newInteraction(spec InteractionSpec) (*Interaction, error) {
	if spec.UserID == "" {
		return nil, errors.New("InteractionSpec.UserID is required")
	}
	if spec.Command == "" {
		return nil, errors.New("InteractionSpec.Command is required")
	}
	cmdType := discordgo.ChatApplicationCommand
	switch {
	case spec.TargetUser != "" && spec.TargetMessage != nil:
		return nil, errors.New("InteractionSpec: a context menu has one target, a user or a message")
	case spec.TargetUser != "":
		cmdType = discordgo.UserApplicationCommand
	case spec.TargetMessage != nil:
		cmdType = discordgo.MessageApplicationCommand
		if spec.ChannelID == "" {
			spec.ChannelID = spec.TargetMessage.ChannelID
		}
	}
	if cmdType != discordgo.ChatApplicationCommand && (spec.Autocomplete || len(spec.Options) > 0 || spec.Subcommand != "") {
		return nil, errors.New("InteractionSpec: a context menu has no options, subcommands or autocomplete")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	typ := discordgo.InteractionApplicationCommand
	if spec.Autocomplete {
		typ = discordgo.InteractionApplicationCommandAutocomplete
	}
	in := f.startLocked(typ, spec)
	in.Command = spec.Command
	gs := f.guilds[spec.GuildID]

	// Command id and scope.
	data := map[string]any{"name": spec.Command, "type": int(cmdType)}
	cmdID := spec.CommandID
	if cmdID == "" {
		// A guild command shadows a global one of the same name.
		for _, scope := range []string{spec.GuildID, GlobalScope} {
			for _, c := range f.commands[scope] {
				if c.obj["name"] == spec.Command && fmt.Sprint(c.obj["type"]) == strconv.Itoa(int(cmdType)) {
					cmdID = c.obj["id"].(string)
					if scope != GlobalScope {
						data["guild_id"] = scope
					}
					break
				}
			}
			if cmdID != "" {
				break
			}
		}
	}
	if cmdID == "" {
		cmdID = f.ids.next()
	}
	data["id"] = cmdID

	// Options and resolved data.
	resolved := map[string]map[string]any{}
	addResolved := func(kind, id string, v any) {
		if resolved[kind] == nil {
			resolved[kind] = map[string]any{}
		}
		resolved[kind][id] = v
	}
	var opts []any
	for _, o := range spec.Options {
		typ := o.Type
		if typ == 0 {
			switch o.Value.(type) {
			case string:
				typ = discordgo.ApplicationCommandOptionString
			case int, int64, int32:
				typ = discordgo.ApplicationCommandOptionInteger
			case bool:
				typ = discordgo.ApplicationCommandOptionBoolean
			case float64, float32:
				typ = discordgo.ApplicationCommandOptionNumber
			default:
				return nil, fmt.Errorf("option %q: set Type for a %T value", o.Name, o.Value)
			}
		}
		opt := map[string]any{"name": o.Name, "type": int(typ), "value": o.Value}
		if o.Focused {
			opt["focused"] = true
		}
		opts = append(opts, opt)
		id, _ := o.Value.(string)
		switch typ {
		case discordgo.ApplicationCommandOptionUser, discordgo.ApplicationCommandOptionMentionable:
			if m, ok := gsMember(gs, id); ok {
				addResolved("users", id, userWire(m.UserID, m.Username, m.GlobalName, m.Bot))
				mw := memberWire(m, gs.joinedAt, false)
				mw.Permissions = strconv.FormatInt(gs.permissions(m.UserID, m.Roles), 10)
				addResolved("members", id, mw)
			} else if r, ok := gsRole(gs, id); ok && typ == discordgo.ApplicationCommandOptionMentionable {
				addResolved("roles", id, roleWire(r))
			} else if id != "" {
				addResolved("users", id, userWire(id, "", "", false))
			}
		case discordgo.ApplicationCommandOptionRole:
			if r, ok := gsRole(gs, id); ok {
				addResolved("roles", id, roleWire(r))
			}
		case discordgo.ApplicationCommandOptionChannel:
			if gs != nil {
				if c, ok := gs.channel(id); ok {
					addResolved("channels", id, map[string]any{"id": c.ID, "name": c.Name, "type": int(c.Type),
						"parent_id": strPtr(c.ParentID), "permissions": strconv.FormatInt(discordgo.PermissionAll, 10)})
				}
			}
		}
	}
	if spec.Subcommand != "" {
		so := map[string]any{"name": spec.Subcommand, "type": int(discordgo.ApplicationCommandOptionSubCommand)}
		if len(opts) > 0 {
			so["options"] = opts
		}
		opts = []any{so}
	}
	if spec.SubcommandGroup != "" {
		opts = []any{map[string]any{"name": spec.SubcommandGroup, "type": int(discordgo.ApplicationCommandOptionSubCommandGroup), "options": opts}}
	}
	if len(opts) > 0 {
		data["options"] = opts
	}
	resolveUser := func(id string) {
		if m, ok := gsMember(gs, id); ok {
			addResolved("users", id, userWire(m.UserID, m.Username, m.GlobalName, m.Bot))
			mw := memberWire(m, gs.joinedAt, false)
			mw.Permissions = strconv.FormatInt(gs.permissions(m.UserID, m.Roles), 10)
			addResolved("members", id, mw)
		} else if id != "" {
			addResolved("users", id, userWire(id, "", "", false))
		}
	}
	switch {
	case spec.TargetUser != "":
		data["target_id"] = spec.TargetUser
		resolveUser(spec.TargetUser)
	case spec.TargetMessage != nil:
		tm := *spec.TargetMessage
		if tm.ID == "" {
			tm.ID = f.ids.next()
		}
		if tm.ChannelID == "" {
			tm.ChannelID = in.ChannelID
		}
		data["target_id"] = tm.ID
		author := userWire(tm.AuthorID, "", "", tm.AuthorBot)
		if m, ok := gsMember(gs, tm.AuthorID); ok && tm.WebhookID == "" {
			author = userWire(m.UserID, m.Username, m.GlobalName, m.Bot || tm.AuthorBot)
			mw := memberWire(m, gs.joinedAt, false)
			mw.Permissions = strconv.FormatInt(gs.permissions(m.UserID, m.Roles), 10)
			addResolved("members", m.UserID, mw)
		}
		if tm.WebhookID != "" {
			author = userWire(tm.WebhookID, "webhook", "", true)
		}
		msg := map[string]any{
			"id": tm.ID, "channel_id": tm.ChannelID, "type": 0, "content": tm.Content, "author": author,
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "edited_timestamp": nil,
			"tts": false, "mention_everyone": false, "mentions": []any{}, "mention_roles": []any{},
			"attachments": []any{}, "embeds": []any{}, "pinned": false, "flags": 0, "components": []any{},
		}
		if tm.WebhookID != "" {
			msg["webhook_id"] = tm.WebhookID
		}
		addResolved("messages", tm.ID, msg)
	}
	if len(resolved) > 0 {
		data["resolved"] = resolved
	}

	f.finishLocked(in, spec, data, nil)
	return in, nil
}

// startLocked makes the handle of a new interaction of typ with a fresh id
// and token, its deadline and its channel (the spec's, else the guild's
// first text channel, else a fresh id).
func (f *Fake) startLocked(typ discordgo.InteractionType, spec InteractionSpec) *Interaction {
	in := &Interaction{
		ID:      f.ids.next(),
		Token:   "aW50ZXJhY3Rpb246" + randomHex(40), // "interaction:" base64, like Discord's
		Type:    typ,
		GuildID: spec.GuildID,
		UserID:  spec.UserID,
		f:       f,
		spec:    spec,
		acked:   -1,
	}
	switch {
	case spec.Deadline > 0:
		in.deadline = spec.Deadline
	case spec.Deadline == 0:
		in.deadline = f.cfg.deadline
	}
	in.ChannelID = spec.ChannelID
	if gs := f.guilds[spec.GuildID]; in.ChannelID == "" && gs != nil {
		for _, c := range gs.g.Channels {
			if c.Type == discordgo.ChannelTypeGuildText {
				in.ChannelID = c.ID
				break
			}
		}
	}
	if in.ChannelID == "" {
		in.ChannelID = f.ids.next()
	}
	return in
}

// finishLocked wraps data in the interaction as Discord sends it (who
// invoked it, where, with which permissions; the message, for a click) and
// registers the handle.
func (f *Fake) finishLocked(in *Interaction, spec InteractionSpec, data, message map[string]any) {
	gs := f.guilds[spec.GuildID]
	locale := spec.Locale
	if locale == "" {
		locale = discordgo.EnglishUS
	}
	p := map[string]any{
		"id": in.ID, "application_id": f.cfg.appID, "type": int(in.Type), "token": in.Token, "version": 1,
		"data": data, "channel_id": in.ChannelID, "locale": string(locale), "entitlements": []any{},
	}
	if message != nil {
		p["message"] = message
	}
	if spec.GuildID != "" {
		m, ok := gsMember(gs, spec.UserID)
		if !ok {
			m = Member{UserID: spec.UserID}
		}
		if spec.Username != "" {
			m.Username = spec.Username
		}
		if spec.Roles != nil {
			m.Roles = slices.Clone(spec.Roles)
		}
		var perms, appPerms int64
		joined := time.Now()
		if gs != nil {
			perms = gs.permissions(m.UserID, m.Roles)
			bot, _ := gs.member(f.cfg.botID)
			appPerms = gs.permissions(f.cfg.botID, bot.Roles)
			joined = gs.joinedAt
		}
		if spec.Permissions != nil {
			perms = *spec.Permissions
		}
		mw := memberWire(m, joined, true)
		mw.Permissions = strconv.FormatInt(perms, 10)
		p["guild_id"] = spec.GuildID
		p["member"] = mw
		p["app_permissions"] = strconv.FormatInt(appPerms, 10)
		guildLocale := spec.GuildLocale
		if guildLocale == "" {
			guildLocale = gs.locale()
		}
		p["guild_locale"] = string(guildLocale)
		p["guild"] = map[string]any{"id": spec.GuildID, "locale": string(guildLocale), "features": []any{}}
		p["context"] = 0
		p["authorizing_integration_owners"] = map[string]any{"0": spec.GuildID}
		p["channel"] = map[string]any{"id": in.ChannelID, "type": int(discordgo.ChannelTypeGuildText), "guild_id": spec.GuildID}
	} else {
		name := spec.Username
		p["user"] = userWire(spec.UserID, name, "", false)
		p["app_permissions"] = strconv.FormatInt(discordgo.PermissionAll&^discordgo.PermissionAdministrator, 10)
		p["context"] = 1
		p["authorizing_integration_owners"] = map[string]any{"0": "0"}
		p["channel"] = map[string]any{"id": in.ChannelID, "type": int(discordgo.ChannelTypeDM)}
	}
	in.payload = mustJSON(p)
	f.interactions[in.ID] = in
	f.byToken[in.Token] = in
}

func gsMember(gs *guildState, id string) (Member, bool) {
	if gs == nil {
		return Member{}, false
	}
	return gs.member(id)
}

func gsRole(gs *guildState, id string) (Role, bool) {
	if gs == nil {
		return Role{}, false
	}
	for _, r := range gs.g.Roles {
		if r.ID == id {
			return r, true
		}
	}
	return Role{}, false
}
