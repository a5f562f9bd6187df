package commands

import (
	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/lang"
)

// Names of the command, its subcommands, options and choices: what Discord
// registers and what an invocation carries.
const (
	personMemoryName = "person-memory"

	subPropose = "propose"
	subRecall  = "recall"
	subMine    = "mine"
	subForget  = "forget"

	optPerson     = "person"
	optFact       = "fact"
	optKind       = "kind"
	optVisibility = "visibility"
	optExpires    = "expires"
	optConfidence = "confidence"
	optSupersedes = "supersedes"
	optQuery      = "query"

	confidenceHigh   = "high"
	confidenceMedium = "medium"
	confidenceLow    = "low"

	maxExpiresText = 32
)

// personMemoryDefinition is what is registered. It is built from literals
// and the embedded catalog only (which words every description, and each
// name, description and choice in de, fr, es-ES, pt-BR and ja), so every
// build registers the same bytes and command sync finds nothing to
// rewrite after a restart. It is guild-only: person memory is keyed by
// server, and Discord does not offer the command in DMs. Required options
// come first in each subcommand, as Discord requires.
func personMemoryDefinition(cat *lang.Catalog) *discordgo.ApplicationCommand {
	return cat.Command(&discordgo.ApplicationCommand{
		Name:     personMemoryName,
		Type:     discordgo.ChatApplicationCommand,
		Contexts: &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild},
		Options: []*discordgo.ApplicationCommandOption{
			proposeDefinition(),
			recallDefinition(),
			mineDefinition(),
			forgetDefinition(),
			exportDefinition(),
		},
	})
}

// kindChoiceID is the catalog's name for a kind, the kind option's choice.
func kindChoiceID(k api.Kind) lang.ID {
	return lang.ChoiceID("cmd."+personMemoryName+"."+subPropose+"."+optKind, string(k))
}

func proposeDefinition() *discordgo.ApplicationCommandOption {
	minFact := 1
	return &discordgo.ApplicationCommandOption{
		Type: discordgo.ApplicationCommandOptionSubCommand,
		Name: subPropose,
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionUser, Name: optPerson, Required: true},
			{Type: discordgo.ApplicationCommandOptionString, Name: optFact, Required: true, MinLength: &minFact, MaxLength: api.MaxFactBody},
			{Type: discordgo.ApplicationCommandOptionString, Name: optKind,
				Choices: choices(api.Kinds()...)},
			{Type: discordgo.ApplicationCommandOptionString, Name: optVisibility,
				Choices: choices(api.ScopeGuild, api.ScopeChannel)},
			{Type: discordgo.ApplicationCommandOptionString, Name: optExpires, MaxLength: maxExpiresText},
			{Type: discordgo.ApplicationCommandOptionString, Name: optConfidence,
				Choices: choices(confidenceHigh, confidenceMedium, confidenceLow)},
			{Type: discordgo.ApplicationCommandOptionString, Name: optSupersedes, MaxLength: api.MaxIDLength, Autocomplete: true},
		},
	}
}

func recallDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type: discordgo.ApplicationCommandOptionSubCommand,
		Name: subRecall,
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionUser, Name: optPerson},
			{Type: discordgo.ApplicationCommandOptionString, Name: optQuery, MaxLength: api.MaxRecallQuery},
		},
	}
}

func mineDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type: discordgo.ApplicationCommandOptionSubCommand,
		Name: subMine,
	}
}

func forgetDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type: discordgo.ApplicationCommandOptionSubCommand,
		Name: subForget,
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: optFact, Required: true, MaxLength: api.MaxIDLength, Autocomplete: true},
			{Type: discordgo.ApplicationCommandOptionUser, Name: optPerson},
		},
	}
}

// choices offers each value; Catalog.Command names it (the English name
// of a choice is its value, "person-fact", but for the words people read).
func choices[S ~string](values ...S) []*discordgo.ApplicationCommandOptionChoice {
	out := make([]*discordgo.ApplicationCommandOptionChoice, 0, len(values))
	for _, v := range values {
		out = append(out, &discordgo.ApplicationCommandOptionChoice{Name: string(v), Value: string(v)})
	}
	return out
}
