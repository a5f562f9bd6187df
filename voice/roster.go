package voice

import (
	"sort"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// roster is the bridge's own record of who is in which voice channel, kept
// from gateway events (GUILD_CREATE voice states, VOICE_STATE_UPDATE).
// discordgo's State cache is not used: its guild updates race with its
// voice-state reads.
type roster struct {
	mu     sync.Mutex
	guilds map[string]map[string]presence // guild → user → presence
}

type presence struct {
	channelID string
	bot       bool
}

func newRoster() *roster { return &roster{guilds: map[string]map[string]presence{}} }

// load replaces a guild's voice states, as GUILD_CREATE carries all of them
// (on joining a server, and again after every re-identify), and returns the
// moves it implies: each user whose channel differs from before, with the
// channel they were in. Those who left while no VOICE_STATE_UPDATE could
// tell us are among them. Its voice states carry no member, so bot flags
// come from its member list (which always holds the members in voice).
func (r *roster) load(guildID string, states []*discordgo.VoiceState, members []*discordgo.Member) (moved []move) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bots := map[string]bool{}
	for _, mb := range members {
		if mb != nil && mb.User != nil && mb.User.Bot {
			bots[mb.User.ID] = true
		}
	}
	m := map[string]presence{}
	for _, vs := range states {
		if vs != nil && vs.ChannelID != "" {
			m[vs.UserID] = presence{channelID: vs.ChannelID, bot: isBot(vs) || bots[vs.UserID]}
		}
	}
	for id, p := range r.guilds[guildID] {
		if m[id].channelID != p.channelID {
			moved = append(moved, move{userID: id, from: p.channelID, to: m[id].channelID})
		}
	}
	r.guilds[guildID] = m
	return moved
}

// move is one user's change of voice channel ("" is none).
type move struct{ userID, from, to string }

// update applies one VOICE_STATE_UPDATE and returns the user's previous
// channel ("" when they were not in voice).
func (r *roster) update(vs *discordgo.VoiceState) (before string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.guilds[vs.GuildID]
	if m == nil {
		m = map[string]presence{}
		r.guilds[vs.GuildID] = m
	}
	before = m[vs.UserID].channelID
	if vs.ChannelID == "" {
		delete(m, vs.UserID)
	} else {
		m[vs.UserID] = presence{channelID: vs.ChannelID, bot: isBot(vs) || m[vs.UserID].bot}
	}
	return before
}

// channelOf returns where a user is in a guild's voice channels.
func (r *roster) channelOf(guildID, userID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.guilds[guildID][userID].channelID
}

// humans returns the humans in a channel, sorted, excluding exclude (the
// bot's own user).
func (r *roster) humans(guildID, channelID, exclude string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, p := range r.guilds[guildID] {
		if p.channelID == channelID && !p.bot && id != exclude {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func isBot(vs *discordgo.VoiceState) bool {
	return vs.Member != nil && vs.Member.User != nil && vs.Member.User.Bot
}
