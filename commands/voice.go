package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/voice/voiceapi"
)

// VoiceSessions is what /voice needs of the voice bridge's session manager;
// *voice.Manager satisfies it. Its errors are voice's (voiceapi.ErrNoSession,
// …), turned into sentences here.
type VoiceSessions interface {
	// Join waits until Discord has put the bot in the invoker's channel
	// (or the join timeout passed); textChannelID is where /voice join
	// ran, where Clankie later says why he left.
	Join(ctx context.Context, guildID, userID, textChannelID string) (channelID string, err error)
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

// Voice is the /voice command of the voice bridge.
func Voice(sessions VoiceSessions, p VoicePolicy) interaction.Command {
	def := &discordgo.ApplicationCommand{
		Name:        "voice",
		Description: "Clankie in a voice channel: join, leave, consent and status",
		Contexts:    &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild},
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "join", Description: "Bring Clankie into your voice channel"},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "leave", Description: "Make Clankie leave voice and end the session"},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "consent", Description: "Choose whether Clankie may use what he knows about you in this voice session",
				Options: []*discordgo.ApplicationCommandOption{{
					Type: discordgo.ApplicationCommandOptionString, Name: "action", Description: "opt-in or opt-out", Required: true,
					Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "opt-in", Value: "opt-in"}, {Name: "opt-out", Value: "opt-out"}},
				}}},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "status", Description: "Show the voice session's channel, policy and how many speakers consented"},
		},
	}
	h := voiceHandler{sessions: sessions, policy: p}
	inGuild := interaction.GuildOnly("Voice sessions belong to a server.")
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
}

func (h voiceHandler) join(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	if !h.policy.mayManage(inv) {
		return interaction.Reply{}, interaction.UserErrorf("You need the Move Members permission or a voice role to bring Clankie into voice.")
	}
	ch, err := h.sessions.Join(ctx, inv.GuildID, inv.User.ID, inv.ChannelID)
	if err != nil {
		return interaction.Reply{}, voiceSentence(err)
	}
	return interaction.Reply{Content: fmt.Sprintf("Clankie is now listening in <#%s>.\n"+
		"You are counted as consenting: Clankie may use what he has been told about you in this session. "+
		"Anyone in the channel can change that for themselves with `/voice consent`. Consent lasts only for this session and is never stored.", ch)}, nil
}

func (h voiceHandler) leave(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	if !h.policy.mayManage(inv) {
		return interaction.Reply{}, interaction.UserErrorf("You need the Move Members permission or a voice role to end the voice session.")
	}
	if err := h.sessions.Leave(ctx, inv.GuildID); err != nil {
		return interaction.Reply{}, voiceSentence(err)
	}
	return interaction.Reply{Content: "Clankie left voice. The session and everyone's consent in it have ended."}, nil
}

func (h voiceHandler) consent(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	action, _ := inv.Options.String("action")
	var optIn bool
	switch action {
	case "opt-in":
		optIn = true
	case "opt-out":
	default:
		return interaction.Reply{}, interaction.UserErrorf("Choose opt-in or opt-out.")
	}
	if err := h.sessions.Consent(ctx, inv.GuildID, inv.User.ID, optIn); err != nil {
		return interaction.Reply{}, voiceSentence(err)
	}
	return consentReply(optIn), nil
}

// consentReply confirms an opt-in or an opt-out, however it was given.
func consentReply(optIn bool) interaction.Reply {
	if optIn {
		return interaction.Reply{Content: "You opted in: Clankie may use what he has been told about you in this voice session, until you opt out or leave the channel."}
	}
	return interaction.Reply{Content: "You opted out for the rest of this session: Clankie will not use what he has been told about you here."}
}

// consentButton is a click on a disclosure's Opt in or Opt out: the
// clicker's own consent, in the session that posted it. The custom_id is
// parsed here and trusted for nothing but which session and which way.
func (h voiceHandler) consentButton(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	rest, _ := strings.CutPrefix(inv.CustomID, voiceapi.ConsentButtonPrefix+":")
	sessionID, way, _ := strings.Cut(rest, ":")
	if !validSessionID(sessionID) || (way != "in" && way != "out") {
		return interaction.Reply{}, interaction.UserErrorf("That button is not one Clankie made; nothing was changed.")
	}
	optIn := way == "in"
	if err := h.sessions.ConsentInSession(ctx, inv.GuildID, inv.User.ID, sessionID, optIn); err != nil {
		return interaction.Reply{}, voiceSentence(err)
	}
	return consentReply(optIn), nil
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

func (h voiceHandler) status(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	st, ok := h.sessions.Status(inv.GuildID)
	if !ok {
		return interaction.Reply{Content: "There is no voice session in this server."}, nil
	}
	if st.State == voiceapi.StateEnded {
		content := fmt.Sprintf("There is no voice session in this server. The last one, in <#%s>, ended: %s.", st.ChannelID, endedWhy(st))
		return interaction.Reply{Content: content + budgetLine(st.Budget)}, nil
	}
	speakers := "speakers have"
	if st.Consented == 1 {
		speakers = "speaker has"
	}
	state := string(st.State)
	if st.State != voiceapi.StateJoining {
		state += fmt.Sprintf(" for %s of at most %s", voiceapi.Human(st.Elapsed), voiceapi.Human(st.MaxSession))
	}
	content := fmt.Sprintf("Voice session in <#%s>: %s.\nConsent policy: %s.\n%d %s consented.\n%s\nBriefings delivered to the model: %d.",
		st.ChannelID, state, st.Policy, st.Consented, speakers, st.Model, st.BriefingsDelivered)
	if st.Turns != nil {
		content += fmt.Sprintf("\nTurns this session: %d answered, %d let pass (not addressed to Clankie).", st.Turns.Answered, st.Turns.Silent)
	}
	if st.Encryption != "" {
		content += "\n" + st.Encryption
	}
	return interaction.Reply{Content: content + budgetLine(st.Budget)}, nil
}

// budgetLine is the server's voice time today, when it has a budget.
func budgetLine(b voiceapi.Budget) string {
	if b.Limit <= 0 {
		return ""
	}
	left := max(0, b.Limit-b.Used)
	return fmt.Sprintf("\nVoice time today: %s used of %s, %s left; it resets at 00:00 UTC (<t:%d:R>).",
		voiceapi.Human(b.Used), voiceapi.Human(b.Limit), voiceapi.Human(left), b.ResetsAt.Unix())
}

// endedWhy says why a session ended, for /voice status.
func endedWhy(st voiceapi.Status) string {
	switch st.Ended {
	case voiceapi.EndLeave:
		return "someone ran `/voice leave`"
	case voiceapi.EndEmpty:
		return "nobody was left in the channel"
	case voiceapi.EndIdle:
		return "nobody who consented was there for a while"
	case voiceapi.EndMaxSession:
		return "it reached the longest a session may last (" + voiceapi.Human(st.MaxSession) + ")"
	case voiceapi.EndBudget:
		return "the server's voice time for today was used up"
	case voiceapi.EndJoinTimeout:
		return "Discord never let Clankie in (the channel may be full, or he may lack Connect/Speak there)"
	case voiceapi.EndRejoinFailed:
		return "the voice connection was lost and could not be re-established"
	case voiceapi.EndDisconnected:
		return "Clankie was disconnected from the channel"
	case voiceapi.EndMoved:
		return "Clankie was moved to another channel"
	case voiceapi.EndProtocol:
		return fmt.Sprintf("the voice server refused the connection (code %d)", st.CloseCode)
	case voiceapi.EndShutdown:
		return "the voice bridge shut down"
	}
	return string(st.Ended)
}

// voiceSentence turns voice's errors into what the invoker reads; any other
// error is returned unchanged (the router shows a generic sentence).
func voiceSentence(err error) error {
	switch {
	case errors.Is(err, voiceapi.ErrNotInVoice):
		return interaction.UserErrorf("Join a voice channel in this server first, then run `/voice join`.")
	case errors.Is(err, voiceapi.ErrNoSession):
		return interaction.UserErrorf("There is no voice session in this server.")
	case errors.Is(err, voiceapi.ErrNotInSessionChannel):
		return interaction.UserErrorf("You can manage your consent only from the voice channel the session is in.")
	case errors.Is(err, voiceapi.ErrSessionEnded):
		return interaction.UserErrorf("That voice session has ended, so its buttons do nothing now; use the current session's message or `/voice consent`.")
	case errors.Is(err, voiceapi.ErrOtherChannel):
		return interaction.UserErrorf("Clankie is already in another voice channel here; end that session with `/voice leave` first.")
	}
	var je *voiceapi.JoinError
	if errors.As(err, &je) {
		if je.Why == voiceapi.EndJoinTimeout {
			return interaction.UserErrorf("I could not join <#%s>: it may be full, or I may lack Connect/Speak there.", je.ChannelID)
		}
		return interaction.UserErrorf("I could not join <#%s>: %s.", je.ChannelID, endedWhy(voiceapi.Status{Ended: je.Why}))
	}
	var be *voiceapi.BudgetSpentError
	if errors.As(err, &be) {
		return interaction.UserErrorf("This server's voice time for today (%s) is used up. It resets at 00:00 UTC (<t:%d:R>).",
			voiceapi.Human(be.Budget), be.ResetsAt.Unix())
	}
	return err
}
