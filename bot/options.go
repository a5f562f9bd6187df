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
	if commandType(data.CommandType) != commandType(def.Type) {
		return inv, interaction.ErrStale
	}
	if def.Type == discordgo.UserApplicationCommand || def.Type == discordgo.MessageApplicationCommand {
		return contextMenuTarget(inv, data, def.Type)
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

// commandType reads Discord's default: a command without a type is a slash
// command.
func commandType(t discordgo.ApplicationCommandType) discordgo.ApplicationCommandType {
	if t == 0 {
		return discordgo.ChatApplicationCommand
	}
	return t
}

// contextMenuTarget fills in what a user or message command was invoked on
// from target_id and the resolved data Discord sends with it. Context menus
// take no options; one with options, no target or a target missing from
// the resolved data is not what Discord sends for ours (stale).
func contextMenuTarget(inv interaction.Invocation, data discordgo.ApplicationCommandInteractionData, typ discordgo.ApplicationCommandType) (interaction.Invocation, error) {
	inv.Options = interaction.NewOptions(nil)
	if len(data.Options) > 0 || data.TargetID == "" || data.Resolved == nil {
		return inv, interaction.ErrStale
	}
	inv.TargetID = data.TargetID
	if typ == discordgo.UserApplicationCommand {
		u, ok := data.Resolved.Users[data.TargetID]
		if !ok || u == nil || u.ID != data.TargetID {
			return inv, interaction.ErrStale
		}
		inv.TargetUser = &interaction.User{ID: u.ID, Bot: u.Bot}
		return inv, nil
	}
	m, ok := data.Resolved.Messages[data.TargetID]
	if !ok || m == nil || m.ID != data.TargetID {
		return inv, interaction.ErrStale
	}
	msg := &interaction.Message{ID: m.ID, ChannelID: m.ChannelID, Webhook: m.WebhookID != "", Content: m.Content}
	if m.Author != nil {
		msg.Author = interaction.User{ID: m.Author.ID, Bot: m.Author.Bot}
	}
	if msg.ChannelID == "" {
		// Discord's resolved messages carry their channel; one without
		// is in the channel the command was invoked in.
		msg.ChannelID = inv.ChannelID
	}
	inv.TargetMessage = msg
	return inv, nil
}

// modalValues reads a modal submit's text inputs by custom_id. Anything
// but a text input (a client may send what it likes) is left out; a
// custom_id sent twice keeps its first value.
func modalValues(rows []discordgo.MessageComponent) map[string]any {
	values := map[string]any{}
	for _, c := range rows {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok || row == nil {
			continue
		}
		for _, in := range row.Components {
			ti, ok := in.(*discordgo.TextInput)
			if !ok || ti == nil || ti.CustomID == "" {
				continue
			}
			if _, dup := values[ti.CustomID]; !dup {
				values[ti.CustomID] = ti.Value
			}
		}
	}
	return values
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
