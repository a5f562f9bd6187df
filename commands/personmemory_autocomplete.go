package commands

import (
	"context"
	"strings"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
)

// suggestCorrectable suggests fact ids for `propose supersedes`, and
// suggestForgettable for `forget fact`. A failure gets no choices (the
// router logs the error's type): a suggestion list is a convenience, and
// typing an id still works.
func (pm *personMemory) suggestCorrectable(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
	return pm.suggest(ctx, inv, optSupersedes, pm.correctable)
}

func (pm *personMemory) suggestForgettable(ctx context.Context, inv interaction.Invocation) ([]interaction.Choice, error) {
	return pm.suggest(ctx, inv, optFact, pm.forgettable)
}

// suggest offers the facts list returns, when option is the one being typed
// in a server.
func (pm *personMemory) suggest(ctx context.Context, inv interaction.Invocation, option string,
	list func(context.Context, interaction.Invocation) ([]api.Fact, error)) ([]interaction.Choice, error) {
	if inv.GuildID == "" || inv.Focused != option {
		return nil, nil
	}
	facts, err := list(ctx, inv)
	if err != nil {
		return nil, err
	}
	return factChoices(facts, optionString(inv, option)), nil
}

// correctable are the facts a proposal may supersede: visible here, about the
// chosen person, and either about the invoker or proposed by them.
func (pm *personMemory) correctable(ctx context.Context, inv interaction.Invocation) ([]api.Fact, error) {
	resp, err := pm.mem.Recall(ctx, inv.GuildID, personOrInvoker(inv),
		api.RecallQuery{ChannelID: inv.ChannelID, Limit: api.MaxFactsPerPerson})
	if err != nil {
		return nil, err
	}
	return changeableBy(inv.User.ID, resp.Facts), nil
}

// forgettable are the facts a forget may name: every fact about the invoker
// in this server (their own view, whatever the channel), or about someone
// else the facts visible here that the invoker proposed.
func (pm *personMemory) forgettable(ctx context.Context, inv interaction.Invocation) ([]api.Fact, error) {
	subject := personOrInvoker(inv)
	if subject == inv.User.ID {
		resp, err := pm.mem.Mine(ctx, inv.GuildID, subject, inv.User.ID)
		return resp.Facts, err
	}
	return pm.correctable(ctx, inv)
}

// changeableBy keeps the facts a member may correct or forget: those about
// them and those they proposed (api.AboutOrProposedBy, the rule the service
// applies). The service enforces it; this only keeps suggestions to ones
// that will work.
func changeableBy(userID string, facts []api.Fact) []api.Fact {
	out := make([]api.Fact, 0, len(facts))
	for _, f := range facts {
		if api.AboutOrProposedBy(f, userID) {
			out = append(out, f)
		}
	}
	return out
}

// factChoices offers up to 25 facts matching what has been typed, each as its
// id with a short one-line preview. Choice names are plain text in Discord
// (no markdown), so previews are flattened but not escaped.
func factChoices(facts []api.Fact, typed string) []interaction.Choice {
	out := make([]interaction.Choice, 0, min(len(facts), autocompleteCapacity))
	for _, f := range facts {
		if len(out) == autocompleteCapacity {
			break
		}
		if matchesTyped(f, typed) {
			out = append(out, interaction.Choice{Name: choiceName(f), Value: f.FactID})
		}
	}
	return out
}

// choiceName is "<id> · <preview>", at most 100 characters.
func choiceName(f api.Fact) string {
	preview := clipRunes(strings.Join(strings.Fields(flatten(f.Body)), " "), maxPreview)
	return clipRunes(f.FactID+" · "+preview, maxChoiceName)
}

// matchesTyped reports whether a fact fits what has been typed so far: an id
// prefix, or the service's recall query (api.MatchesQuery). Nothing typed
// matches everything.
func matchesTyped(f api.Fact, typed string) bool {
	typed = strings.TrimSpace(typed)
	return strings.HasPrefix(strings.ToLower(f.FactID), strings.ToLower(typed)) || api.MatchesQuery(&f, typed)
}
