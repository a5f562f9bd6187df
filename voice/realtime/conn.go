package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
)

// run is the session's background loop: connect, serve the connection until
// it ends, pause, connect again, until the session's context ends. It is the
// only goroutine that dials or writes data frames, which gives gorilla its
// single writer and keeps session.update ahead of any briefing on every
// connection without a write lock.
func (s *Session) run() {
	defer close(s.done)
	defer s.cancel()
	failures := 0
	for {
		conn, resp, err := s.dial()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			failures++
			s.noteDialFailure(failures, resp, err)
			if !s.sleep(s.backoff(failures)) {
				return
			}
			continue
		}
		started := time.Now()
		s.serve(conn)
		if s.ctx.Err() != nil {
			return
		}
		// A connection that lived a while resets the backoff. One the server
		// drops at once does not, so a server that accepts and then hangs up
		// is not hammered at the minimum pause.
		if time.Since(started) >= s.cfg.MaxBackoff {
			failures = 0
		}
		failures++
		if !s.sleep(s.backoff(failures)) {
			return
		}
	}
}

// dial makes one connection attempt, bounded by the session's context so
// Close interrupts it. gorilla's DialContext honours the context only while
// connecting TCP; during the TLS and HTTP handshake it waits for the
// handshake timeout. So the attempt's dial functions are wrapped to remember
// the raw connection, and the session's end closes it, which makes Close
// prompt against a server that accepts and then stalls.
func (s *Session) dial() (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if s.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	h.Set("OpenAI-Beta", "realtime=v1")

	var (
		mu  sync.Mutex
		raw []net.Conn
	)
	remember := func(c net.Conn, err error) (net.Conn, error) {
		if c != nil {
			mu.Lock()
			raw = append(raw, c)
			mu.Unlock()
		}
		return c, err
	}
	d := *s.dialer // a copy: the caller's dialer is never modified
	base := d.NetDialContext
	if base == nil {
		if nd := d.NetDial; nd != nil {
			base = func(_ context.Context, network, addr string) (net.Conn, error) { return nd(network, addr) }
		} else {
			base = (&net.Dialer{}).DialContext
		}
	}
	d.NetDial = nil
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return remember(base(ctx, network, addr))
	}
	if tlsDial := d.NetDialTLSContext; tlsDial != nil {
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return remember(tlsDial(ctx, network, addr))
		}
	}

	aborted := make(chan struct{})
	stop := context.AfterFunc(s.ctx, func() {
		defer close(aborted)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range raw {
			_ = c.Close()
		}
	})
	conn, resp, err := d.DialContext(s.ctx, s.dialURL, h)
	if !stop() {
		// The session ended during the attempt; whatever it produced is
		// closed or about to be.
		<-aborted
		if conn != nil {
			_ = conn.Close()
		}
		return nil, nil, s.ctx.Err()
	}
	return conn, resp, err
}

// backoff is the pause after n consecutive failures (n ≥ 1). Its ceiling
// doubles from 2×MinBackoff up to MaxBackoff, and the pause is drawn from the
// upper half of [MinBackoff, ceiling], so it always lies within
// [MinBackoff, MaxBackoff] and is jittered at every step, the first and the
// capped ones included: bridges that lost the endpoint together do not all
// retry in step.
func (s *Session) backoff(n int) time.Duration {
	lo, hi := s.cfg.MinBackoff, s.cfg.MaxBackoff
	upper := lo
	for i := 0; i < n && upper < hi; i++ {
		upper *= 2
	}
	upper = min(upper, hi)
	floor := max(lo, upper/2)
	return floor + rand.N(upper-floor+1)
}

// sleep pauses for d unless the session ends first; it reports whether the
// session is still running.
func (s *Session) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// reader is the outcome of a connection's read loop: done is closed when it
// has returned, after err is set.
type reader struct {
	done chan struct{}
	err  error
}

// serve runs one connection from just after the handshake until it is gone,
// and returns only when every goroutine it started has ended.
func (s *Session) serve(conn *websocket.Conn) {
	conn.SetReadLimit(maxEventBytes)
	s.mu.Lock()
	s.stats.Connects++
	if s.stats.Connects > 1 {
		s.stats.Reconnects++
	}
	connects := s.stats.Connects
	s.connGen = 0
	s.mu.Unlock()

	rd := &reader{done: make(chan struct{})}
	go s.readLoop(conn, rd)

	// Backstop for Close: if a write is stuck on a server that stopped
	// reading, drop the socket rather than wait out the write timeout.
	connDone, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-connDone:
		case <-s.ctx.Done():
			t := time.NewTimer(2 * closeGrace)
			defer t.Stop()
			select {
			case <-connDone:
			case <-t.C:
				_ = conn.Close()
			}
		}
	}()

	err := s.converse(conn, rd, connects)
	_ = conn.Close()
	<-rd.done
	close(connDone)
	<-watchDone

	s.mu.Lock()
	s.stats.Connected = false
	s.connGen = 0
	s.mu.Unlock()
	if s.ctx.Err() != nil {
		s.log.Info("realtime session closed", zap.String("host", s.host), zap.Int("connects", connects))
		return
	}
	if err == nil {
		err = rd.err
	}
	s.log.Warn("realtime connection lost; reconnecting", append([]zap.Field{zap.String("host", s.host)}, s.describe(err)...)...)
}

// converse seeds a fresh connection (session.update, then the latest
// briefing if any) and then writes briefings and pings as they come due.
// It returns when the connection fails (with why) or the session closes (nil,
// after a normal-closure handshake).
func (s *Session) converse(conn *websocket.Conn, rd *reader, connects int) error {
	msg, err := sessionUpdate(s.cfg)
	if err != nil {
		return err
	}
	if err := s.write(conn, msg); err != nil {
		return err
	}
	s.mu.Lock()
	s.stats.Connected = true
	s.mu.Unlock()
	s.log.Info("realtime connected", zap.String("host", s.host), zap.Int("connects", connects))

	var ping <-chan time.Time
	if s.cfg.PingInterval > 0 {
		t := time.NewTicker(s.cfg.PingInterval)
		defer t.Stop()
		ping = t.C
	}
	for {
		if err := s.flush(conn); err != nil {
			return err
		}
		select {
		case <-s.kick:
		case <-ping:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)); err != nil {
				return err
			}
		case <-rd.done:
			return rd.err
		case <-s.ctx.Done():
			_ = conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(closeGrace))
			t := time.NewTimer(closeGrace)
			defer t.Stop()
			select {
			case <-rd.done: // the server answered the close frame
			case <-t.C:
			}
			return nil
		}
	}
}

// flush writes the latest briefing if this connection has not had it yet.
// A briefing already delivered on an earlier connection is a re-seed and
// gets ReseedPrefix; one the caller marked as a refresh gets RefreshPrefix.
func (s *Session) flush(conn *websocket.Conn) error {
	s.mu.Lock()
	b := s.latest
	due := b.gen != 0 && b.gen != s.connGen
	s.mu.Unlock()
	if !due {
		return nil
	}
	text, kind := b.text, "briefing"
	switch {
	case b.delivered:
		text, kind = ReseedPrefix+text, "reseed"
	case b.refresh:
		text, kind = RefreshPrefix+text, "refresh"
	}
	msg, err := briefingItem(text)
	if err != nil {
		return err
	}
	if err := s.write(conn, msg); err != nil {
		return err
	}
	s.mu.Lock()
	s.connGen = b.gen
	if s.latest.gen == b.gen {
		s.latest.delivered = true
	}
	s.stats.ItemsSent++
	s.mu.Unlock()
	s.log.Debug("realtime briefing sent", zap.String("kind", kind), zap.Int("length", len(text)))
	return nil
}

// write sends one text frame. Only the serve goroutine calls it.
func (s *Session) write(conn *websocket.Conn, msg []byte) error {
	if err := conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return conn.WriteMessage(websocket.TextMessage, msg)
}

// readLoop reads server events until the connection fails. Events are
// discarded; only their type is logged. With pings on, a connection that
// yields neither an event nor a pong for two ping intervals times out here.
// Server pings are answered by gorilla's default handler.
func (s *Session) readLoop(conn *websocket.Conn, rd *reader) {
	defer close(rd.done)
	extend := func() {}
	if iv := s.cfg.PingInterval; iv > 0 {
		extend = func() { _ = conn.SetReadDeadline(time.Now().Add(2 * iv)) }
		conn.SetPongHandler(func(string) error { extend(); return nil })
	}
	extend()
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			rd.err = err
			return
		}
		extend()
		s.noteEvent(data)
	}
}

// noteEvent logs a server event's type at debug level, and an error event's
// kind and code at warn level. Payloads and messages are never logged: a
// server may echo the briefing back.
func (s *Session) noteEvent(data []byte) {
	var ev serverEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		s.log.Debug("realtime event", zap.String("type", "unparseable"), zap.Int("bytes", len(data)))
		return
	}
	if ev.Type == "error" {
		var kind, code string
		if ev.Error != nil {
			kind, code = ev.Error.Type, ev.Error.Code
		}
		s.log.Warn("realtime server reported an error",
			zap.String("error_type", safeToken(kind)), zap.String("code", safeToken(code)))
		return
	}
	s.log.Debug("realtime event", zap.String("type", safeToken(ev.Type)))
}

// noteDialFailure counts a failed attempt and logs it: at warn for the first
// and every tenth, at debug otherwise, so a long outage does not flood logs.
func (s *Session) noteDialFailure(n int, resp *http.Response, err error) {
	s.mu.Lock()
	s.stats.DialFailures++
	s.mu.Unlock()
	fields := []zap.Field{zap.String("host", s.host), zap.Int("attempt", n)}
	if resp != nil {
		fields = append(fields, zap.Int("status", resp.StatusCode))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			fields = append(fields, zap.String("hint", "check CLANKIE_REALTIME_API_KEY"))
		}
	} else {
		fields = append(fields, zap.String("error", s.redact(err.Error())))
	}
	const msg = "realtime connect failed; retrying"
	if n == 1 || n%10 == 0 {
		s.log.Warn(msg, fields...)
	} else {
		s.log.Debug(msg, fields...)
	}
}

// describe turns why a connection ended into content-free log fields: a
// close code (never the close text, which the server chooses), a timeout, or
// a transport error with secrets redacted.
func (s *Session) describe(err error) []zap.Field {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case err == nil:
		return []zap.Field{zap.String("reason", "unknown")}
	case errors.As(err, &ce):
		return []zap.Field{zap.String("reason", "closed"), zap.Int("close_code", ce.Code)}
	case errors.As(err, &ne) && ne.Timeout():
		return []zap.Field{zap.String("reason", "timeout")}
	default:
		return []zap.Field{zap.String("reason", "error"), zap.String("error", s.redact(err.Error()))}
	}
}

// redact removes the key and the URL's secret-capable parts from a transport
// error's text before it is logged. The transport errors we log name hosts,
// not URLs, so this is a second line of defence.
func (s *Session) redact(msg string) string {
	if s.cfg.APIKey != "" {
		msg = strings.ReplaceAll(msg, s.cfg.APIKey, "[redacted]")
	}
	for _, u := range []string{s.dialURL, s.cfg.URL} {
		if u != "" {
			msg = strings.ReplaceAll(msg, u, "[url "+s.host+"]")
		}
	}
	if q := queryOf(s.dialURL); q != "" {
		msg = strings.ReplaceAll(msg, q, "[query]")
	}
	return msg
}

// queryOf is the raw query of a URL already validated by Start.
func queryOf(raw string) string {
	if _, q, ok := strings.Cut(raw, "?"); ok {
		return q
	}
	return ""
}
