package commands

import (
	"context"
	"errors"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/voiceapi"
)

// VoiceSessions is what /voice needs of the voice bridge's session manager;
// *voice.Manager satisfies it. Its errors are voice's (voiceapi.ErrNoSession,
// …), turned into sentences here.
type VoiceSessions interface {
	// Join waits until Discord has put the bot in the invoker's channel
	// (or the join timeout passed); textChannelID is where /voice join
	// ran, where Clankie later says why he left; guildLocale is the
	// server's locale, which the messages everyone in the channel reads
	// (the disclosure, why he left) are written in.
	Join(ctx context.Context, guildID, userID, textChannelID, guildLocale string) (channelID string, err error)
	Leave(ctx context.Context, guildID string) error
	Consent(ctx context.Context, guildID, userID string, optIn bool) error
	// ConsentInSession is Consent from a disclosure's button, counted only
	// while sessionID is still the server's live session.
	ConsentInSession(ctx context.Context, guildID, userID, sessionID string, optIn bool) error
	// Status is the consent-safe state of a session: a count of consented
	// speakers, never who they are, and the model connection.
	Status(guildID string) (voiceapi.Status, bool)
}

// VoicePolicy says who may start and stop sessions besides Move Members.
type VoicePolicy struct {
	RoleIDs, UserIDs []string
}

func (p VoicePolicy) mayManage(inv interaction.Invocation) bool {
	return inv.HasPermission(discordgo.PermissionVoiceMoveMembers) || inv.HasRole(p.RoleIDs) || contains(p.UserIDs, inv.User.ID)
}

func contains(list []string, id string) bool {
	for _, x := range list {
		if x == id {
			return true
		}
	}
	return false
}

// Voice is the /voice command of the voice bridge; cat words its
// definition's descriptions and localizations and every reply, in the
// invoker's locale.
func Voice(sessions VoiceSessions, p VoicePolicy, cat *lang.Catalog) interaction.Command {
	def := cat.Command(&discordgo.ApplicationCommand{
		Name:     "voice",
		Contexts: &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild},
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "join"},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "leave"},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "consent",
				Options: []*discordgo.ApplicationCommandOption{{
					Type: discordgo.ApplicationCommandOptionString, Name: "action", Required: true,
					Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "opt-in", Value: "opt-in"}, {Name: "opt-out", Value: "opt-out"}},
				}}},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "status"},
		},
	})
	h := voiceHandler{sessions: sessions, policy: p, cat: cat}
	inGuild := interaction.GuildOnly(sentenceIn(cat, lang.VoiceNoGuild))
	return interaction.Command{Definition: def, Handlers: map[string]interaction.Handler{
		"join":    inGuild(h.join),
		"leave":   inGuild(h.leave),
		"consent": inGuild(h.consent),
		"status":  inGuild(h.status),
	}, Components: map[string]interaction.Handler{
		voiceapi.ConsentButtonPrefix: inGuild(h.consentButton),
	}}
}

type voiceHandler struct {
	sessions VoiceSessions
	policy   VoicePolicy
	cat      *lang.Catalog
}

// join answers in the invoker's locale and hands the session the
// server's, for what it posts to the channel.
func (h voiceHandler) join(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := h.cat.Printer(inv.Locale)
	if !h.policy.mayManage(inv) {
		return interaction.Reply{}, refusal(say, lang.VoiceJoinNotAllowed, nil)
	}
	ch, err := h.sessions.Join(ctx, inv.GuildID, inv.User.ID, inv.ChannelID, inv.GuildLocale)
	if err != nil {
		return interaction.Reply{}, voiceSentence(say, err)
	}
	return interaction.Reply{Content: say.Say(lang.VoiceJoined, lang.Args{"Channel": ch})}, nil
}

func (h voiceHandler) leave(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := h.cat.Printer(inv.Locale)
	if !h.policy.mayManage(inv) {
		return interaction.Reply{}, refusal(say, lang.VoiceLeaveNotAllowed, nil)
	}
	if err := h.sessions.Leave(ctx, inv.GuildID); err != nil {
		return interaction.Reply{}, voiceSentence(say, err)
	}
	return interaction.Reply{Content: say.Say(lang.VoiceLeft, nil)}, nil
}

func (h voiceHandler) consent(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := h.cat.Printer(inv.Locale)
	action, _ := inv.Options.String("action")
	var optIn bool
	switch action {
	case "opt-in":
		optIn = true
	case "opt-out":
	default:
		return interaction.Reply{}, refusal(say, lang.VoiceChooseConsent, nil)
	}
	if err := h.sessions.Consent(ctx, inv.GuildID, inv.User.ID, optIn); err != nil {
		return interaction.Reply{}, voiceSentence(say, err)
	}
	return consentReply(say, optIn), nil
}

// consentReply confirms an opt-in or an opt-out, however it was given.
func consentReply(say *lang.Printer, optIn bool) interaction.Reply {
	if optIn {
		return interaction.Reply{Content: say.Say(lang.VoiceOptedIn, nil)}
	}
	return interaction.Reply{Content: say.Say(lang.VoiceOptedOut, nil)}
}

// consentButton is a click on a disclosure's Opt in or Opt out: the
// clicker's own consent, in the session that posted it. The custom_id is
// parsed here and trusted for nothing but which session and which way.
func (h voiceHandler) consentButton(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := h.cat.Printer(inv.Locale)
	rest, _ := strings.CutPrefix(inv.CustomID, voiceapi.ConsentButtonPrefix+":")
	sessionID, way, _ := strings.Cut(rest, ":")
	if !validSessionID(sessionID) || (way != "in" && way != "out") {
		return interaction.Reply{}, refusal(say, lang.VoiceForeignButton, nil)
	}
	optIn := way == "in"
	if err := h.sessions.ConsentInSession(ctx, inv.GuildID, inv.User.ID, sessionID, optIn); err != nil {
		return interaction.Reply{}, voiceSentence(say, err)
	}
	return consentReply(say, optIn), nil
}

// validSessionID is the shape of a voice session's id: "vs-" and 16
// lower-case hex digits.
func validSessionID(id string) bool {
	hexPart, ok := strings.CutPrefix(id, "vs-")
	if !ok || len(hexPart) != 16 {
		return false
	}
	for _, c := range hexPart {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// status is /voice status in the invoker's language. The session's model
// and encryption lines come from voice as messages not yet rendered
// (lang.Msg), rendered here.
func (h voiceHandler) status(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := h.cat.Printer(inv.Locale)
	st, ok := h.sessions.Status(inv.GuildID)
	if !ok {
		return interaction.Reply{Content: say.Say(lang.VoiceNoSession, nil)}, nil
	}
	if st.State == voiceapi.StateEnded {
		content := say.Say(lang.VoiceLastEnded, lang.Args{"Channel": st.ChannelID, "Why": endedWhy(say, st)})
		return interaction.Reply{Content: content + budgetLine(say, st.Budget)}, nil
	}
	state := stateWord(say, st.State)
	if st.State != voiceapi.StateJoining {
		state = say.Say(lang.VoiceStateFor, lang.Args{"State": state, "Elapsed": voiceapi.Human(st.Elapsed), "Max": voiceapi.Human(st.MaxSession)})
	}
	lines := []string{
		say.Say(lang.VoiceStatusSession, lang.Args{"Channel": st.ChannelID, "State": state}),
		say.Say(lang.VoiceStatusPolicy, lang.Args{"Policy": policyWord(say, st.Policy)}),
		say.Count(lang.VoiceStatusConsented, st.Consented, nil),
		say.Render(st.Model),
		say.Say(lang.VoiceStatusBriefings, lang.Args{"Count": st.BriefingsDelivered}),
	}
	if st.Turns != nil {
		lines = append(lines, say.Say(lang.VoiceStatusTurns, lang.Args{"Answered": st.Turns.Answered, "Silent": st.Turns.Silent}))
	}
	if st.Encryption.ID != "" {
		lines = append(lines, say.Render(st.Encryption))
	}
	return interaction.Reply{Content: strings.Join(lines, "\n") + budgetLine(say, st.Budget)}, nil
}

// stateWord names a session's state.
func stateWord(say *lang.Printer, s voiceapi.State) string {
	switch s {
	case voiceapi.StateJoining:
		return say.Say(lang.StateJoining, nil)
	case voiceapi.StateLive:
		return say.Say(lang.StateLive, nil)
	case voiceapi.StateReconnecting:
		return say.Say(lang.StateReconnecting, nil)
	case voiceapi.StateEnded:
		return say.Say(lang.StateEnded, nil)
	}
	return string(s)
}

// policyWord names a consent policy.
func policyWord(say *lang.Printer, p config.ConsentPolicy) string {
	switch p {
	case config.ConsentExplicit:
		return say.Say(lang.PolicyExplicit, nil)
	case config.ConsentPresence:
		return say.Say(lang.PolicyPresence, nil)
	}
	return string(p)
}

// budgetLine is the server's voice time today, when it has a budget.
func budgetLine(say *lang.Printer, b voiceapi.Budget) string {
	if b.Limit <= 0 {
		return ""
	}
	left := max(0, b.Limit-b.Used)
	return "\n" + say.Say(lang.VoiceBudgetLine, lang.Args{"Used": voiceapi.Human(b.Used), "Limit": voiceapi.Human(b.Limit),
		"Left": voiceapi.Human(left), "Reset": b.ResetsAt.Unix()})
}

// endedWhy says why a session ended, for /voice status.
func endedWhy(say *lang.Printer, st voiceapi.Status) string {
	switch st.Ended {
	case voiceapi.EndLeave:
		return say.Say(lang.EndedLeave, nil)
	case voiceapi.EndEmpty:
		return say.Say(lang.EndedEmpty, nil)
	case voiceapi.EndIdle:
		return say.Say(lang.EndedIdle, nil)
	case voiceapi.EndMaxSession:
		return say.Say(lang.EndedMaxSession, lang.Args{"Max": voiceapi.Human(st.MaxSession)})
	case voiceapi.EndBudget:
		return say.Say(lang.EndedBudget, nil)
	case voiceapi.EndJoinTimeout:
		return say.Say(lang.EndedJoinTimeout, nil)
	case voiceapi.EndRejoinFailed:
		return say.Say(lang.EndedRejoinFailed, nil)
	case voiceapi.EndDisconnected:
		return say.Say(lang.EndedDisconnected, nil)
	case voiceapi.EndMoved:
		return say.Say(lang.EndedMoved, nil)
	case voiceapi.EndProtocol:
		return say.Say(lang.EndedProtocol, lang.Args{"Code": st.CloseCode})
	case voiceapi.EndShutdown:
		return say.Say(lang.EndedShutdown, nil)
	}
	return string(st.Ended)
}

// voiceSentence turns voice's errors into what the invoker reads; any other
// error is returned unchanged (the router shows a generic sentence).
func voiceSentence(say *lang.Printer, err error) error {
	switch {
	case errors.Is(err, voiceapi.ErrNotInVoice):
		return refusal(say, lang.VoiceNotInVoice, nil)
	case errors.Is(err, voiceapi.ErrNoSession):
		return refusal(say, lang.VoiceNoSession, nil)
	case errors.Is(err, voiceapi.ErrNotInSessionChannel):
		return refusal(say, lang.VoiceNotInSessionChannel, nil)
	case errors.Is(err, voiceapi.ErrSessionEnded):
		return refusal(say, lang.VoiceSessionEnded, nil)
	case errors.Is(err, voiceapi.ErrOtherChannel):
		return refusal(say, lang.VoiceOtherChannel, nil)
	}
	var je *voiceapi.JoinError
	if errors.As(err, &je) {
		if je.Why == voiceapi.EndJoinTimeout {
			return refusal(say, lang.VoiceJoinTimedOut, lang.Args{"Channel": je.ChannelID})
		}
		return refusal(say, lang.VoiceJoinFailed, lang.Args{"Channel": je.ChannelID, "Why": endedWhy(say, voiceapi.Status{Ended: je.Why})})
	}
	var be *voiceapi.BudgetSpentError
	if errors.As(err, &be) {
		return refusal(say, lang.VoiceBudgetSpent, lang.Args{"Budget": voiceapi.Human(be.Budget), "Reset": be.ResetsAt.Unix()})
	}
	return err
}
