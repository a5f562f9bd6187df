package discordtest

import (
	"slices"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Guild describes a server the fake bot is a member of. It is what GUILD_CREATE
// carries after READY, what the guild REST routes answer, and where
// interactions take the invoker's roles and permissions from, so one value
// configures all three consistently.
type Guild struct {
	ID      string
	Name    string
	OwnerID string
	// Roles of the guild. The @everyone role (id = guild id) is added with no
	// permissions when it is missing.
	Roles []Role
	// Members of the guild. The bot's own member is added when missing, as
	// Discord always lists it.
	Members     []Member
	Channels    []Channel
	VoiceStates []VoiceState
	// Locale is the server's preferred locale: its preferred_locale, and
	// the guild_locale of every interaction in it (en-US when empty).
	Locale discordgo.Locale
}

// Role is a guild role; Permissions is the bit set of discordgo.Permission*.
type Role struct {
	ID          string
	Name        string
	Permissions int64
	Position    int
}

// Member is a guild member. UserID is required; Username defaults to a name
// derived from the id.
type Member struct {
	UserID     string
	Username   string
	GlobalName string
	Nick       string
	Bot        bool
	Roles      []string
}

// Channel is a guild channel. Type is discordgo.ChannelTypeGuildText (0) or
// discordgo.ChannelTypeGuildVoice (2) for most tests.
type Channel struct {
	ID       string
	Name     string
	Type     discordgo.ChannelType
	ParentID string
}

// VoiceState says who is in which voice channel. ChannelID "" means the user
// left voice. GuildID may be left empty inside Guild.VoiceStates.
type VoiceState struct {
	GuildID   string
	ChannelID string
	UserID    string
	SessionID string
	SelfMute  bool
	SelfDeaf  bool
	Mute      bool
	Deaf      bool
}

// guildState is the fake's live copy of a Guild plus the time the bot joined.
type guildState struct {
	g        Guild
	joinedAt time.Time
}

// locale is the server's preferred locale.
func (gs *guildState) locale() discordgo.Locale {
	if gs == nil || gs.g.Locale == "" {
		return discordgo.EnglishUS
	}
	return gs.g.Locale
}

func cloneGuild(g Guild) Guild {
	c := g
	c.Roles = slices.Clone(g.Roles)
	c.Members = make([]Member, len(g.Members))
	for i, m := range g.Members {
		m.Roles = slices.Clone(m.Roles)
		c.Members[i] = m
	}
	c.Channels = slices.Clone(g.Channels)
	c.VoiceStates = slices.Clone(g.VoiceStates)
	return c
}

// normalize fills what Discord always has: the @everyone role, the bot's
// member, guild ids on voice states, a name.
func (f *Fake) normalizeGuild(g Guild) Guild {
	g = cloneGuild(g)
	if g.Name == "" {
		g.Name = "guild-" + g.ID
	}
	if !slices.ContainsFunc(g.Roles, func(r Role) bool { return r.ID == g.ID }) {
		g.Roles = append([]Role{{ID: g.ID, Name: "@everyone"}}, g.Roles...)
	}
	if !slices.ContainsFunc(g.Members, func(m Member) bool { return m.UserID == f.cfg.botID }) {
		g.Members = append(g.Members, Member{UserID: f.cfg.botID, Username: f.cfg.botName, Bot: true})
	}
	for i := range g.VoiceStates {
		g.VoiceStates[i].GuildID = g.ID
		if g.VoiceStates[i].SessionID == "" {
			g.VoiceStates[i].SessionID = randomHex(16)
		}
	}
	return g
}

func (gs *guildState) member(userID string) (Member, bool) {
	for _, m := range gs.g.Members {
		if m.UserID == userID {
			return m, true
		}
	}
	return Member{}, false
}

func (gs *guildState) channel(id string) (Channel, bool) {
	for _, c := range gs.g.Channels {
		if c.ID == id {
			return c, true
		}
	}
	return Channel{}, false
}

// permissions computes a member's guild-level permissions the way Discord does
// before channel overwrites: owner and Administrator get everything, otherwise
// @everyone's bits OR the member's roles' bits.
func (gs *guildState) permissions(userID string, roles []string) int64 {
	if userID == gs.g.OwnerID && userID != "" {
		return discordgo.PermissionAll
	}
	var p int64
	for _, r := range gs.g.Roles {
		if r.ID == gs.g.ID || slices.Contains(roles, r.ID) {
			p |= r.Permissions
		}
	}
	if p&discordgo.PermissionAdministrator != 0 {
		return discordgo.PermissionAll
	}
	return p
}

// setVoiceState replaces the user's voice state (removing it when ChannelID is
// empty), the way Discord's roster changes on VOICE_STATE_UPDATE.
func (gs *guildState) setVoiceState(vs VoiceState) {
	gs.g.VoiceStates = slices.DeleteFunc(gs.g.VoiceStates, func(v VoiceState) bool { return v.UserID == vs.UserID })
	if vs.ChannelID != "" {
		gs.g.VoiceStates = append(gs.g.VoiceStates, vs)
	}
}

// ---- wire shapes (what Discord sends) ----

type wireUser struct {
	ID            string  `json:"id"`
	Username      string  `json:"username"`
	Discriminator string  `json:"discriminator"`
	GlobalName    *string `json:"global_name"`
	Avatar        *string `json:"avatar"`
	Bot           bool    `json:"bot,omitempty"`
	PublicFlags   int     `json:"public_flags"`
}

type wireMember struct {
	User                       *wireUser `json:"user,omitempty"`
	Nick                       *string   `json:"nick"`
	Avatar                     *string   `json:"avatar"`
	Roles                      []string  `json:"roles"`
	JoinedAt                   string    `json:"joined_at"`
	PremiumSince               *string   `json:"premium_since"`
	Deaf                       bool      `json:"deaf"`
	Mute                       bool      `json:"mute"`
	Flags                      int       `json:"flags"`
	Pending                    bool      `json:"pending"`
	CommunicationDisabledUntil *string   `json:"communication_disabled_until"`
	Permissions                string    `json:"permissions,omitempty"`
}

type wireRole struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Color        int     `json:"color"`
	Hoist        bool    `json:"hoist"`
	Icon         *string `json:"icon"`
	UnicodeEmoji *string `json:"unicode_emoji"`
	Position     int     `json:"position"`
	Permissions  string  `json:"permissions"`
	Managed      bool    `json:"managed"`
	Mentionable  bool    `json:"mentionable"`
	Flags        int     `json:"flags"`
}

type wireChannel struct {
	ID                   string  `json:"id"`
	Type                 int     `json:"type"`
	GuildID              string  `json:"guild_id,omitempty"`
	Name                 string  `json:"name"`
	Position             int     `json:"position"`
	PermissionOverwrites []any   `json:"permission_overwrites"`
	ParentID             *string `json:"parent_id"`
	NSFW                 bool    `json:"nsfw"`
	Bitrate              int     `json:"bitrate,omitempty"`
	UserLimit            int     `json:"user_limit"`
	RateLimitPerUser     int     `json:"rate_limit_per_user"`
}

type wireVoiceState struct {
	GuildID                 string      `json:"guild_id,omitempty"`
	ChannelID               *string     `json:"channel_id"`
	UserID                  string      `json:"user_id"`
	Member                  *wireMember `json:"member,omitempty"`
	SessionID               string      `json:"session_id"`
	Deaf                    bool        `json:"deaf"`
	Mute                    bool        `json:"mute"`
	SelfDeaf                bool        `json:"self_deaf"`
	SelfMute                bool        `json:"self_mute"`
	SelfVideo               bool        `json:"self_video"`
	Suppress                bool        `json:"suppress"`
	RequestToSpeakTimestamp *string     `json:"request_to_speak_timestamp"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func defaultUsername(id string) string {
	if len(id) > 4 {
		return "user" + id[len(id)-4:]
	}
	return "user" + id
}

func userWire(id, username, globalName string, bot bool) *wireUser {
	if username == "" {
		username = defaultUsername(id)
	}
	return &wireUser{ID: id, Username: username, Discriminator: "0", GlobalName: strPtr(globalName), Bot: bot}
}

func memberWire(m Member, joined time.Time, withUser bool) *wireMember {
	w := &wireMember{
		Nick:     strPtr(m.Nick),
		Roles:    slices.Clone(m.Roles),
		JoinedAt: joined.UTC().Format(time.RFC3339Nano),
	}
	if w.Roles == nil {
		w.Roles = []string{}
	}
	if withUser {
		w.User = userWire(m.UserID, m.Username, m.GlobalName, m.Bot)
	}
	return w
}

func roleWire(r Role) wireRole {
	return wireRole{ID: r.ID, Name: r.Name, Position: r.Position, Permissions: strconv.FormatInt(r.Permissions, 10)}
}

func channelWire(c Channel, guildID string, pos int) wireChannel {
	w := wireChannel{ID: c.ID, Type: int(c.Type), GuildID: guildID, Name: c.Name, Position: pos,
		PermissionOverwrites: []any{}, ParentID: strPtr(c.ParentID)}
	if c.Type == discordgo.ChannelTypeGuildVoice || c.Type == discordgo.ChannelTypeGuildStageVoice {
		w.Bitrate = 64000
	}
	return w
}

func (gs *guildState) voiceStateWire(vs VoiceState, withGuildAndMember bool) wireVoiceState {
	w := wireVoiceState{ChannelID: strPtr(vs.ChannelID), UserID: vs.UserID, SessionID: vs.SessionID,
		Deaf: vs.Deaf, Mute: vs.Mute, SelfDeaf: vs.SelfDeaf, SelfMute: vs.SelfMute}
	if withGuildAndMember {
		w.GuildID = gs.g.ID
		if m, ok := gs.member(vs.UserID); ok {
			w.Member = memberWire(m, gs.joinedAt, true)
		} else {
			w.Member = memberWire(Member{UserID: vs.UserID}, gs.joinedAt, true)
		}
	}
	return w
}

// guildObject is the guild as GET /guilds/{id} answers it (no members,
// channels or voice states).
func (gs *guildState) guildObject() map[string]any {
	roles := make([]wireRole, len(gs.g.Roles))
	for i, r := range gs.g.Roles {
		roles[i] = roleWire(r)
	}
	return map[string]any{
		"id": gs.g.ID, "name": gs.g.Name, "icon": nil, "splash": nil, "discovery_splash": nil,
		"owner_id": gs.g.OwnerID, "afk_channel_id": nil, "afk_timeout": 300,
		"verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
		"roles": roles, "emojis": []any{}, "stickers": []any{}, "features": []any{},
		"mfa_level": 0, "application_id": nil, "system_channel_id": nil, "system_channel_flags": 0,
		"rules_channel_id": nil, "vanity_url_code": nil, "description": nil, "banner": nil,
		"premium_tier": 0, "preferred_locale": string(gs.locale()), "public_updates_channel_id": nil,
		"nsfw_level": 0, "premium_progress_bar_enabled": false,
	}
}

// guildCreate is the GUILD_CREATE payload. Voice states are left out for a
// session without the GUILD_VOICE_STATES intent, as Discord gates voice data
// on that intent.
func (gs *guildState) guildCreate(intents discordgo.Intent) map[string]any {
	o := gs.guildObject()
	members := make([]*wireMember, len(gs.g.Members))
	for i, m := range gs.g.Members {
		members[i] = memberWire(m, gs.joinedAt, true)
	}
	channels := make([]wireChannel, len(gs.g.Channels))
	for i, c := range gs.g.Channels {
		channels[i] = channelWire(c, "", i)
	}
	voice := []wireVoiceState{}
	if intents&discordgo.IntentsGuildVoiceStates != 0 {
		for _, vs := range gs.g.VoiceStates {
			voice = append(voice, gs.voiceStateWire(vs, false))
		}
	}
	o["joined_at"] = gs.joinedAt.UTC().Format(time.RFC3339Nano)
	o["large"] = false
	o["unavailable"] = false
	o["member_count"] = len(gs.g.Members)
	o["members"] = members
	o["channels"] = channels
	o["threads"] = []any{}
	o["presences"] = []any{}
	o["voice_states"] = voice
	o["stage_instances"] = []any{}
	o["guild_scheduled_events"] = []any{}
	return o
}
