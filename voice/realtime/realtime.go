// Package realtime is the voice bridge's client for one session with an
// OpenAI Realtime-compatible voice model over a WebSocket.
//
// It exists to hand the model its briefing (what consented speakers told
// Clankie about themselves) without letting the realtime endpoint slow down
// or leak anything from the Discord side:
//
//   - Non-blocking: Start returns at once and connects in the background, so a
//     Discord interaction is never answered late because the endpoint is slow
//     or down. Brief keeps the latest briefing and delivers it as soon as a
//     connection is up.
//   - Self-healing: when the connection drops, the session reconnects with
//     jittered exponential backoff and re-seeds the new server session
//     (session.update, then the latest briefing again, marked as a refresh),
//     because a fresh server session remembers nothing of the old one.
//   - Private: briefings are memory content and the API key is a secret.
//     Neither appears in a log line, an error string or a panic; logs carry
//     the endpoint's host, counts, close codes and server event types only.
package realtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for the zero values in Config. The backoff bounds keep a dead
// endpoint at one attempt every few seconds while a blip heals in well under
// a second; the ping interval is short enough to notice a silently dead
// connection within a minute and long enough to cost nothing.
const (
	DefaultMinBackoff   = 200 * time.Millisecond
	DefaultMaxBackoff   = 5 * time.Second
	DefaultPingInterval = 20 * time.Second
)

const (
	// writeTimeout bounds one frame write, so a server that stops reading
	// cannot stall the session forever; the connection is then replaced.
	writeTimeout = 10 * time.Second
	// handshakeTimeout bounds the opening handshake of the default dialer.
	handshakeTimeout = 10 * time.Second
	// closeGrace is how long Close waits for the server to answer the close
	// frame (and the longest a stuck write can hold Close up).
	closeGrace = time.Second
	// maxEventBytes bounds one server event we must buffer before discarding
	// it. Audio deltas are far smaller; a larger frame means a broken server.
	maxEventBytes = 16 << 20
)

// Prefixes that mark a briefing that is not the first one the model sees.
// A refresh is a new conversation item rather than an edit of the old one
// (the protocol has no edit), so its text has to tell the model which
// briefing wins.
const (
	// RefreshPrefix begins a briefing sent with refresh=true.
	RefreshPrefix = "[Briefing refresh] This briefing replaces every earlier briefing in this conversation; rely only on what follows.\n\n"
	// ReseedPrefix begins the latest briefing when it is sent again after a
	// reconnect. The new server session may or may not have kept the old
	// conversation, so the text says it is a refresh either way.
	ReseedPrefix = "[Briefing refresh after reconnect] The connection to you was re-established; this briefing replaces every earlier briefing in this conversation; rely only on what follows.\n\n"
)

// Errors returned by Start and Brief. They are sentinels (compare with
// errors.Is) and never carry a briefing, the key, or the URL's query, so a
// caller may log them as they are.
var (
	// ErrConfig: Start was given a configuration it cannot use (no URL, not
	// ws:// or wss://, no host, or user info in the URL).
	ErrConfig = errors.New("realtime: invalid configuration")
	// ErrClosed: the session was closed (Close, or the context given to
	// Start ended); nothing more will be sent.
	ErrClosed = errors.New("realtime: session closed")
	// ErrEmptyBriefing: Brief was given an empty or blank text. An empty
	// item would tell the model nothing, and would replace a real briefing.
	ErrEmptyBriefing = errors.New("realtime: empty briefing")
)

// Config configures one realtime session. It mirrors the CLANKIE_REALTIME_*
// settings; zero values get the defaults above.
//
// Config holds the API key, so it redacts itself when printed with fmt or
// logged with zap (zap.Any / zap.Object); do not encode it any other way.
type Config struct {
	// URL is the ws:// or wss:// endpoint (CLANKIE_REALTIME_URL).
	URL string
	// APIKey (CLANKIE_REALTIME_API_KEY) is sent as "Authorization: Bearer
	// <key>" when set, and nowhere else.
	APIKey string
	// Model (CLANKIE_REALTIME_MODEL), when set, is added to the URL as the
	// model query parameter (and repeated in session.update, which is
	// harmless and helps servers that read it there).
	Model string
	// Instructions are the system instructions sent in every session.update.
	Instructions string
	// MinBackoff and MaxBackoff bound the pause between connection attempts
	// (defaults 200 ms and 5 s). The pause doubles per failed attempt with
	// jitter, so many bridges restarting together do not retry in step.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often the client pings the server; a connection
	// with no frame or pong for two intervals is treated as dead and
	// replaced. Zero means DefaultPingInterval; negative disables pings.
	PingInterval time.Duration
	// Dialer, when set, is used for every connection attempt (TLS settings,
	// proxies, timeouts). Nil means a dialer that honours the proxy
	// environment with a 10 s handshake timeout.
	Dialer *websocket.Dialer
}

// String describes the configuration without the key or the URL's query, so
// that printing a Config by mistake leaks nothing.
func (c Config) String() string {
	return fmt.Sprintf("realtime.Config{host:%q model:%q key_set:%t instructions_len:%d}",
		hostOf(c.URL), c.Model, c.APIKey != "", len(c.Instructions))
}

// GoString is String, so %#v cannot print the key either.
func (c Config) GoString() string { return c.String() }

// MarshalLogObject makes zap.Any and zap.Object log the same redacted
// description instead of reflecting the key out of the struct.
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("host", hostOf(c.URL))
	enc.AddString("model", c.Model)
	enc.AddBool("key_set", c.APIKey != "")
	enc.AddInt("instructions_len", len(c.Instructions))
	return nil
}

// Stats are counts about a session, content-free by construction, for
// `/voice status` and receipts.
type Stats struct {
	// Connects counts successful connections, the first one included.
	Connects int
	// Reconnects counts successful connections after the first.
	Reconnects int
	// DialFailures counts connection attempts that failed.
	DialFailures int
	// ItemsSent counts briefing items written to a connection (re-seeds
	// included).
	ItemsSent int
	// Connected says a connection is up and has been sent session.update.
	Connected bool
	// Pending says the latest briefing has not been written to the current
	// connection yet (it will be once one is up).
	Pending bool
}

// briefing is the latest text handed to Brief. Only the latest matters: a
// newer briefing replaces older ones, so there is no queue to grow.
type briefing struct {
	text    string
	refresh bool
	gen     uint64 // 0: no briefing yet
	// delivered: written to some connection, so sending it again on a new
	// connection is a re-seed.
	delivered bool
}

// Session is one realtime voice session: a connection kept up in the
// background plus the latest briefing. Its methods are safe for concurrent
// use.
type Session struct {
	cfg     Config
	dialURL string // URL with the model parameter; never logged
	host    string // the only part of the URL that is logged
	dialer  *websocket.Dialer
	log     *zap.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the background loop has returned
	kick   chan struct{} // capacity 1: "a new briefing is waiting"

	mu      sync.Mutex
	gen     uint64
	latest  briefing
	connGen uint64 // gen of the briefing written on the current connection
	stats   Stats
}

// Start validates cfg and starts a session that connects in the background;
// it never waits for the network. It is non-blocking (rather than an Open
// that dials first) because the voice bridge starts sessions while answering
// a Discord interaction, which must be acknowledged within 3 s whatever the
// realtime endpoint does; Brief queues the briefing until a connection is up.
//
// ctx bounds the session's whole life (use the bridge's run context, not an
// interaction's): when it ends the session closes as with Close. The only
// errors are ErrConfig ones. log may be nil.
func Start(ctx context.Context, cfg Config, log *zap.Logger) (*Session, error) {
	u, err := checkURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Model != "" {
		q := u.Query()
		q.Set("model", cfg.Model)
		u.RawQuery = q.Encode()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = cfg.MinBackoff
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if log == nil {
		log = zap.NewNop()
	}
	dialer := cfg.Dialer
	if dialer == nil {
		dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: handshakeTimeout}
	}
	s := &Session{
		cfg:     cfg,
		dialURL: u.String(),
		host:    u.Host,
		dialer:  dialer,
		log:     log,
		done:    make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	go s.run()
	return s, nil
}

// checkURL accepts ws:// and wss:// URLs with a host and no user info. Its
// errors never echo the URL: it may hold a secret in its query or user info.
func checkURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("%w: no URL (set CLANKIE_REALTIME_URL)", ErrConfig)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the URL does not parse", ErrConfig)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("%w: the URL must start with ws:// or wss://", ErrConfig)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: the URL has no host", ErrConfig)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: the URL must not hold user info; put the key in CLANKIE_REALTIME_API_KEY", ErrConfig)
	}
	return u, nil
}

// hostOf is the host of a URL, or "" when it does not parse; used where the
// URL is described rather than validated.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// Brief hands the session a briefing to send as a system conversation item.
// With refresh set, the item is a new one whose text begins with
// RefreshPrefix, telling the model it replaces earlier briefings.
//
// Brief never waits on the network, for the same reason Start does not: a nil
// error means the session has the briefing and will write it as soon as a
// connection is up (at once if one is), and again after every reconnect until
// a newer briefing replaces it. Stats().Pending tells whether it is still
// waiting. Only the latest briefing is kept: one queued while disconnected is
// replaced, not followed, by a newer one. ctx is checked before anything is
// kept, so a caller that gave up sends nothing.
//
// Errors: ctx's error, ErrEmptyBriefing or ErrClosed; none holds the text.
func (s *Session) Brief(ctx context.Context, text string, refresh bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return ErrEmptyBriefing
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		return ErrClosed
	}
	s.gen++
	s.latest = briefing{text: text, refresh: refresh, gen: s.gen}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // a kick is already waiting; it will pick up this briefing
	}
	return nil
}

// Close ends the session: it sends a normal-closure frame on the current
// connection (waiting at most a second for the server's answer), stops
// reconnecting, including during a backoff pause, and returns once every
// goroutine of the session has ended. It is idempotent and always returns
// nil; the error result is there to satisfy io.Closer.
func (s *Session) Close() error {
	s.mu.Lock()
	s.cancel()
	s.mu.Unlock()
	<-s.done
	return nil
}

// String describes the session by host and counts. It exists because fmt
// would otherwise print the unexported fields, the key and the briefing among
// them, for a %v of a *Session.
func (s *Session) String() string {
	st := s.Stats()
	return fmt.Sprintf("realtime.Session{host:%q connects:%d connected:%t}", s.host, st.Connects, st.Connected)
}

// GoString is String, for %#v.
func (s *Session) GoString() string { return s.String() }

// Stats returns a snapshot of the session's counts.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Pending = s.latest.gen != 0 && s.latest.gen != s.connGen
	return st
}
