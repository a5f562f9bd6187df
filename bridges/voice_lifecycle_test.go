package bridges

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/voice"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/voiceapi"
)

// Issue 26: voice sessions that never die silently. One test per numbered
// item, each asserting what /voice status says and that audio flows again
// (or that the session ended, with its reason, and said so).

// bounds sets the session manager's clocks for a test.
func bounds(join, idle, maxLife, budget time.Duration) VoiceOption {
	return func(c *voice.Config) {
		c.Bounds = config.VoiceSessions{JoinTimeout: join, IdleLeave: idle, MaxSession: maxLife, DailyBudget: budget}
	}
}

// voiceIn runs /voice from a channel (where its reply and, for join, the
// leave sentences go).
func (e *voiceEnv) voiceIn(channel, user, sub string, opts ...discordtest.OptionValue) string {
	e.t.Helper()
	return reply(e.t, e.fake, discordtest.InteractionSpec{GuildID: guildID, ChannelID: channel, UserID: user, Command: "voice", Subcommand: sub, Options: opts})
}

func (e *voiceEnv) statusSays(want string) func() bool {
	return func() bool { return strings.Contains(e.voice(mover, "status"), want) }
}

// messages waits for n of the bot's messages in channel.
func (e *voiceEnv) messages(channel string, n int) []discordtest.ChannelMessage {
	e.t.Helper()
	got, err := e.fake.WaitChannelMessages(ctxFor(e.t, 10*time.Second), channel, n)
	if err != nil {
		e.t.Fatalf("%d messages in %s, want %d: %+v", len(got), channel, n, got)
	}
	return got
}

func (e *voiceEnv) ops() []string {
	var out []string
	for _, op := range e.fake.VoiceStateOps() {
		out = append(out, op.ChannelID)
	}
	return out
}

func endedCount(e *voiceEnv, why voiceapi.EndReason) uint64 { return e.vb.Voice.Totals().EndedBy[why] }

// Item 1: a join Discord never answers (a full channel, no Connect) ends
// within the join timeout with a sentence in the join's own reply, and the
// bot's voice state is left clean; echo counting does not wait for
// Discord, so the next join works and a real disconnect is not swallowed.
// A moderator's disconnect while a join is unanswered ends it too.
func TestVoiceJoinUnansweredEndsWithASentence(t *testing.T) {
	e := startVoiceWith(t, config.ConsentExplicit, "", voiceSetup{voice: []VoiceOption{bounds(time.Second, time.Minute, time.Hour, 0)}}, inVoice(mover)...)
	e.fake.SetVoiceEcho(false)
	start := time.Now()
	got := e.voiceIn(textA, mover, "join")
	if want := "I could not join <#" + voiceRoom + ">: it may be full, or I may lack Connect/Speak there."; got != want {
		t.Fatalf("join reply %q, want %q", got, want)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the unanswered join took %v", took)
	}
	waitFor(t, 5*time.Second, "the leave after the unanswered join", func() bool { return len(e.ops()) >= 2 })
	if ops := e.ops(); strings.Join(ops, ",") != voiceRoom+"," {
		t.Fatalf("op 4s %q, want the join then a leave", ops)
	}
	if got := e.voice(mover, "status"); !strings.Contains(got, "ended: Discord never let Clankie in") {
		t.Fatalf("status %q", got)
	}

	// Discord answers again: the join works, and a moderator's disconnect
	// a moment later is news, not an echo.
	e.fake.SetVoiceEcho(true)
	if got := e.voiceIn(textA, mover, "join"); !strings.Contains(got, "listening") {
		t.Fatalf("second join %q", got)
	}
	waitFor(t, 5*time.Second, "live", e.statusSays("Voice session in <#"+voiceRoom+">: live"))
	e.move(e.fake.BotID(), "")
	waitFor(t, 5*time.Second, "ended by the disconnect", e.statusSays("ended: Clankie was disconnected from the channel"))
	msgs := e.messages(textA, 1)
	if last := msgs[len(msgs)-1].Content; last != "I was disconnected from <#"+voiceRoom+">, so the session ended." {
		t.Fatalf("leave message %q", last)
	}

	// Unanswered again, and a moderator disconnects the bot meanwhile (the
	// fake's own model has the bot out of voice already, so the event is
	// sent as it is).
	e.fake.SetVoiceEcho(false)
	in := e.fake.Interact(ctxFor(t, 10*time.Second), discordtest.InteractionSpec{GuildID: guildID, ChannelID: textA, UserID: mover, Command: "voice", Subcommand: "join"})
	waitFor(t, 5*time.Second, "the third join's op 4", func() bool { return len(e.ops()) >= 4 })
	e.fake.Dispatch("VOICE_STATE_UPDATE", map[string]any{"guild_id": guildID, "channel_id": nil, "user_id": e.fake.BotID(),
		"session_id": "s", "deaf": false, "mute": false, "self_deaf": false, "self_mute": false, "self_video": false, "suppress": false, "request_to_speak_timestamp": nil})
	m, err := in.WaitReply(ctxFor(t, 10*time.Second))
	if err != nil || m.Content != "I could not join <#"+voiceRoom+">: Clankie was disconnected from the channel." {
		t.Fatalf("join reply %+v %v", m, err)
	}
	if n := endedCount(e, voiceapi.EndJoinTimeout); n != 1 {
		t.Fatalf("%d join timeouts counted", n)
	}
	if n := endedCount(e, voiceapi.EndDisconnected); n != 2 {
		t.Fatalf("%d disconnects counted", n)
	}
}

// plainAudio is an audio test on a voice server without DAVE, with short
// clocks: the lifecycle, not the encryption, is under test.
func plainAudio(t *testing.T, extra ...VoiceOption) *audioEnv {
	t.Helper()
	a := startVoiceAudioWith(t, audioSetup{plain: true, voice: append([]VoiceOption{bounds(time.Second, time.Minute, time.Hour, 0)}, extra...)}, inVoice(mover)...)
	a.join(t)
	return a
}

// heardAgain has mover speak on a fresh connection of his own until the
// model has heard more than it had: audio flows through the session.
func (a *audioEnv) heardAgain(t *testing.T) {
	t.Helper()
	rt := opusRuntime(t)
	before := len(a.rt.Audio(1))
	creds := a.vsrv.Join(mover)
	c, err := media.Dial(ctxFor(t, 10*time.Second), media.Config{Endpoint: creds.Endpoint, ServerID: creds.ServerID, UserID: mover,
		SessionID: creds.SessionID, Token: creds.Token, TLS: a.vsrv.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One utterance at a time: each ends with the speaker's silence, then
	// goes to the model as a turn.
	frames := encodeTone(t, rt, 440, 25)
	deadline := time.Now().Add(15 * time.Second)
	for len(a.rt.Audio(1)) <= before+10000 {
		if time.Now().After(deadline) {
			t.Fatalf("the model did not hear mover again: %d bytes before, %d now", before, len(a.rt.Audio(1)))
		}
		for _, f := range frames {
			if err := c.Send(context.Background(), f); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
	}
}

// Item 1 (rejoin) and 3 attempts: a lost voice session is rejoined with
// op 4; when Discord does not answer, the bot leaves and joins again; with
// an answer, audio flows again. With none, after 3 tries the session ends
// and says so where /voice join ran.
func TestVoiceRejoinFallsBackToLeaveThenJoin(t *testing.T) {
	t.Run("answered on the second try", func(t *testing.T) {
		a := plainAudio(t)
		bot := a.fake.BotID()
		a.fake.SetVoiceEcho(false)
		n := len(a.ops())
		a.vsrv.CloseWith(bot, media.CloseSessionInvalid)
		waitFor(t, 5*time.Second, "the first rejoin", func() bool { return len(a.ops()) > n })
		waitFor(t, 5*time.Second, "reconnecting", a.statusSays(": reconnecting"))
		a.fake.SetVoiceEcho(true)
		waitFor(t, 10*time.Second, "live again", a.statusSays(": live"))
		if ops := a.ops()[n:]; strings.Join(ops, ",") != voiceRoom+",,"+voiceRoom {
			t.Fatalf("op 4s after the close %q, want a join, then a leave and a join", ops)
		}
		a.heardAgain(t)
	})
	t.Run("never answered", func(t *testing.T) {
		a := plainAudio(t)
		a.fake.SetVoiceEcho(false)
		a.vsrv.CloseWith(a.fake.BotID(), media.CloseSessionInvalid)
		waitFor(t, 15*time.Second, "the session to end", a.statusSays("ended: the voice connection was lost and could not be re-established"))
		msgs := a.messages(voiceRoom, 2) // the disclosure, then the sentence
		if last := msgs[len(msgs)-1].Content; !strings.Contains(last, "could not get it back after 3 tries") {
			t.Fatalf("message %q", last)
		}
		// 1 join, then 3 rejoins: a join, a leave and a join, a leave and a
		// join; then the final leave.
		if ops := a.ops(); strings.Join(ops, ",") != strings.Join([]string{voiceRoom, voiceRoom, "", voiceRoom, "", voiceRoom, ""}, ",") {
			t.Fatalf("op 4s %q", ops)
		}
	})
}

// Item 2: close codes as Discord documents them.
func TestVoiceCloseCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
		// then runs after the close; want is what /voice status says.
		then func(a *audioEnv)
		want string
		log  string
	}{
		{name: "4014 with no follow-up rejoins", code: media.CloseDisconnected, want: ": live"},
		{name: "4014 then a disconnect ends", code: media.CloseDisconnected,
			then: func(a *audioEnv) { a.move(a.fake.BotID(), "") }, want: "ended: Clankie was disconnected"},
		{name: "4021 rejoins", code: media.CloseRateLimited, want: ": live"},
		{name: "4022 rejoins while the bot is still in the channel", code: media.CloseCallTerminated, want: ": live"},
		{name: "4000 rejoins", code: 4000, want: ": live"},
		{name: "4020 rejoins", code: media.CloseBadRequest, want: ": live"},
		{name: "4016 is our protocol error: ends", code: media.CloseUnknownEncryptionMode,
			want: "ended: the voice server refused the connection (code 4016)", log: "the voice server refused our protocol; the session ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := plainAudio(t)
			resumes := a.vsrv.Resumes()
			a.vsrv.CloseWith(a.fake.BotID(), tc.code)
			if tc.then != nil {
				tc.then(a)
			}
			waitFor(t, 15*time.Second, tc.want, a.statusSays(tc.want))
			if tc.want == ": live" {
				waitFor(t, 10*time.Second, "the bot back on the voice server", func() bool { return a.vsrv.Connected(a.fake.BotID()) })
				a.heardAgain(t)
			}
			if tc.log != "" {
				if n := a.l.obs.FilterMessage(tc.log).FilterField(zapInt("closeCode", tc.code)).Len(); n != 1 {
					t.Fatalf("%d log lines naming code %d", n, tc.code)
				}
			}
			t.Logf("close %d: %d resumes; status %q", tc.code, a.vsrv.Resumes()-resumes, firstLine(a.voice(mover, "status")))
		})
	}
	// A main-gateway re-identify whose GUILD_CREATE no longer lists the bot
	// in the channel: the session rejoins, never a zombie.
	t.Run("re-identify without the bot rejoins", func(t *testing.T) {
		a := plainAudio(t)
		n := len(a.ops())
		ids := len(a.fake.Identifies())
		a.fake.InvalidateSessions()
		waitFor(t, 10*time.Second, "the bot to identify again", func() bool { return len(a.fake.Identifies()) > ids })
		a.fake.GuildCreate(testGuild(inVoice(mover)...))
		waitFor(t, 10*time.Second, "a rejoin", func() bool { return len(a.ops()) > n })
		waitFor(t, 15*time.Second, "live again", a.statusSays(": live"))
		a.heardAgain(t)
	})
}

// Item 3: endpoint null closes the voice connection and waits; the next
// VOICE_SERVER_UPDATE is connected to with its own token. Nothing of the
// previous server is reused: the old token, which the voice server now
// refuses, is never tried, and a new /voice join gets a new token.
func TestVoiceServerGoneThenANewOne(t *testing.T) {
	a := plainAudio(t)
	bot := a.fake.BotID()
	ops := a.fake.VoiceStateOps()
	sessionID := ops[len(ops)-1].SessionID
	a.fake.Dispatch("VOICE_SERVER_UPDATE", map[string]any{"guild_id": guildID, "token": "gone", "endpoint": nil})
	waitFor(t, 5*time.Second, "the old connection closed", func() bool { return !a.vsrv.Connected(bot) })
	waitFor(t, 5*time.Second, "reconnecting", a.statusSays(": reconnecting"))
	creds := a.vsrv.Admit(bot, sessionID) // a new token; the old one is refused from now on
	a.fake.Dispatch("VOICE_SERVER_UPDATE", map[string]any{"guild_id": guildID, "token": creds.Token, "endpoint": creds.Endpoint})
	waitFor(t, 10*time.Second, "live on the new server", a.statusSays(": live"))
	a.heardAgain(t)
	if n := a.vsrv.AuthFailures(); n != 0 {
		t.Fatalf("%d identifies with a stale token", n)
	}
	a.voice(mover, "leave")
	waitFor(t, 5*time.Second, "the connection closed", func() bool { return !a.vsrv.Connected(bot) })
	before := len(a.secrets())
	a.join(t)
	if n := a.vsrv.AuthFailures(); n != 0 || len(a.secrets()) <= before {
		t.Fatalf("the next join: %d stale identifies, %d credentials issued before and %d after", n, before, len(a.secrets()))
	}
}

// Item 5: a bot moved by someone follows as a new session there: consent
// starts over, the disclosure goes to the new channel, and the move is
// said where /voice join ran. It never sits silent.
func TestVoiceMovedBotFollowsAsANewSession(t *testing.T) {
	e := startVoiceWith(t, config.ConsentExplicit, "", voiceSetup{}, append(inVoice(mover), discordtest.VoiceState{ChannelID: voiceTwo, UserID: alice})...)
	if got := e.voiceIn(textA, mover, "join"); !strings.Contains(got, "listening") {
		t.Fatalf("join %q", got)
	}
	waitFor(t, 5*time.Second, "1 consented, live", e.statusSays("1 speaker has consented"))
	n := len(e.ops())
	e.move(e.fake.BotID(), voiceTwo)
	waitFor(t, 5*time.Second, "the session in the new channel", e.statusSays("Voice session in <#"+voiceTwo+">: live"))
	if got := e.voice(mover, "status"); !strings.Contains(got, "0 speakers have consented") {
		t.Fatalf("consent carried over: %q", got)
	}
	if ops := e.ops()[n:]; strings.Join(ops, ",") != ","+voiceTwo {
		t.Fatalf("op 4s after the move %q, want a leave and a join there", ops)
	}
	moved := e.messages(textA, 1)
	if want := "I was moved from <#" + voiceRoom + "> to <#" + voiceTwo + ">. A new session starts there; nobody's consent carries over."; moved[len(moved)-1].Content != want {
		t.Fatalf("message %q", moved[len(moved)-1].Content)
	}
	if d := e.messages(voiceTwo, 1); !strings.Contains(d[0].Content, "AI voice assistant") {
		t.Fatalf("no disclosure in the new channel: %q", d[0].Content)
	}
	// alice opts in there and is briefed about.
	if got := e.voice(alice, "consent", str("action", "opt-in")); !strings.Contains(got, "opted in") {
		t.Fatalf("consent %q", got)
	}
	waitFor(t, 5*time.Second, "a briefing about alice in the new channel", func() bool {
		reqs := e.rec.all()
		last := reqs[len(reqs)-1]
		return last.ChannelID == voiceTwo && strings.Join(last.ConsentedUserIDs, ",") == alice
	})
	if n := endedCount(e, voiceapi.EndMoved); n != 1 {
		t.Fatalf("%d moves counted", n)
	}
}

// Item 6: Clankie leaves when nobody who consented has been there for the
// idle time, when the session reaches its longest, and when the server's
// day's budget is spent; each says so once where /voice join ran, and a
// join with the budget spent is refused with when it resets.
func TestVoiceLeavesWhenIdleOutOfTimeOrBudget(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		e := startVoiceWith(t, config.ConsentExplicit, "", voiceSetup{voice: []VoiceOption{bounds(5*time.Second, time.Second, time.Hour, 0)}}, inVoice(mover, alice)...)
		e.voiceIn(textA, mover, "join")
		time.Sleep(1500 * time.Millisecond) // mover consented: no idle leave
		if got := e.voice(mover, "status"); !strings.Contains(got, ": live") {
			t.Fatalf("a consented person's session left: %q", got)
		}
		e.voice(mover, "consent", str("action", "opt-out"))
		waitFor(t, 5*time.Second, "the idle leave", e.statusSays("ended: nobody who consented was there for a while"))
		if msgs := e.messages(textA, 1); msgs[0].Content != "I left <#"+voiceRoom+">: nobody who consented has been there for 1s." {
			t.Fatalf("message %q", msgs[0].Content)
		}
		if ops := e.ops(); ops[len(ops)-1] != "" {
			t.Fatalf("the bot did not leave: %q", ops)
		}
	})
	t.Run("longest session", func(t *testing.T) {
		e := startVoiceWith(t, config.ConsentExplicit, "", voiceSetup{voice: []VoiceOption{bounds(5*time.Second, time.Hour, time.Second, 0)}}, inVoice(mover)...)
		e.voiceIn(textA, mover, "join")
		waitFor(t, 5*time.Second, "the end", e.statusSays("ended: it reached the longest a session may last (1s)"))
		if msgs := e.messages(textA, 1); msgs[0].Content != "I left <#"+voiceRoom+">: a voice session lasts at most 1s. Run `/voice join` to start a new one." {
			t.Fatalf("message %q", msgs[0].Content)
		}
	})
	t.Run("daily budget", func(t *testing.T) {
		e := startVoiceWith(t, config.ConsentExplicit, "", voiceSetup{voice: []VoiceOption{bounds(5*time.Second, time.Hour, time.Hour, 1500*time.Millisecond)}}, inVoice(mover)...)
		e.voiceIn(textA, mover, "join")
		if got := e.voice(mover, "status"); !strings.Contains(got, "Voice time today: ") {
			t.Fatalf("status without the budget: %q", got)
		}
		waitFor(t, 5*time.Second, "the end", e.statusSays("ended: the server's voice time for today was used up"))
		reset := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Unix()
		msgs := e.messages(textA, 1)
		if want := fmt.Sprintf("I left <#%s>: this server's voice time for today (2s) is used up. It resets at 00:00 UTC (<t:%d:R>).", voiceRoom, reset); msgs[0].Content != want {
			t.Fatalf("message %q, want %q", msgs[0].Content, want)
		}
		got := e.voiceIn(textA, mover, "join")
		if want := fmt.Sprintf("This server's voice time for today (2s) is used up. It resets at 00:00 UTC (<t:%d:R>).", reset); got != want {
			t.Fatalf("join with the budget spent %q, want %q", got, want)
		}
		if got := e.voice(mover, "status"); !strings.Contains(got, "Voice time today: 2s used of 2s, 0s left") {
			t.Fatalf("status %q", got)
		}
		tot := e.vb.Voice.Totals()
		if tot.EndedBy[voiceapi.EndBudget] != 1 || tot.SessionTime < time.Second {
			t.Fatalf("totals: ended %v, session time %v", tot.EndedBy, tot.SessionTime)
		}
	})
}

// Item 7: the disclosure opens a session in the voice channel's own chat,
// with no pings; where the bot may not post there, it goes where /voice
// join ran.
func TestVoiceDisclosureAtJoin(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover)...)
	e.voiceIn(textA, mover, "join")
	d := e.messages(voiceRoom, 1)[0]
	for _, want := range []string{"Clankie, an AI voice assistant", "Only people who opt in are heard", "voice model at 127.0.0.1",
		"This call is not end-to-end encrypted.", "/voice consent action:opt-in", "action:opt-out", "buttons below", "/voice leave"} {
		if !strings.Contains(d.Content, want) {
			t.Errorf("disclosure lacks %q: %q", want, d.Content)
		}
	}
	var am struct {
		Parse *[]string `json:"parse"`
	}
	if err := json.Unmarshal(d.AllowedMentions, &am); err != nil || am.Parse == nil || len(*am.Parse) != 0 {
		t.Fatalf("allowed_mentions %s", d.AllowedMentions)
	}
	if n := len(e.fake.ChannelMessages(textA)); n != 0 {
		t.Fatalf("%d messages in the join's channel", n)
	}
	if v := e.fake.Violations(); len(v) != 0 {
		t.Fatalf("Discord refused: %+v", v)
	}

	e.voice(mover, "leave")
	e.fake.DenyMessages(voiceRoom)
	e.voiceIn(textA, mover, "join")
	if got := e.messages(textA, 1)[0].Content; !strings.Contains(got, "AI voice assistant") {
		t.Fatalf("the fallback disclosure %q", got)
	}
	if n := len(e.fake.ChannelMessages(voiceRoom)); n != 1 {
		t.Fatalf("%d messages in the voice channel, want the first session's only", n)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Item 4: DAVE recovers as libdave and discord.js do: a welcome after the
// group exists, and 36 frames in a row from one sender that fail to
// decrypt, are answered with op 31 and a new key package; once the voice
// server re-adds the bot, the consented speaker is heard again and the
// call is still end-to-end encrypted.
func TestVoiceDAVERecovers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(a *audioEnv, mv *goPerson, rt *opus.Runtime)
	}{
		{"a welcome after the group exists", func(a *audioEnv, _ *goPerson, _ *opus.Runtime) {
			if _, err := a.role.SendWelcomeAfterGroup(a.fake.BotID()); err != nil {
				t.Fatal(err)
			}
		}},
		{"36 frames from one sender fail to decrypt", func(a *audioEnv, mv *goPerson, rt *opus.Runtime) {
			a.vsrv.CorruptDAVEFrames(mover, dave.DecryptFailureTolerance)
			<-mv.speak(t, encodeTone(t, rt, 440, dave.DecryptFailureTolerance), 0, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startVoiceAudio(t, inVoice(mover)...)
			rt := opusRuntime(t)
			bot := a.fake.BotID()
			a.join(t)
			mv := a.dialPerson(t, mover)
			a.settle(t, []string{mover}, mv)
			kps := a.role.KeyPackagesFrom(bot)

			tc.breakIt(a, mv, rt)
			waitFor(t, 10*time.Second, "op 31 and a new key package from the bot", func() bool {
				for _, r := range a.role.InvalidReports() {
					if r.UserID == bot {
						return a.role.KeyPackagesFrom(bot) > kps
					}
				}
				return false
			})
			a.settle(t, []string{mover}, mv)
			before := len(a.modelHeard(1))
			<-mv.speak(t, encodeTone(t, rt, 440, 50), 0, nil)
			waitFor(t, 10*time.Second, "mover heard again", func() bool { return len(a.modelHeard(1)) >= before+20000 })
			if dom := pcmtest.DominantFrequency(a.modelHeard(1)[before+2400:], realtime.SampleRate, 100, 4000); !near(dom, 440, 3) {
				t.Fatalf("the model hears %.1f Hz after the recovery", dom)
			}
			got := a.voice(mover, "status")
			if !strings.Contains(got, ": live") || !strings.Contains(got, "End-to-end encrypted (DAVE).") {
				t.Fatalf("status %q", got)
			}
		})
	}
}

// click presses a button and returns the (ephemeral) reply.
func (e *voiceEnv) click(user, messageID, customID string) string {
	e.t.Helper()
	ctx := ctxFor(e.t, 10*time.Second)
	m, err := e.fake.Click(ctx, discordtest.ClickSpec{GuildID: guildID, ChannelID: voiceRoom, UserID: user, MessageID: messageID, CustomID: customID}).WaitReply(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if !m.Ephemeral() {
		e.t.Fatalf("a click's reply is public: %q", m.Content)
	}
	return m.Content
}

// Issue 28, item 4: the disclosure carries Opt in and Opt out buttons; a
// click works as /voice consent for whoever clicked, only in the session
// that posted it (a button of an ended session stays dead after a new
// join); a forged custom_id does nothing.
func TestVoiceConsentButtons(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, false, append(inVoice(mover, alice), discordtest.VoiceState{ChannelID: voiceTwo, UserID: bob})...)
	e.voiceIn(textA, mover, "join")
	d := e.messages(voiceRoom, 1)[0]
	var rows []struct {
		Components []struct {
			Label    string `json:"label"`
			CustomID string `json:"custom_id"`
		} `json:"components"`
	}
	if err := json.Unmarshal(d.Components, &rows); err != nil || len(rows) != 1 || len(rows[0].Components) != 2 {
		t.Fatalf("disclosure components %s (%v)", d.Components, err)
	}
	in, out := rows[0].Components[0], rows[0].Components[1]
	if in.Label != "Opt in" || out.Label != "Opt out" || !strings.HasPrefix(in.CustomID, "voice-consent:vs-") || !strings.HasSuffix(out.CustomID, ":out") {
		t.Fatalf("buttons %+v", rows[0].Components)
	}
	if got := e.click(alice, d.ID, in.CustomID); !strings.Contains(got, "You opted in") {
		t.Fatalf("alice's opt-in click %q", got)
	}
	waitFor(t, 5*time.Second, "2 consented", e.statusSays("2 speakers have consented"))
	if got := e.click(alice, d.ID, out.CustomID); !strings.Contains(got, "You opted out") {
		t.Fatalf("alice's opt-out click %q", got)
	}
	waitFor(t, 5*time.Second, "1 consented", e.statusSays("1 speaker has consented"))
	if got := e.click(bob, d.ID, in.CustomID); !strings.Contains(got, "only from the voice channel the session is in") {
		t.Fatalf("bob, in another channel: %q", got)
	}
	for _, forged := range []string{"voice-consent:vs-0000000000000000:in", "voice-consent:" + strings.Repeat("x", 19) + ":in", "voice-consent:evil"} {
		got := e.click(alice, d.ID, forged)
		if !strings.Contains(got, "has ended") && !strings.Contains(got, "not one Clankie made") {
			t.Fatalf("forged %q: %q", forged, got)
		}
	}
	if got := e.voice(mover, "status"); !strings.Contains(got, "1 speaker has consented") {
		t.Fatalf("a forged click changed consent: %q", got)
	}
	// A new session in the same channel: the old message's button is dead.
	e.voice(mover, "leave")
	e.voiceIn(textA, mover, "join")
	e.messages(voiceRoom, 2)
	if got := e.click(alice, d.ID, in.CustomID); !strings.Contains(got, "That voice session has ended") {
		t.Fatalf("the old session's button: %q", got)
	}
	if got := e.voice(mover, "status"); !strings.Contains(got, "1 speaker has consented") {
		t.Fatalf("the old button changed the new session: %q", got)
	}
	if v := e.fake.Violations(); len(v) != 0 {
		t.Fatalf("Discord refused: %+v", v)
	}
}
