package realtimetest

import (
	"os"
	"testing"
)

func validator(t *testing.T) *Validator {
	t.Helper()
	p, err := SpecPath()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip("missing dependency: OpenAI's Realtime schemas: ", err)
	}
	v, err := NewValidator(p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The validator is strict the way the live server is: GA shapes pass,
// unknown fields, missing required ones, beta shapes and unknown events
// fail with the live codes, and the discriminated unions are judged by the
// branch the frame claims (a system message is not a function call).
func TestValidatorIsStrictWithLiveCodes(t *testing.T) {
	v := validator(t)
	for _, tc := range []struct {
		name, frame, code, param string
	}{
		{"GA session.update", `{"type":"session.update","event_id":"e1","session":{"type":"realtime","instructions":"x","output_modalities":["audio"],"audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"turn_detection":{"type":"semantic_vad"}},"output":{"format":{"type":"audio/pcm","rate":24000},"voice":"marin"}}}}`, "", ""},
		{"beta session.update", `{"type":"session.update","session":{"modalities":["audio","text"],"model":"gpt-realtime"}}`, "missing_required_parameter", "session.type"},
		{"beta modalities with a type", `{"type":"session.update","session":{"type":"realtime","modalities":["audio"]}}`, "unknown_parameter", "session.modalities"},
		{"unknown nested field", `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":24000,"bits":16}}}}}`, "unknown_parameter", "session.audio.input.format.bits"},
		{"wrong rate", `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":16000}}}}}`, "invalid_value", ""},
		{"system item", `{"type":"conversation.item.create","event_id":"e2","item":{"id":"brf_1","type":"message","role":"system","content":[{"type":"input_text","text":"hi"}]}}`, "", ""},
		{"system item, extra field in a part", `{"type":"conversation.item.create","item":{"type":"message","role":"system","content":[{"type":"input_text","text":"hi","lang":"en"}]}}`, "unknown_parameter", "item.content.0.lang"},
		{"item without content", `{"type":"conversation.item.create","item":{"type":"message","role":"system"}}`, "missing_required_parameter", "item.content"},
		{"audio append", `{"type":"input_audio_buffer.append","event_id":"e3","audio":"AAAA"}`, "", ""},
		{"audio append without audio", `{"type":"input_audio_buffer.append"}`, "missing_required_parameter", "audio"},
		{"response.cancel", `{"type":"response.cancel","response_id":"resp_1"}`, "", ""},
		{"truncate", `{"type":"conversation.item.truncate","item_id":"i","content_index":0,"audio_end_ms":10}`, "", ""},
		{"truncate without audio_end_ms", `{"type":"conversation.item.truncate","item_id":"i","content_index":0}`, "missing_required_parameter", "audio_end_ms"},
		{"user briefing item", `{"type":"conversation.item.create","event_id":"e4","item":{"id":"brf_2","type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`, "", ""},
		{"item delete", `{"type":"conversation.item.delete","event_id":"e5","item_id":"item_1"}`, "", ""},
		{"item delete without item_id", `{"type":"conversation.item.delete"}`, "missing_required_parameter", "item_id"},
		{"audio buffer clear", `{"type":"input_audio_buffer.clear","event_id":"e6"}`, "", ""},
		{"audio buffer commit", `{"type":"input_audio_buffer.commit"}`, "", ""},
		{"manual turns, transcription and tools", `{"type":"session.update","event_id":"e7","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"transcription":{"model":"gpt-4o-mini-transcribe"},"turn_detection":null}},"tools":[{"type":"function","name":"remember","description":"d","parameters":{"type":"object","properties":{"fact":{"type":"string"}}}}],"tool_choice":"auto"}}`, "", ""},
		{"turn detection as a string", `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"turn_detection":"none"}}}}`, "invalid_value", ""},
		{"transcription with an unknown field", `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1","diarize":true}}}}}`, "unknown_parameter", "session.audio.input.transcription.diarize"},
		{"function tool with an unknown field", `{"type":"session.update","session":{"type":"realtime","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object"}}]}}`, "unknown_parameter", ""},
		{"tool choice not an option", `{"type":"session.update","session":{"type":"realtime","tool_choice":"sometimes"}}`, "invalid_value", ""},
		{"function output", `{"type":"conversation.item.create","event_id":"e8","item":{"type":"function_call_output","call_id":"call_1","output":"{}"}}`, "", ""},
		{"function output without call_id", `{"type":"conversation.item.create","item":{"type":"function_call_output","output":"{}"}}`, "missing_required_parameter", "item.call_id"},
		{"bare response.create", `{"type":"response.create","event_id":"e9"}`, "", ""},
		{"unknown event", `{"type":"session.create"}`, "unknown_event", "type"},
		{"not JSON", `hello`, "invalid_json", ""},
	} {
		got := v.ClientEvent([]byte(tc.frame))
		switch {
		case tc.code == "" && got != nil:
			t.Errorf("%s: %s, want valid", tc.name, got)
		case tc.code != "" && got == nil:
			t.Errorf("%s: valid, want %s", tc.name, tc.code)
		case tc.code != "" && (got.Code != tc.code || (tc.param != "" && got.Param != tc.param)):
			t.Errorf("%s: %s, want %s (%s)", tc.name, got, tc.code, tc.param)
		}
	}
}

// Server events are checked too, so the fake cannot drift from the server.
func TestValidatorChecksServerEvents(t *testing.T) {
	v := validator(t)
	if got := v.ServerEvent([]byte(`{"type":"error","event_id":"ev","error":{"type":"invalid_request_error","code":"x","message":"m","param":null,"event_id":null}}`)); got != nil {
		t.Errorf("a valid error event: %s", got)
	}
	if got := v.ServerEvent([]byte(`{"type":"conversation.item.created","event_id":"ev","item":{}}`)); got == nil {
		t.Error("an invalid server event passed")
	}
}
