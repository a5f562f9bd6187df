package realtimetest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
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
