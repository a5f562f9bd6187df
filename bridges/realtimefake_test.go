package bridges

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeRealtime is an OpenAI Realtime-compatible endpoint that records every
// client event and can drop the connection.
type fakeRealtime struct {
	srv *httptest.Server
	mu  sync.Mutex
	// events are the client events in arrival order, across connections.
	events []realtimeEvent
	conns  []*websocket.Conn
	closed int // connections that ended
	auth   []string
}

type realtimeEvent struct {
	conn int
	typ  string
	text string // the item's text, for conversation.item.create
	raw  string
}

func newFakeRealtime(t *testing.T) *fakeRealtime {
	f := &fakeRealtime{}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		n := len(f.conns) - 1
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		defer func() {
			c.Close()
			f.mu.Lock()
			f.closed++
			f.mu.Unlock()
		}()
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			typ, text, _ := decodeRealtimeEvent(b)
			f.mu.Lock()
			f.events = append(f.events, realtimeEvent{conn: n, typ: typ, text: text, raw: string(b)})
			f.mu.Unlock()
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// decodeRealtimeEvent reads a client event's type and, for a conversation
// item, its text.
func decodeRealtimeEvent(b []byte) (typ, text string, err error) {
	var ev struct {
		Type string `json:"type"`
		Item struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"item"`
	}
	err = json.Unmarshal(b, &ev)
	for _, c := range ev.Item.Content {
		text += c.Text
	}
	return ev.Type, text, err
}

func (f *fakeRealtime) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") }

func (f *fakeRealtime) snapshot() (events []realtimeEvent, conns, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]realtimeEvent(nil), f.events...), len(f.conns), f.closed
}

// items answers the briefing texts received so far.
func (f *fakeRealtime) items() []string {
	evs, _, _ := f.snapshot()
	var out []string
	for _, e := range evs {
		if e.typ == "conversation.item.create" {
			out = append(out, e.text)
		}
	}
	return out
}

// waitItems waits for at least n briefing items and answers them all.
func (f *fakeRealtime) waitItems(t *testing.T, n int) []string {
	t.Helper()
	waitFor(t, 10*time.Second, "realtime briefing items", func() bool { return len(f.items()) >= n })
	return f.items()
}

// drop closes the newest connection from the server side.
func (f *fakeRealtime) drop() {
	f.mu.Lock()
	c := f.conns[len(f.conns)-1]
	f.mu.Unlock()
	c.Close()
}
