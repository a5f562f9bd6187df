package bot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/internal/discordtest"
)

var discordSpec = discordtest.NewSpec()

// guildOnShard returns a guild id that Discord routes to shard of count
// (n tells several such guilds apart).
func guildOnShard(shard, count, n int) string {
	return fmt.Sprint(uint64(1_000_000+n*count+shard) << 22)
}

// manyGuilds makes n minimal servers spread over the shards by their ids.
func manyGuilds(n int) []discordtest.Guild {
	gs := make([]discordtest.Guild, n)
	for i := range gs {
		id := fmt.Sprint(uint64(2_000_000+i) << 22)
		gs[i] = discordtest.Guild{ID: id, Name: "server " + fmt.Sprint(i)}
	}
	return gs
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func openShards(t testing.TB, fake *discordtest.Fake, plan bot.ShardPlan, interval time.Duration) (*bot.Shards, map[int]*discordgo.Ready, error) {
	t.Helper()
	sh, err := bot.NewShards(fake.Token(), fake.APIURL(), discordgo.IntentsGuilds|discordgo.IntentsGuildVoiceStates, plan, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	sh.IdentifyInterval = interval
	readies, err := sh.Open(ctxFor(t, 60*time.Second))
	if err == nil {
		t.Cleanup(func() {
			_ = fake.WaitHeartbeat(ctxFor(t, 5*time.Second))
			sh.Close()
		})
	}
	return sh, readies, err
}

func TestShardForIsDiscordsRouting(t *testing.T) {
	for _, tc := range []struct {
		guild string
		count int
		want  int
	}{
		{"41771983423143937", 1, 0},
		{"41771983423143937", 2, (41771983423143937 >> 22) % 2},
		{guildOnShard(1, 4, 7), 4, 1},
		{guildOnShard(3, 16, 2), 16, 3},
		{"175928847299117063", 10, (175928847299117063 >> 22) % 10},
	} {
		got, err := bot.ShardFor(tc.guild, tc.count)
		if err != nil || got != tc.want || got != discordtest.ShardOf(tc.guild, tc.count) {
			t.Errorf("ShardFor(%s, %d) = %d, %v; want %d", tc.guild, tc.count, got, err, tc.want)
		}
	}
	if _, err := bot.ShardFor("not-a-guild", 2); err == nil {
		t.Error("a guild id that is not a snowflake was routed")
	}
}

// Auto sharding takes the count GET /gateway/bot recommends; each shard
// identifies with [id, count], gets only its own servers, and the identifies
// keep max_concurrency (the fake refuses and fails the test otherwise).
func TestShardsStartWithTheRecommendedCountWithinTheIdentifyRule(t *testing.T) {
	const interval = 150 * time.Millisecond
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(3000)...),
		discordtest.WithIdentifyInterval(interval),
		discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 1000, ResetAfter: time.Hour, MaxConcurrency: 2}))
	sh, readies, err := openShards(t, fake, bot.ShardPlan{}, interval)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Count() != 3 || len(readies) != 3 {
		t.Fatalf("count %d, %d readies; want the recommended 3", sh.Count(), len(readies))
	}
	total := 0
	for id, r := range readies {
		for _, g := range r.Guilds {
			if discordtest.ShardOf(g.ID, 3) != id {
				t.Fatalf("shard %d got guild %s of shard %d", id, g.ID, discordtest.ShardOf(g.ID, 3))
			}
		}
		total += len(r.Guilds)
	}
	if total != 3000 {
		t.Fatalf("the shards carry %d servers, want 3000", total)
	}
	ids := fake.Identifies()
	if len(ids) != 3 {
		t.Fatalf("%d identifies", len(ids))
	}
	var at = map[int]int{}
	for i, id := range ids {
		if !id.Accepted || id.Shard == nil || id.Shard[1] != 3 {
			t.Fatalf("identify %d: %+v", i, id)
		}
		at[id.Shard[0]] = i
	}
	// Buckets 0 (shards 0, 2) and 1 (shard 1): shard 2 waits for shard 0.
	if at[2] < at[0] {
		t.Fatalf("shard 2 identified before shard 0 of its bucket: %v", at)
	}
	if got := fake.SessionStartsRemaining(); got != 997 {
		t.Fatalf("session starts left %d, want 997", got)
	}
}

// With no session starts left the process says so, with when the budget
// resets, and identifies nothing.
func TestNoSessionStartsLeftIsASentenceAndNoIdentify(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(10)...),
		discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 0, ResetAfter: 2*time.Hour + 30*time.Minute, MaxConcurrency: 1}))
	_, _, err := openShards(t, fake, bot.ShardPlan{}, time.Millisecond)
	if !errors.Is(err, bot.ErrNoSessionStarts) {
		t.Fatalf("err %v", err)
	}
	msg := err.Error()
	reset := time.Now().Add(150 * time.Minute).UTC()
	t.Log(msg)
	if !strings.HasPrefix(msg, "Discord allows this bot no more gateway session starts until ") || !strings.Contains(msg, "(in 2h30m)") ||
		!strings.Contains(msg, reset.Format("2006-01-02")) || !strings.HasSuffix(msg, "none is spent") {
		t.Fatalf("sentence %q", msg)
	}
	if n := len(fake.Identifies()); n != 0 {
		t.Fatalf("%d identifies despite an empty budget", n)
	}
	if got := fake.SessionStartsRemaining(); got != 0 {
		t.Fatalf("remaining %d", got)
	}
	// A budget smaller than the shards to start is refused the same way.
	fake2 := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(10)...),
		discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 1, ResetAfter: time.Hour, MaxConcurrency: 1}))
	_, _, err = openShards(t, fake2, bot.ShardPlan{Count: 2}, time.Millisecond)
	if !errors.Is(err, bot.ErrNoSessionStarts) || !strings.Contains(err.Error(), "only 1 more gateway session starts (this process needs 2)") || len(fake2.Identifies()) != 0 {
		t.Fatalf("err %v, identifies %d", err, len(fake2.Identifies()))
	}
}

// A bot too big for one connection is told to shard (Discord's 4011),
// naming the variable.
func TestTooManyServersForOneShardNamesTheSetting(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(discordtest.MaxGuildsPerShard+1)...))
	_, _, err := openShards(t, fake, bot.ShardPlan{Count: 1}, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "4011") || !strings.Contains(err.Error(), "DISCORD_SHARD_COUNT") {
		t.Fatalf("err %v", err)
	}
	ids := fake.Identifies()
	if len(ids) != 1 || ids[0].Accepted {
		t.Fatalf("identifies %+v", ids)
	}
}

func TestShardIDsOutsideTheCountNameTheSetting(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(10)...))
	_, _, err := openShards(t, fake, bot.ShardPlan{IDs: []int{0, 1}}, time.Millisecond) // auto: 1 shard
	if err == nil || !strings.Contains(err.Error(), "DISCORD_SHARD_IDS") || len(fake.Identifies()) != 0 {
		t.Fatalf("err %v, %d identifies", err, len(fake.Identifies()))
	}
}

// A guild's voice state update goes out on the connection of the guild's
// shard (the fake refuses op 4 on any other and fails the test); a guild
// whose shard this process does not run is an error, not a silent no-op.
func TestVoiceStateUpdateGoesOutOnTheGuildsShard(t *testing.T) {
	const count = 4
	g1, g3 := guildOnShard(1, count, 1), guildOnShard(3, count, 1)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithIdentifyInterval(time.Millisecond),
		discordtest.WithGuilds(discordtest.Guild{ID: g1, Name: "one"}, discordtest.Guild{ID: g3, Name: "three"}))
	sh, _, err := openShards(t, fake, bot.ShardPlan{Count: count, IDs: []int{0, 1}}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.ChannelVoiceJoinManual(g1, "900000000000000001", false, false); err != nil {
		t.Fatal(err)
	}
	ops, err := fake.WaitVoiceStateOps(ctxFor(t, 5*time.Second), 1)
	if err != nil || ops[0].Shard != 1 || ops[0].GuildID != g1 {
		t.Fatalf("ops %+v, %v", ops, err)
	}
	if err := sh.ChannelVoiceJoinManual(g3, "900000000000000002", false, false); !errors.Is(err, bot.ErrShardNotHere) {
		t.Fatalf("joining a guild of shard 3, run elsewhere: %v", err)
	}
}

// BenchmarkShardStart measures how long 16 shards take to connect with
// max_concurrency 1 and 4, against a fake whose identify interval is 100 ms
// (Discord's is 5 s; the ratio is what matters): the start should be
// bounded by the identify rule, ⌈16/mc⌉-1 intervals, not by us.
func BenchmarkShardStart(b *testing.B) {
	const interval = 100 * time.Millisecond
	for _, mc := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("maxConcurrency=%d", mc), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				fake := discordtest.New(b, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(64)...),
					discordtest.WithIdentifyInterval(interval), discordtest.WithRecommendedShards(16),
					discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 1000, ResetAfter: time.Hour, MaxConcurrency: mc}))
				sh, err := bot.NewShards(fake.Token(), fake.APIURL(), discordgo.IntentsGuilds, bot.ShardPlan{}, zap.NewNop())
				if err != nil {
					b.Fatal(err)
				}
				sh.IdentifyInterval = interval
				b.StartTimer()
				if _, err := sh.Open(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = fake.WaitHeartbeat(context.Background())
				sh.Close()
				fake.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64((16+mc-1)/mc-1)*interval.Seconds(), "rule-floor-s")
		})
	}
}

// A shard count GET /gateway/bot recommends that no bot could use is
// refused with a sentence naming the setting, before anything is
// allocated for it or identified; before, the process enumerated that many
// shard ids and ran out of memory.
func TestAnImplausibleRecommendedShardCountIsRefused(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(manyGuilds(1)...),
		discordtest.WithRecommendedShards(1<<40))
	_, _, err := openShards(t, fake, bot.ShardPlan{}, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "DISCORD_SHARD_COUNT") || len(fake.Identifies()) != 0 {
		t.Fatalf("err %v, %d identifies", err, len(fake.Identifies()))
	}
}
