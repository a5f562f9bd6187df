package voice

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/config"
)

// posterRec records the messages a session posts.
type posterRec struct {
	mu   sync.Mutex
	sent []*discordgo.MessageSend
}

func (p *posterRec) ChannelMessageSendComplex(_ string, m *discordgo.MessageSend, _ ...discordgo.RequestOption) (*discordgo.Message, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, m)
	return &discordgo.Message{}, nil
}

func (p *posterRec) messages() []*discordgo.MessageSend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*discordgo.MessageSend(nil), p.sent...)
}

// What a session posts to the channel, read by everyone there, is in the
// server's locale (the guild_locale of /voice join): the disclosure, its
// buttons, why Clankie left; an untranslated one is English.
func TestNoticesAreInTheServersLanguage(t *testing.T) {
	for _, tc := range []struct {
		locale               string
		title, optIn, optOut string
		left                 string
	}{
		{"de", "**Clankie, ein KI-Sprachassistent, ist in diesem Sprachkanal.**", "Zustimmen", "Ablehnen",
			"Ich habe <#" + lounge + "> verlassen: Es ist niemand mehr da."},
		{"ja", "**AI音声アシスタントのClankieがこのボイスチャンネルにいます。**", "同意する", "同意しない",
			"<#" + lounge + ">から退出しました：もう誰もいません。"},
		{"ko", "**Clankie, an AI voice assistant, is in this voice channel.**", "Opt in", "Opt out",
			"I left <#" + lounge + ">: nobody is there any more."},
	} {
		t.Run(tc.locale, func(t *testing.T) {
			p := &posterRec{}
			m := startManager(t, Config{Policy: config.ConsentExplicit, Notices: p}, nil, guild, voiceStates(lounge, ana)...)
			if _, err := m.Join(context.Background(), guild, ana, "text", tc.locale); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the disclosure", func() bool { return len(p.messages()) == 1 })
			d := p.messages()[0]
			if !strings.HasPrefix(d.Content, tc.title+"\n") {
				t.Fatalf("disclosure %q", d.Content)
			}
			row := d.Components[0].(discordgo.ActionsRow)
			in, out := row.Components[0].(discordgo.Button), row.Components[1].(discordgo.Button)
			if in.Label != tc.optIn || out.Label != tc.optOut {
				t.Fatalf("buttons %q, %q", in.Label, out.Label)
			}
			m.OnVoiceStateUpdate(nil, voiceUpdate(ana, ""))
			eventually(t, "why Clankie left", func() bool { return len(p.messages()) == 2 })
			if got := p.messages()[1].Content; got != tc.left {
				t.Fatalf("left: %q, want %q", got, tc.left)
			}
		})
	}
}
