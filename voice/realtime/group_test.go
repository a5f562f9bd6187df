package realtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// groupTools are three function tools as a group call's floor might
// declare them.
func groupTools() []Tool {
	return []Tool{
		{Name: "remember", Description: "Keep a fact a consented speaker asked you to remember.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string"}},"required":["fact"]}`)},
		{Name: "pass_floor", Description: "Say nothing this turn: nobody addressed you.",
			Parameters: json.RawMessage(` { "type" : "object", "properties" : { } } `)},
		{Name: "leave_call", Description: "Leave the voice channel."},
	}
}

// groupConfig is testConfig with manual turns, transcription and tools.
func groupConfig(url string, l Listener) Config {
	cfg := testConfig(url)
	cfg.ManualTurns = true
	cfg.TranscribeModel = "gpt-4o-mini-transcribe"
	cfg.Tools = groupTools()
	cfg.Listener = l
	return cfg
}

// turnEvent is one TurnListener call.
type turnEvent struct {
	kind       string // transcript, call, done
	seq        uint64
	text       string
	ok         bool
	callID     string
	name, args string
	status     string
	at         time.Time
}

// turns records what a TurnListener hears; onCall, when set, runs inside
// FunctionCall (as a floor answering at once would).
type turns struct {
	mu     sync.Mutex
	events []turnEvent
	onCall func(callID string)
}

func (l *turns) OutputAudio(string, string, []byte) {}
func (l *turns) SpeechStarted(int)                  {}
func (l *turns) SpeechStopped(int)                  {}

func (l *turns) add(e turnEvent) {
	e.at = time.Now()
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *turns) Transcript(seq uint64, text string, ok bool) {
	l.add(turnEvent{kind: "transcript", seq: seq, text: text, ok: ok})
}

func (l *turns) FunctionCall(callID, name, arguments string) {
	l.add(turnEvent{kind: "call", callID: callID, name: name, args: arguments})
	if l.onCall != nil {
		l.onCall(callID)
	}
}

func (l *turns) ResponseDone(responseID, status string) {
	l.add(turnEvent{kind: "done", callID: responseID, status: status})
}

func (l *turns) of(kind string) []turnEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []turnEvent
	for _, e := range l.events {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// speech is n bytes of PCM16 whose first byte is marker (the fake's
// transcription script reads it) and the rest a pattern.
func speech(marker byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	b[0] = marker
	return b
}

// scripted transcribes committed audio by its first byte: texts[marker],
// or a failure for a marker not in texts.
func scripted(texts map[byte]string) realtimetest.Option {
	return realtimetest.Transcribe(func(pcm []byte) (string, bool) {
		text, ok := texts[pcm[0]]
		return text, ok
	})
}

// audioOf returns the input audio section of a session.update frame.
func audioInputOf(f realtimetest.Frame) map[string]any {
	audio, _ := f.Session["audio"].(map[string]any)
	in, _ := audio["input"].(map[string]any)
	return in
}

// TestSessionUpdateForGroupTurns: the group settings reach session.update
// in their GA shapes (turn_detection null, transcription.model, three
// function tools with tool_choice auto), which validate strictly; a zero
// Config still sends what it sent before them.
func TestSessionUpdateForGroupTurns(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        func(url string) Config
		manual     bool
		transcribe string
		tools      []string
	}{
		{name: "group", cfg: func(url string) Config { return groupConfig(url, nil) }, manual: true,
			transcribe: "gpt-4o-mini-transcribe", tools: []string{"remember", "pass_floor", "leave_call"}},
		{name: "zero", cfg: testConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			f := newFake(t)
			if f.Validator() == nil {
				t.Skip("missing dependency: OpenAI's Realtime schemas (openai-realtime.json not found); nothing to validate against")
			}
			s, _ := start(t, tc.cfg(f.URL()))
			eventually(t, "ready", func() bool { return s.State().Phase == Ready })
			up := f.AllFrames()[0]
			if up.Type != "session.update" || up.Violation != nil || f.Validator().ClientEvent(up.Raw) != nil {
				t.Fatalf("first frame %s does not validate: %v", up.Type, up.Violation)
			}
			in := audioInputOf(up)
			td, set := in["turn_detection"]
			if tc.manual && (!set || td != nil) {
				t.Errorf("turn_detection = %v (set %t), want JSON null", td, set)
			}
			if !tc.manual {
				if m, _ := td.(map[string]any); m["type"] != ServerVAD {
					t.Errorf("turn_detection = %v, want server_vad", td)
				}
			}
			tr, _ := in["transcription"].(map[string]any)
			if got, _ := tr["model"].(string); got != tc.transcribe {
				t.Errorf("transcription = %v, want model %q", in["transcription"], tc.transcribe)
			}
			tools, _ := up.Session["tools"].([]any)
			var names []string
			for _, x := range tools {
				tool, _ := x.(map[string]any)
				names = append(names, fmt.Sprint(tool["name"]))
				if tool["type"] != "function" || tool["description"] == "" {
					t.Errorf("tool %v is not a described function tool", tool)
				}
				if p, _ := tool["parameters"].(map[string]any); p["type"] != "object" {
					t.Errorf("tool %v: parameters %v, want a JSON schema object", tool["name"], tool["parameters"])
				}
			}
			if !slices.Equal(names, tc.tools) {
				t.Errorf("tools %v, want %v", names, tc.tools)
			}
			choice, hasChoice := up.Session["tool_choice"]
			if (len(tc.tools) > 0) != hasChoice || (hasChoice && choice != "auto") {
				t.Errorf("tool_choice = %v (set %t), want auto exactly when there are tools", choice, hasChoice)
			}
		})
	}
}

func TestStartRefusesBadTools(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []Tool
		model string
	}{
		{name: "no name", tools: []Tool{{Description: "x"}}},
		{name: "space in name", tools: []Tool{{Name: "pass floor"}}},
		{name: "long name", tools: []Tool{{Name: strings.Repeat("a", 65)}}},
		{name: "twice", tools: []Tool{{Name: "a"}, {Name: "a"}}},
		{name: "array parameters", tools: []Tool{{Name: "a", Parameters: json.RawMessage(`[]`)}}},
		{name: "null parameters", tools: []Tool{{Name: "a", Parameters: json.RawMessage(`null`)}}},
		{name: "broken parameters", tools: []Tool{{Name: "a", Parameters: json.RawMessage(`{"type":`)}}},
		{name: "blank transcription model", model: "  "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{URL: "wss://example.com/v1/realtime", Tools: tc.tools, TranscribeModel: tc.model}
			if s, err := Start(context.Background(), cfg, nil); !errors.Is(err, ErrConfig) {
				if s != nil {
					_ = s.Close()
				}
				t.Errorf("Start = %v, want ErrConfig", err)
			}
		})
	}
}

// A tool's parameters are copied at Start: the caller changing its bytes
// afterwards does not change what a reconnect sends.
func TestToolsAreCopiedAtStart(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	params := []byte(`{"type":"object","properties":{"fact":{"type":"string"}}}`)
	cfg := groupConfig(f.URL(), nil)
	cfg.Tools = []Tool{{Name: "remember", Parameters: params}}
	s, _ := start(t, cfg)
	eventually(t, "ready", func() bool { return s.Stats().Connected })
	copy(params, `{"type":"string"`)
	cfg.Tools[0].Name = "renamed"
	f.Drop()
	up := f.WaitConnFrames(2, 1)[0]
	tools, _ := up.Session["tools"].([]any)
	tool, _ := tools[0].(map[string]any)
	if p, _ := tool["parameters"].(map[string]any); tool["name"] != "remember" || p["type"] != "object" {
		t.Errorf("the reconnect sent tool %v", tool)
	}
}

// checkUtteranceFrames checks that every label item on connection n is
// followed by appends of at most a second each and then a commit, with
// nothing else between, and returns the labels in order.
func checkUtteranceFrames(t *testing.T, frames []realtimetest.Frame) (labels []string, appends []int) {
	t.Helper()
	for i := 0; i < len(frames); i++ {
		fr := frames[i]
		if fr.Type != "conversation.item.create" || !strings.HasPrefix(fr.ItemID, "utt_") {
			continue
		}
		if fr.Role != "user" || fr.ContentType != "input_text" {
			t.Errorf("label item %s: role %q content %q, want a user input_text", fr.ItemID, fr.Role, fr.ContentType)
		}
		labels = append(labels, fr.Text)
		n := 0
		for i++; i < len(frames) && frames[i].Type == "input_audio_buffer.append"; i++ {
			var ev struct{ Audio string }
			_ = json.Unmarshal(frames[i].Raw, &ev)
			if got := base64.StdEncoding.DecodedLen(len(ev.Audio)); got > appendBytes {
				t.Errorf("an append of %d bytes, want at most %d (1 s)", got, appendBytes)
			}
			n++
		}
		appends = append(appends, n)
		if i == len(frames) || frames[i].Type != "input_audio_buffer.commit" {
			typ := "nothing"
			if i < len(frames) {
				typ = frames[i].Type
			}
			t.Errorf("label %q: %d appends then %s, want the commit", fr.Text, n, typ)
		}
	}
	return labels, appends
}

// TestUtteranceIsALabelledTurnWithItsTranscript: each utterance is a label
// item, its audio in appends of at most a second, and a commit, nothing
// between; the fake's committed turn carries the label and the exact PCM,
// and the TurnListener hears the scripted transcript under the
// utterance's sequence number, or ok=false for a scripted failure.
func TestUtteranceIsALabelledTurnWithItsTranscript(t *testing.T) {
	noLeaks(t)
	f := newFake(t, scripted(map[byte]string{
		1: secret("Ana says the spare key is under the blue flowerpot."),
		2: secret("Ben asks Clankie what time the match starts."),
	}))
	l := &turns{}
	s, _ := start(t, groupConfig(f.URL(), l))
	eventually(t, "ready", func() bool { return s.Stats().Connected })

	for i, tc := range []struct {
		name    string
		label   string
		pcm     []byte
		appends int
		text    string
		ok      bool
	}{
		{"short", "<@111> (Ana)", speech(1, 960), 1, "Ana says the spare key is under the blue flowerpot.", true},
		{"two and a half seconds", "<@222> (Ben)", speech(2, 5*SampleRate), 3, "Ben asks Clankie what time the match starts.", true},
		{"exactly one second", "<@111> (Ana)", speech(1, appendBytes), 1, "Ana says the spare key is under the blue flowerpot.", true},
		{"transcription fails", "<@333> (Cy)", speech(9, 4800), 1, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, ok := s.Utterance(tc.label, tc.pcm)
			if !ok || seq != uint64(i+1) {
				t.Fatalf("Utterance = %d, %t; want %d, true", seq, ok, i+1)
			}
			eventually(t, "the transcript", func() bool { return len(l.of("transcript")) == i+1 })
			got := l.of("transcript")[i]
			if got.seq != seq || got.text != tc.text || got.ok != tc.ok {
				t.Errorf("Transcript(%d, %d bytes, %t); want (%d, %d bytes, %t)", got.seq, len(got.text), got.ok, seq, len(tc.text), tc.ok)
			}
			turns := f.Committed(1)
			if len(turns) != i+1 {
				t.Fatalf("%d committed turns, want %d", len(turns), i+1)
			}
			if c := turns[i]; c.Label != tc.label || !bytes.Equal(c.PCM, tc.pcm) {
				t.Errorf("committed turn: label %q, %d bytes (equal %t); want %q, %d bytes", c.Label, len(c.PCM), bytes.Equal(c.PCM, tc.pcm), tc.label, len(tc.pcm))
			}
			labels, appends := checkUtteranceFrames(t, f.AllFrames())
			if len(labels) != i+1 || labels[i] != tc.label || appends[i] != tc.appends {
				t.Errorf("labels %q appends %v; want label %d %q with %d appends", labels, appends, i, tc.label, tc.appends)
			}
		})
	}
	st := s.Stats()
	if st.UtterancesSent != 4 || st.UtterancesDropped != 0 || st.TranscriptsOK != 3 || st.TranscriptsFailed != 1 {
		t.Errorf("Stats = %+v, want 4 utterances sent, 3 transcripts and 1 failure", st)
	}
	if len(f.ResponseCreates(1)) != 0 {
		t.Error("the client asked for a response by itself")
	}
}

// TestUtterancesBackToBackKeepTheirOrder: utterances, a briefing and a
// response.create issued together still leave every label right before
// its own audio, and each transcript comes back under its own sequence
// number.
func TestUtterancesBackToBackKeepTheirOrder(t *testing.T) {
	noLeaks(t)
	texts := map[byte]string{}
	for m := byte(1); m <= 6; m++ {
		texts[m] = secret(fmt.Sprintf("Speaker %d says something only they said, number %d.", m, m*17))
	}
	f := newFake(t, scripted(texts))
	l := &turns{}
	s, _ := start(t, groupConfig(f.URL(), l))
	eventually(t, "ready", func() bool { return s.Stats().Connected })

	want := map[uint64]string{}
	var labels []string
	for m := byte(1); m <= 6; m++ {
		label := fmt.Sprintf("<@%d> (Speaker %d)", 1000+int(m), m)
		seq, ok := s.Utterance(label, speech(m, int(m)*SampleRate/2))
		if !ok {
			t.Fatalf("utterance %d refused", m)
		}
		want[seq], labels = texts[m], append(labels, label)
		if m == 3 {
			if err := s.Brief(context.Background(), secret("Speaker 3 (consented) likes kites."), false); err != nil {
				t.Fatal(err)
			}
			if !s.CreateResponse() {
				t.Fatal("CreateResponse refused while ready")
			}
		}
	}
	eventually(t, "six transcripts", func() bool { return len(l.of("transcript")) == 6 })
	for _, e := range l.of("transcript") {
		if !e.ok || e.text != want[e.seq] {
			t.Errorf("seq %d got a transcript of %d bytes (ok %t) that is not its own", e.seq, len(e.text), e.ok)
		}
	}
	got, _ := checkUtteranceFrames(t, f.AllFrames())
	if !slices.Equal(got, labels) {
		t.Errorf("labels in order %q, want %q", got, labels)
	}
	for i, c := range f.Committed(1) {
		if c.Label != labels[i] || c.PCM[0] != byte(i+1) {
			t.Errorf("committed turn %d: label %q first byte %d; want %q, %d", i, c.Label, c.PCM[0], labels[i], i+1)
		}
	}
	if n := len(f.ResponseCreates(1)); n != 1 {
		t.Errorf("%d response.create, want 1", n)
	}
}

// TestUtteranceRefusals: Utterance sends nothing, and counts a drop, when
// it cannot send a labelled turn whole; AppendAudio refuses a mixed chunk
// under manual turns (the next commit would carry it under a label).
func TestUtteranceRefusals(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	s, _ := start(t, groupConfig(f.URL(), nil))
	vad, _ := start(t, testConfig(newFake(t).URL()))
	eventually(t, "both ready", func() bool { return s.Stats().Connected && vad.Stats().Connected })
	for _, tc := range []struct {
		name  string
		s     *Session
		label string
		pcm   []byte
	}{
		{"server VAD session", vad, "<@1> (Ana)", speech(1, 960)},
		{"blank label", s, " ", speech(1, 960)},
		{"no audio", s, "<@1> (Ana)", nil},
		{"half a sample", s, "<@1> (Ana)", speech(1, 961)},
		{"over a minute", s, "<@1> (Ana)", speech(1, maxUtteranceBytes+2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.s.Stats().UtterancesDropped
			if seq, ok := tc.s.Utterance(tc.label, tc.pcm); ok || seq != 0 {
				t.Errorf("Utterance = %d, %t; want refused", seq, ok)
			}
			if got := tc.s.Stats().UtterancesDropped; got != before+1 {
				t.Errorf("UtterancesDropped %d, want %d", got, before+1)
			}
		})
	}
	if s.AppendAudio(speech(1, 960)) {
		t.Error("AppendAudio queued a mixed chunk under manual turns")
	}
	if seq, ok := s.Utterance("<@1> (Ana)", speech(1, maxUtteranceBytes)); !ok || seq != 1 {
		t.Errorf("a one-minute utterance: %d, %t; want 1, true", seq, ok)
	}
	eventually(t, "the minute committed", func() bool { return len(f.Committed(1)) == 1 })
	if c := f.Committed(1)[0]; len(c.PCM) != maxUtteranceBytes {
		t.Errorf("committed %d bytes, want %d", len(c.PCM), maxUtteranceBytes)
	}

	cfg := groupConfig("ws://"+freeAddr(t)+"/v1/realtime", nil)
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	down, _ := start(t, cfg)
	if _, ok := down.Utterance("<@1> (Ana)", speech(1, 960)); ok {
		t.Error("Utterance queued with no connection")
	}
	if down.CreateResponse() || down.FunctionOutput("call_1", "{}") {
		t.Error("CreateResponse or FunctionOutput queued with no connection")
	}
	if st := down.Stats(); st.UtterancesDropped != 1 {
		t.Errorf("Stats = %+v, want 1 utterance dropped", st)
	}
}

// TestLostOrForgottenTurnsGetNoTranscript: an utterance whose connection
// drops, or whose conversation is forgotten, as its commit arrives never
// gets a transcript, and does not take the next connection's: that one's
// first utterance gets its own.
func TestLostOrForgottenTurnsGetNoTranscript(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(f *realtimetest.Server, s *Session)
	}{
		{"connection dropped", func(f *realtimetest.Server, _ *Session) { f.Drop() }},
		{"conversation forgotten", func(_ *realtimetest.Server, s *Session) { s.Forget() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			var (
				fake  atomic.Pointer[realtimetest.Server]
				sess  atomic.Pointer[Session]
				armed atomic.Bool
			)
			first, second := secret("Dee says her PIN is 4417."), secret("Eli says hello to everyone.")
			f := newFake(t, scripted(map[byte]string{1: first, 2: second}),
				realtimetest.OnFrame(func(fr realtimetest.Frame) {
					// Cut as the first commit arrives, before the fake
					// answers it.
					if fr.Type == "input_audio_buffer.commit" && armed.CompareAndSwap(true, false) {
						tc.cut(fake.Load(), sess.Load())
					}
				}))
			fake.Store(f)
			l := &turns{}
			s, _ := start(t, groupConfig(f.URL(), l))
			sess.Store(s)
			eventually(t, "ready", func() bool { return s.Stats().Connected })
			armed.Store(true)
			if seq, ok := s.Utterance("<@4> (Dee)", speech(1, 960)); !ok || seq != 1 {
				t.Fatalf("Utterance = %d, %t", seq, ok)
			}
			f.Conn(2)
			var seq uint64
			eventually(t, "an utterance on the new connection", func() bool {
				var ok bool
				seq, ok = s.Utterance("<@5> (Eli)", speech(2, 960))
				return ok
			})
			eventually(t, "its transcript", func() bool { return len(l.of("transcript")) > 0 })
			time.Sleep(50 * time.Millisecond) // room for a stray transcript to show
			got := l.of("transcript")
			if len(got) != 1 || got[0].seq != seq || got[0].text != second {
				for _, e := range got {
					t.Logf("transcript for seq %d, %d bytes, own %t", e.seq, len(e.text), e.text == second)
				}
				t.Errorf("%d transcripts, want exactly seq %d's own", len(got), seq)
			}
		})
	}
}

// TestFunctionCallRoundTrip: a call the model makes reaches the
// TurnListener once (though announced twice), its response's end too;
// FunctionOutput answers it with a function_call_output the fake records,
// immediately followed by a response.create; an output for a call id the
// model never made is refused by the fake.
func TestFunctionCallRoundTrip(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	l := &turns{}
	s, logs := start(t, groupConfig(f.URL(), l))
	eventually(t, "ready", func() bool { return s.Stats().Connected })

	args := secret(`{"fact":"Fay's cat is called Biscuit"}`)
	f.EmitFunctionCall(1, "resp_fc1", "call_fc1", "remember", args)
	eventually(t, "the call and the response's end", func() bool { return len(l.of("done")) == 1 })
	calls := l.of("call")
	if len(calls) != 1 || calls[0].callID != "call_fc1" || calls[0].name != "remember" || calls[0].args != args {
		t.Fatalf("FunctionCall heard %d times: %+v", len(calls), calls)
	}
	if d := l.of("done")[0]; d.callID != "resp_fc1" || d.status != "completed" || d.at.Before(calls[0].at) {
		t.Errorf("ResponseDone(%q, %q), want (resp_fc1, completed) after the call", d.callID, d.status)
	}

	output := secret(`{"ok":true,"stored":"Fay's cat is called Biscuit"}`)
	if !s.FunctionOutput("call_fc1", output) {
		t.Fatal("FunctionOutput refused while ready")
	}
	eventually(t, "the output and a response.create", func() bool { return len(f.ResponseCreates(1)) == 1 })
	if got := f.FunctionOutputs(1); !slices.Equal(got, []realtimetest.FunctionOutput{{CallID: "call_fc1", Output: output}}) {
		t.Errorf("the fake recorded outputs %d (want the one)", len(got))
	}
	frames := f.AllFrames()
	i := slices.IndexFunc(frames, func(fr realtimetest.Frame) bool {
		return fr.Type == "conversation.item.create" && bytes.Contains(fr.Raw, []byte(`"function_call_output"`))
	})
	if i < 0 || i+1 >= len(frames) || frames[i+1].Type != "response.create" {
		t.Errorf("function_call_output at frame %d not followed by response.create", i)
	}
	if created := f.ResponseCreates(1)[0]; i >= 0 && created.Before(frames[i].At) {
		t.Error("response.create arrived before the output")
	}

	if !s.FunctionOutput("call_never_made", `{"ok":true}`) {
		t.Fatal("FunctionOutput refused while ready")
	}
	eventually(t, "the refusal", func() bool {
		return logs.FilterMessage("realtime server reported an error").FilterField(zap.String("code", "invalid_value")).Len() == 1
	})
	if got := f.FunctionOutputs(1); len(got) != 1 {
		t.Errorf("the fake accepted an output for a call it never issued: %d outputs", len(got))
	}
	if st := s.Stats(); st.FunctionCalls != 1 || st.FunctionOutputs != 2 {
		t.Errorf("Stats = %+v, want 1 call and 2 outputs written", st)
	}
	if s.FunctionOutput("", "{}") {
		t.Error("FunctionOutput queued without a call id")
	}
}

// TestCreateResponseOnlyWhenAsked: under manual turns a committed turn
// starts no response (neither the client nor the fake's server does it);
// CreateResponse sends one bare, valid response.create.
func TestCreateResponseOnlyWhenAsked(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	l := &turns{}
	s, _ := start(t, groupConfig(f.URL(), l))
	eventually(t, "ready", func() bool { return s.Stats().Connected })
	if _, ok := s.Utterance("<@7> (Gus)", speech(1, 960)); !ok {
		t.Fatal("Utterance refused")
	}
	eventually(t, "committed", func() bool { return len(f.Committed(1)) == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := len(f.ResponseCreates(1)); n != 0 || len(l.of("done")) != 0 {
		t.Fatalf("%d response.create and %d responses after a manual turn, want none", n, len(l.of("done")))
	}
	if !s.CreateResponse() {
		t.Fatal("CreateResponse refused while ready")
	}
	eventually(t, "response.create", func() bool { return len(f.ResponseCreates(1)) == 1 })
	frames := f.AllFrames()
	last := frames[len(frames)-1]
	var ev map[string]any
	_ = json.Unmarshal(last.Raw, &ev)
	if last.Type != "response.create" || last.Violation != nil || len(ev) != 2 {
		t.Errorf("last frame %s = %s, want a bare, valid response.create", last.Type, last.Raw)
	}
}

// TestGroupContentNeverLogged: transcripts, labels, function arguments
// and outputs reach the TurnListener and the fake, never a log line, the
// Stats or the session's description, at debug level (TestMain checks the
// whole run again).
func TestGroupContentNeverLogged(t *testing.T) {
	noLeaks(t)
	transcript := secret("Hal whispers that the surprise party is on Friday at Ivy's.")
	label := secret("<@987654321> (Hal Private-Name)")
	f := newFake(t, scripted(map[byte]string{1: transcript}), realtimetest.EchoContent())
	l := &turns{}
	s, logs := start(t, groupConfig(f.URL(), l))
	eventually(t, "ready", func() bool { return s.Stats().Connected })
	if _, ok := s.Utterance(label, speech(1, 960)); !ok {
		t.Fatal("Utterance refused")
	}
	if _, ok := s.Utterance(label, speech(2, 960)); !ok { // a failed transcription
		t.Fatal("Utterance refused")
	}
	args := secret(`{"fact":"Hal's party is a surprise for Ivy"}`)
	f.EmitFunctionCall(1, "", "call_h1", "remember", args)
	eventually(t, "the call", func() bool { return len(l.of("call")) == 1 })
	output := secret(`{"stored":"Hal's party is a surprise for Ivy, Friday"}`)
	s.FunctionOutput("call_h1", output)
	eventually(t, "two transcripts and the output", func() bool {
		return len(l.of("transcript")) == 2 && len(f.FunctionOutputs(1)) == 1
	})
	if got := l.of("transcript")[0]; got.text != transcript {
		t.Fatal("the transcript did not reach the listener")
	}
	_ = s.Close()
	if logs.Len() == 0 {
		t.Fatal("nothing was logged; the check proves nothing")
	}
	described := fmt.Sprintf("%v %+v %#v %v", s, s.Stats(), s, s.cfg)
	for _, e := range logs.AllUntimed() {
		described += " " + e.Message + " " + strings.Join(fieldStrings(e.ContextMap()), " ")
	}
	for _, text := range []string{transcript, label, args, output, "surprise", "Hal"} {
		if strings.Contains(described, text) {
			t.Errorf("a log line, the Stats or a description holds %q", text)
		}
	}
}

// BenchmarkGroupTurnLatency measures, over loopback to the fake, the two
// paths a group call's floor waits on: call-to-output, from the fake
// starting to emit a function call to it reading the function_call_output
// the TurnListener answered with at once; and transcript-to-callback, from
// the fake's transcription script returning (the transcript is sent right
// after) to the TurnListener hearing it. Each iteration is one call and
// one utterance.
func BenchmarkGroupTurnLatency(b *testing.B) {
	var (
		s          *Session
		scriptDone atomic.Int64 // Unix ns
	)
	outputs := make(chan time.Time, 1)
	f := realtimetest.New(b, realtimetest.WithKey(testKey), realtimetest.WithModels(testModel),
		realtimetest.Transcribe(func([]byte) (string, bool) {
			scriptDone.Store(time.Now().UnixNano())
			return "a turn", true
		}),
		realtimetest.OnFrame(func(fr realtimetest.Frame) {
			if fr.Type == "conversation.item.create" && bytes.Contains(fr.Raw, []byte(`"function_call_output"`)) {
				outputs <- fr.At
			}
		}))
	l := &benchTurns{heard: make(chan time.Time, 1), answer: func(callID string) { s.FunctionOutput(callID, `{"ok":true}`) }}
	var err error
	if s, err = Start(context.Background(), groupConfig(f.URL(), l), zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	realtimetest.Eventually(b, "ready", func() bool { return s.Stats().Connected })
	pcm := speech(1, 960)
	var callLat, trLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f.EmitFunctionCall(1, "", fmt.Sprintf("call_%d", i), "remember", `{"fact":"x"}`)
		callLat = append(callLat, (<-outputs).Sub(t0))

		if _, ok := s.Utterance("<@1> (Ana)", pcm); !ok {
			b.Fatal("Utterance refused")
		}
		heard := <-l.heard
		trLat = append(trLat, heard.Sub(time.Unix(0, scriptDone.Load())))
	}
	b.StopTimer()
	reportLatency(b, "call-to-output", callLat)
	reportLatency(b, "transcript-to-callback", trLat)
}

// benchTurns answers every call at once and signals each transcript.
type benchTurns struct {
	heard  chan time.Time
	answer func(callID string)
}

func (*benchTurns) OutputAudio(string, string, []byte) {}
func (*benchTurns) SpeechStarted(int)                  {}
func (*benchTurns) SpeechStopped(int)                  {}
func (l *benchTurns) Transcript(uint64, string, bool)  { l.heard <- time.Now() }
func (l *benchTurns) FunctionCall(callID, _, _ string) { l.answer(callID) }
func (*benchTurns) ResponseDone(string, string)        {}

// reportLatency adds p50 and p99 of lat in microseconds.
func reportLatency(b *testing.B, name string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), name+"-p50-µs")
	b.ReportMetric(at(0.99), name+"-p99-µs")
}
