package realtime

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Client events, in the OpenAI Realtime GA shape. Only the fields the
// bridge sends are declared, and every one of them is in the GA schema:
// realtimetest validates each frame strictly (unknown fields are errors).

type sessionUpdateEvent struct {
	Type    string        `json:"type"`
	EventID string        `json:"event_id"`
	Session sessionParams `json:"session"`
}

// sessionParams is RealtimeSessionCreateRequestGA as far as we set it. No
// model: in GA the URL fixes it.
type sessionParams struct {
	Type             string         `json:"type"` // "realtime"
	Instructions     string         `json:"instructions"`
	OutputModalities []string       `json:"output_modalities"`
	Audio            audioParams    `json:"audio"`
	Tools            []functionTool `json:"tools,omitempty"`
	ToolChoice       string         `json:"tool_choice,omitempty"` // "auto" when there are tools
}

// functionTool is RealtimeFunctionTool.
type functionTool struct {
	Type        string          `json:"type"` // "function"
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type audioParams struct {
	Input  audioInput  `json:"input"`
	Output audioOutput `json:"output"`
}

type audioInput struct {
	Format audioFormat `json:"format"`
	// Transcription is AudioTranscription; nil (omitted) leaves the
	// server's default, no transcription.
	Transcription *transcription `json:"transcription,omitempty"`
	// TurnDetection nil is sent as JSON null (never omitted): GA turns the
	// server's VAD off only for an explicit null, and an omitted field
	// would keep the session's server_vad default.
	TurnDetection *turnDetection `json:"turn_detection"`
}

type transcription struct {
	Model string `json:"model"`
}

type audioOutput struct {
	Format audioFormat `json:"format"`
	Voice  string      `json:"voice,omitempty"`
}

type audioFormat struct {
	Type string `json:"type"` // "audio/pcm"
	Rate int    `json:"rate"` // 24000
}

type turnDetection struct {
	Type string `json:"type"` // server_vad or semantic_vad
}

type itemCreateEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Item    item   `json:"item"`
}

type item struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// functionOutputItem is RealtimeConversationItemFunctionCallOutput.
type functionOutputItem struct {
	Type   string `json:"type"` // "function_call_output"
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

type functionOutputEvent struct {
	Type    string             `json:"type"`
	EventID string             `json:"event_id"`
	Item    functionOutputItem `json:"item"`
}

// bareEvent is a client event with no body: input_audio_buffer.commit,
// response.create (with the session's defaults).
type bareEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
}

type audioAppendEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Audio   string `json:"audio"` // base64 PCM16
}

type responseCancelEvent struct {
	Type       string `json:"type"`
	EventID    string `json:"event_id"`
	ResponseID string `json:"response_id,omitempty"`
}

type itemTruncateEvent struct {
	Type         string `json:"type"`
	EventID      string `json:"event_id"`
	ItemID       string `json:"item_id"`
	ContentIndex int    `json:"content_index"`
	AudioEndMs   int    `json:"audio_end_ms"`
}

// serverEvent is what the read loop looks at in a server event. Messages,
// transcripts and item contents are not decoded here, since a server may
// echo what it was sent: the one transcript the caller asked for (of an
// utterance) is decoded on its own by inputTranscript, and a function
// call's arguments go to the TurnListener and nowhere else.
type serverEvent struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		EventID string `json:"event_id"`
	} `json:"error"`
	Item *struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"item"`
	Response *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
	ResponseID   string `json:"response_id"`
	ItemID       string `json:"item_id"`
	CallID       string `json:"call_id"`   // response.function_call_arguments.done
	Name         string `json:"name"`      // response.function_call_arguments.done
	Arguments    string `json:"arguments"` // response.function_call_arguments.done
	Delta        string `json:"delta"`     // only read for output audio
	AudioStartMs int    `json:"audio_start_ms"`
	AudioEndMs   int    `json:"audio_end_ms"`
	// transcript is set, by inputTranscript, only for
	// conversation.item.input_audio_transcription.completed.
	transcript string
}

// newID returns prefix and random hex: content-free on purpose, since the
// server may log it, and it correlates nothing on our side.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return prefix + hex.EncodeToString(b)
}

func newEventID() string { return newID("evt_", 12) }

// newItemID is a client-chosen item id (the server keeps it), so the
// acknowledgement can be matched to the briefing it confirms.
func newItemID() string { return newID("brf_", 8) }

// newUtteranceID names an utterance's label item, so its acknowledgement
// is told apart from a briefing's.
func newUtteranceID() string { return newID("utt_", 8) }

// sessionUpdate is the session.update of cfg (already checked by Start).
// Manual turns are an explicit turn_detection null; the zero Config sends
// exactly what it sent before tools and transcription existed.
func sessionUpdate(cfg Config) ([]byte, error) {
	pcm := audioFormat{Type: "audio/pcm", Rate: SampleRate}
	in := audioInput{Format: pcm}
	if !cfg.ManualTurns {
		in.TurnDetection = &turnDetection{Type: cfg.TurnDetection}
	}
	if cfg.TranscribeModel != "" {
		in.Transcription = &transcription{Model: cfg.TranscribeModel}
	}
	params := sessionParams{
		Type:             "realtime",
		Instructions:     sessionInstructions(cfg.Instructions),
		OutputModalities: []string{"audio"},
		Audio:            audioParams{Input: in, Output: audioOutput{Format: pcm, Voice: cfg.Voice}},
	}
	for _, t := range cfg.Tools {
		params.Tools = append(params.Tools, functionTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: toolParameters(t.Parameters)})
	}
	if len(params.Tools) > 0 {
		params.ToolChoice = "auto"
	}
	return json.Marshal(sessionUpdateEvent{Type: "session.update", EventID: newEventID(), Session: params})
}

// emptyParameters is the JSON schema of a tool that takes no arguments:
// the schema wants parameters to be an object, never null.
const emptyParameters = `{"type":"object","properties":{}}`

func toolParameters(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage(emptyParameters)
	}
	return p
}

// briefingItem is a user message holding the briefing text as data. Not
// the system role: the briefing quotes what members wrote about themselves,
// and text in the highest-trust role would be read as the operator's own
// instructions. The rule that says how to read it (BriefingRule) is in the
// session's instructions, where no member's text ever goes.
func briefingItem(itemID, text string) (msg []byte, eventID string, err error) {
	eventID = newEventID()
	msg, err = json.Marshal(itemCreateEvent{
		Type:    "conversation.item.create",
		EventID: eventID,
		Item: item{
			ID:      itemID,
			Type:    "message",
			Role:    "user",
			Content: []contentPart{{Type: "input_text", Text: text}},
		},
	})
	return msg, eventID, err
}

// sessionInstructions are the caller's instructions followed by
// BriefingRule, so every session says how briefings are to be read whatever
// the caller wrote.
func sessionInstructions(own string) string {
	if strings.TrimSpace(own) == "" {
		return BriefingRule
	}
	return own + "\n\n" + BriefingRule
}

func audioAppend(pcm []byte) ([]byte, error) {
	return json.Marshal(audioAppendEvent{Type: "input_audio_buffer.append", EventID: newEventID(),
		Audio: base64.StdEncoding.EncodeToString(pcm)})
}

// labelItem is an utterance's label: a user message whose only content is
// the speaker's label as input_text. The audio committed right after it
// becomes the next user item, so the model reads who spoke, then what.
func labelItem(itemID, label string) ([]byte, error) {
	return json.Marshal(itemCreateEvent{
		Type:    "conversation.item.create",
		EventID: newEventID(),
		Item:    item{ID: itemID, Type: "message", Role: "user", Content: []contentPart{{Type: "input_text", Text: label}}},
	})
}

func audioCommit() (msg []byte, eventID string, err error) {
	eventID = newEventID()
	msg, err = json.Marshal(bareEvent{Type: "input_audio_buffer.commit", EventID: eventID})
	return msg, eventID, err
}

func responseCreate() ([]byte, error) {
	return json.Marshal(bareEvent{Type: "response.create", EventID: newEventID()})
}

func functionOutput(callID, output string) ([]byte, error) {
	return json.Marshal(functionOutputEvent{Type: "conversation.item.create", EventID: newEventID(),
		Item: functionOutputItem{Type: "function_call_output", CallID: callID, Output: output}})
}

// inputTranscript decodes the transcript of an input audio transcription
// event. Its result goes to the TurnListener and nowhere else.
func inputTranscript(raw []byte) (string, error) {
	var ev struct {
		Transcript string `json:"transcript"`
	}
	err := json.Unmarshal(raw, &ev)
	return ev.Transcript, err
}

func responseCancel(responseID string) ([]byte, error) {
	return json.Marshal(responseCancelEvent{Type: "response.cancel", EventID: newEventID(), ResponseID: responseID})
}

func itemTruncate(itemID string, contentIndex, audioEndMs int) ([]byte, error) {
	return json.Marshal(itemTruncateEvent{Type: "conversation.item.truncate", EventID: newEventID(),
		ItemID: itemID, ContentIndex: contentIndex, AudioEndMs: audioEndMs})
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
