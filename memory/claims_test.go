package memory

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// claimClock is a service clock the test moves.
type claimClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *claimClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// age makes every claim of the service on dir d older: the service's clock
// on files; on PostgreSQL, whose now() decides, the rows' claimed_at.
func (c *claimClock) age(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	if !onPostgres() {
		c.mu.Lock()
		c.t = c.t.Add(d)
		c.mu.Unlock()
		return
	}
	conn := claimsConn(t, dir)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "UPDATE interaction_claims SET claimed_at = claimed_at - make_interval(secs => $1)", d.Seconds()); err != nil {
		t.Fatal(err)
	}
}

// claimsConn connects to the PostgreSQL schema of the service on dir.
func claimsConn(t *testing.T, dir string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(os.Getenv(testPostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = testSchema(dir)
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func claimAs(t *testing.T, url, token, id string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+api.RouteClaimInteraction.Expand(id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusCreated {
		if len(b) != 0 {
			t.Fatalf("a claim answered with a body: %s", b)
		}
		return resp.StatusCode, ""
	}
	return resp.StatusCode, result{resp.StatusCode, b}.errorCode(t)
}

// TestInteractionClaims: an interaction id is claimed once within 15
// minutes, across a restart of the service (the second service on the same
// root or schema: a restart after kill -9, since the first is never
// closed), and again after the 15 minutes; only Discord lanes may claim,
// and only a snowflake.
func TestInteractionClaims(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memory")
	clock := &claimClock{t: time.Now().UTC()}
	start := func() string {
		srv := httptest.NewServer(newTestService(t, dir, testTokens, zap.NewNop(), clock.now).handler)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	first := start()
	const id = "1234567890123456789"
	for _, tc := range []struct {
		name, token, id string
		want            int
		code            string
	}{
		{"first claim", txt, id, 201, ""},
		{"second claim", txt, id, 409, "already_claimed"},
		{"the other Discord lane", voice, id, 409, "already_claimed"},
		{"another id by the operator", op, "42", 201, ""},
		{"gameplay", game, "43", 403, "forbidden"},
		{"letters", txt, "12ab", 400, "invalid_request"},
		{"21 digits", txt, strings.Repeat("7", 21), 400, "invalid_request"},
		{"a sign", txt, "-1", 400, "invalid_request"},
	} {
		if got, code := claimAs(t, first, tc.token, tc.id); got != tc.want || code != tc.code {
			t.Errorf("%s: %d %q, want %d %q", tc.name, got, code, tc.want, tc.code)
		}
	}
	restarted := start()
	if got, code := claimAs(t, restarted, txt, id); got != 409 || code != "already_claimed" {
		t.Fatalf("after a restart: %d %q, want 409 already_claimed", got, code)
	}
	clock.age(t, dir, api.InteractionClaimTTL-time.Second)
	if got, _ := claimAs(t, restarted, txt, id); got != 409 {
		t.Fatalf("14m59s later: %d, want 409", got)
	}
	clock.age(t, dir, time.Second)
	if got, code := claimAs(t, restarted, txt, id); got != 201 {
		t.Fatalf("15 minutes later: %d %q, want 201", got, code)
	}
	if got, _ := claimAs(t, start(), txt, id); got != 409 {
		t.Fatalf("the claim taken after expiry did not survive a restart: %d", got)
	}
	if onPostgres() {
		// The new process's first claim swept the expired rows ("42").
		conn := claimsConn(t, dir)
		defer conn.Close(context.Background())
		rows, _ := conn.Query(context.Background(), "SELECT interaction_id FROM interaction_claims")
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("rows left %v, %v; want only the live claim", ids, err)
		}
	}
}

// TestFileClaimsDropExpiredAndTornLines: on open the claims file keeps only
// claims younger than 15 minutes and loses a line torn by a crash (which
// was never acknowledged), without merging the next claim into it; once
// most lines have expired a claim rewrites the file.
func TestFileClaimsDropExpiredAndTornLines(t *testing.T) {
	fileOnly(t)
	dir := t.TempDir()
	root, err := openRootForTest(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	clock := &claimClock{t: time.Unix(1_800_000_000, 0)}
	line := func(ago time.Duration, id string) string {
		return strconv.FormatInt(clock.t.Add(-ago).UnixNano(), 10) + " " + id + "\n"
	}
	torn := line(time.Second, "555")
	data := line(20*time.Minute, "100") + line(time.Minute, "200") + "garbage\n" + torn[:len(torn)-3]
	if err := os.WriteFile(filepath.Join(dir, claimsFile), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openFileClaims(root, clock.now, durable.Disk{})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(c *fileClaims, id string) bool {
		t.Helper()
		ok, err := c.Claim(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim(c, "100") || claim(c, "200") || !claim(c, "555") {
		t.Fatal("expired 100 or torn 555 still claimed, or live 200 not")
	}
	reopened, err := openFileClaims(root, clock.now, durable.Disk{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"100", "200", "555"} {
		if claim(reopened, id) {
			t.Errorf("claim %s lost across a reopen", id)
		}
	}
	c.Close()
	b, _ := os.ReadFile(filepath.Join(dir, claimsFile))
	if got := strings.Count(string(b), "\n"); got != 3 || strings.Contains(string(b), "garbage") {
		t.Fatalf("claims file after open and 2 claims:\n%s", b)
	}

	// Compaction: past compactAt lines, most expired, a claim rewrites.
	reopened.compactAt = 8
	for i := range 8 {
		claim(reopened, strconv.Itoa(1000+i))
	}
	clock.t = clock.t.Add(api.InteractionClaimTTL)
	if !claim(reopened, "9999") {
		t.Fatal("a new id refused")
	}
	b, _ = os.ReadFile(filepath.Join(dir, claimsFile))
	if got := strings.TrimSpace(string(b)); strings.Count(got, "\n") != 0 || !strings.HasSuffix(got, " 9999") {
		t.Fatalf("claims file after compaction:\n%s", b)
	}
	reopened.Close()
}
