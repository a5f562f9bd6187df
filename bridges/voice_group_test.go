package bridges

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memoryclient"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// committed waits for n committed turns on the model's first connection.
func (a *audioEnv) committed(t *testing.T, n int) []realtimetest.CommittedTurn {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d committed turns", n), func() bool { return len(a.rt.Committed(1)) >= n })
	return a.rt.Committed(1)
}

// toneOfTurn is the dominant frequency of a committed turn's audio.
func toneOfTurn(turn realtimetest.CommittedTurn) float64 {
	s, _ := pcm.AppendFromLE(nil, turn.PCM)
	return pcmtest.DominantFrequency(s, realtime.SampleRate, 100, 4000)
}

// outputFor waits for the function call's output.
func (a *audioEnv) outputFor(t *testing.T, callID string) string {
	t.Helper()
	var out string
	waitFor(t, 10*time.Second, "the output of "+callID, func() bool {
		for _, o := range a.rt.FunctionOutputs(1) {
			if o.CallID == callID {
				out = o.Output
				return true
			}
		}
		return false
	})
	return out
}

// TestVoiceGroupCall (issue 27): mover and alice consented, bob not, in one
// channel. Each utterance reaches the model as its own turn labelled with
// its speaker; alice talking to the others gets no answer; mover
// addressing Clankie does; the model's recall_person for mover holds his
// facts visible here and nothing else, for bob a refusal; while Clankie
// answers mover, alice's speech does not cut him off and mover's does;
// remember_episode keeps voice notes, five a minute.
func TestVoiceGroupCall(t *testing.T) {
	a := startVoiceAudio(t, inVoice(mover, alice, bob)...)
	a.seed(mover, mover, textA, "mover plays the cello", api.ScopeGuild)
	a.seed(mover, mover, textA, "said only in general", api.ScopeChannel)
	a.seed(bob, bob, textA, "bob's private plans", api.ScopeGuild)
	rt := opusRuntime(t)
	bot := a.fake.BotID()
	a.join(t)
	if got := a.voice(alice, "consent", str("action", "opt-in")); !strings.Contains(got, "opted in") {
		t.Fatalf("alice's opt-in %q", got)
	}
	mv, al, bo := a.dialPerson(t, mover), a.dialPerson(t, alice), a.dialPerson(t, bob)
	a.settle(t, []string{mover, alice, bob}, mv, al, bo)
	creates := func() int { return len(a.rt.ResponseCreates(1)) }

	// alice talks to the others: her own turn, labelled, and no answer.
	<-al.speak(t, encodeTone(t, rt, 700, 40), 0, nil)
	turns := a.committed(t, 1)
	if turns[0].Label != "<@"+alice+">" || !near(toneOfTurn(turns[0]), 700, 5) {
		t.Fatalf("alice's turn: label %q, %.1f Hz", turns[0].Label, toneOfTurn(turns[0]))
	}
	// bob never consented: nothing of his reaches the model.
	<-bo.speak(t, encodeTone(t, rt, 1000, 40), 0, nil)
	time.Sleep(time.Second) // his utterance would have ended by now
	if n := len(a.rt.Committed(1)); n != 1 || creates() != 0 {
		t.Fatalf("%d turns and %d response.create after alice and bob talked; want 1 and 0", n, creates())
	}

	// mover addresses Clankie: an answer is asked for.
	<-mv.speak(t, encodeTone(t, rt, 440, 40), 0, nil)
	turns = a.committed(t, 2)
	if turns[1].Label != "<@"+mover+">" || !near(toneOfTurn(turns[1]), 440, 5) {
		t.Fatalf("mover's turn: label %q, %.1f Hz", turns[1].Label, toneOfTurn(turns[1]))
	}
	waitFor(t, 5*time.Second, "response.create for mover", func() bool { return creates() == 1 })

	// The model looks mover up: his facts visible in this channel only.
	a.rt.EmitFunctionCall(1, "resp_call1", "call_1", "recall_person", `{"user_id":"`+mover+`"}`)
	out := a.outputFor(t, "call_1")
	if !strings.Contains(out, `"mover plays the cello"`) || strings.Contains(out, "said only in general") || !strings.Contains(out, "never an instruction") {
		t.Fatalf("recall_person for mover: %q", out)
	}
	// and bob: refused, none of his facts.
	a.rt.EmitFunctionCall(1, "resp_call2", "call_2", "recall_person", `{"user_id":"`+bob+`"}`)
	if out := a.outputFor(t, "call_2"); strings.Contains(out, "private plans") || !strings.Contains(out, "only people in this call who agreed") {
		t.Fatalf("recall_person for bob: %q", out)
	}
	waitFor(t, 5*time.Second, "a response.create after each output", func() bool { return creates() == 3 })

	// Clankie answers mover at 600 Hz; alice talks meanwhile: he goes on.
	a.rt.EmitAudio(1, "resp_answer", "item_answer", answerPCM(600, 4*time.Second), 4800)
	if got := mv.hear(bot, 5*time.Second, func(got []heardFrame) bool { return len(got) >= 10 }); len(got) < 10 {
		t.Fatalf("mover heard %d frames of the answer", len(got))
	}
	<-al.speak(t, encodeTone(t, rt, 700, 40), 0, nil)
	if got := mv.hear(bot, 500*time.Millisecond, nil); len(got) < 15 || len(framesOf(a.rt, 1, "response.cancel")) != 0 {
		t.Fatalf("after alice talked over him: %d frames heard in 500 ms, %d response.cancel", len(got), len(framesOf(a.rt, 1, "response.cancel")))
	}
	// mover talks: the answer stops.
	<-mv.speak(t, encodeTone(t, rt, 550, 25), 0, nil)
	waitFor(t, 5*time.Second, "response.cancel after mover talked", func() bool { return len(framesOf(a.rt, 1, "response.cancel")) == 1 })

	// Five notes a minute; the sixth is refused and not kept.
	for i := range 6 {
		a.rt.EmitFunctionCall(1, fmt.Sprintf("resp_note%d", i), fmt.Sprintf("note_%d", i), "remember_episode",
			fmt.Sprintf(`{"summary":"group call note %d"}`, i))
		out := a.outputFor(t, fmt.Sprintf("note_%d", i))
		if want := map[bool]string{true: "Kept.", false: "at most 5"}[i < 5]; !strings.Contains(out, want) {
			t.Fatalf("note %d: %q", i+1, out)
		}
	}
	voiceMem, err := memoryclient.New(a.mem.url, tokens.VoiceBridge)
	if err != nil {
		t.Fatal(err)
	}
	card, err := voiceMem.Episodes(context.Background(), "group call note", 10)
	if err != nil || card.Count != 5 {
		t.Fatalf("episodes: %d, %v", card.Count, err)
	}

	// Every committed turn is labelled with its speaker (tone ↔ person).
	want := map[float64]string{700: alice, 440: mover, 550: mover}
	for _, turn := range a.rt.Committed(1) {
		f := toneOfTurn(turn)
		for hz, who := range want {
			if near(f, hz, 5) && turn.Label != "<@"+who+">" {
				t.Errorf("a %.0f Hz turn labelled %q, want <@%s>", f, turn.Label, who)
			}
		}
	}
	status := a.voice(mover, "status")
	if !strings.Contains(status, "Turns this session: ") {
		t.Fatalf("status %q", status)
	}
	tot := a.vb.Voice.Totals()
	t.Logf("turns: %d answered, %d let pass; tool calls %v; %s", tot.TurnsAnswered, tot.TurnsSilent, tot.ToolCalls, firstLine(strings.SplitN(status, "Turns", 2)[1]))
	if tot.TurnsAnswered < 1 || tot.TurnsSilent < 2 {
		t.Errorf("turns %d answered, %d silent", tot.TurnsAnswered, tot.TurnsSilent)
	}
	assertFramesValid(t, a.rt)
	// The session's client frames, content elided: what the Show asks for.
	var shape []string
	for _, f := range a.rt.AllFrames() {
		if f.Conn != 1 {
			continue
		}
		desc := f.Type
		switch {
		case f.Type == "conversation.item.create" && isLabel(f.Text):
			desc += " (label " + f.Text + ")"
		case f.Type == "conversation.item.create" && strings.Contains(string(f.Raw), "function_call_output"):
			var it struct {
				Item struct {
					CallID string `json:"call_id"`
					Output string `json:"output"`
				} `json:"item"`
			}
			_ = json.Unmarshal(f.Raw, &it)
			desc += fmt.Sprintf(" (function_call_output %s, %d characters)", it.Item.CallID, len(it.Item.Output))
		case f.Type == "conversation.item.create":
			desc += fmt.Sprintf(" (briefing, %d characters)", len(f.Text))
		}
		if n := len(shape); n > 0 && strings.HasPrefix(shape[n-1], desc) {
			if !strings.HasSuffix(shape[n-1], "…") {
				shape[n-1] += " …"
			}
			continue
		}
		shape = append(shape, desc)
	}
	t.Logf("client frames on the model's connection:\n  %s", strings.Join(shape, "\n  "))
	session := framesOf(a.rt, 1, "session.update")[0]
	var su struct {
		Session struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			Audio struct {
				Input struct {
					TurnDetection json.RawMessage `json:"turn_detection"`
					Transcription struct {
						Model string `json:"model"`
					} `json:"transcription"`
				} `json:"input"`
			} `json:"audio"`
		} `json:"session"`
	}
	if err := json.Unmarshal(session.Raw, &su); err != nil || string(su.Session.Audio.Input.TurnDetection) != "null" ||
		su.Session.Audio.Input.Transcription.Model == "" || len(su.Session.Tools) != 3 {
		t.Fatalf("session.update %s (%v)", session.Raw, err)
	}
	a.run.stop()
	a.l.assertClean(t, "Clankie, what do you know about me?", "did you see the match", "mover plays the cello", "group call note")
}
