package commands

import (
	"context"
	"testing"
	"time"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/voiceapi"
)

// statusVoice answers Status with a fixed session.
type statusVoice struct {
	noVoice
	st voiceapi.Status
}

func (s statusVoice) Status(string) (voiceapi.Status, bool) { return s.st, true }

// /voice status names the session's state in one word (joining, live,
// reconnecting, ended with why), its time against its bound, the
// encryption sentence when there is a voice connection, and the day's
// voice time when the server has a budget.
func TestVoiceStatusSaysTheState(t *testing.T) {
	downgraded := "Not end-to-end encrypted: the call was downgraded to transport encryption only (Discord's servers can hear it, Clankie included)."
	cat := testCatalog(t)
	reset := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	live := voiceapi.Status{ChannelID: "1", State: voiceapi.StateLive, Policy: config.ConsentExplicit, Consented: 1,
		Model: lang.Msg{ID: lang.ModelReady}, BriefingsDelivered: 2, Elapsed: 5*time.Minute + 3*time.Second, MaxSession: 2 * time.Hour}
	for _, tc := range []struct {
		name string
		edit func(*voiceapi.Status)
		want string
	}{
		{"joining", func(s *voiceapi.Status) {
			s.State, s.Elapsed, s.Model, s.BriefingsDelivered = voiceapi.StateJoining, 0, lang.Msg{ID: lang.ModelConnecting}, 0
		},
			"Voice session in <#1>: joining.\nConsent policy: explicit.\n1 speaker has consented.\nRealtime voice model: connecting.\nBriefings delivered to the model: 0."},
		{"live", func(s *voiceapi.Status) {
			s.Encryption, s.Turns = lang.Msg{ID: lang.EncryptionE2EE}, &voiceapi.Turns{Answered: 3, Silent: 7}
		}, "Voice session in <#1>: live for 5m3s of at most 2h.\nConsent policy: explicit.\n1 speaker has consented.\nRealtime voice model: ready.\nBriefings delivered to the model: 2." +
			"\nTurns this session: 3 answered, 7 let pass (not addressed to Clankie).\nEnd-to-end encrypted (DAVE)."},
		{"live, downgraded", func(s *voiceapi.Status) { s.Encryption = lang.Msg{ID: lang.EncryptionDowngraded} },
			"Voice session in <#1>: live for 5m3s of at most 2h.\nConsent policy: explicit.\n1 speaker has consented.\nRealtime voice model: ready.\nBriefings delivered to the model: 2.\n" + downgraded},
		{"reconnecting, with a budget", func(s *voiceapi.Status) {
			s.State = voiceapi.StateReconnecting
			s.Budget = voiceapi.Budget{Limit: 90 * time.Minute, Used: 12 * time.Minute, ResetsAt: reset}
		}, "Voice session in <#1>: reconnecting for 5m3s of at most 2h.\nConsent policy: explicit.\n1 speaker has consented.\nRealtime voice model: ready.\nBriefings delivered to the model: 2." +
			"\nVoice time today: 12m used of 1h30m, 1h18m left; it resets at 00:00 UTC (<t:1796256000:R>)."},
		{"ended", func(s *voiceapi.Status) { s.State, s.Ended = voiceapi.StateEnded, voiceapi.EndIdle },
			"There is no voice session in this server. The last one, in <#1>, ended: nobody who consented was there for a while."},
		{"ended by the voice server", func(s *voiceapi.Status) {
			s.State, s.Ended, s.CloseCode = voiceapi.StateEnded, voiceapi.EndProtocol, 4016
		},
			"There is no voice session in this server. The last one, in <#1>, ended: the voice server refused the connection (code 4016)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := live
			tc.edit(&st)
			h := voiceHandler{sessions: statusVoice{st: st}, cat: cat}
			r, err := h.status(context.Background(), interaction.Invocation{GuildID: "9"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Content != tc.want {
				t.Fatalf("status\n%s\nwant\n%s", r.Content, tc.want)
			}
		})
	}
}
