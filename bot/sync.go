package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
)

// CommandAPI is the part of discordgo's session that command sync uses.
type CommandAPI interface {
	ApplicationCommands(appID, guildID string, options ...discordgo.RequestOption) ([]*discordgo.ApplicationCommand, error)
	ApplicationCommandBulkOverwrite(appID, guildID string, commands []*discordgo.ApplicationCommand, options ...discordgo.RequestOption) ([]*discordgo.ApplicationCommand, error)
}

// SyncResult says, per scope ("" is global), whether commands were written.
type SyncResult map[string]bool

// SyncCommands registers defs in each guild of guildIDs (instant), or
// globally when there are none, by bulk overwrite, and only where what
// Discord already holds differs. The comparison is against Discord's own
// answer, so no local state can drift from it and a restart with unchanged
// definitions writes nothing.
func SyncCommands(ctx context.Context, api CommandAPI, appID string, guildIDs []string, defs []*discordgo.ApplicationCommand) (SyncResult, error) {
	scopes := guildIDs
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	want := normalizeAll(defs)
	out := SyncResult{}
	for _, g := range scopes {
		have, err := api.ApplicationCommands(appID, g, discordgo.WithContext(ctx))
		if err != nil {
			return out, fmt.Errorf("list registered commands (%s): %s", scopeName(g), restError(err))
		}
		if reflect.DeepEqual(normalizeAll(have), want) {
			out[g] = false
			continue
		}
		if _, err := api.ApplicationCommandBulkOverwrite(appID, g, defs, discordgo.WithContext(ctx)); err != nil {
			return out, fmt.Errorf("register commands (%s): %s", scopeName(g), restError(err))
		}
		out[g] = true
	}
	return out, nil
}

func scopeName(g string) string {
	if g == "" {
		return "global"
	}
	return "guild " + g
}

// shape is the part of a definition we declare; Discord adds ids, versions
// and defaults that must not count as a difference. Localizations count
// (choices' through their JSON): a changed translation is registered
// again, an unchanged one is not.
type shape struct {
	Name        string
	Type        discordgo.ApplicationCommandType
	Description string
	Names       map[discordgo.Locale]string
	Descs       map[discordgo.Locale]string
	Contexts    []discordgo.InteractionContextType
	Perms       string
	Options     []optionShape
}

type optionShape struct {
	Type         discordgo.ApplicationCommandOptionType
	Name         string
	Description  string
	Names        map[discordgo.Locale]string
	Descs        map[discordgo.Locale]string
	Required     bool
	Autocomplete bool
	Choices      string
	MinValue     string
	MaxValue     float64
	MinLength    int
	MaxLength    int
	Options      []optionShape
}

func normalizeAll(cmds []*discordgo.ApplicationCommand) []shape {
	out := make([]shape, 0, len(cmds))
	for _, c := range cmds {
		s := shape{Name: c.Name, Type: c.Type, Description: c.Description, Options: normalizeOptions(c.Options)}
		if c.NameLocalizations != nil {
			s.Names = localizations(*c.NameLocalizations)
		}
		if c.DescriptionLocalizations != nil {
			s.Descs = localizations(*c.DescriptionLocalizations)
		}
		if s.Type == 0 {
			s.Type = discordgo.ChatApplicationCommand
		}
		if c.Contexts != nil {
			s.Contexts = append(s.Contexts, *c.Contexts...)
			sort.Slice(s.Contexts, func(i, j int) bool { return s.Contexts[i] < s.Contexts[j] })
		}
		if c.DefaultMemberPermissions != nil {
			s.Perms = fmt.Sprint(*c.DefaultMemberPermissions)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func normalizeOptions(opts []*discordgo.ApplicationCommandOption) []optionShape {
	if len(opts) == 0 {
		return nil
	}
	out := make([]optionShape, 0, len(opts))
	for _, o := range opts {
		s := optionShape{Type: o.Type, Name: o.Name, Description: o.Description, Required: o.Required,
			Names: localizations(o.NameLocalizations), Descs: localizations(o.DescriptionLocalizations),
			Autocomplete: o.Autocomplete, MaxValue: o.MaxValue, MaxLength: o.MaxLength, Options: normalizeOptions(o.Options)}
		if len(o.Choices) > 0 {
			b, _ := json.Marshal(o.Choices)
			s.Choices = string(b)
		}
		if o.MinValue != nil {
			s.MinValue = fmt.Sprint(*o.MinValue)
		}
		if o.MinLength != nil {
			s.MinLength = *o.MinLength
		}
		out = append(out, s)
	}
	return out
}

// localizations is a localization map as compared: none and an empty one
// are the same.
func localizations(m map[discordgo.Locale]string) map[discordgo.Locale]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// GuildLister is the part of discordgo's session that lists the servers the
// bot is in.
type GuildLister interface {
	UserGuilds(limit int, beforeID, afterID string, withCounts bool, options ...discordgo.RequestOption) ([]*discordgo.UserGuild, error)
}

// guildPage is the most servers Discord lists in one answer.
const guildPage = 200

// PruneCommands removes the application's commands from every scope that a
// sync for guildIDs does not serve, so a bot moved from per-server commands
// to global ones (or back) is not listed twice: with guildIDs, the global
// scope and every other server the bot is in; without, every server the bot
// is in. It lists each scope first and writes only where commands remain,
// and returns the scopes it emptied. It costs one request per server the bot
// is in, so it runs on demand (`clankie bridge … sync`), not at every start.
func PruneCommands(ctx context.Context, api interface {
	CommandAPI
	GuildLister
}, appID string, guildIDs []string) ([]string, error) {
	keep := map[string]bool{}
	for _, g := range guildIDs {
		keep[g] = true
	}
	var scopes []string
	if len(guildIDs) > 0 {
		scopes = append(scopes, "")
	}
	for after := ""; ; {
		page, err := api.UserGuilds(guildPage, "", after, false, discordgo.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("list the servers the bot is in: %s", restError(err))
		}
		for _, g := range page {
			if !keep[g.ID] {
				scopes = append(scopes, g.ID)
			}
		}
		if len(page) < guildPage {
			break
		}
		after = page[len(page)-1].ID
	}
	var emptied []string
	for _, g := range scopes {
		have, err := api.ApplicationCommands(appID, g, discordgo.WithContext(ctx))
		if err != nil {
			return emptied, fmt.Errorf("list registered commands (%s): %s", scopeName(g), restError(err))
		}
		if len(have) == 0 {
			continue
		}
		if _, err := api.ApplicationCommandBulkOverwrite(appID, g, []*discordgo.ApplicationCommand{}, discordgo.WithContext(ctx)); err != nil {
			return emptied, fmt.Errorf("remove commands (%s): %s", scopeName(g), restError(err))
		}
		emptied = append(emptied, g)
	}
	return emptied, nil
}

// SyncAndPrune is `clankie bridge … sync`: it checks the token, registers
// defs as SyncAll does, then removes the application's commands from every
// scope the settings no longer serve (PruneCommands), logging what it wrote
// and emptied. It opens no gateway.
func SyncAndPrune(ctx context.Context, rest *discordgo.Session, guildIDs []string, defs []*discordgo.ApplicationCommand, log *zap.Logger) error {
	if _, err := CheckToken(ctx, rest); err != nil {
		return err
	}
	appID, err := applicationID(rest)
	if err != nil {
		return err
	}
	if err := syncLogged(ctx, rest, appID, guildIDs, defs, log); err != nil {
		return err
	}
	emptied, err := PruneCommands(ctx, rest, appID, guildIDs)
	for _, scope := range emptied {
		log.Info("commands removed", zap.String("scope", scopeName(scope)))
	}
	return err
}
