package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/memoryclient"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// scrape GETs url with bearer (none when empty) and returns the status,
// the raw text and the parsed families.
func scrape(t *testing.T, url, bearer string) (int, string, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b), nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("scrape %s does not parse as Prometheus text: %v\n%s", url, err, b)
	}
	return resp.StatusCode, string(b), fams
}

// scrapeAfter scrapes until the interactions counter of the text bridge
// reaches n: the router counts an interaction just after its reply reaches
// Discord, so a test that saw the reply may scrape a moment too early.
func scrapeAfter(t *testing.T, url, bearer string, n float64) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, text, fams := scrape(t, url, bearer)
		v, _ := metricValue(fams["clankie_bridge_interactions_total"], map[string]string{"bridge": "text"})
		if v >= n || time.Now().After(deadline) {
			return text, fams
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metricValue sums the samples of a counter or gauge family whose labels
// include want.
func metricValue(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if have[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, found
}

// TestMetricsScrapeIsContentFree (issue 14, item 4) runs `clankie up` with
// the text bridge against the fake Discord and CLANKIE_METRICS_ADDR set,
// stores a fact and an episode whose text is a canary, and scrapes: the
// memory service's /metrics needs the operator bearer; the metrics address
// serves the memory service's and the bridge's metrics without one; every
// expected name has its type and a plausible value; no canary text and no
// id appears anywhere in either scrape.
func TestMetricsScrapeIsContentFree(t *testing.T) {
	const guild, channel, user = "100000000000000001", "100000000000000011", "200000000000000001"
	const canaryFact, canaryEpisode = "CANARY7fact likes lapsang", "CANARY7episode sang in the tavern"
	fake := discordtest.New(t, discordtest.WithGuilds(discordtest.Guild{ID: guild,
		Members:  []discordtest.Member{{UserID: user}},
		Channels: []discordtest.Channel{{ID: channel, Name: "general", Type: discordgo.ChannelTypeGuildText}}}))
	dir := filepath.Join(t.TempDir(), "memory")
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLANKIE_MEMORY_DIR", dir)
	t.Setenv("CLANKIE_MEMORY_ADDR", addr)
	t.Setenv("CLANKIE_METRICS_ADDR", ":"+strings.Split(metricsAddr, ":")[1]) // a port alone: loopback
	t.Setenv("DISCORD_TEXT_BOT_TOKEN", fake.Token())
	t.Setenv("DISCORD_API_URL", fake.APIURL())
	t.Setenv("DISCORD_GUILD_IDS", guild)
	t.Setenv("CLANKIE_LOG_LEVEL", "error")

	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- runUp(ctx, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("clankie up stopped with %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	if _, err := fake.WaitCommandPuts(wctx, guild, 1); err != nil {
		t.Fatalf("the text bridge never registered its command: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "metrics: GET /metrics at http://"+metricsAddr+", no credential") {
		t.Fatalf("clankie up does not say where metrics are:\n%s", out.String())
	}
	in := fake.Interact(wctx, discordtest.InteractionSpec{GuildID: guild, ChannelID: channel, UserID: user, Command: "person-memory", Subcommand: "propose",
		Options: []discordtest.OptionValue{discordtest.UserOption("person", user), discordtest.StringOption("fact", canaryFact)}})
	if _, err := in.WaitReply(wctx); err != nil {
		t.Fatal(err)
	}
	opTok, err := config.ResolveBearer("", dir, api.LaneOperator)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := memoryclient.New("http://"+addr, opTok)
	if _, err := op.RecordEpisode(wctx, api.EpisodeRequest{Lane: api.LaneOperator, Room: "#" + canaryEpisode, Summary: canaryEpisode,
		OccurredAt: time.Now().UTC(), Provenance: api.EpisodeProvenance{SelfAuthored: true}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a miss then a hit of the person cache, by path with ids
		if _, err := op.Export(wctx, guild, user); err != nil {
			t.Fatal(err)
		}
	}

	if code, _, _ := scrape(t, "http://"+addr+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a bearer answered %d, want 401", code)
	}
	textTok, _ := config.ResolveBearer("", dir, api.LaneDiscordPresence)
	if code, _, _ := scrape(t, "http://"+addr+"/metrics", textTok); code != http.StatusForbidden {
		t.Fatalf("/metrics with the text bridge's bearer answered %d, want 403", code)
	}
	memText, memFams := scrapeAfter(t, "http://"+addr+"/metrics", opTok, 1)
	allText, allFams := scrapeAfter(t, "http://"+metricsAddr+"/metrics", "", 1)

	type want struct {
		name    string
		typ     dto.MetricType
		labels  map[string]string
		atLeast float64
	}
	memory := []want{
		{"clankie_memory_requests_total", dto.MetricType_COUNTER, map[string]string{"route": "POST /v1/memory/discord-people/proposals", "lane": "discord_presence", "outcome": "ok"}, 1},
		{"clankie_memory_requests_total", dto.MetricType_COUNTER, map[string]string{"route": "GET /metrics", "lane": "none", "outcome": "unauthorized"}, 1},
		{"clankie_memory_request_duration_seconds", dto.MetricType_HISTOGRAM, map[string]string{"route": "GET /v1/memory/discord-people/{guildId}/{userId}/export"}, 2},
		{"clankie_memory_fsync_duration_seconds", dto.MetricType_HISTOGRAM, nil, 2},
		{"clankie_memory_people", dto.MetricType_GAUGE, nil, 1},
		{"clankie_memory_facts", dto.MetricType_GAUGE, nil, 1},
		{"clankie_memory_episodes_unretained", dto.MetricType_GAUGE, nil, 1},
		{"clankie_memory_episodes_retained", dto.MetricType_GAUGE, nil, 0},
		{"clankie_memory_person_files_corrupt", dto.MetricType_GAUGE, nil, 0},
		{"clankie_memory_people_cache_hits_total", dto.MetricType_COUNTER, nil, 1},
		{"clankie_memory_people_cache_misses_total", dto.MetricType_COUNTER, nil, 0},
		{"clankie_memory_people_cache_bytes", dto.MetricType_GAUGE, nil, 1},
		{"clankie_memory_people_cache_evictions_total", dto.MetricType_COUNTER, nil, 0},
		{"go_goroutines", dto.MetricType_GAUGE, nil, 1},
	}
	bridge := []want{
		{"clankie_bridge_interactions_total", dto.MetricType_COUNTER, map[string]string{"bridge": "text", "command": "person-memory", "kind": "command", "outcome": "ok"}, 1},
		{"clankie_bridge_first_callback_seconds", dto.MetricType_HISTOGRAM, map[string]string{"bridge": "text", "command": "person-memory"}, 1},
		{"clankie_bridge_gateway_reconnects_total", dto.MetricType_COUNTER, map[string]string{"bridge": "text"}, 0},
	}
	check := func(where string, fams map[string]*dto.MetricFamily, ws []want) {
		for _, w := range ws {
			f := fams[w.name]
			if f == nil {
				t.Errorf("%s: no %s", where, w.name)
				continue
			}
			if f.GetType() != w.typ {
				t.Errorf("%s: %s is a %v, want %v", where, w.name, f.GetType(), w.typ)
			}
			if v, ok := metricValue(f, w.labels); !ok || v < w.atLeast {
				t.Errorf("%s: %s%v = %v (found %v), want at least %v", where, w.name, w.labels, v, ok, w.atLeast)
			}
		}
	}
	check("memory /metrics", memFams, memory)
	check("CLANKIE_METRICS_ADDR", allFams, append(memory, bridge...))

	for where, text := range map[string]string{"memory /metrics": memText, "CLANKIE_METRICS_ADDR": allText} {
		for _, secret := range []string{"CANARY7", "lapsang", "tavern", guild, channel, user, opTok, textTok, fake.Token()} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q: metrics must be content-free", where, secret)
			}
		}
	}
}

// TestBridgeAloneServesItsMetrics (issue 14, item 4): `clankie bridge text`
// on its own serves its metrics on CLANKIE_METRICS_ADDR, without the
// memory service's, content-free.
func TestBridgeAloneServesItsMetrics(t *testing.T) {
	const guild, channel, user = "100000000000000002", "100000000000000022", "200000000000000002"
	f := startMemory(t)
	fake := discordtest.New(t, discordtest.WithGuilds(discordtest.Guild{ID: guild,
		Members:  []discordtest.Member{{UserID: user}},
		Channels: []discordtest.Channel{{ID: channel, Name: "general", Type: discordgo.ChannelTypeGuildText}}}))
	metricsAddr := freeAddr(t)
	t.Setenv("CLANKIE_METRICS_ADDR", metricsAddr)
	t.Setenv("DISCORD_TEXT_BOT_TOKEN", fake.Token())
	t.Setenv("DISCORD_API_URL", fake.APIURL())
	t.Setenv("DISCORD_GUILD_IDS", guild)
	t.Setenv("CLANKIE_LOG_LEVEL", "error")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runBridgeAlone(ctx, loadTextBridge) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("clankie bridge text stopped with %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	if _, err := fake.WaitCommandPuts(wctx, guild, 1); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"propose", "recall"} {
		opts := []discordtest.OptionValue{discordtest.UserOption("person", user)}
		if sub == "propose" {
			opts = append(opts, discordtest.StringOption("fact", "CANARY9 plays the oboe"))
		}
		in := fake.Interact(wctx, discordtest.InteractionSpec{GuildID: guild, ChannelID: channel, UserID: user, Command: "person-memory", Subcommand: sub, Options: opts})
		if _, err := in.WaitReply(wctx); err != nil {
			t.Fatal(err)
		}
	}
	text, fams := scrapeAfter(t, "http://"+metricsAddr+"/metrics", "", 2)
	if fams == nil {
		t.Fatalf("no metrics on CLANKIE_METRICS_ADDR: %s", text)
	}
	if v, ok := metricValue(fams["clankie_bridge_interactions_total"], map[string]string{"bridge": "text", "command": "person-memory", "outcome": "ok"}); !ok || v < 2 {
		t.Errorf("interactions: %v %v\n%s", v, ok, text)
	}
	if fams["clankie_bridge_first_callback_seconds"].GetType() != dto.MetricType_HISTOGRAM || fams["clankie_bridge_gateway_reconnects_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("bridge metric types wrong:\n%s", text)
	}
	if fams["clankie_memory_requests_total"] != nil {
		t.Errorf("a bridge alone reports the memory service's metrics")
	}
	for _, secret := range append([]string{"CANARY9", "oboe", guild, channel, user, fake.Token()}, f.secrets...) {
		if strings.Contains(text, secret) {
			t.Errorf("bridge metrics hold %q", secret)
		}
	}
}

// TestVoiceBridgeAloneServesItsMetrics (issue 14, item 4): `clankie bridge
// voice` serves its voice figures on CLANKIE_METRICS_ADDR: live sessions,
// briefings delivered, seconds of audio in and out, frames dropped for
// lack of consent, barge-ins; counts only, no id, no secret.
func TestVoiceBridgeAloneServesItsMetrics(t *testing.T) {
	const guild, voiceCh, user, moverRole = "100000000000000003", "100000000000000033", "200000000000000003", "300000000000000003"
	f := startMemory(t)
	fake := discordtest.New(t, discordtest.WithGuilds(discordtest.Guild{ID: guild,
		Roles:       []discordtest.Role{{ID: moverRole, Name: "movers", Permissions: discordgo.PermissionVoiceMoveMembers}},
		Members:     []discordtest.Member{{UserID: user, Roles: []string{moverRole}}},
		Channels:    []discordtest.Channel{{ID: voiceCh, Name: "lounge", Type: discordgo.ChannelTypeGuildVoice}},
		VoiceStates: []discordtest.VoiceState{{ChannelID: voiceCh, UserID: user}}}))
	model := realtimetest.New(t)
	metricsAddr := freeAddr(t)
	t.Setenv("CLANKIE_METRICS_ADDR", metricsAddr)
	t.Setenv("DISCORD_VOICE_BOT_TOKEN", fake.Token())
	t.Setenv("DISCORD_API_URL", fake.APIURL())
	t.Setenv("DISCORD_GUILD_IDS", guild)
	t.Setenv("CLANKIE_LOG_LEVEL", "error")
	t.Setenv("CLANKIE_REALTIME_URL", model.URL())
	t.Setenv("CLANKIE_REALTIME_API_KEY", realtimetest.DefaultKey)
	t.Setenv("CLANKIE_REALTIME_MODEL", realtimetest.DefaultModel)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runBridgeAlone(ctx, loadVoiceBridge) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("clankie bridge voice stopped with %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if _, err := fake.WaitCommandPuts(wctx, guild, 1); err != nil {
		t.Fatal(err)
	}
	in := fake.Interact(wctx, discordtest.InteractionSpec{GuildID: guild, ChannelID: voiceCh, UserID: user, Command: "voice", Subcommand: "join"})
	if m, err := in.WaitReply(wctx); err != nil || !strings.Contains(m.Content, "listening") {
		t.Fatalf("join: %v %v", m, err)
	}
	url := "http://" + metricsAddr + "/metrics"
	var text string
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(20 * time.Second) // a loaded CI machine: the briefing follows the join, not the reply
	for {
		_, text, fams = scrape(t, url, "")
		s, _ := metricValue(fams["clankie_voice_sessions"], map[string]string{"bridge": "voice"})
		b, _ := metricValue(fams["clankie_voice_briefings_delivered_total"], map[string]string{"bridge": "voice"})
		// The router counts an interaction just after its reply reached
		// Discord, so the count may trail the reply the test waited for.
		_, counted := fams["clankie_bridge_interactions_total"]
		if s == 1 && b >= 1 && counted || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range []struct {
		name    string
		typ     dto.MetricType
		atLeast float64
	}{
		{"clankie_voice_sessions", dto.MetricType_GAUGE, 1},
		{"clankie_voice_briefings_delivered_total", dto.MetricType_COUNTER, 1},
		{"clankie_voice_audio_in_seconds_total", dto.MetricType_COUNTER, 0},
		{"clankie_voice_audio_out_seconds_total", dto.MetricType_COUNTER, 0},
		{"clankie_voice_frames_dropped_no_consent_total", dto.MetricType_COUNTER, 0},
		{"clankie_voice_barge_ins_total", dto.MetricType_COUNTER, 0},
		{"clankie_voice_model_audio_dropped_total", dto.MetricType_COUNTER, 0},
		{"clankie_bridge_interactions_total", dto.MetricType_COUNTER, 1},
	} {
		fam := fams[w.name]
		if fam == nil {
			t.Errorf("no %s:\n%s", w.name, text)
			continue
		}
		if fam.GetType() != w.typ {
			t.Errorf("%s is a %v, want %v", w.name, fam.GetType(), w.typ)
		}
		if v, ok := metricValue(fam, map[string]string{"bridge": "voice"}); !ok || v < w.atLeast {
			t.Errorf("%s{bridge=voice} = %v (found %v), want at least %v", w.name, v, ok, w.atLeast)
		}
		for _, m := range fam.GetMetric() {
			if strings.HasPrefix(w.name, "clankie_voice_") && len(m.GetLabel()) != 1 {
				t.Errorf("%s carries labels %v; only bridge is allowed", w.name, m.GetLabel())
			}
		}
	}
	for _, secret := range append([]string{guild, voiceCh, user, moverRole, fake.Token(), realtimetest.DefaultKey}, f.secrets...) {
		if strings.Contains(text, secret) {
			t.Errorf("voice bridge metrics hold %q", secret)
		}
	}
}
