package realtime

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// frame is one text frame the fake server received, decoded.
type frame struct {
	Conn         int // 1-based, in accept order
	Type         string
	EventID      string
	Model        string
	Instructions string
	Modalities   []string
	ItemType     string
	Role         string
	ContentType  string
	Text         string
}

// serverConn is one accepted WebSocket connection.
type serverConn struct {
	n         int
	ws        *websocket.Conn
	header    http.Header
	query     url.Values
	kill      chan struct{} // closed to end a silent connection's handler
	killOnce  sync.Once
	ended     chan struct{} // closed when the handler has returned
	closeCode int           // close code the client sent, 0 if none
}

func (c *serverConn) stop() { c.killOnce.Do(func() { close(c.kill) }) }

// fakeServer is a realtime endpoint that records every frame it receives and
// echoes content back in ways a careless client would log: it echoes each
// item, reports an "error" whose message is the briefing, and sends an event
// whose type is the briefing.
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server
	up  websocket.Upgrader

	mu       sync.Mutex
	reject   int // answer 503 to this many upgrade attempts first
	silent   int // connections numbered ≤ silent neither read nor write
	pingOpen bool
	attempts int
	closed   bool
	conns    []*serverConn
	frames   []frame
	pongs    int
	wg       sync.WaitGroup
}

// newFake starts a fake server on a fresh loopback port; configure it
// through opts before any client connects.
func newFake(t *testing.T, opts ...func(*fakeServer)) *fakeServer {
	return newFakeOn(t, nil, opts...)
}

// newFakeOn starts a fake server on ln (nil: a fresh loopback port).
func newFakeOn(t *testing.T, ln net.Listener, opts ...func(*fakeServer)) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t}
	for _, o := range opts {
		o(f)
	}
	f.srv = httptest.NewUnstartedServer(f)
	if ln != nil {
		_ = f.srv.Listener.Close()
		f.srv.Listener = ln
	}
	f.srv.Start()
	t.Cleanup(f.close)
	return f
}

func (f *fakeServer) url() string {
	return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/v1/realtime"
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.wg.Add(1)
	defer f.wg.Done()
	f.mu.Lock()
	f.attempts++
	if f.attempts <= f.reject {
		f.mu.Unlock()
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	f.mu.Unlock()

	ws, err := f.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &serverConn{ws: ws, header: r.Header.Clone(), query: r.URL.Query(), kill: make(chan struct{}), ended: make(chan struct{})}
	defer close(c.ended)
	defer ws.Close()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.conns = append(f.conns, c)
	c.n = len(f.conns)
	silent := c.n <= f.silent
	pingOpen := f.pingOpen
	f.mu.Unlock()

	if silent {
		<-c.kill
		return
	}
	ws.SetPongHandler(func(string) error {
		f.mu.Lock()
		f.pongs++
		f.mu.Unlock()
		return nil
	})
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"session.created","event_id":"srv_1","session":{"id":"sess_1"}}`))
	if pingOpen {
		_ = ws.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second))
	}
	for {
		mt, data, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				f.mu.Lock()
				c.closeCode = ce.Code
				f.mu.Unlock()
			}
			return
		}
		if mt != websocket.TextMessage {
			continue
		}
		fr := decodeFrame(f.t, data)
		fr.Conn = c.n
		f.mu.Lock()
		f.frames = append(f.frames, fr)
		f.mu.Unlock()
		if fr.Type == "conversation.item.create" {
			f.echo(ws, data, fr.Text)
		}
	}
}

// echo answers an item the way a server that repeats content would.
func (f *fakeServer) echo(ws *websocket.Conn, data []byte, text string) {
	var raw struct {
		Item json.RawMessage `json:"item"`
	}
	_ = json.Unmarshal(data, &raw)
	created, _ := json.Marshal(map[string]any{"type": "conversation.item.created", "item": raw.Item})
	errEv, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
		"type": "invalid_request_error", "code": "echo_test", "message": "could not use: " + text, "param": text}})
	odd, _ := json.Marshal(map[string]any{"type": text})
	for _, m := range [][]byte{created, errEv, odd, []byte("not json: " + text)} {
		_ = ws.WriteMessage(websocket.TextMessage, m)
	}
}

func decodeFrame(t *testing.T, data []byte) frame {
	var raw struct {
		Type    string `json:"type"`
		EventID string `json:"event_id"`
		Session *struct {
			Model        string   `json:"model"`
			Instructions string   `json:"instructions"`
			Modalities   []string `json:"modalities"`
		} `json:"session"`
		Item *struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"item"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Errorf("client sent a frame that is not JSON (%d bytes)", len(data))
		return frame{}
	}
	fr := frame{Type: raw.Type, EventID: raw.EventID}
	if s := raw.Session; s != nil {
		fr.Model, fr.Instructions, fr.Modalities = s.Model, s.Instructions, s.Modalities
	}
	if it := raw.Item; it != nil {
		fr.ItemType, fr.Role = it.Type, it.Role
		if len(it.Content) != 1 {
			t.Errorf("item has %d content parts, want 1", len(it.Content))
		} else {
			fr.ContentType, fr.Text = it.Content[0].Type, it.Content[0].Text
		}
	}
	return fr
}

// waitFrames waits until the server has received at least n frames in all
// and returns them all.
func (f *fakeServer) waitFrames(n int) []frame {
	f.t.Helper()
	var out []frame
	eventually(f.t, "server receives frames", func() bool {
		out = f.allFrames()
		return len(out) >= n
	})
	return out
}

// waitConnFrames waits until connection c has received at least n frames and
// returns that connection's frames.
func (f *fakeServer) waitConnFrames(c, n int) []frame {
	f.t.Helper()
	var out []frame
	eventually(f.t, "connection receives frames", func() bool {
		out = out[:0]
		for _, fr := range f.allFrames() {
			if fr.Conn == c {
				out = append(out, fr)
			}
		}
		return len(out) >= n
	})
	return out
}

func (f *fakeServer) allFrames() []frame {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]frame(nil), f.frames...)
}

func (f *fakeServer) conn(n int) *serverConn {
	f.t.Helper()
	var c *serverConn
	eventually(f.t, "server accepts connection", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.conns) >= n {
			c = f.conns[n-1]
		}
		return c != nil
	})
	return c
}

func (f *fakeServer) closeCodeOf(c *serverConn) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return c.closeCode
}

func (f *fakeServer) attemptCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

func (f *fakeServer) pongCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pongs
}

// drop ends every live connection abruptly from the server side, without a
// close frame, as a crashed or restarted endpoint would.
func (f *fakeServer) drop() {
	f.mu.Lock()
	conns := append([]*serverConn(nil), f.conns...)
	f.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.Close()
		c.stop()
	}
}

// close stops the server and waits for every handler, hijacked ones
// included (httptest.Server.Close does not wait for those).
func (f *fakeServer) close() {
	f.srv.Close()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.drop()
	f.wg.Wait()
}

// eventually polls cond until it holds, failing the test after 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
