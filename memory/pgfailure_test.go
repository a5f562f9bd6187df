package memory

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/pgstore"
)

// pgProxy is a loopback TCP relay to the test server, so a test can take
// "the database" away (Close) or lose a commit's answer (dropOnCommit)
// without stopping the server the other tests share.
type pgProxy struct {
	ln           net.Listener
	target       func() (net.Conn, error)
	dropOnCommit atomic.Bool
	// unreachable refuses new connections while a commit's answer is being
	// lost: the network is gone, so the cancel request pgx sends when its
	// connection breaks does not reach the server either (it would race
	// the commit's statements and, on a fast machine, win).
	unreachable atomic.Bool
	mu          sync.Mutex
	conns       []net.Conn
}

func newPGProxy(t *testing.T) *pgProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(os.Getenv(testPostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: func() (net.Conn, error) { return net.Dial(network, addr) }}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.unreachable.Load() {
			c.Close()
			continue
		}
		s, err := p.target()
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var cut atomic.Bool // a commit went out: the server's answer must not come back
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !cut.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
		}()
		go func() {
			buf := make([]byte, 32<<10)
			var spot commitSpotter
			for {
				n, err := c.Read(buf)
				if n > 0 {
					// Once a commit is on its way, cut the client off, so
					// the server commits and the client never hears.
					commit := spot.feed(buf[:n]) && p.dropOnCommit.Load()
					if commit {
						cut.Store(true)
						p.unreachable.Store(true)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						break
					}
					if commit {
						c.Close()
						time.Sleep(200 * time.Millisecond)
						p.unreachable.Store(false)
						break
					}
				}
				if err != nil {
					break
				}
			}
			s.Close()
		}()
	}
}

// commitSpotter reads the client's side of the protocol and tells when a
// commit has been sent whole: the simple query "commit" (pgx's Tx.Commit),
// or the Sync that ends a pipeline executing a statement prepared as
// "commit" (a commit queued in a batch, which pgx prepares once per
// connection and then binds by name).
type commitSpotter struct {
	pending  []byte
	started  bool            // past the untyped start-up messages
	commits  map[string]bool // prepared statements whose text is commit
	boundOne bool            // a commit was bound since the last Sync
}

// feed takes the next bytes from the client and reports whether a commit
// was sent whole within them.
func (c *commitSpotter) feed(b []byte) bool {
	c.pending = append(c.pending, b...)
	sent := false
	for {
		head := 5
		if !c.started {
			head = 4
		}
		if len(c.pending) < head {
			return sent
		}
		n := int(binary.BigEndian.Uint32(c.pending[head-4:head])) + head - 4
		if len(c.pending) < n {
			return sent
		}
		msg := c.pending[:n]
		c.pending = c.pending[n:]
		if !c.started {
			code := binary.BigEndian.Uint32(msg[4:8])
			c.started = code != 80877103 && code != 80877104 // not an SSL or GSS request
			continue
		}
		body := msg[5:]
		switch msg[0] {
		case 'Q':
			sent = sent || strings.EqualFold(cString(body, 0), "commit")
		case 'P':
			name := cString(body, 0)
			if strings.EqualFold(strings.TrimSpace(cString(body, 1)), "commit") {
				if c.commits == nil {
					c.commits = map[string]bool{}
				}
				c.commits[name] = true
			}
		case 'B':
			c.boundOne = c.boundOne || c.commits[cString(body, 1)]
		case 'S':
			sent = sent || c.boundOne
			c.boundOne = false
		}
	}
}

// cString returns the i-th NUL-terminated string of b.
func cString(b []byte, i int) string {
	for ; i > 0; i-- {
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			return ""
		}
		b = b[j+1:]
	}
	if j := bytes.IndexByte(b, 0); j >= 0 {
		return string(b[:j])
	}
	return ""
}

// Close takes the database away: no new connection, every open one cut.
func (p *pgProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// dsn names the database through the proxy, with a password the server
// (trust authentication) ignores and nothing may ever print.
func (p *pgProxy) dsn(t *testing.T) string {
	cfg, err := pgconn.ParseConfig(os.Getenv(testPostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, testDBPassword, p.ln.Addr(), cfg.Database)
}

const testDBPassword = "pg-secret-password-never-printed"

func requirePostgres(t *testing.T) {
	t.Helper()
	if !onPostgres() {
		t.Skip("the PostgreSQL run covers the database's failures")
	}
}

// TestDatabaseDownAnswers503 takes the database away from a running
// service: every route that needs it answers 503 with the JSON error and a
// sentence saying nothing was saved (the bridges then say "nothing was
// saved"), never a 500 or a driver message, and the password is in no
// answer and no log line. Starting against a database that is not there is
// one sentence naming CLANKIE_MEMORY_STORE.
func TestDatabaseDownAnswers503(t *testing.T) {
	requirePostgres(t)
	proxy := newPGProxy(t)
	dir := filepath.Join(t.TempDir(), "memory")
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	schema := "t_down_" + fmt.Sprint(time.Now().UnixNano())
	db, err := pgstore.Open(context.Background(), proxy.dsn(t), log, nil, pgstore.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		if admin, err := pgstore.Open(context.Background(), os.Getenv(testPostgresEnv), nil, nil, pgstore.Options{MaxConns: 1}); err == nil {
			_ = admin.DropSchema(context.Background(), schema)
			admin.Close()
		}
	})
	root, err := openRootForTest(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	bearers, _, err := LoadBearers(root, testTokens)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewService(root, dir, bearers, db.People(), db.Episodes(), db.Claims(), log, nil, nil).Handler())
	t.Cleanup(srv.Close)
	h := &harness{t: t, url: srv.URL, dir: dir, logs: logs, allow503: true}

	if r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", fact("before", "10", "20", "20", "30", "said before the outage")); r.status != http.StatusCreated {
		t.Fatalf("with the database up: %d %s", r.status, r.body)
	}
	proxy.Close()

	episode := api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneDiscordPresence, Room: "r", Summary: "during the outage", OccurredAt: time.Now()}
	for _, c := range []struct {
		name, token, method, path string
		body                      any
	}{
		{"propose", txt, "POST", "/v1/memory/discord-people/proposals", fact("during", "10", "20", "20", "30", "said during the outage")},
		{"recall", txt, "GET", "/v1/memory/discord-people/10/20?channelId=30", nil},
		{"forget", op, "DELETE", "/v1/memory/discord-people/10/20", nil},
		{"catalog", op, "GET", "/v1/memory", nil},
		{"list", op, "GET", "/v1/memory/discord-people", nil},
		{"record episode", txt, "POST", "/v1/memory/captain-episodes", episode},
		{"episode card", txt, "GET", "/v1/memory/captain-episodes", nil},
		{"briefing", voice, "POST", "/v1/discord/voice-briefing", api.BriefingRequest{SchemaVersion: 1, GuildID: "10", ChannelID: "30", ConsentedUserIDs: []string{"20"}}},
		{"readyz", "", "GET", "/readyz", nil},
	} {
		r := h.do(c.token, c.method, c.path, c.body)
		if r.status != http.StatusServiceUnavailable {
			t.Errorf("%s with the database down: %d %s; want 503", c.name, r.status, r.body)
			continue
		}
		var e api.Error
		r.decode(t, &e)
		if e.Code == "" || e.Message == "" || strings.Contains(string(r.body), testDBPassword) || strings.Contains(strings.ToLower(e.Message), "dial") {
			t.Errorf("%s: %s", c.name, r.body)
		}
		read := c.method == "GET" || c.name == "briefing"
		if !read && (e.Code != "store_unavailable" || !strings.Contains(e.Message, "nothing was saved")) {
			t.Errorf("%s: %s; want store_unavailable saying nothing was saved", c.name, r.body)
		}
		// A read saves nothing by nature: it must not say "nothing was saved".
		if read && c.name != "readyz" && (e.Code != "store_unavailable" || strings.Contains(e.Message, "saved") || !strings.Contains(e.Message, "nothing could be read")) {
			t.Errorf("%s: %s; want store_unavailable saying nothing could be read", c.name, r.body)
		}
	}
	for _, e := range logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		if strings.Contains(line, testDBPassword) || strings.Contains(line, "postgres://") {
			t.Errorf("a log line holds the connection string: %s", line)
		}
	}

	_, err = pgstore.Open(context.Background(), proxy.dsn(t), log, nil, pgstore.Options{})
	if err == nil || strings.Contains(err.Error(), testDBPassword) || !strings.Contains(err.Error(), "CLANKIE_MEMORY_STORE") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("start with the database down: %v; want one sentence naming CLANKIE_MEMORY_STORE", err)
	}
	t.Logf("start with the database down: %v", err)
	_, err = pgstore.Open(context.Background(), "postgres://u:"+testDBPassword+"@[bad", log, nil, pgstore.Options{})
	if err == nil || strings.Contains(err.Error(), testDBPassword) || !strings.Contains(err.Error(), "CLANKIE_MEMORY_STORE") {
		t.Fatalf("a malformed connection string: %v", err)
	}
	// A server that answers with a refusal (here: no such database) is not
	// "a database that does not answer".
	cfg, err := pgconn.ParseConfig(os.Getenv(testPostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	noDB := fmt.Sprintf("postgres://%s@/clankie_no_such_database?host=%s&port=%d", cfg.User, cfg.Host, cfg.Port)
	if _, err = pgstore.Open(context.Background(), noDB, log, nil, pgstore.Options{}); err == nil ||
		!strings.Contains(err.Error(), "refused the connection") || strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("a server that refuses: %v; want it to say the database refused the connection", err)
	}
}

// TestCommitWithoutAnswerIsReportedUnknown loses the answer to a proposal's
// COMMIT (the server commits, the client never hears): the service answers
// 503 outcome_unknown, not success and not "nothing was saved", and the
// retry with the same proposalId answers the stored fact.
func TestCommitWithoutAnswerIsReportedUnknown(t *testing.T) {
	requirePostgres(t)
	proxy := newPGProxy(t)
	dir := filepath.Join(t.TempDir(), "memory")
	schema := "t_unknown_" + fmt.Sprint(time.Now().UnixNano())
	db, err := pgstore.Open(context.Background(), proxy.dsn(t), zap.NewNop(), nil, pgstore.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		if admin, err := pgstore.Open(context.Background(), os.Getenv(testPostgresEnv), nil, nil, pgstore.Options{MaxConns: 1}); err == nil {
			_ = admin.DropSchema(context.Background(), schema)
			admin.Close()
		}
	})
	root, err := openRootForTest(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	bearers, _, err := LoadBearers(root, testTokens)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewService(root, dir, bearers, db.People(), db.Episodes(), db.Claims(), zap.NewNop(), nil, nil).Handler())
	t.Cleanup(srv.Close)
	h := &harness{t: t, url: srv.URL, dir: dir, allow503: true}

	proxy.dropOnCommit.Store(true)
	req := fact("unknown", "10", "20", "20", "30", "committed without an answer")
	r := h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
	proxy.dropOnCommit.Store(false)
	if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "outcome_unknown" {
		t.Fatalf("a commit without an answer: %d %s; want 503 outcome_unknown", r.status, r.body)
	}
	// The client retries until the network is back.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r = h.do(txt, "POST", "/v1/memory/discord-people/proposals", req)
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	var resp api.ProposalResponse
	r.decode(t, &resp)
	if r.status != http.StatusOK || !resp.Replayed || resp.Fact == nil || resp.Fact.Body != "committed without an answer" {
		t.Fatalf("the retry: %d %s; want 200 with the fact the unanswered commit stored", r.status, r.body)
	}
}
