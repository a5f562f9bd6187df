package realtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// TestEveryFrameOfAFullSessionValidatesStrictly runs a whole session —
// connect, session.update, briefing, refresh, a dropped connection,
// reconnect and re-seed, audio in, response.cancel, conversation.item.truncate,
// close — and checks every frame the client sent against OpenAI's GA
// schemas, with unknown fields as errors. The fake fails the test on any
// frame that does not validate; this test also checks that it validated
// (the schemas were found) and that the frames are exactly the expected
// ones, in order.
func TestEveryFrameOfAFullSessionValidatesStrictly(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	if f.Validator() == nil {
		// Only outside CI: under CI=true the fake itself fails the test.
		t.Skip("missing dependency: OpenAI's Realtime schemas (openai-realtime.json not found); nothing to validate against")
	}
	cfg := testConfig(f.URL())
	cfg.Voice = "marin"
	s, _ := start(t, cfg)
	first := secret("Mia (consented) is training for a half marathon.")
	second := secret("Mia (consented) is training for a half marathon. Noor (consented) keeps bees.")
	if err := s.Brief(context.Background(), first, false); err != nil {
		t.Fatal(err)
	}
	f.WaitFrames(2)
	if err := s.Brief(context.Background(), second, true); err != nil {
		t.Fatal(err)
	}
	f.WaitFrames(3)
	eventually(t, "both acknowledged", func() bool { return s.Stats().ItemsAcked == 2 })
	f.Drop()
	f.WaitConnFrames(2, 2)
	eventually(t, "re-seed acknowledged", func() bool { return s.Stats().ItemsAcked == 3 })
	pcm := make([]byte, 960) // 20 ms of PCM16 at 24 kHz
	if !s.AppendAudio(pcm) {
		t.Fatal("AppendAudio refused while ready")
	}
	f.WaitConnFrames(2, 3)
	if !s.CancelResponse("") || !s.Truncate("item_abc", 0, 1500) {
		t.Fatal("control events refused while ready")
	}
	f.WaitConnFrames(2, 5)
	c2 := f.Conn(2)
	_ = s.Close()
	<-c2.Ended

	frames := f.AllFrames()
	var types []string
	for i, fr := range frames {
		if fr.Violation != nil {
			t.Errorf("frame %d (%s) does not validate: %s", i, fr.Type, fr.Violation)
		}
		if v := f.Validator().ClientEvent(fr.Raw); v != nil {
			t.Errorf("frame %d (%s) does not validate on a second check: %s", i, fr.Type, v)
		}
		types = append(types, fr.Type)
		t.Logf("conn %d: %s", fr.Conn, placeholder(fr, first, second))
	}
	want := []string{"session.update", "conversation.item.create", "conversation.item.create",
		"session.update", "conversation.item.create", "input_audio_buffer.append", "response.cancel", "conversation.item.truncate"}
	if !slices.Equal(types, want) {
		t.Errorf("frames %v, want %v", types, want)
	}
	if code := f.CloseCode(c2); code != websocket.CloseNormalClosure {
		t.Errorf("close code %d, want 1000", code)
	}
	if got := f.Audio(2); len(got) != len(pcm) {
		t.Errorf("server received %d audio bytes, want %d", len(got), len(pcm))
	}
}

// placeholder renders a frame with briefing texts replaced, for the log.
func placeholder(fr realtimetest.Frame, texts ...string) string {
	out := string(fr.Raw)
	if fr.Type == "input_audio_buffer.append" {
		return `{"type":"input_audio_buffer.append","event_id":"` + fr.EventID + `","audio":"<base64 PCM16>"}`
	}
	texts = slices.Clone(texts)
	slices.SortFunc(texts, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, t := range texts {
		b, _ := json.Marshal(t)
		out = strings.ReplaceAll(out, strings.Trim(string(b), `"`), "<briefing>")
	}
	out = strings.ReplaceAll(out, `"text":"`+strings.Trim(mustJSON(BriefingPrefix), `"`)+`<briefing>"`, `"text":"<BriefingPrefix><briefing>"`)
	out = strings.ReplaceAll(out, `"text":"`+strings.Trim(mustJSON(RefreshPrefix), `"`)+`<briefing>"`, `"text":"<RefreshPrefix><briefing>"`)
	out = strings.ReplaceAll(out, `"text":"`+strings.Trim(mustJSON(ReseedPrefix), `"`)+`<briefing>"`, `"text":"<ReseedPrefix><briefing>"`)
	return out
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A connection is ready only once the server answered session.update: a
// briefing is not written before, and State says connecting.
func TestNotReadyUntilSessionUpdated(t *testing.T) {
	noLeaks(t)
	f := newFake(t, realtimetest.HoldSessionUpdated())
	s, _ := start(t, testConfig(f.URL()))
	if err := s.Brief(context.Background(), secret("Omar (consented) loves chess."), false); err != nil {
		t.Fatal(err)
	}
	f.WaitFrames(1)
	time.Sleep(50 * time.Millisecond)
	if n := len(f.AllFrames()); n != 1 {
		t.Errorf("%d frames before session.updated, want only session.update", n)
	}
	if st := s.State(); st.Phase != Connecting {
		t.Errorf("State = %+v, want Connecting", st)
	}
	if st := s.Stats(); st.Connected || !st.Pending || st.Connects != 0 {
		t.Errorf("Stats = %+v, want not connected, briefing pending", st)
	}
	if s.AppendAudio([]byte{1, 2}) {
		t.Error("audio queued before the session was ready")
	}
}

// A briefing counts as delivered only when the server acknowledged its
// item; one written to a server that never answers stays pending.
func TestBriefingDeliveredOnlyWhenAcknowledged(t *testing.T) {
	noLeaks(t)
	f := newFake(t, realtimetest.NoAck())
	s, _ := start(t, testConfig(f.URL()))
	if err := s.Brief(context.Background(), secret("Pia (consented) plays the oboe."), false); err != nil {
		t.Fatal(err)
	}
	f.WaitFrames(2)
	time.Sleep(50 * time.Millisecond)
	st := s.Stats()
	if st.ItemsSent != 1 || st.ItemsAcked != 0 || st.BriefingsDelivered != 0 || !st.Pending {
		t.Errorf("Stats = %+v, want 1 item sent, none acknowledged or delivered, pending", st)
	}
}

// Azure OpenAI's GA endpoint takes the key in an api-key header; the
// session.update carries the configured voice and semantic VAD.
func TestAzureAPIKeyAuthVoiceAndSemanticVAD(t *testing.T) {
	noLeaks(t)
	f := newFake(t, realtimetest.WithAuth(realtimetest.AuthAPIKey))
	cfg := testConfig(f.URL())
	cfg.Auth, cfg.Voice, cfg.TurnDetection = AuthAPIKey, "cedar", SemanticVAD
	s, _ := start(t, cfg)
	eventually(t, "ready", func() bool { return s.State().Phase == Ready })
	c := f.Conn(1)
	if c.Header.Get("api-key") != testKey || c.Header.Get("Authorization") != "" {
		t.Errorf("headers: api-key set %t, Authorization %q; want only api-key", c.Header.Get("api-key") == testKey, c.Header.Get("Authorization"))
	}
	up := f.AllFrames()[0]
	audio, _ := up.Session["audio"].(map[string]any)
	in, _ := audio["input"].(map[string]any)
	out, _ := audio["output"].(map[string]any)
	if td, _ := in["turn_detection"].(map[string]any); td["type"] != SemanticVAD {
		t.Errorf("turn_detection = %v, want semantic_vad", in["turn_detection"])
	}
	if out["voice"] != "cedar" {
		t.Errorf("voice = %v, want cedar", out["voice"])
	}
}

func TestStartRefusesUnknownAuthAndTurnDetection(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "wss://example.com/v1/realtime", Auth: "basic"},
		{URL: "wss://example.com/v1/realtime", TurnDetection: "push_to_talk"},
	} {
		if s, err := Start(context.Background(), cfg, nil); !errors.Is(err, ErrConfig) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("Start(%v) = %v, want ErrConfig", cfg, err)
		}
	}
}

// Bad input and failure: each case ends in one state (refused with why,
// or reconnecting with the attempt), one warning-or-worse log line with
// the code, no hot loop, no panic, and never the key in a log.
func TestBadEndpointsGiveOneStateAndOneLogLine(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []realtimetest.Option
		cfg       func(*Config)
		phase     Phase
		reason    Reason
		code      string
		permanent bool
	}{
		{name: "wrong key", cfg: func(c *Config) { c.APIKey = "sk-wrong-key-0000000000000000" }, phase: Refused, reason: ReasonKey, code: "invalid_api_key", permanent: true},
		{name: "wrong model", cfg: func(c *Config) { c.Model = "gpt-nonexistent" }, phase: Refused, reason: ReasonModel, code: "model_not_found", permanent: true},
		{name: "not a WebSocket", opts: []realtimetest.Option{realtimetest.NotWebSocket()}, phase: Refused, reason: ReasonNotRealtime, code: "http_200", permanent: true},
		{name: "garbage", opts: []realtimetest.Option{realtimetest.Garbage()}, phase: Refused, reason: ReasonNotRealtime, code: "not_realtime", permanent: true},
		{name: "closes at once", opts: []realtimetest.Option{realtimetest.CloseAtOnce()}, phase: Reconnecting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			f := newFake(t, tc.opts...)
			cfg := testConfig(f.URL())
			cfg.MinBackoff, cfg.MaxBackoff = 40*time.Millisecond, 200*time.Millisecond
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			s, logs := start(t, cfg)
			// The refusal may already have come (ErrRefused): either is fine.
			if err := s.Brief(context.Background(), secret("Quinn (consented) rows at dawn."), false); err != nil && !errors.Is(err, ErrRefused) {
				t.Fatal(err)
			}
			eventually(t, "the expected state", func() bool { return s.State().Phase == tc.phase })
			time.Sleep(400 * time.Millisecond) // long enough for a hot loop to show
			st := s.State()
			if st.Phase != tc.phase || st.Reason != tc.reason || st.Code != tc.code {
				t.Errorf("State = %+v, want phase %d reason %d code %q", st, tc.phase, tc.reason, tc.code)
			}
			attempts := f.Attempts()
			if tc.permanent && attempts != 1 {
				t.Errorf("%d attempts after a permanent refusal, want 1", attempts)
			}
			if !tc.permanent && (attempts < 2 || attempts > 12) {
				t.Errorf("%d attempts in ~0.5 s with 40–200 ms backoff: want a few, not a hot loop", attempts)
			}
			loud := logs.FilterLevelExact(zapcore.WarnLevel).All()
			loud = append(loud, logs.FilterLevelExact(zapcore.ErrorLevel).All()...)
			if len(loud) != 1 {
				for _, e := range loud {
					t.Logf("%s %s %v", e.Level, e.Message, e.ContextMap())
				}
				t.Fatalf("%d warning-or-worse log lines, want exactly 1", len(loud))
			}
			m := loud[0].ContextMap()
			if tc.permanent && m["code"] != tc.code {
				t.Errorf("log line %q %v lacks code %q", loud[0].Message, m, tc.code)
			}
			if !tc.permanent && m["close_code"] == nil && m["reason"] == nil {
				t.Errorf("log line %q %v names no code or reason", loud[0].Message, m)
			}
			if tc.permanent {
				if err := s.Brief(context.Background(), "more", true); !errors.Is(err, ErrRefused) {
					t.Errorf("Brief after refusal = %v, want ErrRefused", err)
				}
			}
		})
	}
}

// The fake answers the retired beta shapes with the live server's codes,
// so a client that regressed to them fails: the beta header gets
// beta_api_shape_disabled and close 4000, a beta session.update
// missing_required_parameter or unknown_parameter, a wrong key 401.
func TestFakeAnswersBetaShapesWithLiveCodes(t *testing.T) {
	noLeaks(t)
	f := newFake(t, realtimetest.AllowInvalid())
	url := f.URL() + "?model=" + testModel
	dial := func(h http.Header) (*websocket.Conn, *http.Response, error) {
		return websocket.DefaultDialer.Dial(url, h)
	}
	bearer := http.Header{"Authorization": {"Bearer " + testKey}}

	_, resp, err := dial(http.Header{"Authorization": {"Bearer nope"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized || bodyCode(resp) != "invalid_api_key" {
		t.Errorf("wrong key: %v %v, want 401 invalid_api_key", resp, err)
	}

	beta := bearer.Clone()
	beta.Set("OpenAI-Beta", "realtime=v1")
	ws, _, err := dial(beta)
	if err != nil {
		t.Fatal(err)
	}
	if ev := readEvent(t, ws); ev.Type != "error" || ev.Error.Code != "beta_api_shape_disabled" {
		t.Errorf("beta header answered %+v", ev)
	}
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, 4000) {
		t.Errorf("beta connection ended with %v, want close 4000", err)
	}
	ws.Close()

	ws, _, err = dial(bearer)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if ev := readEvent(t, ws); ev.Type != "session.created" {
		t.Fatalf("first event %q, want session.created", ev.Type)
	}
	for _, tc := range []struct{ frame, code string }{
		{`{"type":"session.update","session":{"modalities":["audio","text"],"instructions":"x"}}`, "missing_required_parameter"},
		{`{"type":"session.update","session":{"type":"realtime","modalities":["audio","text"]}}`, "unknown_parameter"},
		{`{"type":"session.update","session":{"type":"realtime","output_modalities":["audio","text"]}}`, "invalid_value"},
		{`{"type":"conversation.item.create","item":{"type":"message","role":"system","content":[{"type":"input_text","text":"x"}]},"extra":1}`, "unknown_parameter"},
	} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(tc.frame)); err != nil {
			t.Fatal(err)
		}
		if ev := readEvent(t, ws); ev.Type != "error" || ev.Error.Code != tc.code {
			t.Errorf("%s answered %+v, want error %s", tc.frame, ev, tc.code)
		}
	}
}

type testEvent struct {
	Type  string `json:"type"`
	Error struct {
		Code  string `json:"code"`
		Param string `json:"param"`
	} `json:"error"`
}

func readEvent(t *testing.T, ws *websocket.Conn) testEvent {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var ev testEvent
	_ = json.Unmarshal(b, &ev)
	return ev
}

// listener records what the audio path would hear.
type listener struct {
	mu      sync.Mutex
	pcm     []byte
	started []int
	stopped []int
}

func (l *listener) OutputAudio(_, _ string, pcm []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pcm = append(l.pcm, pcm...)
}

func (l *listener) SpeechStarted(ms int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = append(l.started, ms)
}

func (l *listener) SpeechStopped(ms int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = append(l.stopped, ms)
}

// Audio both ways: appended PCM reaches the server intact (base64 in a
// validated input_audio_buffer.append), output audio deltas and speech
// events reach the Listener, transcripts reach nothing and no log.
func TestAudioBothWaysAndTranscriptsNeverLogged(t *testing.T) {
	noLeaks(t)
	f := newFake(t)
	l := &listener{}
	cfg := testConfig(f.URL())
	cfg.Listener = l
	s, logs := start(t, cfg)
	eventually(t, "ready", func() bool { return s.State().Phase == Ready })

	in := make([]byte, 3*960)
	for i := range len(in) / 2 {
		binary.LittleEndian.PutUint16(in[2*i:], uint16(i*7))
	}
	for i := 0; i < 3; i++ {
		if !s.AppendAudio(in[i*960 : (i+1)*960]) {
			t.Fatal("AppendAudio refused")
		}
	}
	eventually(t, "audio received", func() bool { return len(f.Audio(1)) == len(in) })
	if got := f.Audio(1); !slices.Equal(got, in) {
		t.Error("the server received different audio than was appended")
	}

	out := make([]byte, 4800)
	for i := range out {
		out[i] = byte(i)
	}
	f.EmitAudio(1, "resp_1", "item_1", out, 1000)
	f.EmitSpeechStarted(1, 1234)
	f.EmitSpeechStopped(1, 2345)
	transcript := secret("Clankie says the secret word is marmalade-under-the-stairs.")
	f.EmitTranscript(1, "resp_1", "item_1", transcript)
	eventually(t, "audio and speech heard", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.pcm) == len(out) && len(l.stopped) == 1
	})
	l.mu.Lock()
	if !slices.Equal(l.pcm, out) || !slices.Equal(l.started, []int{1234}) {
		t.Errorf("listener heard %d bytes (equal %t), speech started %v", len(l.pcm), slices.Equal(l.pcm, out), l.started)
	}
	l.mu.Unlock()
	if st := s.Stats(); st.AudioBytesSent != int64(len(in)) || st.AudioBytesReceived != int64(len(out)) {
		t.Errorf("Stats = %+v", st)
	}
	_ = s.Close()
	for _, e := range logs.AllUntimed() {
		if strings.Contains(e.Message+" "+strings.Join(fieldStrings(e.ContextMap()), " "), "marmalade") {
			t.Errorf("a log line holds the transcript: %s", e.Message)
		}
	}
}

func fieldStrings(m map[string]any) []string {
	var out []string
	for k, v := range m {
		b, _ := json.Marshal(v)
		out = append(out, k+"="+string(b))
	}
	return out
}

// Audio is paused, not buffered, while no connection is ready: chunks
// appended meanwhile are dropped and counted.
func TestAudioDroppedWhileNotReady(t *testing.T) {
	noLeaks(t)
	cfg := testConfig("ws://" + freeAddr(t) + "/v1/realtime")
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	s, _ := start(t, cfg)
	for range 3 {
		if s.AppendAudio(make([]byte, 960)) {
			t.Fatal("AppendAudio queued with no connection")
		}
	}
	if st := s.Stats(); st.AudioChunksDropped != 3 {
		t.Errorf("Stats = %+v, want 3 dropped chunks", st)
	}
}

// Transient failures are retried and the session recovers: a rate-limited
// handshake (429), a server error event that ends the connection, and a
// rate-limit error while ready, which keeps it.
func TestTransientFailuresAreRetried(t *testing.T) {
	noLeaks(t)
	f := newFake(t, realtimetest.RejectWith(2, http.StatusTooManyRequests, "rate_limit_exceeded"))
	s, _ := start(t, testConfig(f.URL()))
	text := secret("Rosa (consented) paints murals.")
	if err := s.Brief(context.Background(), text, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delivered after two 429s", func() bool { return s.Stats().BriefingsDelivered == 1 })
	if st := s.Stats(); st.DialFailures != 2 {
		t.Errorf("Stats = %+v, want 2 dial failures", st)
	}
	f.EmitError(1, "invalid_request_error", "rate_limit_exceeded")
	time.Sleep(30 * time.Millisecond)
	if st := s.State(); st.Phase != Ready {
		t.Errorf("State after a rate-limit event = %+v, want still Ready", st)
	}
	f.EmitError(1, "server_error", "server_error")
	f.CloseConn(1, websocket.CloseInternalServerErr)
	frames := f.WaitConnFrames(2, 2)
	if frames[1].Text != ReseedPrefix+text {
		t.Errorf("after a server error the re-seed is %q", frames[1].Text)
	}
	eventually(t, "ready again", func() bool { return s.State().Phase == Ready })
}
