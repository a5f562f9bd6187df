package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/voice/voiceapi"
)

// statusVoice answers Status with a fixed session.
type statusVoice struct {
	noVoice
	st voiceapi.Status
}

func (s statusVoice) Status(string) (voiceapi.Status, bool) { return s.st, true }

// /voice status shows the encryption sentence as its own last line, and
// no empty line when there is none (no voice connection yet).
func TestVoiceStatusShowsEncryption(t *testing.T) {
	downgraded := "Not end-to-end encrypted: the call was downgraded to transport encryption only (Discord's servers can hear it, Clankie included)."
	for _, tc := range []struct {
		name, encryption, wantLast string
	}{
		{"downgraded", downgraded, downgraded},
		{"no connection", "", "Briefings delivered to the model: 0."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := voiceHandler{sessions: statusVoice{st: voiceapi.Status{ChannelID: "1", Model: "Realtime voice model: ready.", Encryption: tc.encryption}}}
			r, err := h.status(context.Background(), interaction.Invocation{GuildID: "9"})
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(r.Content, "\n")
			if last := lines[len(lines)-1]; last != tc.wantLast {
				t.Fatalf("last line %q, want %q (reply %q)", last, tc.wantLast, r.Content)
			}
		})
	}
}
