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
// Group calls are served as the live server serves manual turns: with
// turn_detection null nothing is committed or answered by the server on
// its own (cueing VAD events on such a session fails the test); each
// input_audio_buffer.commit is answered with input_audio_buffer.committed
// and, when the session asked for transcription, the transcript a
// per-test script makes of the committed audio (Transcribe). Committed
// shows each committed turn with the label item sent right before it. A
// function call is emitted on cue (EmitFunctionCall) and its
// function_call_output recorded (FunctionOutputs); one for a call id the
// fake never issued is refused. response.create is recorded
// (ResponseCreates), not answered: the model speaks only on cue.
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
	"strconv"
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
	// Type is message, function_call or function_call_output.
	Type string
	// Role is user, assistant or system (empty for function items).
	Role string
	// Text is the text of a message's text parts, an assistant's
	// transcript, a user audio item's transcript, a function call's
	// arguments or a function output.
	Text string
	// Audio is the PCM of a user audio item made by a commit.
	Audio []byte
}

// CommittedTurn is one input_audio_buffer.commit the client sent: the
// item it made, the text of the user item the client created right before
// its audio (empty when anything but that item and the appends came
// between the previous commit and this one's audio), and the audio.
type CommittedTurn struct {
	ItemID string
	Label  string
	PCM    []byte
}

// FunctionOutput is one function_call_output item the fake accepted.
type FunctionOutput struct {
	CallID string
	Output string
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
	// label is the text of the user message item created last, while only
	// appends followed it; a commit takes it.
	label     string
	committed []CommittedTurn
	outputs   []FunctionOutput
	creates   []time.Time
	// calls are the function call ids the fake issued on this connection.
	calls map[string]bool
}

// manual reports whether the session's turn detection is off (null).
// s.mu is held.
func (c *Conn) manual() bool {
	audio, _ := c.session["audio"].(map[string]any)
	in, _ := audio["input"].(map[string]any)
	td, set := in["turn_detection"]
	return set && td == nil
}

// transcribing reports whether the session asked for input transcription.
// s.mu is held.
func (c *Conn) transcribing() bool {
	audio, _ := c.session["audio"].(map[string]any)
	in, _ := audio["input"].(map[string]any)
	tr, _ := in["transcription"].(map[string]any)
	m, _ := tr["model"].(string)
	return m != ""
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
	transcribe   func(pcm []byte) (string, bool)

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

// Transcribe sets the script that transcribes committed audio on sessions
// that asked for transcription: f gets the committed PCM and returns the
// transcript, or false for a failed transcription
// (conversation.item.input_audio_transcription.failed). It runs on the
// connection's goroutine. Without it every transcript is empty.
func Transcribe(f func(pcm []byte) (string, bool)) Option {
	return func(s *Server) { s.transcribe = f }
}

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
	c := &Conn{ws: ws, Header: r.Header.Clone(), Query: r.URL.Query(), kill: make(chan struct{}), Ended: make(chan struct{}), calls: map[string]bool{}}
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
// modality, the model fixed by the URL, a transcription model named, and
// function tools named uniquely as the endpoint requires (the schema
// requires no name at all).
func checkSessionUpdate(sess map[string]any, model string) *Violation {
	if mods, ok := sess["output_modalities"].([]any); ok && len(mods) != 1 {
		return &Violation{Code: "invalid_value", Param: "session.output_modalities", Message: "GA allows exactly one output modality"}
	}
	if m, ok := sess["model"].(string); ok && m != model {
		return &Violation{Code: "invalid_value", Param: "session.model", Message: "the model is fixed by the URL"}
	}
	audio, _ := sess["audio"].(map[string]any)
	in, _ := audio["input"].(map[string]any)
	if tr, ok := in["transcription"].(map[string]any); ok {
		if m, _ := tr["model"].(string); m == "" {
			return &Violation{Code: "missing_required_parameter", Param: "session.audio.input.transcription.model", Message: "transcription needs a model"}
		}
	}
	tools, _ := sess["tools"].([]any)
	names := map[string]bool{}
	for i, t := range tools {
		tool, _ := t.(map[string]any)
		if tool["type"] != "function" {
			continue
		}
		param := "session.tools." + strconv.Itoa(i) + ".name"
		name, _ := tool["name"].(string)
		switch {
		case name == "":
			return &Violation{Code: "missing_required_parameter", Param: param, Message: "a function tool needs a name"}
		case !toolName(name):
			return &Violation{Code: "invalid_value", Param: param, Message: "a function name is 1 to 64 of a-z, A-Z, 0-9, _ and -"}
		case names[name]:
			return &Violation{Code: "invalid_value", Param: param, Message: "function names must be unique"}
		}
		names[name] = true
		if p, ok := tool["parameters"].(map[string]any); ok {
			if typ, _ := p["type"].(string); typ != "object" {
				return &Violation{Code: "invalid_value", Param: "session.tools." + strconv.Itoa(i) + ".parameters", Message: "function parameters must be a JSON schema of type object"}
			}
		}
	}
	return nil
}

func toolName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// handle answers one valid client event the way the GA server does.
func (s *Server) handle(c *Conn, fr Frame) {
	s.trackLabel(c, fr)
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
		it := Item{Conn: c.N, ID: id, Type: "message", Role: fr.Role, Text: fr.Text}
		if typ, _ := ev.Item["type"].(string); typ == "function_call_output" {
			callID, _ := ev.Item["call_id"].(string)
			output, _ := ev.Item["output"].(string)
			s.mu.Lock()
			issued := c.calls[callID]
			if issued {
				c.outputs = append(c.outputs, FunctionOutput{CallID: callID, Output: output})
			}
			s.mu.Unlock()
			if !issued {
				s.sendError(c, fr.EventID, "invalid_request_error", "invalid_value", "item.call_id", "No function call with this call_id in the conversation.")
				return
			}
			it = Item{Conn: c.N, ID: id, Type: typ, Text: output}
		}
		s.mu.Lock()
		prev := c.lastID()
		c.convo = append(c.convo, it)
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
	case "response.create":
		s.mu.Lock()
		c.creates = append(c.creates, fr.At)
		s.mu.Unlock()
	case "response.cancel":
		// Nothing is generating in the fake; the live server answers so too.
		s.sendError(c, fr.EventID, "invalid_request_error", "response_cancel_not_active", "", "Cancellation failed: no active response found.")
	}
}

// trackLabel keeps the text of a user message item created just before
// the next turn's audio, for Committed: any other frame but an append
// between it and the commit means the turn has no label.
func (s *Server) trackLabel(c *Conn, fr Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case fr.Type == "conversation.item.create" && fr.Role == "user":
		c.label = fr.Text
	case fr.Type == "input_audio_buffer.append", fr.Type == "input_audio_buffer.commit":
	default:
		c.label = ""
	}
}

// commit turns the input audio buffer into a user audio item, as the
// live server does on input_audio_buffer.commit or when its VAD ends a
// turn; an empty buffer is an error. On a session that asked for
// transcription, the item's transcript follows (from the Transcribe
// script). It returns the item's id ("" when nothing was committed).
func (s *Server) commit(c *Conn, clientEventID string) string {
	s.mu.Lock()
	if len(c.buffer) == 0 || c.gone {
		c.label = ""
		s.mu.Unlock()
		s.sendError(c, clientEventID, "invalid_request_error", "input_audio_buffer_commit_empty", "", "Error committing input audio buffer: the buffer is empty.")
		return ""
	}
	id := "item_" + randomHex(8)
	prev := c.lastID()
	pcm := c.buffer
	c.convo = append(c.convo, Item{Conn: c.N, ID: id, Type: "message", Role: "user", Audio: pcm})
	c.committed = append(c.committed, CommittedTurn{ItemID: id, Label: c.label, PCM: pcm})
	c.buffer, c.label = nil, ""
	transcribing := c.transcribing()
	s.mu.Unlock()
	item := map[string]any{"id": id, "object": "realtime.item", "type": "message", "status": "completed", "role": "user",
		"content": []any{map[string]any{"type": "input_audio"}}}
	s.send(c, map[string]any{"type": "input_audio_buffer.committed", "previous_item_id": prev, "item_id": id})
	s.send(c, map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": item})
	s.send(c, map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": item})
	if transcribing {
		s.transcribeItem(c, id, pcm)
	}
	return id
}

// transcribeItem sends the transcription of a committed item as the live
// server does (a delta, then completed), or its failure.
func (s *Server) transcribeItem(c *Conn, itemID string, pcm []byte) {
	text, ok := "", true
	if s.transcribe != nil {
		text, ok = s.transcribe(slices.Clone(pcm))
	}
	if !ok {
		s.send(c, map[string]any{"type": "conversation.item.input_audio_transcription.failed", "item_id": itemID, "content_index": 0,
			"error": map[string]any{"type": "transcription_error", "code": "audio_unintelligible", "message": "Audio could not be transcribed."}})
		return
	}
	s.mu.Lock()
	if i := slices.IndexFunc(c.convo, func(it Item) bool { return it.ID == itemID }); i >= 0 {
		c.convo[i].Text = text // the transcript is part of the conversation now
	}
	s.mu.Unlock()
	s.send(c, map[string]any{"type": "conversation.item.input_audio_transcription.delta", "item_id": itemID, "content_index": 0, "delta": text})
	s.send(c, map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": itemID, "content_index": 0,
		"transcript": text, "usage": map[string]any{"type": "duration", "seconds": float64(len(pcm)) / (24000 * 2)}})
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
// id ("" when the buffer was empty). On a session with manual turns the
// server has no VAD: cueing it fails the test.
func (s *Server) Commit(n int) string {
	c := s.Conn(n)
	if !s.vad(c, "Commit") {
		return ""
	}
	return s.commit(c, "")
}

// vad reports whether c's session has the server's turn detection on, and
// fails the test when it is off: a cue the live server would never give.
func (s *Server) vad(c *Conn, cue string) bool {
	s.t.Helper()
	s.mu.Lock()
	manual := c.manual()
	s.mu.Unlock()
	if manual {
		s.t.Errorf("realtimetest: %s cued on connection %d, whose turn_detection is null: the live server has no VAD there", cue, c.N)
	}
	return !manual
}

// EmitFunctionCall makes connection n's model call a function, with the
// events of a whole response as the live server sends them: response.created,
// response.output_item.added (a function_call item), conversation.item.added,
// response.function_call_arguments.delta and .done,
// conversation.item.done, response.output_item.done, response.done. The
// call id is then issued: a function_call_output for it is accepted.
// responseID may be empty (a fresh one).
func (s *Server) EmitFunctionCall(n int, responseID, callID, name, arguments string) {
	c := s.Conn(n)
	if responseID == "" {
		responseID = "resp_" + randomHex(8)
	}
	id := "item_" + randomHex(8)
	s.mu.Lock()
	prev := c.lastID()
	c.convo = append(c.convo, Item{Conn: c.N, ID: id, Type: "function_call", Text: arguments})
	c.calls[callID] = true
	s.mu.Unlock()
	item := func(status, args string) map[string]any {
		return map[string]any{"id": id, "object": "realtime.item", "type": "function_call", "status": status,
			"call_id": callID, "name": name, "arguments": args}
	}
	done := item("completed", arguments)
	s.send(c, map[string]any{"type": "response.created", "response": map[string]any{"id": responseID, "object": "realtime.response", "status": "in_progress", "output": []any{}}})
	s.send(c, map[string]any{"type": "response.output_item.added", "response_id": responseID, "output_index": 0, "item": item("in_progress", "")})
	s.send(c, map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": item("in_progress", "")})
	s.send(c, map[string]any{"type": "response.function_call_arguments.delta", "response_id": responseID, "item_id": id,
		"output_index": 0, "call_id": callID, "delta": arguments})
	s.send(c, map[string]any{"type": "response.function_call_arguments.done", "response_id": responseID, "item_id": id,
		"output_index": 0, "call_id": callID, "name": name, "arguments": arguments})
	s.send(c, map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": done})
	s.send(c, map[string]any{"type": "response.output_item.done", "response_id": responseID, "output_index": 0, "item": done})
	s.send(c, map[string]any{"type": "response.done", "response": map[string]any{"id": responseID, "object": "realtime.response", "status": "completed", "output": []any{done}}})
}

// Respond makes connection n's model answer: an assistant audio item whose
// transcript is transcript joins the conversation, announced with the
// events of a whole response. It returns the item's id.
func (s *Server) Respond(n int, transcript string) string {
	c := s.Conn(n)
	respID, id := "resp_"+randomHex(8), "item_"+randomHex(8)
	s.mu.Lock()
	prev := c.lastID()
	c.convo = append(c.convo, Item{Conn: c.N, ID: id, Type: "message", Role: "assistant", Text: transcript})
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

// EmitSpeechStarted tells connection n that the server's VAD heard speech
// (a session with manual turns has no VAD: cueing it fails the test).
func (s *Server) EmitSpeechStarted(n int, atMs int) {
	c := s.Conn(n)
	if s.vad(c, "EmitSpeechStarted") {
		s.send(c, map[string]any{"type": "input_audio_buffer.speech_started", "audio_start_ms": atMs, "item_id": "item_" + randomHex(8)})
	}
}

// EmitSpeechStopped tells connection n that the speech ended.
func (s *Server) EmitSpeechStopped(n int, atMs int) {
	c := s.Conn(n)
	if s.vad(c, "EmitSpeechStopped") {
		s.send(c, map[string]any{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": atMs, "item_id": "item_" + randomHex(8)})
	}
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

// Committed returns the turns committed on connection n so far, in order,
// each with the label item the client created right before its audio.
func (s *Server) Committed(n int) []CommittedTurn {
	c := s.Conn(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(c.committed)
}

// FunctionOutputs returns the function_call_output items connection n
// accepted so far (those for an issued call id), in order.
func (s *Server) FunctionOutputs(n int) []FunctionOutput {
	c := s.Conn(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(c.outputs)
}

// ResponseCreates returns when each response.create of connection n
// arrived, in order.
func (s *Server) ResponseCreates(n int) []time.Time {
	c := s.Conn(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(c.creates)
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
