package voice

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/voiceapi"
)

// waitJoined waits until Discord has put the bot in the channel: nil, or a
// *voiceapi.JoinError when the session ended first (the join timed out, or
// someone disconnected the bot meanwhile).
func (s *Session) waitJoined(ctx context.Context) error {
	select {
	case <-s.joined:
		return nil
	case <-s.finished:
		s.mu.Lock()
		why := s.endReason
		s.mu.Unlock()
		return &voiceapi.JoinError{ChannelID: s.channelID, Why: why}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// status is the session's consent-safe state for /voice status.
func (s *Session) status() voiceapi.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Session) statusLocked() voiceapi.Status {
	st := voiceapi.Status{ChannelID: s.channelID, Policy: s.m.cfg.Policy, State: s.state,
		MaxSession: s.m.cfg.Bounds.MaxSession, Ended: s.endReason, CloseCode: s.closeCode}
	if !s.started.IsZero() {
		st.Elapsed = s.m.cfg.Now().Sub(s.started)
	}
	if s.state != voiceapi.StateEnded {
		st.Consented = len(s.permittedLocked())
	}
	var ms realtime.State // Connecting until the briefing loop has opened the model
	if s.model != nil {
		ms = s.model.State()
		st.BriefingsDelivered = s.model.Stats().BriefingsDelivered
	}
	st.Model = modelSentence(s.m.cfg.Model != nil, s.modelFailed, ms)
	if s.model != nil && s.speech != nil {
		answered, silent := s.speech.floor.counts()
		st.Turns = &voiceapi.Turns{Answered: answered, Silent: silent}
	}
	st.Encryption = encryptionSentence(s.link)
	return st
}

// post sends one message with no pings (allowed_mentions parses nothing),
// to the first channel that takes it: a channel the bot may not post in
// (403) or cannot see (404) passes to the next.
func (s *Session) post(what, content string, buttons []discordgo.MessageComponent, channels ...string) {
	p := s.m.cfg.Notices
	if p == nil {
		return
	}
	msg := &discordgo.MessageSend{Content: content, AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}}
	if len(buttons) > 0 {
		msg.Components = []discordgo.MessageComponent{discordgo.ActionsRow{Components: buttons}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, ch := range channels {
		if ch == "" {
			continue
		}
		_, err := p.ChannelMessageSendComplex(ch, msg, discordgo.WithContext(ctx))
		if err == nil {
			return
		}
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil && (re.Response.StatusCode == http.StatusForbidden || re.Response.StatusCode == http.StatusNotFound) {
			continue
		}
		s.m.log.Warn("voice notice not posted", zap.String("notice", what), zap.String("errorType", "discord"))
		return
	}
	s.m.log.Warn("voice notice not posted: no channel took it", zap.String("notice", what))
}

// disclose posts, once the session is live, who hears what: that Clankie
// is an AI voice, which provider hears consented speakers, whether the
// call is end-to-end encrypted, and how to opt in and out. It goes to the
// voice channel's own text chat, or where /voice join ran when the bot may
// not post there, in the server's locale (everyone there reads it).
// Posted in the background: Discord's answer never holds up the session.
func (s *Session) disclose(link *audioLink) {
	s.mu.Lock()
	first := !s.disclosed
	s.disclosed = true
	s.mu.Unlock()
	if !first {
		return
	}
	text := disclosure(s.say, s.m.cfg.Policy, s.m.cfg.ModelHost, s.m.cfg.Model != nil, daveActive(link))
	s.m.wg.Add(1)
	go func() {
		defer s.m.wg.Done()
		s.post("disclosure", text, s.consentButtons(), s.channelID, s.textChannelID)
	}()
}

func daveActive(link *audioLink) bool {
	if link == nil {
		return false
	}
	d, ok := link.dave.(*davemedia.Session)
	return ok && d.DAVE().ProtocolVersion() > 0 && !d.DAVE().Downgraded()
}

// consentButtons are the disclosure's Opt in and Opt out: a click works as
// /voice consent for whoever clicked, in this session only. The custom_id
// carries the session's id and nothing else; the labels are in the
// server's locale, as the disclosure is.
func (s *Session) consentButtons() []discordgo.MessageComponent {
	id := voiceapi.ConsentButtonPrefix + ":" + s.id + ":"
	return []discordgo.MessageComponent{
		discordgo.Button{Label: s.say.Say(lang.ButtonOptIn, nil), Style: discordgo.SuccessButton, CustomID: id + "in"},
		discordgo.Button{Label: s.say.Say(lang.ButtonOptOut, nil), Style: discordgo.SecondaryButton, CustomID: id + "out"},
	}
}

// disclosure is the message that opens a session.
func disclosure(say *lang.Printer, policy config.ConsentPolicy, host string, model, e2ee bool) string {
	lines := []string{say.Say(lang.DisclosureTitle, nil)}
	switch {
	case !model:
		lines = append(lines, say.Say(lang.DisclosureNoModel, nil))
	case policy == config.ConsentPresence:
		lines = append(lines, say.Say(lang.DisclosurePresence, lang.Args{"Host": host}))
	default:
		lines = append(lines, say.Say(lang.DisclosureExplicit, lang.Args{"Host": host}))
	}
	if e2ee {
		lines = append(lines, say.Say(lang.DisclosureE2EE, nil))
	} else {
		lines = append(lines, say.Say(lang.DisclosureNotE2EE, nil))
	}
	lines = append(lines, say.Say(lang.DisclosureHowTo, nil))
	return strings.Join(lines, "\n")
}

// sayEnded posts why Clankie left, in the channel /voice join ran in and
// the server's locale, when he left on his own; a /voice leave, and a
// join that failed, are answered in their own reply.
func (s *Session) sayEnded(why voiceapi.EndReason, code int, followed bool, to string) {
	var id lang.ID
	args := lang.Args{"Channel": s.channelID}
	b := s.m.cfg.Bounds
	switch why {
	case voiceapi.EndLeave, voiceapi.EndJoinTimeout:
		return
	case voiceapi.EndEmpty:
		id = lang.LeftEmpty
	case voiceapi.EndIdle:
		id, args["Idle"] = lang.LeftIdle, voiceapi.Human(b.IdleLeave)
	case voiceapi.EndMaxSession:
		id, args["Max"] = lang.LeftMaxSession, voiceapi.Human(b.MaxSession)
	case voiceapi.EndBudget:
		reset := s.m.budget.status(s.guildID, s.m.cfg.Now()).ResetsAt
		id, args["Budget"], args["Reset"] = lang.LeftBudget, voiceapi.Human(b.DailyBudget), reset.Unix()
	case voiceapi.EndRejoinFailed:
		id, args["Tries"] = lang.LeftRejoinFailed, maxRejoins
	case voiceapi.EndDisconnected:
		id = lang.LeftDisconnected
	case voiceapi.EndMoved:
		id, args["To"] = lang.LeftMoved, to
		if followed {
			id = lang.LeftMovedFollowed
		}
	case voiceapi.EndProtocol:
		id, args["Code"] = lang.LeftProtocol, code
	case voiceapi.EndShutdown:
		id = lang.LeftShutdown
	default:
		return
	}
	s.post("ended_"+string(why), s.say.Say(id, args), nil, s.textChannelID)
}
