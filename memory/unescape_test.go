package memory

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
)

// encodeNoHTML is what unescapeHTML must produce: encoding/json with HTML
// escaping off.
func encodeNoHTML(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestUnescapeHTMLAgreesWithAnEncoderThatDoesNotEscape(t *testing.T) {
	for _, s := range []string{
		"", "plain", "<@123> likes tea & biscuits", `\u003c typed by hand`, `\\u003c`, `a\`, "\u2028 \x00 \"<>\"",
		`\\\u0026`, "é<é>é&", strings.Repeat(`\`, 7) + "u003c",
	} {
		m, _ := json.Marshal(map[string]string{"body": s})
		if got, want := unescapeHTML(m), encodeNoHTML(t, map[string]string{"body": s}); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzUnescapeHTML(f *testing.F) {
	for _, s := range []string{"<@1> & <#2>", `\u003c`, `\\u0026`, "\xff<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, _ := json.Marshal([]string{s, s + "<", "&" + s})
		got := unescapeHTML(m)
		if want := encodeNoHTML(t, []string{s, s + "<", "&" + s}); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
		var fromGot, fromMarshal []string
		if json.Unmarshal(got, &fromGot) != nil || json.Unmarshal(m, &fromMarshal) != nil || fromGot[0] != fromMarshal[0] {
			t.Fatalf("%q reads back differently: %q vs %q", s, fromGot, fromMarshal)
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
