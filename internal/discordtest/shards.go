package discordtest

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Discord's sharding rules, as the fake applies them.
const (
	// DefaultIdentifyInterval is Discord's: one IDENTIFY per max_concurrency
	// bucket every 5 seconds.
	DefaultIdentifyInterval = 5 * time.Second
	// MaxGuildsPerShard is the most servers one connection may carry; an
	// IDENTIFY that would carry more is closed with 4011.
	MaxGuildsPerShard = 2500
	// guildsPerRecommendedShard is how many servers GET /gateway/bot counts
	// per shard it recommends (Discord: about one shard per 1000).
	guildsPerRecommendedShard = 1000
)

// SessionStartLimit is GET /gateway/bot's session_start_limit.
type SessionStartLimit struct {
	Total          int
	Remaining      int
	ResetAfter     time.Duration
	MaxConcurrency int
}

// WithSessionStartLimit sets the identify budget: each IDENTIFY spends one
// of Remaining (an IDENTIFY with none left is a violation), and
// MaxConcurrency is how many buckets may identify per interval. Default:
// 1000 of 1000, resetting in 24 h, max_concurrency 1.
func WithSessionStartLimit(l SessionStartLimit) Option {
	return func(c *config) { c.startLimit = l }
}

// WithIdentifyInterval replaces Discord's 5 s between two IDENTIFYs of one
// max_concurrency bucket, so a test of many shards need not wait 5 s per
// bucket. The bot under test must use the same interval: an IDENTIFY
// sooner is refused (closed 4008) and fails the test.
func WithIdentifyInterval(d time.Duration) Option { return func(c *config) { c.identifyInterval = d } }

// WithRecommendedShards fixes the shard count GET /gateway/bot recommends
// (default: one per 1000 guilds, at least 1).
func WithRecommendedShards(n int) Option { return func(c *config) { c.recommendedShards = n } }

// getGatewayBot returns the gateway URL, the recommended shard count and
// what is left of the identify budget.
func (f *Fake) getGatewayBotRoute() reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	shards := f.cfg.recommendedShards
	if shards < 1 {
		shards = max(1, (len(f.guildOrder)+guildsPerRecommendedShard-1)/guildsPerRecommendedShard)
	}
	l := f.cfg.startLimit
	reset := l.ResetAfter - time.Since(f.started)
	if reset < 0 {
		reset = 0
	}
	return okJSON(map[string]any{
		"url": f.gatewayURL, "shards": shards,
		"session_start_limit": map[string]any{"total": l.Total, "remaining": f.startsLeft,
			"reset_after": reset.Milliseconds(), "max_concurrency": l.MaxConcurrency},
	})
}

// SessionStartsRemaining returns what is left of the identify budget.
func (f *Fake) SessionStartsRemaining() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.startsLeft
}

// identifyLimitsLocked applies the identify budget, the max_concurrency
// rule and the shard size limit to an IDENTIFY that passed the token,
// intents and shard checks. It returns a close code, or 0 to accept. A
// budget or rate violation is recorded: a bot that breaks them fails its
// test, since Discord resets the token of a bot that exhausts the budget.
func (f *Fake) identifyLimitsLocked(shard *[2]int, now time.Time) (int, string) {
	id, count := 0, 1
	if shard != nil {
		id, count = shard[0], shard[1]
	}
	if f.startsLeft <= 0 {
		f.violations = append(f.violations, Violation{Method: "GATEWAY", Path: "op 2 IDENTIFY", Status: CloseAuthenticationFailed,
			Answer: "identify with no session starts left (Discord resets the bot's token)"})
		return CloseAuthenticationFailed, "Authentication failed."
	}
	f.startsLeft--
	mc := max(1, f.cfg.startLimit.MaxConcurrency)
	bucket := id % mc
	if last, ok := f.lastIdentify[bucket]; ok && now.Sub(last) < f.cfg.identifyInterval {
		f.violations = append(f.violations, Violation{Method: "GATEWAY", Path: "op 2 IDENTIFY", Status: CloseRateLimited,
			Answer: fmt.Sprintf("shard %d identified %s after another in bucket %d (max_concurrency %d allows one per %s)",
				id, now.Sub(last).Round(time.Millisecond), bucket, mc, f.cfg.identifyInterval)})
		return CloseRateLimited, "You are being rate limited."
	}
	f.lastIdentify[bucket] = now
	n := 0
	for _, g := range f.guildOrder {
		if shardOf(g, count) == id {
			n++
		}
	}
	if n > MaxGuildsPerShard {
		return CloseShardingRequired, "Sharding required."
	}
	return 0, ""
}

// WaitConnectedShards waits until exactly the given shards have live
// sessions (in any order) and returns them.
func (f *Fake) WaitConnectedShards(ctx context.Context, want ...int) ([]int, error) {
	want = slices.Clone(want)
	slices.Sort(want)
	var got []int
	err := f.waitFor(ctx, func() bool {
		got = got[:0]
		for _, s := range f.sessions {
			if s.conn == nil {
				continue
			}
			id := 0
			if s.shard != nil {
				id = s.shard[0]
			}
			got = append(got, id)
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	return got, err
}

// ShardOf returns the shard of count that carries guildID, as Discord
// routes it.
func ShardOf(guildID string, count int) int { return shardOf(guildID, count) }

// Resumes returns how many RESUMEs the fake accepted.
func (f *Fake) Resumes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resumes
}
