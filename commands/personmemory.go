package commands

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

// PeopleMemory is what the /person-memory handlers need of the memory
// service; *memoryclient.Client satisfies it (in api terms only). It is an interface so the
// handlers' rules are tested without HTTP.
type PeopleMemory interface {
	Propose(ctx context.Context, req api.ProposalRequest) (api.ProposalResponse, error)
	Recall(ctx context.Context, guildID, userID string, q api.RecallQuery) (api.RecallResponse, error)
	Mine(ctx context.Context, guildID, userID, requesterUserID string) (api.RecallResponse, error)
	Forget(ctx context.Context, guildID, userID, factID, requesterUserID string) error
}

// Policy says who, besides members with Manage Server, may propose facts
// about someone other than themselves.
type Policy struct {
	// MemoryRoleIDs are roles whose members may (DISCORD_MEMORY_ROLE_IDS).
	MemoryRoleIDs []string
	// MemoryUserIDs are users who may (DISCORD_MEMORY_USER_IDS).
	MemoryUserIDs []string
}

const (
	// proposalIDPrefix makes the idempotency key from the interaction id.
	proposalIDPrefix = "discord-interaction-"
	// The confidence of each word people choose from.
	confidenceHighValue = 0.9
	confidenceMedValue  = 0.6
	confidenceLowValue  = 0.3
	// recallLimit is how many facts recall asks for; the reply says how many
	// more there are, and the router cuts what does not fit.
	recallLimit = 20
	// autocompleteCapacity is Discord's limit on suggestions.
	autocompleteCapacity = 25
)

// personMemory holds what the handlers share.
type personMemory struct {
	mem    PeopleMemory
	policy Policy
	now    func() time.Time
	cat    *lang.Catalog
}

// PersonMemory is the /person-memory command: propose, recall, mine and
// forget person facts in the server where it is invoked. now is the clock
// for expiries (time.Now when nil); cat words every reply in the
// invoker's locale and the definition's localizations. Person memory is
// keyed by server, so every subcommand refuses an invocation without one
// (a DM, should Discord deliver it anyway) before anything else is read.
func PersonMemory(mem PeopleMemory, p Policy, now func() time.Time, cat *lang.Catalog) interaction.Command {
	if now == nil {
		now = time.Now
	}
	pm := &personMemory{mem: mem, policy: p, now: now, cat: cat}
	inGuild := interaction.GuildOnly(sentenceIn(cat, lang.PersonMemoryNoGuild))
	return interaction.Command{
		Definition: personMemoryDefinition(cat),
		Handlers: map[string]interaction.Handler{
			subPropose: inGuild(pm.propose),
			subRecall:  inGuild(pm.recall),
			subMine:    inGuild(pm.mine),
			subForget:  inGuild(pm.forget),
			subExport:  inGuild(pm.export),
		},
		Autocomplete: map[string]interaction.Autocompleter{
			subPropose: pm.suggestCorrectable,
			subForget:  pm.suggestForgettable,
		},
	}
}

func (pm *personMemory) propose(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := pm.cat.Printer(inv.Locale)
	req, err := pm.proposal(say, inv)
	if err != nil {
		return interaction.Reply{}, err
	}
	resp, err := pm.mem.Propose(ctx, req)
	if err != nil {
		return interaction.Reply{}, memoryError(say, err, writeEffect)
	}
	return interaction.Reply{Content: rememberedReply(say, inv.User.ID, resp, pm.now())}, nil
}

func (pm *personMemory) recall(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := pm.cat.Printer(inv.Locale)
	subject := personOrInvoker(inv)
	query := strings.TrimSpace(optionString(inv, optQuery))
	if utf8.RuneCountInString(query) > api.MaxRecallQuery {
		return interaction.Reply{}, refusal(say, lang.LongQuery, lang.Args{"Max": api.MaxRecallQuery})
	}
	resp, err := pm.mem.Recall(ctx, inv.GuildID, subject,
		api.RecallQuery{ChannelID: inv.ChannelID, Query: query, Limit: recallLimit})
	if err != nil {
		return interaction.Reply{}, memoryError(say, err, readEffect)
	}
	return interaction.Reply{Content: recallReply(say, inv.User.ID, subject, query != "", resp, pm.now())}, nil
}

func (pm *personMemory) mine(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := pm.cat.Printer(inv.Locale)
	resp, err := pm.mem.Mine(ctx, inv.GuildID, inv.User.ID, inv.User.ID)
	if err != nil {
		return interaction.Reply{}, memoryError(say, err, readEffect)
	}
	return interaction.Reply{Content: mineReply(say, inv.User.ID, resp, pm.now())}, nil
}

// forget asks the service to forget one fact in the invoker's name; the
// service decides whether the invoker is its subject or its proposer, so the
// authority lives in one place.
func (pm *personMemory) forget(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := pm.cat.Printer(inv.Locale)
	subject := personOrInvoker(inv)
	factID := strings.TrimSpace(optionString(inv, optFact))
	if !api.ValidFactID(factID) {
		return interaction.Reply{}, refusal(say, lang.NoSuchFact, lang.Args{"Who": mention(subject)})
	}
	if err := pm.mem.Forget(ctx, inv.GuildID, subject, factID, inv.User.ID); err != nil {
		return interaction.Reply{}, forgetError(say, err, subject)
	}
	return interaction.Reply{Content: forgottenReply(say, inv.User.ID, subject, factID)}, nil
}

// proposal applies the rules of /person-memory propose to an invocation and
// builds the request. Provenance holds ids only; the service sets the source
// surface from the bridge's bearer, so it is left empty here.
func (pm *personMemory) proposal(say *lang.Printer, inv interaction.Invocation) (api.ProposalRequest, error) {
	subject, ok := inv.Options.User(optPerson)
	if !ok || subject.ID == "" {
		return api.ProposalRequest{}, refusal(say, lang.ChoosePerson, nil)
	}
	if subject.Bot {
		return api.ProposalRequest{}, refusal(say, lang.BotSubject, nil)
	}
	if !pm.policy.mayProposeAbout(inv, subject.ID) {
		return api.ProposalRequest{}, refusal(say, lang.OnlyYourself, nil)
	}
	body, err := factBody(say, optionString(inv, optFact))
	if err != nil {
		return api.ProposalRequest{}, err
	}
	kind, err := factKind(say, optionString(inv, optKind))
	if err != nil {
		return api.ProposalRequest{}, err
	}
	visibility, err := factVisibility(say, optionString(inv, optVisibility), inv.ChannelID)
	if err != nil {
		return api.ProposalRequest{}, err
	}
	confidence, err := factConfidence(say, optionString(inv, optConfidence), subject.ID == inv.User.ID)
	if err != nil {
		return api.ProposalRequest{}, err
	}
	now := pm.now()
	expiresAt, err := parseExpires(say, optionString(inv, optExpires), issuedAt(inv.ID, now), now)
	if err != nil {
		return api.ProposalRequest{}, err
	}
	supersedes, err := supersedesID(say, optionString(inv, optSupersedes))
	if err != nil {
		return api.ProposalRequest{}, err
	}
	return api.ProposalRequest{
		SchemaVersion: api.SchemaVersion,
		ProposalID:    proposalID(inv.ID),
		Fact: api.FactInput{
			Subject:          api.Subject{GuildID: inv.GuildID, UserID: subject.ID},
			Kind:             kind,
			Body:             body,
			Visibility:       visibility,
			Confidence:       confidence,
			ExpiresAt:        expiresAt,
			SupersedesFactID: supersedes,
			Provenance: api.Provenance{
				SourceEventID:  inv.ID,
				ProposerUserID: inv.User.ID,
				ChannelID:      inv.ChannelID,
			},
		},
	}, nil
}

// mayProposeAbout is who may propose: anyone about themselves; about someone
// else, a member holding a memory role, a listed memory user, or a member
// with Manage Server (Administrator implies it).
func (p Policy) mayProposeAbout(inv interaction.Invocation, subjectID string) bool {
	if subjectID == inv.User.ID {
		return true
	}
	return inv.HasRole(nonEmpty(p.MemoryRoleIDs)) ||
		containsID(p.MemoryUserIDs, inv.User.ID) ||
		inv.HasPermission(discordgo.PermissionManageGuild)
}

// proposalID derives the idempotency key from the interaction id, which
// Discord keeps across a redelivery: the same interaction can never store a
// fact twice.
func proposalID(interactionID string) string { return proposalIDPrefix + interactionID }

// factBody is the fact as stored: trimmed, 1–2048 characters
// (api.CleanFactBody). Discord delivers valid UTF-8; a control character is
// left for the service to refuse in its own sentence, as before.
func factBody(say *lang.Printer, text string) (string, error) {
	body, n, problem := api.CleanFactBody(text)
	switch problem {
	case api.BodyEmpty:
		return "", refusal(say, lang.EmptyFact, nil)
	case api.BodyTooLong:
		return "", refusal(say, lang.LongFact, lang.Args{"Max": api.MaxFactBody, "Length": n})
	}
	return body, nil
}

// factKind is the chosen kind, person-fact when none is chosen.
func factKind(say *lang.Printer, choice string) (api.Kind, error) {
	if choice == "" {
		return api.KindPersonFact, nil
	}
	if k := api.Kind(choice); api.ValidKind(k) {
		return k, nil
	}
	return "", refusal(say, lang.Stale, nil)
}

// factVisibility is every room of the server by default, or only the channel
// the fact was proposed in.
func factVisibility(say *lang.Printer, choice, channelID string) (api.Visibility, error) {
	switch api.Scope(choice) {
	case "", api.ScopeGuild:
		return api.Visibility{Scope: api.ScopeGuild}, nil
	case api.ScopeChannel:
		return api.Visibility{Scope: api.ScopeChannel, ChannelID: channelID}, nil
	}
	return api.Visibility{}, refusal(say, lang.Stale, nil)
}

// factConfidence maps the chosen word to a number. Without a choice, what a
// person says about themselves is taken as high and what someone reports
// about another as medium.
func factConfidence(say *lang.Printer, choice string, aboutSelf bool) (float64, error) {
	switch choice {
	case "":
		if aboutSelf {
			return confidenceHighValue, nil
		}
		return confidenceMedValue, nil
	case confidenceHigh:
		return confidenceHighValue, nil
	case confidenceMedium:
		return confidenceMedValue, nil
	case confidenceLow:
		return confidenceLowValue, nil
	}
	return 0, refusal(say, lang.Stale, nil)
}

// supersedesID is the optional fact id a proposal corrects, refused here
// when it cannot name a fact (api.ValidFactID: autocomplete's choices send
// the bare id). Whether that fact may be replaced is the service's rule; it
// answers why when not.
func supersedesID(say *lang.Printer, text string) (string, error) {
	id := strings.TrimSpace(text)
	if id == "" {
		return "", nil
	}
	if !api.ValidFactID(id) {
		return "", refusal(say, lang.BadSupersedes, nil)
	}
	return id, nil
}

// refusal is a UserError whose sentence is the message id in the
// invoker's language. Commands render their sentences themselves, with
// the printer of the invocation's locale; the router shows a UserError's
// sentence as it is.
func refusal(say *lang.Printer, id lang.ID, args lang.Args) error {
	return &interaction.UserError{Sentence: say.Say(id, args)}
}

// sentenceIn is a sentence per locale, for GuildOnly.
func sentenceIn(cat *lang.Catalog, id lang.ID) func(locale string) string {
	return func(locale string) string { return cat.Printer(locale).Say(id, nil) }
}

// personOrInvoker is the person option, the invoker when none is chosen.
func personOrInvoker(inv interaction.Invocation) string {
	if u, ok := inv.Options.User(optPerson); ok && u.ID != "" {
		return u.ID
	}
	return inv.User.ID
}

func optionString(inv interaction.Invocation, name string) string {
	s, _ := inv.Options.String(name)
	return s
}

func containsID(ids []string, id string) bool {
	if id == "" {
		return false
	}
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// nonEmpty drops empty ids, so a stray separator in configuration never
// matches anything.
func nonEmpty(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}
