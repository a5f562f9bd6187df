package realtime

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

// Client events, in the OpenAI Realtime API's shape. Only the fields the
// bridge needs are declared.

type sessionUpdateEvent struct {
	Type    string        `json:"type"`
	EventID string        `json:"event_id"`
	Session sessionParams `json:"session"`
}

type sessionParams struct {
	Model        string   `json:"model,omitempty"`
	Instructions string   `json:"instructions,omitempty"`
	Modalities   []string `json:"modalities"`
}

type itemCreateEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Item    item   `json:"item"`
}

type item struct {
	Type    string        `json:"type"`
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// serverEvent is what the read loop looks at in a server event: its type,
// and for an "error" event the machine-readable kind and code. Messages and
// payloads are never decoded, since a server may echo what it was sent.
type serverEvent struct {
	Type  string `json:"type"`
	Error *struct {
		Type string `json:"type"`
		Code string `json:"code"`
	} `json:"error"`
}

// newEventID returns a random client event id. It is content-free on
// purpose: the server may log it, and it correlates nothing on our side.
func newEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "evt_" + hex.EncodeToString(b[:])
}

func sessionUpdate(cfg Config) ([]byte, error) {
	return json.Marshal(sessionUpdateEvent{
		Type:    "session.update",
		EventID: newEventID(),
		Session: sessionParams{
			Model:        cfg.Model,
			Instructions: cfg.Instructions,
			Modalities:   []string{"audio", "text"},
		},
	})
}

// briefingItem is a system message holding the briefing text. System role,
// because the briefing is context for the model, not something a speaker
// said.
func briefingItem(text string) ([]byte, error) {
	return json.Marshal(itemCreateEvent{
		Type:    "conversation.item.create",
		EventID: newEventID(),
		Item: item{
			Type:    "message",
			Role:    "system",
			Content: []contentPart{{Type: "input_text", Text: text}},
		},
	})
}

// safeToken returns s when it looks like a protocol token (event types,
// error kinds and codes: lower-case letters, digits, '.', '_', at most 64
// bytes), and "unrecognized" otherwise. Server strings are logged only
// through it, so a misbehaving server cannot put sentences or names into our
// logs.
func safeToken(s string) string {
	if s == "" {
		return "none"
	}
	if len(s) > 64 {
		return "unrecognized"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_':
		default:
			return "unrecognized"
		}
	}
	return s
}
