package realtimetest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// client is a bare WebSocket client of the fake.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, s *Server) *client {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + DefaultKey}}
	ws, _, err := websocket.DefaultDialer.Dial(s.URL()+"?model="+DefaultModel, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	c := &client{t, ws}
	c.expect("session.created")
	return c
}

func (c *client) send(ev string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(ev)); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads events up to the next one of type typ and returns it.
func (c *client) expect(typ string) map[string]any {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", typ, err)
		}
		var ev map[string]any
		if err := json.Unmarshal(data, &ev); err != nil {
			c.t.Fatal(err)
		}
		if ev["type"] == typ {
			return ev
		}
	}
}

func ids(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Role+":"+it.ID)
	}
	return out
}

// TestFakeKeepsTheConversation: the fake keeps the server-side conversation
// the live server would — items from conversation.item.create, committed
// audio and responses; conversation.item.delete removes one and answers
// conversation.item.deleted, or an error for an unknown id; clear empties
// the input buffer — and drops all of it when the connection ends. Every
// event either way is validated against the GA schemas by the fake itself.
func TestFakeKeepsTheConversation(t *testing.T) {
	s := New(t)
	c := dial(t, s)
	c.send(`{"type":"conversation.item.create","item":{"id":"brf_1","type":"message","role":"user","content":[{"type":"input_text","text":"Ivy keeps snails."}]}}`)
	c.expect("conversation.item.done")
	pcm := base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4})
	c.send(`{"type":"input_audio_buffer.append","audio":"` + pcm + `"}`)
	c.send(`{"type":"input_audio_buffer.commit","event_id":"e_commit"}`)
	committed := c.expect("input_audio_buffer.committed")
	c.expect("conversation.item.done")
	answer := s.Respond(1, "Ivy, how are the snails?")
	c.expect("response.done")
	c.send(`{"type":"input_audio_buffer.append","audio":"` + pcm + `"}`)

	conv := s.Conversation(1)
	if len(conv) != 3 || conv[0].ID != "brf_1" || conv[0].Text != "Ivy keeps snails." ||
		conv[1].ID != committed["item_id"] || string(conv[1].Audio) != "\x01\x02\x03\x04" ||
		conv[2].ID != answer || conv[2].Role != "assistant" || conv[2].Text != "Ivy, how are the snails?" {
		t.Fatalf("conversation %+v, want the briefing, the committed audio and the answer", conv)
	}

	c.send(`{"type":"conversation.item.delete","event_id":"e_del","item_id":"brf_1"}`)
	if ev := c.expect("conversation.item.deleted"); ev["item_id"] != "brf_1" {
		t.Errorf("deleted %v, want brf_1", ev["item_id"])
	}
	c.send(`{"type":"conversation.item.delete","event_id":"e_del2","item_id":"brf_1"}`)
	e := c.expect("error")["error"].(map[string]any)
	if e["code"] != "item_delete_invalid_item_id" || e["event_id"] != "e_del2" {
		t.Errorf("deleting an unknown item: %v, want item_delete_invalid_item_id for e_del2", e)
	}
	c.send(`{"type":"input_audio_buffer.clear"}`)
	c.expect("input_audio_buffer.cleared")
	c.send(`{"type":"input_audio_buffer.commit","event_id":"e_commit2"}`)
	if e := c.expect("error")["error"].(map[string]any); e["code"] != "input_audio_buffer_commit_empty" {
		t.Errorf("committing a cleared buffer: %v", e)
	}
	items, pending := s.Live()
	if got := ids(items); len(got) != 2 || got[0] != "user:"+committed["item_id"].(string) || got[1] != "assistant:"+answer || len(pending) != 0 {
		t.Errorf("live %v, pending %d; want the audio item and the answer, nothing pending", got, len(pending))
	}

	// The conversation ends with the connection, before the close is answered.
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	if _, _, err := c.ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("close answered with %v", err)
	}
	if items, pending := s.Live(); len(items) != 0 || len(pending) != 0 {
		t.Errorf("after the close was answered the fake still holds %v, %d pending", ids(items), len(pending))
	}
}

// recordingTB keeps the fake's test failures instead of failing the test,
// for checking that the fake refuses a cue.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// TestFakeServesManualTurns: with turn_detection null the fake serves a
// group call's turns as the live server does: a commit is answered with
// committed and the scripted transcript (or its failure), and recorded
// with the label item sent right before its audio; an empty commit, a
// function_call_output for a call id never issued and a nameless or
// duplicate function tool are refused; an issued call's output and
// response.create are recorded; cueing the server's VAD fails the test.
func TestFakeServesManualTurns(t *testing.T) {
	rec := &recordingTB{TB: t}
	s := New(rec, AllowInvalid(), Transcribe(func(pcm []byte) (string, bool) {
		return "turn of " + strconv.Itoa(len(pcm)) + " bytes", pcm[0] != 0xFF
	}))
	c := dial(t, s)
	c.send(`{"type":"session.update","session":{"type":"realtime","tools":[{"type":"function","parameters":{"type":"object"}}]}}`)
	if e := c.expect("error")["error"].(map[string]any); e["code"] != "missing_required_parameter" || e["param"] != "session.tools.0.name" {
		t.Errorf("a nameless tool: %v", e)
	}
	c.send(`{"type":"session.update","session":{"type":"realtime","tools":[{"type":"function","name":"a"},{"type":"function","name":"a"}]}}`)
	if e := c.expect("error")["error"].(map[string]any); e["code"] != "invalid_value" || e["param"] != "session.tools.1.name" {
		t.Errorf("a duplicate tool: %v", e)
	}
	c.send(`{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"gpt-4o-mini-transcribe"},"turn_detection":null}},"tools":[{"type":"function","name":"remember","parameters":{"type":"object","properties":{}}}],"tool_choice":"auto"}}`)
	in := c.expect("session.updated")["session"].(map[string]any)["audio"].(map[string]any)["input"].(map[string]any)
	if td, set := in["turn_detection"]; !set || td != nil {
		t.Fatalf("session.updated turn_detection %v, want null", td)
	}

	c.send(`{"type":"input_audio_buffer.commit","event_id":"e_empty"}`)
	if e := c.expect("error")["error"].(map[string]any); e["code"] != "input_audio_buffer_commit_empty" || e["event_id"] != "e_empty" {
		t.Errorf("an empty commit: %v", e)
	}
	turn := func(label string, pcm []byte) {
		c.send(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"` + label + `"}]}}`)
		c.send(`{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(pcm[:2]) + `"}`)
		c.send(`{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(pcm[2:]) + `"}`)
		c.send(`{"type":"input_audio_buffer.commit"}`)
	}
	turn("<@1> (Ana)", []byte{1, 2, 3, 4})
	id := c.expect("input_audio_buffer.committed")["item_id"]
	if ev := c.expect("conversation.item.input_audio_transcription.completed"); ev["item_id"] != id || ev["transcript"] != "turn of 4 bytes" {
		t.Errorf("transcript %v for %v, want the script's for %v", ev["transcript"], ev["item_id"], id)
	}
	turn("<@2> (Ben)", []byte{0xFF, 0, 0, 0})
	id = c.expect("input_audio_buffer.committed")["item_id"]
	if ev := c.expect("conversation.item.input_audio_transcription.failed"); ev["item_id"] != id {
		t.Errorf("failure for %v, want %v", ev["item_id"], id)
	}
	// A label that something else followed labels nothing.
	c.send(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"<@3> (Cy)"}]}}`)
	c.send(`{"type":"response.create"}`)
	c.send(`{"type":"input_audio_buffer.append","audio":"AAAA"}`)
	c.send(`{"type":"input_audio_buffer.commit"}`)
	c.expect("conversation.item.input_audio_transcription.completed")
	got := s.Committed(1)
	if len(got) != 3 || got[0].Label != "<@1> (Ana)" || string(got[0].PCM) != "\x01\x02\x03\x04" || got[1].Label != "<@2> (Ben)" || got[2].Label != "" {
		t.Errorf("committed %+v, want Ana's and Ben's turns labelled and the third not", got)
	}

	c.send(`{"type":"conversation.item.create","event_id":"e_out","item":{"type":"function_call_output","call_id":"call_x","output":"{}"}}`)
	if e := c.expect("error")["error"].(map[string]any); e["event_id"] != "e_out" || e["param"] != "item.call_id" {
		t.Errorf("an output for a call never issued: %v", e)
	}
	s.EmitFunctionCall(1, "resp_1", "call_1", "remember", `{"fact":"f"}`)
	if ev := c.expect("response.function_call_arguments.done"); ev["call_id"] != "call_1" || ev["name"] != "remember" || ev["arguments"] != `{"fact":"f"}` {
		t.Errorf("arguments.done %v", ev)
	}
	c.expect("response.done")
	c.send(`{"type":"conversation.item.create","item":{"type":"function_call_output","call_id":"call_1","output":"{\"ok\":true}"}}`)
	c.expect("conversation.item.done")
	c.send(`{"type":"response.create"}`)
	c.send(`{"type":"input_audio_buffer.clear"}`)
	c.expect("input_audio_buffer.cleared")
	if outs := s.FunctionOutputs(1); !slices.Equal(outs, []FunctionOutput{{CallID: "call_1", Output: `{"ok":true}`}}) {
		t.Errorf("outputs %v, want call_1's only", outs)
	}
	if n := len(s.ResponseCreates(1)); n != 2 {
		t.Errorf("%d response.create recorded, want 2", n)
	}
	if len(rec.failures()) != 0 {
		t.Fatalf("the fake failed the test: %q", rec.failures())
	}

	s.EmitSpeechStarted(1, 10)
	s.EmitSpeechStopped(1, 20)
	if s.Commit(1) != "" {
		t.Error("the fake's VAD committed on a session without VAD")
	}
	if n := len(rec.failures()); n != 3 {
		t.Errorf("%d failures for three VAD cues on a manual session, want 3: %q", n, rec.failures())
	}
}
