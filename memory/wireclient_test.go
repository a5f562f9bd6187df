package memory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// wireClient is the benchmarks' HTTP/1.1 client: keep-alive connections
// taken from a free list, each request written in one write, each answer
// read by its Content-Length. For these requests it puts on the wire what
// net/http's client does, with about half its CPU, and that matters here:
// the load and the service share two cores, so every microsecond the
// client spends is one the service does not get. It is strict: an answer
// without Content-Length, chunked, or malformed fails the call.
type wireClient struct {
	addr string // host:port

	mu   sync.Mutex
	free []*wireConn
}

type wireConn struct {
	c    net.Conn
	r    *bufio.Reader
	out  []byte
	used time.Time
}

// wireIdle is how long a connection may sit in the free list; the service
// closes idle ones after 90 s, so older ones are dropped rather than reused.
const wireIdle = 30 * time.Second

func newWireClient(addr string) *wireClient { return &wireClient{addr: addr} }

// do sends one request and returns the status and the whole answer.
func (wc *wireClient) do(token, method, route string, body []byte) (int, []byte, error) {
	c, err := wc.get()
	if err != nil {
		return 0, nil, err
	}
	status, answer, keep, err := c.roundTrip(wc.addr, token, method, route, body)
	if err != nil || !keep {
		c.c.Close()
		return status, answer, err
	}
	wc.put(c)
	return status, answer, nil
}

func (wc *wireClient) get() (*wireConn, error) {
	wc.mu.Lock()
	for len(wc.free) > 0 {
		c := wc.free[len(wc.free)-1]
		wc.free = wc.free[:len(wc.free)-1]
		if time.Since(c.used) < wireIdle {
			wc.mu.Unlock()
			return c, nil
		}
		c.c.Close()
	}
	wc.mu.Unlock()
	c, err := net.Dial("tcp", wc.addr)
	if err != nil {
		return nil, err
	}
	return &wireConn{c: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

func (wc *wireClient) put(c *wireConn) {
	c.used = time.Now()
	wc.mu.Lock()
	wc.free = append(wc.free, c)
	wc.mu.Unlock()
}

// close closes the idle connections.
func (wc *wireClient) close() {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	for _, c := range wc.free {
		c.c.Close()
	}
	wc.free = nil
}

// roundTrip writes one request and reads its answer; keep reports whether
// the connection may carry another.
func (c *wireConn) roundTrip(host, token, method, route string, body []byte) (status int, answer []byte, keep bool, err error) {
	w := c.out[:0]
	w = append(w, method...)
	w = append(w, ' ')
	w = append(w, route...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\nAuthorization: Bearer "...)
	w = append(w, token...)
	if body != nil {
		w = append(w, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		w = strconv.AppendInt(w, int64(len(body)), 10)
	}
	w = append(w, "\r\n\r\n"...)
	w = append(w, body...)
	c.out = w
	if _, err := c.c.Write(w); err != nil {
		return 0, nil, false, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, fmt.Errorf("read the status line: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	n, keep := -1, true
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, fmt.Errorf("read the headers: %w", err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("malformed header %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if n, err = strconv.Atoi(string(value)); err != nil || n < 0 {
				return 0, nil, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, false, errors.New("the answer is not sized (Transfer-Encoding)")
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		}
	}
	if n < 0 {
		return 0, nil, false, errors.New("the answer has no Content-Length")
	}
	answer = make([]byte, n)
	if _, err := io.ReadFull(c.r, answer); err != nil {
		return 0, nil, false, fmt.Errorf("read the answer: %w", err)
	}
	return status, answer, keep, nil
}
