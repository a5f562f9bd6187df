package voice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/config"
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
// not post there. Posted in the background: Discord's answer never holds
// up the session.
func (s *Session) disclose(link *audioLink) {
	s.mu.Lock()
	first := !s.disclosed
	s.disclosed = true
	s.mu.Unlock()
	if !first {
		return
	}
	text := disclosure(s.m.cfg.Policy, s.m.cfg.ModelHost, s.m.cfg.Model != nil, daveActive(link))
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
// carries the session's id and nothing else.
func (s *Session) consentButtons() []discordgo.MessageComponent {
	id := voiceapi.ConsentButtonPrefix + ":" + s.id + ":"
	return []discordgo.MessageComponent{
		discordgo.Button{Label: "Opt in", Style: discordgo.SuccessButton, CustomID: id + "in"},
		discordgo.Button{Label: "Opt out", Style: discordgo.SecondaryButton, CustomID: id + "out"},
	}
}

// disclosure is the message that opens a session.
func disclosure(policy config.ConsentPolicy, host string, model, e2ee bool) string {
	var b strings.Builder
	b.WriteString("**Clankie, an AI voice assistant, is in this voice channel.**\n")
	switch {
	case !model:
		b.WriteString("No voice model is configured: nobody's voice leaves the bridge, and Clankie only prepares what he knows about consented speakers.\n")
	case policy == config.ConsentPresence:
		fmt.Fprintf(&b, "Everyone here is heard unless they opt out: what consented speakers say goes to the voice model at %s.\n", host)
	default:
		fmt.Fprintf(&b, "Only people who opt in are heard: what they say goes to the voice model at %s. Nobody else's audio is decrypted or sent.\n", host)
	}
	if e2ee {
		b.WriteString("This call is end-to-end encrypted (DAVE).\n")
	} else {
		b.WriteString("This call is not end-to-end encrypted.\n")
	}
	b.WriteString("Opt in or out with the buttons below (for yourself, in this session only), or `/voice consent action:opt-in` / `action:opt-out`; end the session: `/voice leave`.")
	return b.String()
}

// sayEnded posts why Clankie left, in the channel /voice join ran in, when
// he left on his own; a /voice leave, and a join that failed, are answered
// in their own reply.
func (s *Session) sayEnded(why voiceapi.EndReason, code int, followed bool, to string) {
	var text string
	ch := "<#" + s.channelID + ">"
	b := s.m.cfg.Bounds
	switch why {
	case voiceapi.EndLeave, voiceapi.EndJoinTimeout:
		return
	case voiceapi.EndEmpty:
		text = "I left " + ch + ": nobody is there any more."
	case voiceapi.EndIdle:
		text = fmt.Sprintf("I left %s: nobody who consented has been there for %s.", ch, voiceapi.Human(b.IdleLeave))
	case voiceapi.EndMaxSession:
		text = fmt.Sprintf("I left %s: a voice session lasts at most %s. Run `/voice join` to start a new one.", ch, voiceapi.Human(b.MaxSession))
	case voiceapi.EndBudget:
		reset := s.m.budget.status(s.guildID, s.m.cfg.Now()).ResetsAt
		text = fmt.Sprintf("I left %s: this server's voice time for today (%s) is used up. It resets at 00:00 UTC (<t:%d:R>).", ch, voiceapi.Human(b.DailyBudget), reset.Unix())
	case voiceapi.EndRejoinFailed:
		text = fmt.Sprintf("I lost my voice connection in %s and could not get it back after %d tries, so the session ended. Run `/voice join` to try again.", ch, maxRejoins)
	case voiceapi.EndDisconnected:
		text = "I was disconnected from " + ch + ", so the session ended."
	case voiceapi.EndMoved:
		if followed {
			text = fmt.Sprintf("I was moved from %s to <#%s>. A new session starts there; nobody's consent carries over.", ch, to)
		} else {
			text = fmt.Sprintf("I was moved from %s to <#%s> and left: a new session could not start there.", ch, to)
		}
	case voiceapi.EndProtocol:
		text = fmt.Sprintf("My voice connection in %s was refused (voice server code %d), so I left.", ch, code)
	case voiceapi.EndShutdown:
		text = "I left " + ch + ": the voice bridge is shutting down."
	default:
		return
	}
	s.post("ended_"+string(why), text, nil, s.textChannelID)
}
