package bot

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/discordtest"
)

// TestCheckTokenRidesOutABriefDiscordOutage: a 5xx at start is retried
// (a deploy that lands on a brief outage should not exit at once); a
// rejected token is final at once; the retries are bounded.
func TestCheckTokenRidesOutABriefDiscordOutage(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordtest.NewSpec()))
	s, err := NewSession(fake.Token(), fake.APIURL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	fake.FailNext(discordtest.RouteCurrentUser, http.StatusServiceUnavailable, 2)
	if u, err := checkToken(ctx, s, time.Millisecond, 4); err != nil || u == nil {
		t.Fatalf("after two 503s: %v; want the bot user", err)
	}

	fake.FailNext(discordtest.RouteCurrentUser, http.StatusInternalServerError, 10)
	_, err = checkToken(ctx, s, time.Millisecond, 2)
	if err == nil || !strings.Contains(err.Error(), "(3 attempts)") {
		t.Fatalf("a lasting outage: %v; want a failure after 3 attempts", err)
	}
	fake.FailNext(discordtest.RouteCurrentUser, 0, 0)

	bad, err := NewSession("not-the-token", fake.APIURL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := checkToken(ctx, bad, time.Hour, 4); err != ErrTokenRejected || time.Since(start) > 10*time.Second {
		t.Fatalf("a rejected token: %v after %s; want ErrTokenRejected at once", err, time.Since(start))
	}
}
