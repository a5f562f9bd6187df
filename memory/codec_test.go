package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// encodeNoHTML is what encodeAnswer must write: encoding/json with HTML
// escaping off, which the service's answers matched before its codec was
// go-json-experiment's.
func encodeNoHTML(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// answerFact is a fact of every optional field, for the answers' tests.
func answerFact(body string) api.Fact {
	at := time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC)
	exp := at.Add(time.Hour)
	return api.Fact{FactID: "fabc2345", Subject: api.Subject{GuildID: "10", UserID: "20"}, Kind: api.KindPersonFact,
		Body: body, Visibility: api.Visibility{Scope: api.ScopeChannel, ChannelID: "30"}, Confidence: 0.75, CreatedAt: at, UpdatedAt: at,
		ExpiresAt: &exp, SupersedesFactID: "fold2345", Expired: true,
		Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: "1", ProposerUserID: "20", SourceMessageID: "1300000000000000077"}}
}

// TestAnswersAreEncodingJSONs: every kind of answer is, byte for byte,
// what encoding/json wrote of it with HTML escaping off: the contract's
// field order, omitempty, null for a nil list, sorted map keys.
func TestAnswersAreEncodingJSONs(t *testing.T) {
	f := answerFact(`plays "bass" <&> é` + "\u2028")
	plain := f
	plain.ExpiresAt, plain.SupersedesFactID, plain.Expired, plain.Provenance = nil, "", false, api.Provenance{}
	for _, v := range []any{
		api.ProposalResponse{SchemaVersion: api.SchemaVersion, Fact: &f},
		api.ProposalResponse{SchemaVersion: api.SchemaVersion, Fact: &plain, Superseded: true, Evicted: 2},
		api.ProposalResponse{SchemaVersion: api.SchemaVersion, Reason: `no fact "f1" <here> & there`},
		api.ProposalResponse{SchemaVersion: api.SchemaVersion, Fact: &f, Replayed: true, Reason: "é\u2028"},
		api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: f.Subject, Facts: []api.Fact{f, plain}, Total: 7},
		api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: f.Subject, Facts: []api.Fact{}, Capacity: 128},
		api.RecallResponse{SchemaVersion: api.SchemaVersion},
		api.FactResponse{SchemaVersion: api.SchemaVersion, Fact: f},
		api.Catalog{SchemaVersion: api.SchemaVersion, Store: api.StoreFile, EpisodesPerLane: map[api.Lane]int{api.LaneOperator: 1, api.LaneGameplay: 2, api.LaneDiscordVoice: 3}},
		api.Error{Code: "invalid", Message: "a <b> & \x00"},
		map[string]bool{"ok": true},
	} {
		got, err := encodeAnswer(v)
		if want := encodeNoHTML(t, v); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %s (%v)\nwant %s", v, got, err, want)
		}
	}
	// Invalid UTF-8 is replaced by U+FFFD as encoding/json did, written
	// as the character rather than as \ufffd: the one difference, which
	// JSON allows (both read back the same).
	if got, err := encodeAnswer(api.Error{Message: "a\xffb"}); err != nil || string(got) != "{\"error\":\"\",\"message\":\"a\ufffdb\"}" {
		t.Errorf("invalid UTF-8: %s %v", got, err)
	}
	if _, err := encodeAnswer(api.FactResponse{Fact: api.Fact{Confidence: math.Inf(1)}}); err == nil {
		t.Error("an infinite confidence was encoded")
	}
}

func FuzzAnswerAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{"<@1> & <#2>", `\u003c`, `\\u0026`, "\xff<", "\u2028\u2029\x00"} {
		f.Add(s, 0.5)
	}
	f.Fuzz(func(t *testing.T, s string, confidence float64) {
		fact := answerFact(s)
		fact.FactID, fact.Provenance.CorrelationID, fact.Confidence = s, s, confidence
		v := api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: api.Subject{GuildID: s, UserID: s + "<"}, Facts: []api.Fact{fact}, Total: 1}
		got, err := encodeAnswer(v)
		if math.IsInf(confidence, 0) || math.IsNaN(confidence) {
			if err == nil {
				t.Fatalf("confidence %v was encoded", confidence)
			}
			return
		}
		want := encodeNoHTML(t, v)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if utf8.ValidString(s) && !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%q reads back differently:\n got %s\nwant %s", s, got, want)
		}
	})
}

// TestAnswersDoNotEscapeHTML: a fact about a mention reads as written in
// every answer that carries it (the proposal's, a recall's), not as
// \u003c@…\u003e.
func TestAnswersDoNotEscapeHTML(t *testing.T) {
	h := newHarness(t)
	body := "<@20> & <@21> share a <b>boat</b>"
	if r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", fact("html-1", "10", "20", "20", "30", body)); r.status != http.StatusCreated || !bytes.Contains(r.body, []byte(body)) {
		t.Fatalf("the proposal's answer: %d %s", r.status, r.body)
	}
	r := h.do(txt, "GET", "/v1/memory/discord-people/10/20?channelId=30", nil)
	if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(body)) || bytes.Contains(r.body, []byte(`\u003c`)) {
		t.Fatalf("recall: %d %s", r.status, r.body)
	}
	var rec api.RecallResponse
	r.decode(t, &rec)
	if len(rec.Facts) != 1 || rec.Facts[0].Body != body {
		t.Fatalf("recall reads back %+v", rec.Facts)
	}
}

// requestSeeds are request bodies decode must take or refuse exactly as
// encoding/json (DisallowUnknownFields, one value) did: as clients write
// them, and escapes, nulls, other cases, duplicates, unknown fields,
// numbers JSON does not allow, trailing data.
var requestSeeds = []string{
	`{"schemaVersion":1,"proposalId":"p-1","fact":{"subject":{"guildId":"100","userId":"200"},"kind":"preference","body":"likes green tea","visibility":{"scope":"channel","channelId":"300"},"confidence":0.8,"provenance":{"sourceSurface":"discord_text","sourceEventId":"9","correlationId":"c-1","proposerUserId":"200","channelId":"300"}}}`,
	` { "schemaVersion" : 1 , "proposalId" : "p-2" , "fact" : { "subject" : { "guildId" : "1" , "userId" : "2" } , "kind" : "fact" , "body" : "héllo — ☕" , "visibility" : { "scope" : "guild" } , "confidence" : 1e-1 , "expiresAt" : "2027-01-02T03:04:05.5+01:00" , "supersedesFactId" : "fabcdefg" , "provenance" : { } } } ` + "\n",
	`{"schemaVersion":1,"proposalId":"p-3","fact":{"subject":{"guildId":"100","userId":"200"},"kind":"person-fact","body":"plays bass","visibility":{"scope":"guild"},"confidence":0.9,"provenance":{"sourceSurface":"discord_text","sourceEventId":"9","proposerUserId":"201","channelId":"300","sourceMessageId":"1300000000000000077"}}}`,
	`{}`,
	`null`,
	`{"schemaVersion":-0,"fact":{"confidence":-1.25E+2}}`,
	`{"proposalId":"p\u002d1"}`,
	`{"fact":{"body":"a \"quoted\" word"}}`,
	`{"fact":{"expiresAt":null}}`,
	`{"ProposalId":"p"}`,
	`{"PROPOSALID":"p","Fact":{"BODY":"x"}}`,
	`{"proposalId":"a","proposalId":"b"}`,
	`{"fact":{"subject":{"guildId":"1"},"subject":{"userId":"2"}}}`,
	`{"extra":1}`,
	`{"fact":{"extra":1}}`,
	`{"schemaVersion":1.0}`,
	`{"schemaVersion":"1"}`,
	`{"schemaVersion":01}`,
	`{"fact":{"confidence":.5}}`,
	`{"fact":{"confidence":+1}}`,
	`{"fact":{"confidence":1e400}}`,
	`{"schemaVersion":99999999999999999999}`,
	`{"fact":{"expiresAt":"tomorrow"}}`,
	`{"fact":{"body":"` + "\xff" + `"}}`,
	`{"fact":{"body":"tab	inside"}}`,
	`{} {}`,
	`{}}`,
	`{"proposalId":"p",}`,
	`[]`,
	`"x"`,
	``,
	`{"proposalId":"p"`,
}

// decodeEncodingJSON is decode's rules as encoding/json applied them.
func decodeEncodingJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return errors.New("trailing data")
	}
	return nil
}

// FuzzDecodeAgreesWithEncodingJSON holds decode to encoding/json's rules:
// the same bodies taken, with the same values, for a proposal and an edit.
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"body":"x","expiresAt":null,"visibility":{"scope":"guild"},"confidence":1}`))
	f.Add([]byte(`{"expiresAt":"2027-01-02T03:04:05Z","kind":"preference"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		agree(t, body, func() any { return new(api.ProposalRequest) })
		agree(t, body, func() any { return new(api.FactPatch) })
	})
}

func agree(t *testing.T, body []byte, zero func() any) {
	t.Helper()
	got, want := zero(), zero()
	err := decodeBytes(body, got)
	stdErr := decodeEncodingJSON(body, want)
	if (err == nil) != (stdErr == nil) {
		t.Fatalf("%T %q: decode %v, encoding/json %v", got, body, err, stdErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%T %q decoded differently:\n got %+v\nwant %+v", got, body, got, want)
	}
	if fe, ok := fault.As(err); err != nil && (!ok || fe.Code != "invalid_json") {
		t.Fatalf("%q: %v", body, err)
	}
}

func TestDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range requestSeeds {
		agree(t, []byte(s), func() any { return new(api.ProposalRequest) })
	}
}

// TestDecodeSentences: each refusal says what is wrong in a sentence of
// its own, and never echoes the body.
func TestDecodeSentences(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{``, "empty or cut short"},
		{`{"proposalId":"secret`, "empty or cut short"},
		{`{"proposalId":"p"} {}`, "exactly one JSON object"},
		{`{"proposalId":"p"}}`, "exactly one JSON object"},
		{`{"proposalId":"p",}`, "not valid JSON (at byte"},
		{`{"secretField":1}`, `Unknown field "secretField"; this service accepts only the fields of its contract.`},
		{`{"fact":{"confidence":"secret"}}`, `Field "fact.confidence" must be float64.`},
		{`{"schemaVersion":"secret"}`, `Field "schemaVersion" must be int.`},
		{`{"fact":{"expiresAt":"secret"}}`, "not valid JSON for this route"},
	} {
		var p api.ProposalRequest
		err := decodeBytes([]byte(c.body), &p)
		fe, ok := fault.As(err)
		if !ok || !strings.Contains(fe.Message, c.want) || strings.Contains(strings.ToLower(fe.Message), "secret") && !strings.Contains(c.want, "secret") {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
}
