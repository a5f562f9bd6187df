package bridges

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/voice"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// End-to-end latency benchmarks: the real memory service, the real bridge
// and the real discordgo client against the fake Discord, all over loopback
// in this process. Each iteration is one interaction, run sequentially; the
// figures are the median and 99th percentile of what the fake measured
// (Callback.After) or of dispatch-to-arrival at the fake realtime endpoint.
// Run them with a fixed count, e.g. -benchtime 1000x.

// benchLogs observes at info, the binary's default level, so the bridges
// and the service pay for the receipts they would log in production.
func benchLogs() *logs {
	core, obs := observer.New(zap.InfoLevel)
	return &logs{obs: obs, log: zap.New(core)}
}

// benchSeed stores facts about a member through the text bridge's bearer,
// as if each had been proposed with /person-memory.
func benchSeed(tb testing.TB, memURL, userID string, n int) {
	tb.Helper()
	text, err := newTextClient(memURL)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		body := fmt.Sprintf("fact %d about this member: plays bass on thursdays, prefers tea, and is learning portuguese for a trip", i)
		if _, err := text.Propose(context.Background(), api.ProposalRequest{SchemaVersion: 1, ProposalID: fmt.Sprintf("bench-%s-%d", userID, i), Fact: api.FactInput{
			Subject: api.Subject{GuildID: guildID, UserID: userID}, Kind: api.KindPersonFact, Body: body,
			Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9,
			Provenance: api.Provenance{SourceEventID: "seed", ProposerUserID: userID, ChannelID: textA}}}); err != nil {
			tb.Fatal(err)
		}
	}
}

// percentile returns the q-quantile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

func reportLatencies(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(percentile(samples, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(samples, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds()), "max-µs")
}

// textBench runs a text bridge against the fake with the real service, alice
// holding 8 facts.
func textBench(b *testing.B) *discordtest.Fake {
	l := benchLogs()
	mem := startMemory(b, l.log)
	fake := discordtest.New(b, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	tb, err := NewText(textConfig(fake, mem.url), tokens.TextBridge, l.log.Named("text"), nil)
	if err != nil {
		b.Fatal(err)
	}
	runInBackground(b, tb.Run)
	waitFor(b, 10*time.Second, "commands synced", func() bool { return syncedCount(l) > 0 })
	benchSeed(b, mem.url, alice, 8)
	return fake
}

// interactionLatencies runs spec once unmeasured (first connections), then
// once per iteration, and reports when the first callback reached the fake.
func interactionLatencies(b *testing.B, fake *discordtest.Fake, spec discordtest.InteractionSpec, want discordgo.InteractionResponseType) {
	once := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cb, err := fake.Interact(ctx, spec).WaitCallback(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if !cb.Accepted() || cb.Type != want {
			b.Fatalf("callback type %d, status %d: %s", cb.Type, cb.Status, cb.Answer)
		}
		return cb.After
	}
	once()
	samples := make([]time.Duration, 0, 1024)
	for b.Loop() {
		samples = append(samples, once())
	}
	b.StopTimer()
	reportLatencies(b, samples)
}

// BenchmarkInteractionToFirstCallback runs /person-memory recall (a member
// recalling their 8 facts in a server channel) through the fake Discord,
// the text bridge and the memory service, one interaction at a time, and
// reports the time from dispatching INTERACTION_CREATE to the fake
// receiving the first callback (the reply itself, type 4).
func BenchmarkInteractionToFirstCallback(b *testing.B) {
	fake := textBench(b)
	interactionLatencies(b, fake, pm(guildID, textA, alice, "recall", person(alice)),
		discordgo.InteractionResponseChannelMessageWithSource)
}

// BenchmarkInteractionBaselineDM is the floor under
// BenchmarkInteractionToFirstCallback: the same command on the same bridge,
// sent as a DM, which the bridge refuses before anything reaches the memory
// service. What is left is the fake's dispatch, discordgo, the router and the
// callback POST.
func BenchmarkInteractionBaselineDM(b *testing.B) {
	fake := textBench(b)
	spec := discordtest.InteractionSpec{UserID: alice, Command: "person-memory", Subcommand: "recall",
		Options: []discordtest.OptionValue{person(alice)}}
	interactionLatencies(b, fake, spec, discordgo.InteractionResponseChannelMessageWithSource)
}

// benchRealtime is the GA-like realtime fake, reporting when each briefing
// item arrives.
type benchRealtime struct {
	*fakeRealtime
	items chan benchItem
}

type benchItem struct {
	at    time.Time
	chars int
}

func newBenchRealtime(tb testing.TB) *benchRealtime {
	r := &benchRealtime{items: make(chan benchItem, 64)}
	r.fakeRealtime = newFakeRealtime(tb, realtimetest.OnFrame(func(fr realtimetest.Frame) {
		if fr.Type == "conversation.item.create" {
			r.items <- benchItem{at: time.Now(), chars: len([]rune(fr.Text))}
		}
	}))
	return r
}

// drain empties the channel of anything left from an earlier iteration.
func (r *benchRealtime) drain() {
	for {
		select {
		case <-r.items:
		default:
			return
		}
	}
}

// voiceMembers is how many people sit in the voice channel: the 25 a
// briefing covers at most.
const voiceMembers = api.MaxBriefingUsers

// BenchmarkVoiceJoinToBriefing puts 25 members in a voice channel, each
// holding 8 guild facts, under the presence consent policy (so all 25 are
// consented), and measures from dispatching /voice join to the fake
// realtime endpoint receiving the briefing item: the bridge joins, opens a
// realtime session, pulls the briefing from the memory service and sends
// it. Each iteration then runs /voice leave and waits for the realtime
// connection to close before the next join.
func BenchmarkVoiceJoinToBriefing(b *testing.B) {
	members := []discordtest.Member{{UserID: mover, Roles: []string{moverRole}}}
	users := []string{mover}
	for i := 1; len(users) < voiceMembers; i++ {
		id := fmt.Sprintf("2000000000000001%02d", i)
		members = append(members, discordtest.Member{UserID: id})
		users = append(users, id)
	}
	g := testGuild()
	g.Members = append(g.Members, members[1:]...)
	for _, u := range users {
		g.VoiceStates = append(g.VoiceStates, discordtest.VoiceState{ChannelID: voiceRoom, UserID: u})
	}

	l := benchLogs()
	mem := startMemory(b, l.log)
	for _, u := range users {
		benchSeed(b, mem.url, u, api.BriefingFactsPerUser)
	}
	// The fake answers the bot's op 4 as Discord does: /voice join waits
	// for that answer, which is on the path measured here.
	fake := discordtest.New(b, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(g))
	rt := newBenchRealtime(b)
	cfg := config.VoiceBridge{
		DiscordToken:   fake.Token(),
		ConsentPolicy:  config.ConsentPresence,
		VoiceRoleIDs:   []string{},
		Memory:         config.MemoryClient{URL: mem.url},
		Discord:        config.Discord{APIURL: fake.APIURL(), GuildIDs: []string{guildID}, MemoryRoleIDs: []string{memRole}},
		RealtimeURL:    rt.URL(),
		RealtimeAPIKey: realtimeKey,
		RealtimeModel:  realtimeModel,
	}
	cfg.VoiceBridgeToken = tokens.VoiceBridgeToken
	vb, err := NewVoiceBridge(cfg, tokens.VoiceBridge, l.log.Named("voice-bridge"), nil)
	if err != nil {
		b.Fatal(err)
	}
	runInBackground(b, vb.Run)
	waitFor(b, 10*time.Second, "voice bridge ready", func() bool { return syncedCount(l) > 0 })

	voiceCmd := func(sub string) discordtest.InteractionSpec {
		return discordtest.InteractionSpec{GuildID: guildID, ChannelID: voiceRoom, UserID: mover, Command: "voice", Subcommand: sub}
	}
	replyOf := func(ctx context.Context, in *discordtest.Interaction, says string) {
		m, err := in.WaitReply(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(m.Content, says) {
			b.Fatalf("reply %q, want it to say %q", m.Content, says)
		}
	}
	chars := 0
	cycle := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt.drain()
		start := time.Now()
		join := fake.Interact(ctx, voiceCmd("join"))
		var item benchItem
		select {
		case item = <-rt.items:
		case <-ctx.Done():
			b.Fatal("no briefing reached the realtime endpoint")
		}
		replyOf(ctx, join, "listening")
		chars = item.chars
		replyOf(ctx, fake.Interact(ctx, voiceCmd("leave")), "left voice")
		for accepted, ended := rt.Conns(); ended < accepted; accepted, ended = rt.Conns() {
			if ctx.Err() != nil {
				b.Fatal("the realtime connection outlived the session")
			}
			time.Sleep(time.Millisecond)
		}
		return item.at.Sub(start)
	}
	cycle() // first connections, unmeasured
	egress := l.obs.FilterField(zap.String("receipt", "voice.briefing.egress")).All()
	if len(egress) == 0 || egress[0].ContextMap()["consentedSpeakers"] != int64(voiceMembers) || egress[0].ContextMap()["outcome"] != "sent" {
		b.Fatalf("first briefing receipt %v", egress)
	}
	samples := make([]time.Duration, 0, 256)
	for b.Loop() {
		samples = append(samples, cycle())
	}
	b.StopTimer()
	reportLatencies(b, samples)
	b.ReportMetric(float64(chars), "briefing-chars")
}

// BenchmarkVoiceToolCallToOutput (issue 27): the voice model calls
// recall_person for a consented speaker holding 16 facts; measured from
// the fake model sending the call to it receiving the function_call_output,
// through the bridge's tool and the local memory service.
func BenchmarkVoiceToolCallToOutput(b *testing.B) {
	l := benchLogs()
	mem := startMemory(b, l.log)
	benchSeed(b, mem.url, mover, 16)
	g := testGuild(discordtest.VoiceState{ChannelID: voiceRoom, UserID: mover})
	fake := discordtest.New(b, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(g))
	rt := newFakeRealtime(b)
	cfg := config.VoiceBridge{
		DiscordToken: fake.Token(), ConsentPolicy: config.ConsentExplicit, VoiceRoleIDs: []string{},
		Memory:      config.MemoryClient{URL: mem.url},
		Discord:     config.Discord{APIURL: fake.APIURL(), GuildIDs: []string{guildID}, MemoryRoleIDs: []string{memRole}},
		RealtimeURL: rt.URL(), RealtimeAPIKey: realtimeKey, RealtimeModel: realtimeModel, RealtimeTranscribe: "gpt-4o-mini-transcribe",
	}
	cfg.VoiceBridgeToken = tokens.VoiceBridgeToken
	vb, err := NewVoiceBridge(cfg, tokens.VoiceBridge, l.log.Named("voice-bridge"), nil, func(c *voice.Config) { c.Audio = nil })
	if err != nil {
		b.Fatal(err)
	}
	runInBackground(b, vb.Run)
	waitFor(b, 10*time.Second, "voice bridge ready", func() bool { return syncedCount(l) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := fake.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, ChannelID: voiceRoom, UserID: mover, Command: "voice", Subcommand: "join"}).WaitReply(ctx); err != nil || !strings.Contains(m.Content, "listening") {
		b.Fatalf("join %v %v", m, err)
	}
	waitFor(b, 10*time.Second, "the model's briefing", func() bool { return len(rt.items()) >= 1 })
	args := `{"user_id":"` + mover + `"}`
	n := 0
	call := func() time.Duration {
		n++
		id := fmt.Sprintf("call_%d", n)
		start := time.Now()
		rt.EmitFunctionCall(1, "resp_"+id, id, "recall_person", args)
		for {
			for _, f := range rt.AllFrames() {
				if f.Type == "conversation.item.create" && strings.Contains(string(f.Raw), `"call_id":"`+id+`"`) {
					if !strings.Contains(string(f.Raw), "plays bass on thursdays") {
						b.Fatalf("output without the facts: %s", f.Raw)
					}
					return f.At.Sub(start)
				}
			}
			if time.Since(start) > 5*time.Second {
				b.Fatal("no function_call_output")
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	call() // the first call, unmeasured
	samples := make([]time.Duration, 0, 256)
	for b.Loop() {
		samples = append(samples, call())
	}
	b.StopTimer()
	reportLatencies(b, samples)
}
