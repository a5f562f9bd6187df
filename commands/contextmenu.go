package commands

import (
	"context"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

// Route prefixes of the context menus' forms, and the custom_ids of their
// text inputs (what a submit's Options are keyed by).
const (
	// prefixRememberMessage: "remember-msg:<message>:<author>:<seal>".
	prefixRememberMessage = "remember-msg"
	// prefixRememberUser: "remember-user:<user>:<seal>".
	prefixRememberUser = "remember-user"

	inputFact    = "fact"
	inputKind    = "kind"
	inputExpires = "expires"
)

// jumpLinkBase is where a Discord message is shown by its ids.
const jumpLinkBase = "https://discord.com/channels/"

// contextMenus holds what the context menus share with /person-memory: the
// same memory, policy and clock, so a fact remembered from a message or a
// member follows the rules of propose, and what they show is what recall
// and mine show.
type contextMenus struct {
	pm   *personMemory
	seal formSeal
}

// formKinds are the kinds a form's kind input takes, in the order its label
// names them.
var formKinds = [...]api.Kind{api.KindPersonFact, api.KindPreference, api.KindRelationshipNote}

// ContextMenus are the text bridge's right-click commands: "Remember this"
// on a message (a form prefilled with its text; the fact is about its
// author, visible in its channel, and names the message), "What Clankie
// knows" on a member (mine on yourself, recall on anyone else) and
// "Remember about them" on a member (a form proposing a fact about them).
// The forms' submits are authorised again when they arrive: a custom_id
// carries ids only, sealed with formKey (FormKey; a random key when nil)
// over where and for whom the form was opened, and a submit whose seal
// does not match is refused. cat words the menus' names, forms and replies
// in the invoker's locale.
func ContextMenus(mem PeopleMemory, p Policy, formKey []byte, now func() time.Time, cat *lang.Catalog) []interaction.Command {
	if now == nil {
		now = time.Now
	}
	cm := &contextMenus{pm: &personMemory{mem: mem, policy: p, now: now, cat: cat}, seal: newFormSeal(formKey)}
	inGuild := interaction.GuildOnly(sentenceIn(cat, lang.PersonMemoryNoGuild))
	guildOnly := &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild}
	return []interaction.Command{
		{
			Definition: cat.Command(&discordgo.ApplicationCommand{Name: nameRememberThis, Type: discordgo.MessageApplicationCommand, Contexts: guildOnly}),
			Handlers:   map[string]interaction.Handler{"": inGuild(cm.openRememberMessage)},
			Modals:     map[string]interaction.Handler{prefixRememberMessage: inGuild(cm.submitRememberMessage)},
			OpensModal: true,
		},
		{
			Definition: cat.Command(&discordgo.ApplicationCommand{Name: nameWhatClankieKnows, Type: discordgo.UserApplicationCommand, Contexts: guildOnly}),
			Handlers:   map[string]interaction.Handler{"": inGuild(cm.whatClankieKnows)},
		},
		{
			Definition: cat.Command(&discordgo.ApplicationCommand{Name: nameRememberAboutThem, Type: discordgo.UserApplicationCommand, Contexts: guildOnly}),
			Handlers:   map[string]interaction.Handler{"": inGuild(cm.openRememberUser)},
			Modals:     map[string]interaction.Handler{prefixRememberUser: inGuild(cm.submitRememberUser)},
			OpensModal: true,
		},
	}
}

// openRememberMessage answers "Remember this" with its form, or a refusal
// when the fact could not be stored anyway: a bot's or a webhook's message,
// someone else's without the authority to write about them, a message in
// another channel than the one Discord says the command was used in. It
// calls nothing (a form must be the first answer, within 3 s).
func (cm *contextMenus) openRememberMessage(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := cm.pm.cat.Printer(inv.Locale)
	msg := inv.TargetMessage
	if msg == nil || !api.ValidSnowflake(msg.ID) || !api.ValidSnowflake(msg.Author.ID) || !api.ValidSnowflake(inv.ChannelID) {
		return interaction.Reply{}, interaction.ErrStale
	}
	switch {
	case msg.Author.Bot || msg.Webhook:
		return interaction.Reply{}, refusal(say, lang.BotMessage, nil)
	case msg.ChannelID != inv.ChannelID:
		return interaction.Reply{}, refusal(say, lang.MessageElsewhere, lang.Args{"Menu": say.Say("menu."+nameRememberThis, nil)})
	case !cm.pm.policy.mayProposeAbout(inv, msg.Author.ID):
		return interaction.Reply{}, refusal(say, lang.OnlyYourOwnMessages, nil)
	}
	return interaction.Reply{Modal: &interaction.Modal{
		CustomID: cm.formID(inv, prefixRememberMessage, msg.ID, msg.Author.ID),
		Title:    say.Say(lang.FormRememberThis, nil),
		Inputs:   []interaction.TextInput{factInput(say, prefill(msg.Content)), expiresInput(say)},
	}}, nil
}

// submitRememberMessage stores the submitted (possibly edited) text as a
// fact about the message's author. Discord does not send the message
// again, so the ids come from the custom_id, which a client can forge:
// its seal must match the ids and the server, channel and member Discord
// says the form was submitted by (so the fact names a message Clankie put
// in this member's form here, and is visible only in its channel), and the
// submitter's authority over the author is checked again.
func (cm *contextMenus) submitRememberMessage(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := cm.pm.cat.Printer(inv.Locale)
	ids, ok := cm.formIDs(inv, prefixRememberMessage, 2)
	if !ok {
		return interaction.Reply{}, refusal(say, lang.StaleForm, nil)
	}
	messageID, authorID := ids[0], ids[1]
	if !cm.pm.policy.mayProposeAbout(inv, authorID) {
		return interaction.Reply{}, refusal(say, lang.OnlyYourOwnMessages, nil)
	}
	return cm.propose(ctx, say, inv, authorID, api.KindPersonFact,
		api.Visibility{Scope: api.ScopeChannel, ChannelID: inv.ChannelID}, messageID)
}

// whatClankieKnows shows what mine shows on yourself, and what recall
// about that member shows here on anyone else: the same handlers.
func (cm *contextMenus) whatClankieKnows(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	target := inv.TargetUser
	if target == nil || target.ID == "" {
		return interaction.Reply{}, interaction.ErrStale
	}
	if target.ID == inv.User.ID {
		return cm.pm.mine(ctx, inv)
	}
	inv.Options = interaction.NewOptions(map[string]any{optPerson: *target})
	return cm.pm.recall(ctx, inv)
}

// openRememberUser answers "Remember about them" with its form, or the
// refusal propose would give (a bot; someone else without authority).
func (cm *contextMenus) openRememberUser(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := cm.pm.cat.Printer(inv.Locale)
	target := inv.TargetUser
	if target == nil || !api.ValidSnowflake(target.ID) {
		return interaction.Reply{}, interaction.ErrStale
	}
	switch {
	case target.Bot:
		return interaction.Reply{}, refusal(say, lang.BotSubject, nil)
	case !cm.pm.policy.mayProposeAbout(inv, target.ID):
		return interaction.Reply{}, refusal(say, lang.OnlyYourself, nil)
	}
	return interaction.Reply{Modal: &interaction.Modal{
		CustomID: cm.formID(inv, prefixRememberUser, target.ID),
		Title:    say.Say(lang.FormRememberAboutThem, nil),
		Inputs: []interaction.TextInput{
			factInput(say, ""),
			{CustomID: inputKind, Label: say.Say(lang.FormKinds, kindArgs(say)), Style: interaction.TextShort,
				MaxLength: maxExpiresText, Value: kindWord(say, api.KindPersonFact)},
			expiresInput(say),
		},
	}}, nil
}

// submitRememberUser proposes the submitted fact about the member the
// custom_id names, with propose's rules checked again for the submitter;
// an unknown kind is refused and nothing is stored.
func (cm *contextMenus) submitRememberUser(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := cm.pm.cat.Printer(inv.Locale)
	ids, ok := cm.formIDs(inv, prefixRememberUser, 1)
	if !ok {
		return interaction.Reply{}, refusal(say, lang.StaleForm, nil)
	}
	subjectID := ids[0]
	if !cm.pm.policy.mayProposeAbout(inv, subjectID) {
		return interaction.Reply{}, refusal(say, lang.OnlyYourself, nil)
	}
	kind, ok := formKind(say, optionString(inv, inputKind))
	if !ok {
		return interaction.Reply{}, refusal(say, lang.UnknownKind, kindArgs(say))
	}
	return cm.propose(ctx, say, inv, subjectID, kind, api.Visibility{Scope: api.ScopeGuild}, "")
}

// propose stores a form's fact about subjectID as /person-memory propose
// does (the same body, expiry and confidence rules, the same idempotency
// key from the submit's interaction id and the same reply).
func (cm *contextMenus) propose(ctx context.Context, say *lang.Printer, inv interaction.Invocation, subjectID string, kind api.Kind,
	vis api.Visibility, sourceMessageID string) (interaction.Reply, error) {
	body, err := factBody(say, optionString(inv, inputFact))
	if err != nil {
		return interaction.Reply{}, err
	}
	now := cm.pm.now()
	expiresAt, err := parseExpires(say, optionString(inv, inputExpires), issuedAt(inv.ID, now), now)
	if err != nil {
		return interaction.Reply{}, err
	}
	confidence, _ := factConfidence(say, "", subjectID == inv.User.ID)
	req := api.ProposalRequest{
		SchemaVersion: api.SchemaVersion,
		ProposalID:    proposalID(inv.ID),
		Fact: api.FactInput{
			Subject:    api.Subject{GuildID: inv.GuildID, UserID: subjectID},
			Kind:       kind,
			Body:       body,
			Visibility: vis,
			Confidence: confidence,
			ExpiresAt:  expiresAt,
			Provenance: api.Provenance{
				SourceEventID:   inv.ID,
				ProposerUserID:  inv.User.ID,
				ChannelID:       inv.ChannelID,
				SourceMessageID: sourceMessageID,
			},
		},
	}
	resp, err := cm.pm.mem.Propose(ctx, req)
	if err != nil {
		return interaction.Reply{}, memoryError(say, err, writeEffect)
	}
	return interaction.Reply{Content: rememberedReply(say, inv.User.ID, resp, now)}, nil
}

// formID is a form's custom_id, "<prefix>:<id>:…:<seal>", sealed over the
// ids and where and by whom the form is opened.
func (cm *contextMenus) formID(inv interaction.Invocation, prefix string, ids ...string) string {
	return strings.Join(append(append([]string{prefix}, ids...), cm.seal.tag(sealed(inv, prefix, ids)...)), ":")
}

// formIDs reads a submit's "<prefix>:<id>:…:<seal>" with exactly n ids,
// each a snowflake, sealed for the server, channel and member Discord says
// submitted it; ok is false for anything else (a forged custom_id, a form
// opened by someone else or elsewhere, or one signed with a retired key).
func (cm *contextMenus) formIDs(inv interaction.Invocation, prefix string, n int) ([]string, bool) {
	parts := strings.Split(inv.CustomID, ":")
	if len(parts) != n+2 || parts[0] != prefix {
		return nil, false
	}
	ids := parts[1 : n+1]
	for _, id := range ids {
		if !api.ValidSnowflake(id) {
			return nil, false
		}
	}
	return ids, cm.seal.valid(parts[n+1], sealed(inv, prefix, ids)...)
}

// sealed lists what a form's seal covers.
func sealed(inv interaction.Invocation, prefix string, ids []string) []string {
	return append([]string{prefix, inv.GuildID, inv.ChannelID, inv.User.ID}, ids...)
}

// factInput is the form's fact: required, at most a fact's length.
func factInput(say *lang.Printer, value string) interaction.TextInput {
	return interaction.TextInput{CustomID: inputFact, Label: say.Say(lang.FormFact, nil), Style: interaction.TextParagraph,
		Required: true, MinLength: 1, MaxLength: api.MaxFactBody, Value: value}
}

// kindArgs names the kinds a form takes, in the reader's words.
func kindArgs(say *lang.Printer) lang.Args {
	return lang.Args{"A": kindWord(say, formKinds[0]), "B": kindWord(say, formKinds[1]), "C": kindWord(say, formKinds[2])}
}

// formKind reads a form's kind: the kind's own name (person-fact) or its
// word in the submitter's language (Vorliebe), in any case; empty is a
// person fact. ok is false for anything else.
func formKind(say *lang.Printer, text string) (api.Kind, bool) {
	text = strings.TrimSpace(text)
	if text == "" {
		return api.KindPersonFact, true
	}
	for _, k := range formKinds {
		if strings.EqualFold(text, string(k)) || strings.EqualFold(text, kindWord(say, k)) {
			return k, true
		}
	}
	return "", false
}

// expiresInput is the form's optional expiry, read as /person-memory
// propose's expires option is.
func expiresInput(say *lang.Printer) interaction.TextInput {
	return interaction.TextInput{CustomID: inputExpires, Label: say.Say(lang.FormExpires, nil), Style: interaction.TextShort,
		MaxLength: maxExpiresText, Placeholder: say.Say(lang.FormExpiresHint, nil)}
}

// prefill is a message's text cut to a fact's length, so the form opens
// with a value Discord accepts and the service would store: at most
// api.MaxFactBody characters, counted as runes (the service) and as UTF-16
// units (Discord's text inputs), whichever is stricter.
func prefill(content string) string {
	units, runes := 0, 0
	for i, r := range content {
		units += utf16.RuneLen(r)
		if runes++; units > api.MaxFactBody || runes > api.MaxFactBody {
			return content[:i]
		}
	}
	return content
}

// sourceLink is the jump link of the message a fact was taken from, which
// recall and mine show before the fact's text (the text may be cut, the
// link never is); empty for a fact without one or whose ids could not form
// a link. The channel is the fact's visibility channel, else the one it
// was proposed in.
func sourceLink(f api.Fact) string {
	channel := f.Visibility.ChannelID
	if channel == "" {
		channel = f.Provenance.ChannelID
	}
	msg := f.Provenance.SourceMessageID
	if msg == "" || !api.ValidSnowflake(msg) || !api.ValidSnowflake(channel) || !api.ValidSnowflake(f.Subject.GuildID) {
		return ""
	}
	return " · " + jumpLinkBase + f.Subject.GuildID + "/" + channel + "/" + msg
}
