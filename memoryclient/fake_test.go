package memoryclient

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// testBearer is distinctive so that any leak into an error string or a log
// line is found by a plain substring search.
const testBearer = "tok_LEAKCHECK_9f3c1e7a"

// seen is one request as the fake service received it.
type seen struct {
	Method      string
	Path        string // exactly as sent, still escaped
	RawQuery    string
	Auth        string
	ContentType string
	Body        []byte
}

// fake stands in for the memory service: it records every request and lets
// the test decide each answer (n is the 1-based call number).
type fake struct {
	mu      sync.Mutex
	reqs    []seen
	handle  func(w http.ResponseWriter, r *http.Request, n int)
	srv     *httptest.Server
	release chan struct{} // closed at cleanup so hanging handlers end
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fake {
	t.Helper()
	f := &fake{handle: handle, release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body)) // handlers may read it again
		path, rawQuery, _ := strings.Cut(r.RequestURI, "?")
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{
			Method: r.Method, Path: path, RawQuery: rawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: body,
		})
		n := len(f.reqs)
		f.mu.Unlock()
		f.handle(w, r, n)
	}))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.release) }) // runs before srv.Close
	return f
}

func (f *fake) calls() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fake) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := New(f.srv.URL, testBearer, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// hang blocks until the client gives up on the request or the test ends.
func (f *fake) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.release:
	}
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

func replyRaw(status int, contentType, body string) func(w http.ResponseWriter, r *http.Request, n int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}
