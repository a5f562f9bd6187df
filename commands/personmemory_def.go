package commands

import (
	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
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
// only, so every build registers the same bytes and command sync finds
// nothing to rewrite after a restart. It is guild-only: person memory is
// keyed by server, and Discord does not offer the command in DMs. Required
// options come first in each subcommand, as Discord requires.
func personMemoryDefinition() *discordgo.ApplicationCommand {
	return &discordgo.ApplicationCommand{
		Name:        personMemoryName,
		Type:        discordgo.ChatApplicationCommand,
		Description: "Remember, recall and forget what members tell me about people in this server",
		Contexts:    &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild},
		Options: []*discordgo.ApplicationCommandOption{
			proposeDefinition(),
			recallDefinition(),
			mineDefinition(),
			forgetDefinition(),
			exportDefinition(),
		},
	}
}

func proposeDefinition() *discordgo.ApplicationCommandOption {
	minFact := 1
	return &discordgo.ApplicationCommandOption{
		Type:        discordgo.ApplicationCommandOptionSubCommand,
		Name:        subPropose,
		Description: "Tell me a fact about yourself or another member; I remember it right away",
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionUser, Name: optPerson, Required: true,
				Description: "Who the fact is about"},
			{Type: discordgo.ApplicationCommandOptionString, Name: optFact, Required: true,
				Description: "The fact, up to 2048 characters", MinLength: &minFact, MaxLength: api.MaxFactBody},
			{Type: discordgo.ApplicationCommandOptionString, Name: optKind,
				Description: "What sort of fact (default: person-fact)",
				Choices:     choices(api.Kinds()...)},
			{Type: discordgo.ApplicationCommandOptionString, Name: optVisibility,
				Description: "Where it may be recalled (default: guild, every room of this server)",
				Choices:     choices(api.ScopeGuild, api.ScopeChannel)},
			{Type: discordgo.ApplicationCommandOptionString, Name: optExpires, MaxLength: maxExpiresText,
				Description: "When to forget it: 90m, 12h, 7d, 2w or a date like 2027-01-31 (at most 365 days)"},
			{Type: discordgo.ApplicationCommandOptionString, Name: optConfidence,
				Description: "How sure this is (default: high about yourself, medium about others)",
				Choices:     choices(confidenceHigh, confidenceMedium, confidenceLow)},
			{Type: discordgo.ApplicationCommandOptionString, Name: optSupersedes, MaxLength: api.MaxIDLength,
				Description: "The id of a fact visible here that this one corrects", Autocomplete: true},
		},
	}
}

func recallDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type:        discordgo.ApplicationCommandOptionSubCommand,
		Name:        subRecall,
		Description: "Show what I remember about someone that is visible in this channel",
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionUser, Name: optPerson,
				Description: "Whose facts (default: you)"},
			{Type: discordgo.ApplicationCommandOptionString, Name: optQuery, MaxLength: api.MaxRecallQuery,
				Description: "Only facts that contain every word of this"},
		},
	}
}

func mineDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type:        discordgo.ApplicationCommandOptionSubCommand,
		Name:        subMine,
		Description: "Show everything I keep about you in this server, where it is visible and who told me",
	}
}

func forgetDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type:        discordgo.ApplicationCommandOptionSubCommand,
		Name:        subForget,
		Description: "Forget a fact about you, or one you proposed about someone",
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: optFact, Required: true, MaxLength: api.MaxIDLength,
				Description: "The id of the fact to forget", Autocomplete: true},
			{Type: discordgo.ApplicationCommandOptionUser, Name: optPerson,
				Description: "Who the fact is about (default: you)"},
		},
	}
}

// choices offers each value under its own name.
func choices[S ~string](values ...S) []*discordgo.ApplicationCommandOptionChoice {
	out := make([]*discordgo.ApplicationCommandOptionChoice, 0, len(values))
	for _, v := range values {
		out = append(out, &discordgo.ApplicationCommandOptionChoice{Name: string(v), Value: string(v)})
	}
	return out
}
