package bridges

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
)

// shardTestInterval stands in for Discord's 5 s identify interval in the
// fakes below and in the bridges under test, so a test of many shards does
// not wait 5 s per bucket; the rule itself is the same.
const shardTestInterval = 25 * time.Millisecond

// serverOnShard returns the n-th server id that Discord routes to shard of
// count, with a text channel.
func serverOnShard(shard, count, n int) discordtest.Guild {
	id := uint64(3_000_000+n*count+shard) << 22
	return discordtest.Guild{ID: fmt.Sprint(id), Name: fmt.Sprintf("server %d/%d", shard, n),
		Channels: []discordtest.Channel{{ID: fmt.Sprint(id + 1), Name: "general", Type: discordgo.ChannelTypeGuildText}}}
}

// servers makes n servers spread round-robin over count shards.
func servers(n, count int) []discordtest.Guild {
	out := make([]discordtest.Guild, n)
	for i := range out {
		out[i] = serverOnShard(i%count, count, i/count)
	}
	return out
}

// countingProxy forwards to the memory service and counts the calls, so a
// test can tell which bridge process served an interaction.
type countingProxy struct {
	url   string
	calls atomic.Int64
}

func countCalls(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	cp := &countingProxy{}
	cp.url = slowProxyListener(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.calls.Add(1)
		rp.ServeHTTP(w, r)
	})})
	return cp
}

func shardedTextConfig(fake *discordtest.Fake, memURL, count, ids string) config.TextBridge {
	cfg := textConfig(fake, memURL)
	cfg.Discord.GuildIDs = nil // every server, global commands
	cfg.Discord.ShardCount, cfg.Discord.ShardIDs = count, ids
	return cfg
}

// runShardedText runs a text bridge with the test identify interval.
func runShardedText(t *testing.T, cfg config.TextBridge, l *logs) *running {
	t.Helper()
	if err := cfg.Discord.Validate(); err != nil {
		t.Fatal(err)
	}
	tb, err := NewText(cfg, tokens.TextBridge, l.log.Named("text"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tb.Bot.Shards.IdentifyInterval = shardTestInterval
	return runInBackground(t, tb.Run)
}

func waitReady(t *testing.T, l *logs) {
	t.Helper()
	waitFor(t, 60*time.Second, "the bridge ready", func() bool { return l.obs.FilterMessage("discord bot ready").Len() > 0 })
}

func readyLine(t *testing.T, l *logs) map[string]any {
	t.Helper()
	lines := l.obs.FilterMessage("discord bot ready").All()
	if len(lines) != 1 {
		t.Fatalf("%d ready lines", len(lines))
	}
	return lines[0].ContextMap()
}

// TestTextBridgeAutoShardsFiveThousandServers: a bot in 5,000 servers, with
// DISCORD_SHARD_COUNT left at auto, takes the 5 shards Discord recommends,
// identifies each with [id, 5] within the identify rule, and serves
// /person-memory in servers on different shards.
func TestTextBridgeAutoShardsFiveThousandServers(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	const count = 5
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(servers(5000, count)...),
		discordtest.WithIdentifyInterval(shardTestInterval))
	runShardedText(t, shardedTextConfig(fake, mem.url, "auto", ""), l)
	waitReady(t, l)

	ready := readyLine(t, l)
	if ready["guilds"] != int64(5000) || ready["shardCount"] != int64(count) {
		t.Fatalf("ready %v", ready)
	}
	var shards []int
	for _, id := range fake.Identifies() {
		if !id.Accepted || id.Shard == nil || id.Shard[1] != count {
			t.Fatalf("identify %+v", id)
		}
		shards = append(shards, id.Shard[0])
	}
	slices.Sort(shards)
	if !slices.Equal(shards, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("identified shards %v", shards)
	}
	if puts := fake.CommandPuts(discordtest.GlobalScope); len(puts) != 1 {
		t.Fatalf("%d global registrations", len(puts))
	}

	for _, shard := range []int{0, 3, 4} {
		g := serverOnShard(shard, count, 7)
		ch := g.Channels[0].ID
		got := reply(t, fake, pm(g.ID, ch, alice, "propose", person(alice), str("fact", fmt.Sprintf("likes shard %d", shard))))
		if !strings.Contains(strings.ToLower(got), "remember") {
			t.Fatalf("shard %d: propose answered %q", shard, got)
		}
		if got := reply(t, fake, pm(g.ID, ch, alice, "recall")); !strings.Contains(got, fmt.Sprintf("likes shard %d", shard)) {
			t.Fatalf("shard %d: recall answered %q", shard, got)
		}
		r, err := mem.operator.Export(context.Background(), g.ID, alice)
		if err != nil || len(r.Facts) != 1 || r.Facts[0].Subject != (api.Subject{GuildID: g.ID, UserID: alice}) {
			t.Fatalf("shard %d: stored %+v, %v", shard, r.Facts, err)
		}
	}
}

// TestTwoProcessesSplitTheShards: two bridge processes (two fully separate
// Text values in this test process: own shards, router, memory client and
// logs) split a bot's 4 shards with DISCORD_SHARD_IDS 0-1 and 2-3. Each
// server is served by the process that runs its shard, and only the
// process running shard 0 registers the commands.
func TestTwoProcessesSplitTheShards(t *testing.T) {
	shared := newLogs()
	mem := startMemory(t, shared.log)
	const count = 4
	// max_concurrency 4: the two processes start at once and their shards
	// fall into different buckets, which the fake checks.
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(servers(40, count)...),
		discordtest.WithIdentifyInterval(shardTestInterval),
		discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 1000, ResetAfter: time.Hour, MaxConcurrency: 4}))
	la, lb := newLogs(), newLogs()
	pa, pb := countCalls(t, mem.url), countCalls(t, mem.url)
	runShardedText(t, shardedTextConfig(fake, pa.url, "4", "0-1"), la)
	runShardedText(t, shardedTextConfig(fake, pb.url, "4", "2-3"), lb)
	waitReady(t, la)
	waitReady(t, lb)
	if _, err := fake.WaitConnectedShards(ctxFor(t, 10*time.Second), 0, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l      *logs
		shards []any
	}{{la, []any{int64(0), int64(1)}}, {lb, []any{int64(2), int64(3)}}} {
		if got := readyLine(t, tc.l)["shards"]; fmt.Sprint(got) != fmt.Sprint(tc.shards) {
			t.Fatalf("process runs shards %v, want %v", got, tc.shards)
		}
	}
	if la.obs.FilterMessage("commands synced").Len() != 1 || lb.obs.FilterMessage("commands synced").Len() != 0 ||
		lb.obs.FilterMessage("commands left to the process running shard 0").Len() != 1 {
		t.Fatal("commands were not synced by the process running shard 0 alone")
	}

	for _, tc := range []struct {
		shard int
		by    *countingProxy
		other *countingProxy
	}{{1, pa, pb}, {3, pb, pa}, {0, pa, pb}, {2, pb, pa}} {
		g := serverOnShard(tc.shard, count, 2)
		byBefore, otherBefore := tc.by.calls.Load(), tc.other.calls.Load()
		got := reply(t, fake, pm(g.ID, g.Channels[0].ID, bob, "propose", person(bob), str("fact", fmt.Sprintf("on shard %d", tc.shard))))
		if !strings.Contains(strings.ToLower(got), "remember") {
			t.Fatalf("shard %d: %q", tc.shard, got)
		}
		if tc.by.calls.Load() == byBefore || tc.other.calls.Load() != otherBefore {
			t.Fatalf("shard %d was not served by the process that runs it alone", tc.shard)
		}
		r, err := mem.operator.Export(context.Background(), g.ID, bob)
		if err != nil || len(r.Facts) != 1 {
			t.Fatalf("shard %d: stored %+v, %v", tc.shard, r.Facts, err)
		}
	}
}

// TestVoiceBridgeJoinsOnTheGuildsShard: the voice bridge runs 2 shards; a
// /voice join in a server on shard 1 sends op 4 on shard 1's connection
// (the fake refuses op 4 elsewhere and fails the test), and /voice and
// consent keep working after that shard's connection drops and resumes.
func TestVoiceBridgeJoinsOnTheGuildsShard(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	const count = 2
	g := testGuild(inVoice(mover, alice)...)
	g.ID = serverOnShard(1, count, 5).ID
	for i := range g.Channels {
		g.Channels[i].ID = fmt.Sprint(900000000000000000 + i)
	}
	room := g.Channels[2].ID
	for i := range g.VoiceStates {
		g.VoiceStates[i].ChannelID = room
	}
	other := serverOnShard(0, count, 5)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(g, other), discordtest.WithIdentifyInterval(shardTestInterval))
	cfg := config.VoiceBridge{
		DiscordToken: fake.Token(), VoiceBridgeToken: tokens.VoiceBridgeToken, ConsentPolicy: config.ConsentExplicit,
		Memory:  config.MemoryClient{URL: mem.url},
		Discord: config.Discord{APIURL: fake.APIURL(), ShardCount: "2", MemoryRoleIDs: []string{memRole}},
		Log:     config.Log{Level: "debug", Format: "json"},
	}
	vb, err := NewVoiceBridge(cfg, tokens.VoiceBridge, l.log.Named("voice-bridge"), nil)
	if err != nil {
		t.Fatal(err)
	}
	vb.Bot.Shards.IdentifyInterval = shardTestInterval
	runInBackground(t, vb.Run)
	waitFor(t, 10*time.Second, "voice bridge ready", func() bool { return syncedCount(l) > 0 })
	voiceCmd := func(user, sub string, opts ...discordtest.OptionValue) string {
		return reply(t, fake, discordtest.InteractionSpec{GuildID: g.ID, ChannelID: room, UserID: user, Command: "voice", Subcommand: sub, Options: opts})
	}

	if got := voiceCmd(mover, "join"); !strings.Contains(got, "listening") {
		t.Fatalf("join: %q", got)
	}
	ops, err := fake.WaitVoiceStateOps(ctxFor(t, 5*time.Second), 1)
	if err != nil || ops[0].GuildID != g.ID || ops[0].ChannelID != room || ops[0].Shard != 1 {
		t.Fatalf("voice state ops %+v, %v", ops, err)
	}

	// Shard connections drop; discordgo resumes each one.
	identifies := len(fake.Identifies())
	fake.DropConnections(discordtest.CloseUnknownError)
	waitFor(t, 10*time.Second, "both shards resumed", func() bool { return fake.Resumes() == 2 })
	if _, err := fake.WaitConnectedShards(ctxFor(t, 10*time.Second), 0, 1); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Identifies()); n != identifies {
		t.Fatalf("a resume identified again (%d → %d)", identifies, n)
	}
	if got := voiceCmd(alice, "consent", str("action", "opt-in")); strings.Contains(strings.ToLower(got), "went wrong") {
		t.Fatalf("consent after the reconnect: %q", got)
	}
	if got := voiceCmd(mover, "status"); !strings.Contains(got, "2 speakers have consented") {
		t.Fatalf("status after the reconnect: %q", got)
	}
	if got := voiceCmd(mover, "leave"); strings.Contains(strings.ToLower(got), "went wrong") {
		t.Fatalf("leave after the reconnect: %q", got)
	}
	ops, err = fake.WaitVoiceStateOps(ctxFor(t, 5*time.Second), 2)
	if err != nil || ops[1].ChannelID != "" || ops[1].Shard != 1 {
		t.Fatalf("leave ops %+v, %v", ops, err)
	}
	l.assertClean(t, fake.Token(), tokens.VoiceBridge)
}

// TestNoSessionStartsLeftStopsTheBridgeWithASentence: with
// session_start_limit.remaining 0 the bridge stops at start with one
// sentence saying when the budget resets, and identifies nothing.
func TestNoSessionStartsLeftStopsTheBridgeWithASentence(t *testing.T) {
	l := newLogs()
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()),
		discordtest.WithSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 0, ResetAfter: 3 * time.Hour, MaxConcurrency: 1}))
	tb, err := NewText(textConfig(fake, deadURL(t)), tokens.TextBridge, l.log.Named("text"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = tb.Run(ctxFor(t, 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "no more gateway session starts until") || !strings.Contains(err.Error(), "(in 3h)") ||
		strings.Count(err.Error(), ";") != 1 {
		t.Fatalf("Run = %v", err)
	}
	if n := len(fake.Identifies()); n != 0 || fake.SessionStartsRemaining() != 0 {
		t.Fatalf("%d identifies", n)
	}
}
