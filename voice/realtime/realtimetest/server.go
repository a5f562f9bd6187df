// Package realtimetest is a fake OpenAI Realtime server that behaves like
// the GA one, for tests only: it validates every client frame strictly
// against OpenAI's published schemas (../shared/openai-realtime-spec), and
// answers the way the live server does — session.created on connect,
// session.updated after a valid update, conversation.item.added and .done
// for an item, conversation.item.deleted for a delete, committed and
// cleared for the input audio buffer, and error events with the live codes for the wrong shapes
// (beta_api_shape_disabled with close 4000, unknown_parameter,
// missing_required_parameter, invalid_api_key at the handshake as 401).
//
// It keeps each connection's server-side conversation (items created by
// the client, by committed audio, by responses; removed by
// conversation.item.delete) and drops it when the connection ends, so a
// test can ask what the model could still see (Live, Conversation).
//
// Every event the fake sends is validated too, so it cannot drift from the
// server it stands for. A client frame that does not validate fails the
// test, unless the test expects it (AllowInvalid).
package realtimetest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Defaults of a new Server.
const (
	DefaultKey   = "sk-realtimetest-key-0123456789abcdef"
	DefaultModel = "gpt-realtime"
)

// Auth is how the fake expects the key: OpenAI's bearer or Azure's api-key
// header.
type Auth string

// Auth modes.
const (
	AuthBearer Auth = "bearer"
	AuthAPIKey Auth = "api-key"
)

// Frame is one text frame a client sent, as received.
type Frame struct {
	Conn      int // 1-based, in accept order
	Raw       []byte
	Type      string
	EventID   string
	Violation *Violation // nil when the frame validated
	// For session.update: the session object as sent.
	Session map[string]any
	// For conversation.item.create: the item's id, role, first content
	// part's type and the text of its parts.
	ItemID, Role, ContentType, Text string
	// At is when the fake read the frame.
	At time.Time
}

// Item is one item of a connection's server-side conversation, as the
// fake keeps it: what a test must be able to look for after the client
// asked for it to be forgotten.
type Item struct {
	Conn int
	ID   string
	// Role is user, assistant or system.
	Role string
	// Text is the text of a message's text parts, or an assistant's
	// transcript.
	Text string
	// Audio is the PCM of a user audio item made by a commit.
	Audio []byte
}

// Conn is one accepted WebSocket connection.
type Conn struct {
	N      int
	Header http.Header
	Query  url.Values
	// Ended is closed when the server's handler for it has returned.
	Ended chan struct{}

	ws        *websocket.Conn
	wmu       sync.Mutex
	kill      chan struct{}
	killOnce  sync.Once
	closeCode int
	session   map[string]any
	audio     []byte // every byte appended, for Audio
	// convo is the server-side conversation and buffer the input audio not
	// committed yet; both end with the connection (gone), as the live
	// server's session does.
	convo  []Item
	buffer []byte
	gone   bool
}

// lastID is the id of the conversation's last item, or nil. s.mu is held.
func (c *Conn) lastID() any {
	if n := len(c.convo); n > 0 {
		return c.convo[n-1].ID
	}
	return nil
}

func (c *Conn) stop() { c.killOnce.Do(func() { close(c.kill) }) }

// Server is the fake. Configure it with options at New; read what it saw
// with its methods. Safe for concurrent use.
type Server struct {
	t   testing.TB
	srv *httptest.Server
	up  websocket.Upgrader
	val *Validator

	// configuration
	key          string
	auth         Auth
	models       []string
	reject       int // answer rejectStatus to this many upgrades first
	rejectStatus int
	rejectCode   string
	silent       int // connections numbered ≤ silent neither read nor write
	pingOpen     bool
	closeAtOnce  bool
	garbage      bool
	notWebSocket bool
	noAck        bool
	holdUpdated  bool
	echo         bool
	allowInvalid bool
	onFrame      func(Frame)

	mu       sync.Mutex
	attempts int
	closed   bool
	conns    []*Conn
	frames   []Frame
	pongs    int
	seq      int
	wg       sync.WaitGroup
}

// Option configures a Server.
type Option func(*Server)

// WithKey sets the only key the fake accepts (default DefaultKey).
func WithKey(k string) Option { return func(s *Server) { s.key = k } }

// WithAuth sets where the fake looks for the key (default AuthBearer).
func WithAuth(a Auth) Option { return func(s *Server) { s.auth = a } }

// WithModels sets the models the fake offers (default DefaultModel).
func WithModels(m ...string) Option { return func(s *Server) { s.models = m } }

// Reject503 answers the first n upgrade attempts with 503.
func Reject503(n int) Option {
	return RejectWith(n, http.StatusServiceUnavailable, "server_is_overloaded")
}

// RejectWith answers the first n upgrade attempts with status and a JSON
// error body carrying code (429 rate_limit_exceeded, say).
func RejectWith(n, status int, code string) Option {
	return func(s *Server) { s.reject, s.rejectStatus, s.rejectCode = n, status, code }
}

// Silent makes the first n connections neither read nor write, as a dead
// peer behind a live TCP connection would.
func Silent(n int) Option { return func(s *Server) { s.silent = n } }

// PingOnOpen pings the client on every connection.
func PingOnOpen() Option { return func(s *Server) { s.pingOpen = true } }

// CloseAtOnce closes every connection right after the upgrade.
func CloseAtOnce() Option { return func(s *Server) { s.closeAtOnce = true } }

// Garbage answers every connection with a frame that is not a realtime
// event instead of session.created.
func Garbage() Option { return func(s *Server) { s.garbage = true } }

// NotWebSocket answers every request with a plain HTTP 200 page.
func NotWebSocket() Option { return func(s *Server) { s.notWebSocket = true } }

// NoAck never acknowledges a conversation item.
func NoAck() Option { return func(s *Server) { s.noAck = true } }

// HoldSessionUpdated never answers session.update, as a server still
// setting up (or a stuck one) would.
func HoldSessionUpdated() Option { return func(s *Server) { s.holdUpdated = true } }

// EchoContent answers every item also with events that repeat its text the
// ways a careless client would log: an error whose message and param hold
// it, an event whose type is the text, and a frame that is not JSON.
func EchoContent() Option { return func(s *Server) { s.echo = true } }

// AllowInvalid lets client frames fail validation without failing the test
// (for tests that send wrong shapes on purpose).
func AllowInvalid() Option { return func(s *Server) { s.allowInvalid = true } }

// OnFrame calls f for every client frame as it arrives, on the
// connection's goroutine.
func OnFrame(f func(Frame)) Option { return func(s *Server) { s.onFrame = f } }

// New starts a fake on a fresh loopback port, stopped when the test ends.
func New(t testing.TB, opts ...Option) *Server { return NewOn(t, nil, opts...) }

// NewOn starts a fake on ln (nil: a fresh loopback port).
func NewOn(t testing.TB, ln net.Listener, opts ...Option) *Server {
	t.Helper()
	s := &Server{t: t, key: DefaultKey, auth: AuthBearer, models: []string{DefaultModel}}
	for _, o := range opts {
		o(s)
	}
	path, err := SpecPath()
	switch {
	case err != nil && os.Getenv("CI") == "true":
		t.Fatalf("realtimetest: %v", err)
	case err != nil:
		t.Logf("realtimetest: %v; client frames are NOT validated against the schemas", err)
	default:
		if s.val, err = NewValidator(path); err != nil {
			t.Fatalf("realtimetest: %v", err)
		}
	}
	s.srv = httptest.NewUnstartedServer(s)
	if ln != nil {
		_ = s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	s.srv.Start()
	t.Cleanup(s.Close)
	return s
}

// URL is the ws:// endpoint without the model parameter, as
// CLANKIE_REALTIME_URL would hold it.
func (s *Server) URL() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/v1/realtime" }

// Host is the endpoint's host:port.
func (s *Server) Host() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// Validator returns the fake's validator (nil when the spec is missing
// outside CI).
func (s *Server) Validator() *Validator { return s.val }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.wg.Add(1)
	defer s.wg.Done()
	s.mu.Lock()
	s.attempts++
	rejected := s.attempts <= s.reject
	s.mu.Unlock()
	if s.notWebSocket {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>Welcome</body></html>"))
		return
	}
	if rejected {
		httpError(w, s.rejectStatus, "server_error", s.rejectCode, "Try again later.")
		return
	}
	if !s.authorized(r.Header) {
		httpError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &Conn{ws: ws, Header: r.Header.Clone(), Query: r.URL.Query(), kill: make(chan struct{}), Ended: make(chan struct{})}
	defer close(c.Ended)
	defer ws.Close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns = append(s.conns, c)
	c.N = len(s.conns)
	silent := c.N <= s.silent
	s.mu.Unlock()

	switch {
	case silent:
		<-c.kill
		return
	case s.closeAtOnce:
		return
	case s.garbage:
		_ = s.writeRaw(c, []byte("hello from a web server, not a realtime endpoint"))
		s.readUntilClosed(c, nil)
		return
	}
	defer s.endConversation(c)
	ws.SetCloseHandler(func(code int, _ string) error {
		// The session, and with it the conversation, ends before the
		// close is answered: a client that waits for the answer knows
		// the server holds nothing of it any more.
		s.endConversation(c)
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
		return nil
	})
	ws.SetPongHandler(func(string) error {
		s.mu.Lock()
		s.pongs++
		s.mu.Unlock()
		return nil
	})
	model := r.URL.Query().Get("model")
	if r.Header.Get("OpenAI-Beta") != "" {
		s.sendError(c, "", "invalid_request_error", "beta_api_shape_disabled", "", "The beta interface has been retired.")
		s.closeWith(c, 4000, "beta_api_shape_disabled")
		s.readUntilClosed(c, nil)
		return
	}
	if !slices.Contains(s.models, model) {
		s.sendError(c, "", "invalid_request_error", "model_not_found", "model", "The model does not exist or you do not have access to it.")
		s.closeWith(c, 1008, "model_not_found")
		s.readUntilClosed(c, nil)
		return
	}
	c.session = map[string]any{
		"type": "realtime", "object": "realtime.session", "id": "sess_" + randomHex(8), "model": model,
		"expires_at": time.Now().Add(time.Hour).Unix(), "output_modalities": []any{"audio"}, "instructions": "",
		"audio": map[string]any{
			"input":  map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": 24000}, "turn_detection": map[string]any{"type": "server_vad"}},
			"output": map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": 24000}, "voice": "alloy"},
		},
	}
	s.send(c, map[string]any{"type": "session.created", "session": c.session})
	if s.pingOpen {
		c.wmu.Lock()
		_ = ws.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second))
		c.wmu.Unlock()
	}
	s.readUntilClosed(c, s.handle)
}

func (s *Server) authorized(h http.Header) bool {
	switch s.auth {
	case AuthAPIKey:
		return h.Get("api-key") == s.key
	default:
		return h.Get("Authorization") == "Bearer "+s.key
	}
}

func httpError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(must(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg, "param": nil}}))
}

// readUntilClosed reads client frames until the connection ends, recording
// each and handing valid ones to handle (nil: record only).
func (s *Server) readUntilClosed(c *Conn, handle func(*Conn, Frame)) {
	for {
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				s.mu.Lock()
				c.closeCode = ce.Code
				s.mu.Unlock()
			}
			return
		}
		if mt != websocket.TextMessage {
			s.record(c, Frame{Conn: c.N, Raw: data, Violation: &Violation{Code: "invalid_json", Message: "binary frame"}})
			continue
		}
		fr := s.decode(c, data)
		s.record(c, fr)
		if fr.Violation != nil {
			s.sendError(c, fr.EventID, "invalid_request_error", fr.Violation.Code, fr.Violation.Param, "Invalid client event.")
			continue
		}
		if handle != nil {
			handle(c, fr)
		}
	}
}

func (s *Server) record(c *Conn, fr Frame) {
	s.mu.Lock()
	s.frames = append(s.frames, fr)
	s.mu.Unlock()
	if fr.Violation != nil && !s.allowInvalid {
		s.t.Errorf("realtimetest: client frame %d on connection %d does not validate: %s", len(s.AllFrames()), c.N, fr.Violation)
	}
	if s.onFrame != nil {
		s.onFrame(fr)
	}
}

func (s *Server) decode(c *Conn, data []byte) Frame {
	fr := Frame{Conn: c.N, Raw: append([]byte(nil), data...), At: time.Now()}
	var raw struct {
		Type    string         `json:"type"`
		EventID string         `json:"event_id"`
		Session map[string]any `json:"session"`
		Item    *struct {
			ID      string `json:"id"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"item"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		fr.Violation = &Violation{Code: "invalid_json", Message: "the frame is not JSON"}
		return fr
	}
	fr.Type, fr.EventID, fr.Session = raw.Type, raw.EventID, raw.Session
	if it := raw.Item; it != nil {
		fr.ItemID, fr.Role = it.ID, it.Role
		for i, p := range it.Content {
			if i == 0 {
				fr.ContentType = p.Type
			}
			fr.Text += p.Text
		}
	}
	if s.val != nil {
		fr.Violation = s.val.ClientEvent(data)
	}
	if fr.Violation == nil && fr.Type == "session.update" {
		fr.Violation = checkSessionUpdate(raw.Session, c.Query.Get("model"))
	}
	return fr
}

// checkSessionUpdate holds the GA rules a schema cannot say: one output
// modality, and the model fixed by the URL.
func checkSessionUpdate(sess map[string]any, model string) *Violation {
	if mods, ok := sess["output_modalities"].([]any); ok && len(mods) != 1 {
		return &Violation{Code: "invalid_value", Param: "session.output_modalities", Message: "GA allows exactly one output modality"}
	}
	if m, ok := sess["model"].(string); ok && m != model {
		return &Violation{Code: "invalid_value", Param: "session.model", Message: "the model is fixed by the URL"}
	}
	return nil
}

// handle answers one valid client event the way the GA server does.
func (s *Server) handle(c *Conn, fr Frame) {
	switch fr.Type {
	case "session.update":
		s.mu.Lock()
		merge(c.session, fr.Session)
		sess := c.session
		s.mu.Unlock()
		if !s.holdUpdated {
			s.send(c, map[string]any{"type": "session.updated", "session": sess})
		}
	case "conversation.item.create":
		var ev struct {
			PreviousItemID string         `json:"previous_item_id"`
			Item           map[string]any `json:"item"`
		}
		_ = json.Unmarshal(fr.Raw, &ev)
		id := fr.ItemID
		if id == "" {
			id = "item_" + randomHex(8)
		}
		s.mu.Lock()
		prev := c.lastID()
		c.convo = append(c.convo, Item{Conn: c.N, ID: id, Role: fr.Role, Text: fr.Text})
		s.mu.Unlock()
		if s.echo {
			s.echoContent(c, fr)
		}
		if s.noAck {
			return
		}
		item := ev.Item
		item["id"], item["object"], item["status"] = id, "realtime.item", "completed"
		s.send(c, map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": item})
		s.send(c, map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": item})
	case "input_audio_buffer.append":
		var ev struct {
			Audio string `json:"audio"`
		}
		_ = json.Unmarshal(fr.Raw, &ev)
		pcm, err := base64.StdEncoding.DecodeString(ev.Audio)
		if err != nil {
			s.sendError(c, fr.EventID, "invalid_request_error", "invalid_value", "audio", "Invalid base64 audio.")
			return
		}
		s.mu.Lock()
		c.audio = append(c.audio, pcm...)
		c.buffer = append(c.buffer, pcm...)
		s.mu.Unlock()
	case "input_audio_buffer.commit":
		s.commit(c, fr.EventID)
	case "input_audio_buffer.clear":
		s.mu.Lock()
		c.buffer = nil
		s.mu.Unlock()
		s.send(c, map[string]any{"type": "input_audio_buffer.cleared"})
	case "conversation.item.delete":
		var ev struct {
			ItemID string `json:"item_id"`
		}
		_ = json.Unmarshal(fr.Raw, &ev)
		s.mu.Lock()
		i := slices.IndexFunc(c.convo, func(it Item) bool { return it.ID == ev.ItemID })
		if i >= 0 {
			c.convo = slices.Delete(c.convo, i, i+1)
		}
		s.mu.Unlock()
		if i < 0 {
			s.sendError(c, fr.EventID, "invalid_request_error", "item_delete_invalid_item_id", "item_id", "Error deleting item: the item does not exist.")
			return
		}
		s.send(c, map[string]any{"type": "conversation.item.deleted", "item_id": ev.ItemID})
	case "conversation.item.truncate":
		var ev struct {
			ItemID       string `json:"item_id"`
			ContentIndex int    `json:"content_index"`
			AudioEndMs   int    `json:"audio_end_ms"`
		}
		_ = json.Unmarshal(fr.Raw, &ev)
		s.send(c, map[string]any{"type": "conversation.item.truncated", "item_id": ev.ItemID, "content_index": ev.ContentIndex, "audio_end_ms": ev.AudioEndMs})
	case "response.cancel":
		// Nothing is generating in the fake; the live server answers so too.
		s.sendError(c, fr.EventID, "invalid_request_error", "response_cancel_not_active", "", "Cancellation failed: no active response found.")
	}
}

// commit turns the input audio buffer into a user audio item, as the
// live server does on input_audio_buffer.commit or when its VAD ends a
// turn; an empty buffer is an error. It returns the item's id ("" when
// nothing was committed).
func (s *Server) commit(c *Conn, clientEventID string) string {
	s.mu.Lock()
	if len(c.buffer) == 0 || c.gone {
		s.mu.Unlock()
		s.sendError(c, clientEventID, "invalid_request_error", "input_audio_buffer_commit_empty", "", "Error committing input audio buffer: the buffer is empty.")
		return ""
	}
	id := "item_" + randomHex(8)
	prev := c.lastID()
	c.convo = append(c.convo, Item{Conn: c.N, ID: id, Role: "user", Audio: c.buffer})
	c.buffer = nil
	s.mu.Unlock()
	item := map[string]any{"id": id, "object": "realtime.item", "type": "message", "status": "completed", "role": "user",
		"content": []any{map[string]any{"type": "input_audio"}}}
	s.send(c, map[string]any{"type": "input_audio_buffer.committed", "previous_item_id": prev, "item_id": id})
	s.send(c, map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": item})
	s.send(c, map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": item})
	return id
}

// endConversation drops a connection's conversation and input buffer: the
// live server's session ends with its connection.
func (s *Server) endConversation(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.convo, c.buffer, c.gone = nil, nil, true
}

func (s *Server) echoContent(c *Conn, fr Frame) {
	s.sendError(c, fr.EventID, "invalid_request_error", "echo_test", fr.Text, "could not use: "+fr.Text)
	_ = s.writeRaw(c, must(map[string]any{"type": fr.Text}))
	_ = s.writeRaw(c, []byte("not json: "+fr.Text))
}

// merge applies a session.update to the effective session, as the server
// does: fields present replace, nested objects merge.
func merge(into, from map[string]any) {
	for k, v := range from {
		if sub, ok := v.(map[string]any); ok {
			if dst, ok := into[k].(map[string]any); ok {
				merge(dst, sub)
				continue
			}
		}
		into[k] = v
	}
}

// send writes one server event with a fresh event_id, validated against
// the server schemas first.
func (s *Server) send(c *Conn, ev map[string]any) {
	s.mu.Lock()
	s.seq++
	ev["event_id"] = "event_" + randomHex(6)
	s.mu.Unlock()
	data := must(ev)
	if s.val != nil {
		if v := s.val.ServerEvent(data); v != nil {
			s.t.Errorf("realtimetest: the fake's own %v event does not validate: %s", ev["type"], v)
		}
	}
	_ = s.writeRaw(c, data)
}

func (s *Server) sendError(c *Conn, clientEventID, typ, code, param, msg string) {
	e := map[string]any{"type": typ, "code": code, "message": msg, "param": nil, "event_id": nil}
	if param != "" {
		e["param"] = param
	}
	if clientEventID != "" {
		e["event_id"] = clientEventID
	}
	s.send(c, map[string]any{"type": "error", "error": e})
}

func (s *Server) writeRaw(c *Conn, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

func (s *Server) closeWith(c *Conn, code int, text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

// ---- test controls ----

// EmitAudio sends pcm (PCM16 24 kHz mono) to connection n as
// response.output_audio.delta events of at most chunk bytes each.
func (s *Server) EmitAudio(n int, responseID, itemID string, pcm []byte, chunk int) {
	c := s.Conn(n)
	for len(pcm) > 0 {
		k := min(chunk, len(pcm))
		s.send(c, map[string]any{"type": "response.output_audio.delta", "response_id": responseID, "item_id": itemID,
			"output_index": 0, "content_index": 0, "delta": base64.StdEncoding.EncodeToString(pcm[:k])})
		pcm = pcm[k:]
	}
}

// Commit commits connection n's input audio buffer as a user audio item,
// as the server's VAD does at the end of a turn, and returns the item's
// id ("" when the buffer was empty).
func (s *Server) Commit(n int) string { return s.commit(s.Conn(n), "") }

// Respond makes connection n's model answer: an assistant audio item whose
// transcript is transcript joins the conversation, announced with the
// events of a whole response. It returns the item's id.
func (s *Server) Respond(n int, transcript string) string {
	c := s.Conn(n)
	respID, id := "resp_"+randomHex(8), "item_"+randomHex(8)
	s.mu.Lock()
	prev := c.lastID()
	c.convo = append(c.convo, Item{Conn: c.N, ID: id, Role: "assistant", Text: transcript})
	s.mu.Unlock()
	item := func(status string, content []any) map[string]any {
		return map[string]any{"id": id, "object": "realtime.item", "type": "message", "status": status, "role": "assistant", "content": content}
	}
	done := item("completed", []any{map[string]any{"type": "output_audio", "transcript": transcript}})
	s.send(c, map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "object": "realtime.response", "status": "in_progress", "output": []any{}}})
	s.send(c, map[string]any{"type": "response.output_item.added", "response_id": respID, "output_index": 0, "item": item("in_progress", []any{})})
	s.send(c, map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": item("in_progress", []any{})})
	s.EmitTranscript(n, respID, id, transcript)
	s.send(c, map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": done})
	s.send(c, map[string]any{"type": "response.output_item.done", "response_id": respID, "output_index": 0, "item": done})
	s.send(c, map[string]any{"type": "response.done", "response": map[string]any{"id": respID, "object": "realtime.response", "status": "completed", "output": []any{done}}})
	return id
}

// EmitTranscript sends a transcript of the model's audio to connection n.
func (s *Server) EmitTranscript(n int, responseID, itemID, text string) {
	c := s.Conn(n)
	s.send(c, map[string]any{"type": "response.output_audio_transcript.delta", "response_id": responseID, "item_id": itemID,
		"output_index": 0, "content_index": 0, "delta": text})
	s.send(c, map[string]any{"type": "response.output_audio_transcript.done", "response_id": responseID, "item_id": itemID,
		"output_index": 0, "content_index": 0, "transcript": text})
}

// EmitSpeechStarted tells connection n that the server's VAD heard speech.
func (s *Server) EmitSpeechStarted(n int, atMs int) {
	s.send(s.Conn(n), map[string]any{"type": "input_audio_buffer.speech_started", "audio_start_ms": atMs, "item_id": "item_" + randomHex(8)})
}

// EmitSpeechStopped tells connection n that the speech ended.
func (s *Server) EmitSpeechStopped(n int, atMs int) {
	s.send(s.Conn(n), map[string]any{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": atMs, "item_id": "item_" + randomHex(8)})
}

// EmitError sends an error event with code to connection n.
func (s *Server) EmitError(n int, typ, code string) {
	s.sendError(s.Conn(n), "", typ, code, "", "Test error.")
}

// CloseConn closes connection n with a close frame carrying code.
func (s *Server) CloseConn(n int, code int) {
	c := s.Conn(n)
	s.closeWith(c, code, "")
	_ = c.ws.Close()
	c.stop()
}

// Drop ends every live connection abruptly, without a close frame, as a
// crashed or restarted endpoint would.
func (s *Server) Drop() {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.Close()
		c.stop()
	}
}

// Close stops the server and waits for every handler, hijacked ones
// included (httptest.Server.Close does not wait for those).
func (s *Server) Close() {
	s.srv.Close()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Drop()
	s.wg.Wait()
}

// ---- what the fake saw ----

// AllFrames returns every client frame so far, in arrival order.
func (s *Server) AllFrames() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frames)
}

// Items returns the text of every conversation item received so far.
func (s *Server) Items() []string {
	var out []string
	for _, f := range s.AllFrames() {
		if f.Type == "conversation.item.create" {
			out = append(out, f.Text)
		}
	}
	return out
}

// WaitFrames waits until at least n frames arrived and returns them all.
func (s *Server) WaitFrames(n int) []Frame {
	s.t.Helper()
	var out []Frame
	Eventually(s.t, "the server receives frames", func() bool { out = s.AllFrames(); return len(out) >= n })
	return out
}

// WaitConnFrames waits until connection c received at least n frames and
// returns that connection's frames.
func (s *Server) WaitConnFrames(c, n int) []Frame {
	s.t.Helper()
	var out []Frame
	Eventually(s.t, "a connection receives frames", func() bool {
		out = out[:0]
		for _, f := range s.AllFrames() {
			if f.Conn == c {
				out = append(out, f)
			}
		}
		return len(out) >= n
	})
	return out
}

// WaitItems waits until at least n items arrived and returns their texts.
func (s *Server) WaitItems(n int) []string {
	s.t.Helper()
	Eventually(s.t, "the server receives briefing items", func() bool { return len(s.Items()) >= n })
	return s.Items()
}

// Conn waits for connection n (1-based) and returns it.
func (s *Server) Conn(n int) *Conn {
	s.t.Helper()
	var c *Conn
	Eventually(s.t, "the server accepts a connection", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.conns) >= n {
			c = s.conns[n-1]
		}
		return c != nil
	})
	return c
}

// Conns returns how many connections were accepted and how many ended.
func (s *Server) Conns() (accepted, ended int) {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		select {
		case <-c.Ended:
			ended++
		default:
		}
	}
	return len(conns), ended
}

// CloseCode returns the close code the client sent on c (0: none yet).
func (s *Server) CloseCode(c *Conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.closeCode
}

// Audio returns the PCM bytes appended on connection n so far.
func (s *Server) Audio(n int) []byte {
	c := s.Conn(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(c.audio)
}

// Conversation returns connection n's server-side conversation now (empty
// once the connection ended).
func (s *Server) Conversation(n int) []Item {
	c := s.Conn(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(c.convo)
}

// Live returns what the fake holds now for every connection still open:
// the items of their conversations, and their input audio not committed
// yet. A connection's conversation ends with it, as on the live server.
func (s *Server) Live() (items []Item, pending [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if c.gone {
			continue
		}
		items = append(items, c.convo...)
		if len(c.buffer) > 0 {
			pending = append(pending, c.buffer)
		}
	}
	return items, pending
}

// Attempts returns how many HTTP requests reached the endpoint.
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Pongs returns how many pongs the clients sent.
func (s *Server) Pongs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pongs
}

// Eventually polls cond until it holds, failing the test after 5 s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
