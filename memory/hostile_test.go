package memory

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
)

// Hostile clients against the real server as Start builds it (timeouts,
// header limit, body limit), on a free loopback port. "Promptly" is a second:
// far above what a healthy request takes here (milliseconds) and far below
// the server's own timeouts, so a starved server cannot pass.
const hostilePrompt = time.Second

type hostileServer struct {
	t    *testing.T
	addr string
	tr   *http.Transport
	http *http.Client
}

// startHostile starts the service with Start and Serve. Its cleanup closes
// the client's idle connections, stops the server and waits for Serve to
// return, so no goroutine outlives the test.
func startHostile(t *testing.T) *hostileServer {
	t.Helper()
	cfg := config.Memory{Addr: "127.0.0.1:0", MemoryRoot: config.MemoryRoot{Dir: filepath.Join(t.TempDir(), "memory")}, Tokens: testTokens,
		Log: config.Log{Level: "info", Format: "json"}}
	srv := serveForTest(t, cfg)
	tr := &http.Transport{}
	h := &hostileServer{t: t, addr: srv.Addr, tr: tr, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	t.Cleanup(tr.CloseIdleConnections) // runs before serveForTest's stop
	return h
}

// serveForTest starts the real service on cfg and serves it until the test
// ends, then stops it and fails the test unless it stopped cleanly within
// 25 s.
func serveForTest(t *testing.T, cfg config.Memory) *Server {
	t.Helper()
	srv, err := Start(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(25 * time.Second):
			t.Error("the server did not stop within 25s")
		}
	})
	return srv
}

// normal makes one ordinary authenticated request and returns how long it
// took; it fails the test unless the answer is a prompt 200.
func (h *hostileServer) normal() time.Duration {
	h.t.Helper()
	req, err := http.NewRequest("GET", "http://"+h.addr+"/v1/memory", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+op)
	start := time.Now()
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("a normal request failed: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("a normal request answered %d", resp.StatusCode)
	}
	if took > hostilePrompt {
		h.t.Fatalf("a normal request took %v", took)
	}
	return took
}

func (h *hostileServer) dial() net.Conn {
	h.t.Helper()
	c, err := net.DialTimeout("tcp", h.addr, 2*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// rawStatus writes head on a fresh connection, then body from a goroutine
// (which stops at the first write error, as when the server hangs up), and
// reads the response. It returns the response, how long it took to arrive,
// and how many body bytes were written by the time it did.
func (h *hostileServer) rawStatus(head string, body func(w io.Writer) int64) (*http.Response, []byte, time.Duration, int64) {
	h.t.Helper()
	c := h.dial()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		h.t.Fatalf("write the request head: %v", err)
	}
	var mu sync.Mutex
	var written int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if body != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := writerFunc(func(p []byte) (int, error) {
				select {
				case <-stop:
					return 0, errors.New("response arrived")
				default:
				}
				n, err := c.Write(p)
				mu.Lock()
				written += int64(n)
				mu.Unlock()
				return n, err
			})
			body(w)
		}()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	took := time.Since(start)
	mu.Lock()
	sent := written
	mu.Unlock()
	close(stop)
	if err != nil {
		c.Close()
		wg.Wait()
		h.t.Fatalf("no response (after %v, %d body bytes sent): %v", took, sent, err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	c.Close()
	wg.Wait()
	return resp, b, took, sent
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestHostileSlowHeadersDoNotStarveOthers: 32 clients dribble a request
// header one byte per 500 ms. Meanwhile normal requests are answered
// promptly, and the server cuts each dribbler off at ReadHeaderTimeout (5 s)
// rather than waiting for it.
func TestHostileSlowHeadersDoNotStarveOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 6 s: waits for ReadHeaderTimeout to cut the slow clients off")
	}
	h := startHostile(t)
	const slow = 32
	head := "GET /v1/memory HTTP/1.1\r\nHost: memory\r\nAuthorization: Bearer " + op + "\r\nX-Dribble: " + strings.Repeat("d", 64) + "\r\n\r\n"
	cut := make(chan time.Duration, slow)
	var wg sync.WaitGroup
	var conns []net.Conn
	start := time.Now()
	for range slow {
		c := h.dial()
		conns = append(conns, c)
		closed := make(chan struct{})
		wg.Add(2)
		go func() { // the server's side of the story: when does it hang up?
			defer wg.Done()
			defer close(closed)
			_, _ = io.Copy(io.Discard, c)
			cut <- time.Since(start)
		}()
		go func() {
			defer wg.Done()
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for i := 0; i < len(head); i++ {
				if _, err := c.Write([]byte{head[i]}); err != nil {
					return
				}
				select {
				case <-closed:
					return
				case <-tick.C:
				}
			}
		}()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()

	var took []time.Duration
	for time.Since(start) < 3*time.Second {
		took = append(took, h.normal())
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(took)
	t.Logf("%d normal requests while %d clients dribbled headers: median %v, max %v",
		len(took), slow, took[len(took)/2], took[len(took)-1])

	var cuts []time.Duration
	deadline := time.After(9 * time.Second)
	for len(cuts) < slow {
		select {
		case d := <-cut:
			cuts = append(cuts, d)
		case <-deadline:
			t.Fatalf("after 9 s only %d of %d slow clients were cut off; ReadHeaderTimeout is 5 s", len(cuts), slow)
		}
	}
	slices.Sort(cuts)
	t.Logf("slow clients cut off after %v to %v (ReadHeaderTimeout 5s)", cuts[0], cuts[len(cuts)-1])
	if cuts[0] < 4*time.Second {
		t.Errorf("a slow client was cut off after %v, before ReadHeaderTimeout", cuts[0])
	}
	t.Logf("after the cut-off a normal request took %v", h.normal())
}

// TestHostileOversizedHeaderIsRefused: a header block well over the 16 KiB
// MaxHeaderBytes is answered 431 without the server reading all of it, and
// the server keeps answering. net/http allows 4 KiB of slack over
// MaxHeaderBytes, so the test also measures the real threshold and reports it.
func TestHostileOversizedHeaderIsRefused(t *testing.T) {
	h := startHostile(t)
	headerOf := func(n int) string {
		return "GET /healthz HTTP/1.1\r\nHost: memory\r\nX-Big: " + strings.Repeat("a", n) + "\r\n\r\n"
	}
	for _, size := range []int{24 << 10, 64 << 10, 1 << 20} {
		var resp *http.Response
		var took time.Duration
		if size <= 64<<10 {
			resp, _, took, _ = h.rawStatus(headerOf(size), nil)
		} else { // a megabyte of header, streamed: the server must answer before it ends
			big := strings.Repeat("a", size)
			resp, _, took, _ = h.rawStatus("GET /healthz HTTP/1.1\r\nHost: memory\r\nX-Big: ", func(w io.Writer) int64 {
				n, _ := io.Copy(w, strings.NewReader(big+"\r\n\r\n"))
				return n
			})
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("%d KiB of header answered %d, want 431", size>>10, resp.StatusCode)
		}
		if took > hostilePrompt {
			t.Fatalf("%d KiB of header took %v to refuse", size>>10, took)
		}
		t.Logf("%d KiB header: %s in %v", size>>10, resp.Status, took)
		h.normal()
	}

	// The largest X-Big value still accepted, by bisection over [1 KiB, 64 KiB].
	lo, hi := 1<<10, 64<<10
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if resp, _, _, _ := h.rawStatus(headerOf(mid), nil); resp.StatusCode == http.StatusOK {
			lo = mid
		} else {
			hi = mid
		}
	}
	total := len(headerOf(lo))
	t.Logf("largest accepted request head: %d bytes (%.2f KiB; MaxHeaderBytes is %d, net/http adds 4096 of slack)", total, float64(total)/1024, 16<<10)
	if total > 16<<10+4096+64 {
		t.Errorf("a %d-byte request head was accepted; the limit is 16 KiB (plus net/http's 4 KiB slack)", total)
	}
	h.normal()
}

// TestHostileHugeBodyIsRefusedWithoutReadingIt: a 10 MiB body is refused
// with the JSON 413 long before it could have been read: announced by
// Content-Length (the answer comes from the headers; at most the first 8 KiB
// are ever sent) or streamed chunked (the answer arrives after about 64 KiB,
// while the client is still sending).
func TestHostileHugeBodyIsRefusedWithoutReadingIt(t *testing.T) {
	h := startHostile(t)
	const size = 10 << 20
	head := "POST /v1/memory/captain-episodes HTTP/1.1\r\nHost: memory\r\nAuthorization: Bearer " + op +
		"\r\nContent-Type: application/json\r\n"
	check := func(name string, resp *http.Response, body []byte, took time.Duration, sent int64) {
		t.Helper()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: answered %d, want 413", name, resp.StatusCode)
		}
		var e api.Error
		if err := json.Unmarshal(body, &e); err != nil || e.Code == "" || e.Message == "" {
			t.Fatalf("%s: 413 without the JSON error: %q", name, body)
		}
		if took > hostilePrompt {
			t.Fatalf("%s: took %v to refuse", name, took)
		}
		if sent >= size {
			t.Fatalf("%s: the whole %d bytes were sent before the refusal", name, sent)
		}
		t.Logf("%s: %s (%s) in %v, after %d of %d body bytes were sent", name, resp.Status, e.Code, took, sent, size)
	}

	resp, body, took, sent := h.rawStatus(head+fmt.Sprintf("Content-Length: %d\r\n\r\n", size), func(w io.Writer) int64 {
		n, _ := w.Write([]byte(`{"summary":"` + strings.Repeat("x", 8<<10-12)))
		return int64(n)
	})
	check("Content-Length 10 MiB", resp, body, took, sent)
	h.normal()

	// Paced at 16 KiB per 2 ms (the whole body would take 1.3 s), so what
	// was sent when the answer arrived is what the server had been offered,
	// not whatever loopback socket buffers happened to swallow.
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 16<<10, strings.Repeat("x", 16<<10))
	resp, body, took, sent = h.rawStatus(head+"Transfer-Encoding: chunked\r\n\r\n", func(w io.Writer) int64 {
		var n int64
		for n < size {
			m, err := io.WriteString(w, chunk)
			n += int64(m)
			if err != nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		return n
	})
	check("chunked 10 MiB", resp, body, took, sent)
	if sent > 1<<20 {
		t.Fatalf("chunked: %d bytes were offered before the refusal; the limit is 64 KiB", sent)
	}
	h.normal()
}

// TestHostileIdleConnectionsDoNotBlockRequests: 100 connections that never
// send a byte and 100 kept alive after one request, all held open, do not
// stop a normal request on a new connection from being answered promptly.
func TestHostileIdleConnectionsDoNotBlockRequests(t *testing.T) {
	h := startHostile(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for range 100 {
		conns = append(conns, h.dial())
	}
	for range 100 {
		c := h.dial()
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: memory\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("keep-alive request: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_ = c.SetDeadline(time.Time{})
	}
	opened := time.Since(start)

	fresh := &http.Transport{}
	defer fresh.CloseIdleConnections()
	h.http.Transport = fresh // a new connection, not one the harness already holds
	var took []time.Duration
	for range 10 {
		took = append(took, h.normal())
		fresh.CloseIdleConnections()
	}
	slices.Sort(took)
	t.Logf("with 200 idle connections open (opened in %v): 10 requests on new connections, median %v, max %v",
		opened, took[len(took)/2], took[len(took)-1])

	// The idle ones are still there: a kept-alive connection still serves.
	c := conns[len(conns)-1]
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: memory\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a kept-alive connection stopped serving: %v", err)
	} else {
		resp.Body.Close()
	}
}
