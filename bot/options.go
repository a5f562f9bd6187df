package bot

import (
	"fmt"
	"strconv"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/interaction"
)

// invoker returns the invocation's ids and who invoked it (a member in a
// server, a user in a DM); ok is false when the interaction names neither.
func invoker(in *discordgo.Interaction) (inv interaction.Invocation, ok bool) {
	inv = interaction.Invocation{ID: in.ID, GuildID: in.GuildID, ChannelID: in.ChannelID}
	inv.Locale, inv.GuildLocale = locales(in)
	switch {
	case in.Member != nil && in.Member.User != nil:
		inv.User = interaction.User{ID: in.Member.User.ID, Bot: in.Member.User.Bot}
		inv.RoleIDs = in.Member.Roles
		inv.Permissions = in.Member.Permissions
	case in.User != nil:
		inv.User = interaction.User{ID: in.User.ID, Bot: in.User.Bot}
	default:
		return inv, false
	}
	return inv, true
}

// locales returns the invoker's and the server's Discord locale as the
// interaction carries them (gateway and HTTP alike); the server's is ""
// outside one.
func locales(in *discordgo.Interaction) (user, guild string) {
	if in.GuildLocale != nil {
		guild = string(*in.GuildLocale)
	}
	return string(in.Locale), guild
}

// parseInvocation builds an Invocation, checking every option against the
// command's definition: an unknown option or one of the wrong type means
// Discord holds a stale registration, and the user is told so rather than a
// handler seeing a value it did not declare.
func parseInvocation(in *discordgo.Interaction, def *discordgo.ApplicationCommand) (interaction.Invocation, error) {
	data := in.ApplicationCommandData()
	inv, ok := invoker(in)
	inv.Command = data.Name
	if !ok {
		return inv, interaction.ErrStale
	}
	opts, declared := data.Options, def.Options
	if len(opts) == 1 && opts[0] != nil && opts[0].Type == discordgo.ApplicationCommandOptionSubCommand {
		sub := findOption(declared, opts[0].Name)
		if sub == nil || sub.Type != discordgo.ApplicationCommandOptionSubCommand {
			return inv, interaction.ErrStale
		}
		inv.Subcommand = opts[0].Name
		opts, declared = opts[0].Options, sub.Options
	} else if hasSubcommands(declared) {
		return inv, interaction.ErrStale
	}
	values := map[string]any{}
	for _, o := range opts {
		if o == nil {
			return inv, interaction.ErrStale
		}
		d := findOption(declared, o.Name)
		if d == nil || d.Type != o.Type {
			return inv, interaction.ErrStale
		}
		if o.Focused {
			inv.Focused = o.Name
		}
		v, err := optionValue(o, data.Resolved)
		if err != nil {
			return inv, interaction.ErrStale
		}
		values[o.Name] = v
	}
	inv.Options = interaction.NewOptions(values)
	return inv, nil
}

func findOption(opts []*discordgo.ApplicationCommandOption, name string) *discordgo.ApplicationCommandOption {
	for _, o := range opts {
		if o.Name == name {
			return o
		}
	}
	return nil
}

func hasSubcommands(opts []*discordgo.ApplicationCommandOption) bool {
	for _, o := range opts {
		if o.Type == discordgo.ApplicationCommandOptionSubCommand || o.Type == discordgo.ApplicationCommandOptionSubCommandGroup {
			return true
		}
	}
	return false
}

// optionValue reads a value by its declared type. Autocomplete sends the
// partial text of the focused option as a string whatever its type.
func optionValue(o *discordgo.ApplicationCommandInteractionDataOption, res *discordgo.ApplicationCommandInteractionDataResolved) (any, error) {
	switch o.Type {
	case discordgo.ApplicationCommandOptionString:
		s, ok := o.Value.(string)
		if !ok {
			return nil, fmt.Errorf("option %s: not a string", o.Name)
		}
		return s, nil
	case discordgo.ApplicationCommandOptionInteger:
		switch v := o.Value.(type) {
		case float64:
			return int64(v), nil
		case string:
			if o.Focused {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n, nil
			}
		}
		return nil, fmt.Errorf("option %s: not an integer", o.Name)
	case discordgo.ApplicationCommandOptionBoolean:
		b, ok := o.Value.(bool)
		if !ok {
			return nil, fmt.Errorf("option %s: not a boolean", o.Name)
		}
		return b, nil
	case discordgo.ApplicationCommandOptionUser:
		id, ok := o.Value.(string)
		if !ok || id == "" {
			return nil, fmt.Errorf("option %s: not a user id", o.Name)
		}
		u := interaction.User{ID: id}
		if res != nil {
			if ru, ok := res.Users[id]; ok && ru != nil {
				u.Bot = ru.Bot
			}
		}
		return u, nil
	}
	return nil, fmt.Errorf("option %s: unsupported type %d", o.Name, o.Type)
}
