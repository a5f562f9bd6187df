package bridges

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
)

// httpTextConfig is the text bridge serving HTTP interactions on a free
// loopback port, verifying with the fake's public key.
func httpTextConfig(fake *discordtest.Fake, memURL string) config.TextBridge {
	cfg := textConfig(fake, memURL)
	cfg.InteractionsAddr = "127.0.0.1:0"
	cfg.PublicKey = fake.PublicKey()
	return cfg
}

// startHTTPText runs a text bridge in HTTP interactions mode and returns its
// endpoint URL once it listens.
func startHTTPText(t *testing.T, cfg config.TextBridge, l *logs, syncCommands bool) (*Text, string) {
	t.Helper()
	tb, err := NewText(cfg, tokens.TextBridge, l.log.Named("text"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tb.HTTP == nil || tb.Bot != nil {
		t.Fatal("DISCORD_INTERACTIONS_ADDR did not select the HTTP transport")
	}
	tb.HTTP.SyncCommands = syncCommands
	addr, err := tb.HTTP.Listen()
	if err != nil {
		t.Fatal(err)
	}
	before := l.obs.FilterMessage("interactions endpoint listening").Len()
	runInBackground(t, tb.Run)
	waitFor(t, 10*time.Second, "the endpoint listening", func() bool {
		return l.obs.FilterMessage("interactions endpoint listening").Len() > before
	})
	return tb, "http://" + addr + "/interactions"
}

// httpReply delivers an interaction over HTTP and returns what the invoker
// sees, checked like reply.
func httpReply(t *testing.T, fake *discordtest.Fake, endpoint string, spec discordtest.InteractionSpec) (string, *discordtest.Interaction) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	in := fake.InteractHTTP(ctx, endpoint, spec)
	m, err := in.WaitReply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ephemeral() || m.AllowedMentions == nil || len(m.AllowedMentions.Parse) != 0 {
		t.Fatalf("reply not ephemeral or allows mentions: %+v", m)
	}
	return m.Content, in
}

// TestHTTPInteractionsServeCommands: with DISCORD_INTERACTIONS_ADDR the text
// bridge opens no gateway, answers the portal's PING with PONG, registers
// the commands when asked, and answers /person-memory in the HTTP response;
// the badly signed copy the fake sends first stores nothing.
func TestHTTPInteractionsServeCommands(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	_, endpoint := startHTTPText(t, httpTextConfig(fake, mem.url), l, true)
	if err := fake.PingHTTP(ctxFor(t, 5*time.Second), endpoint); err != nil {
		t.Fatal(err)
	}
	if puts := fake.CommandPuts(guildID); len(puts) != 1 {
		t.Fatalf("--sync-commands registered %d times", len(puts))
	}
	if n := len(fake.Identifies()); n != 0 {
		t.Fatalf("the HTTP transport opened a gateway (%d identifies)", n)
	}

	got, in := httpReply(t, fake, endpoint, pm(guildID, textA, alice, "propose", person(alice), str("fact", "I like green tea")))
	if !strings.Contains(strings.ToLower(got), "remember") {
		t.Fatalf("propose answered %q", got)
	}
	cbs := in.Callbacks()
	if len(cbs) != 1 || cbs[0].Type != discordgo.InteractionResponseChannelMessageWithSource || cbs[0].After > 3*time.Second {
		t.Fatalf("callbacks %+v", cbs)
	}
	facts := mem.export(t, alice)
	if len(facts) != 1 || facts[0].Provenance.SourceEventID != in.ID || facts[0].Body != "I like green tea" {
		t.Fatalf("stored %+v (the badly signed copy must store nothing)", facts)
	}
	if got, _ := httpReply(t, fake, endpoint, pm(guildID, textA, alice, "recall")); !strings.Contains(got, "green tea") {
		t.Fatalf("recall answered %q", got)
	}
	// Autocomplete answers its choices in the HTTP response too.
	ctx := ctxFor(t, 10*time.Second)
	ac := fake.InteractHTTP(ctx, endpoint, discordtest.InteractionSpec{GuildID: guildID, ChannelID: textA, UserID: alice,
		Command: "person-memory", Subcommand: "forget", Autocomplete: true, Options: []discordtest.OptionValue{str("fact", "").Focus()}})
	cb, err := ac.WaitCallback(ctx)
	if err != nil || cb.Type != discordgo.InteractionApplicationCommandAutocompleteResult || len(cb.Choices) != 1 || cb.Choices[0].Value != facts[0].FactID {
		t.Fatalf("autocomplete callback %+v, %v", cb, err)
	}
	l.assertClean(t, fake.Token(), tokens.TextBridge, "green tea")
}

// TestHTTPInteractionsRefuseWhatDiscordDidNotSign: bad signatures, stale or
// future timestamps (more than 60 seconds off), missing headers get 401, an
// oversized body 413, and none of them stores anything.
func TestHTTPInteractionsRefuseWhatDiscordDidNotSign(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	_, endpoint := startHTTPText(t, httpTextConfig(fake, mem.url), l, true)
	in, err := fake.BuildInteraction(pm(guildID, textA, alice, "propose", person(alice), str("fact", "should never be kept")))
	if err != nil {
		t.Fatal(err)
	}
	body := in.Payload()
	ctx := ctxFor(t, 10*time.Second)
	for _, tc := range []struct {
		name string
		post discordtest.SignedPost
		want int
	}{
		{"bad signature", discordtest.SignedPost{Body: body, BadSignature: true}, http.StatusUnauthorized},
		{"timestamp 61 seconds old", discordtest.SignedPost{Body: body, At: time.Now().Add(-61 * time.Second)}, http.StatusUnauthorized},
		{"timestamp 6 minutes old", discordtest.SignedPost{Body: body, At: time.Now().Add(-6 * time.Minute)}, http.StatusUnauthorized},
		{"timestamp 6 minutes ahead", discordtest.SignedPost{Body: body, At: time.Now().Add(6 * time.Minute)}, http.StatusUnauthorized},
		{"body over the bound", discordtest.SignedPost{Body: append(bytes.Repeat([]byte(" "), bot.MaxInteractionBody), body...)}, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fake.PostSigned(ctx, endpoint, tc.post)
			if err != nil || res.Status != tc.want {
				t.Fatalf("answered %d, %v; want %d", res.Status, err, tc.want)
			}
		})
	}
	t.Run("no signature headers", func(t *testing.T) {
		resp, err := http.Post(endpoint, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("answered %d", resp.StatusCode)
		}
	})
	t.Run("not a POST", func(t *testing.T) {
		resp, err := http.Get(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("answered %d", resp.StatusCode)
		}
	})
	// A timestamp 50 seconds old is within the window: the same request,
	// signed, is served (so the refusals above were for their reason).
	res, err := fake.PostSigned(ctx, endpoint, discordtest.SignedPost{Body: body, At: time.Now().Add(-50 * time.Second)})
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("a fresh enough request answered %d, %v", res.Status, err)
	}
	facts := mem.export(t, alice)
	if len(facts) != 1 || facts[0].Provenance.SourceEventID != in.ID {
		t.Fatalf("stored %+v; only the properly signed request may store", facts)
	}
	l.assertClean(t, "should never be kept", fake.Token())
}

// roundRobin is a reverse proxy that sends each request to the next
// replica in turn (a load balancer in front of HTTP replicas).
func roundRobin(t *testing.T, replicas ...string) string { return roundRobinTB(t, replicas...) }

func roundRobinTB(t testing.TB, replicas ...string) string {
	t.Helper()
	var n atomic.Int64
	targets := make([]*url.URL, len(replicas))
	for i, r := range replicas {
		targets[i], _ = url.Parse(r)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		u := targets[int(n.Add(1)-1)%len(targets)]
		pr.SetURL(u)
		pr.Out.URL.Path = u.Path
	}}
	return slowProxyListener(t, &http.Server{Handler: rp}) + "/interactions"
}

// TestHTTPReplicasBehindARoundRobinProxy: two replicas (two fully separate
// Text values in this test process, each with its own router, memory
// client and logs; one syncs commands) behind a round-robin proxy serve
// interleaved interactions of one application and store one set of facts.
func TestHTTPReplicasBehindARoundRobinProxy(t *testing.T) {
	shared := newLogs()
	mem := startMemory(t, shared.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	pa, pb := countCalls(t, mem.url), countCalls(t, mem.url)
	la, lb := newLogs(), newLogs()
	_, ea := startHTTPText(t, httpTextConfig(fake, pa.url), la, true)
	_, eb := startHTTPText(t, httpTextConfig(fake, pb.url), lb, false)
	lbURL := roundRobin(t, ea, eb)
	if err := fake.PingHTTP(ctxFor(t, 5*time.Second), lbURL); err != nil {
		t.Fatal(err)
	}
	if puts := fake.CommandPuts(guildID); len(puts) != 1 {
		t.Fatalf("commands registered %d times by two replicas", len(puts))
	}
	users := []string{alice, bob, carol}
	const n = 12
	for i := range n {
		u := users[i%len(users)]
		got, _ := httpReply(t, fake, lbURL, pm(guildID, textA, u, "propose", person(u), str("fact", fmt.Sprintf("fact number %d", i))))
		if !strings.Contains(strings.ToLower(got), "remember") {
			t.Fatalf("propose %d answered %q", i, got)
		}
	}
	// Every replica reads what the other wrote: one memory, one set of facts.
	for _, u := range users {
		for range 2 {
			got, _ := httpReply(t, fake, lbURL, pm(guildID, textA, u, "recall"))
			for i := range n {
				if users[i%len(users)] == u && !strings.Contains(got, fmt.Sprintf("fact number %d", i)) {
					t.Fatalf("recall for %s misses fact %d: %q", u, i, got)
				}
			}
		}
	}
	total := 0
	for _, u := range users {
		total += len(mem.export(t, u))
	}
	if total != n {
		t.Fatalf("stored %d facts for %d proposals", total, n)
	}
	if pa.calls.Load() < n/2 || pb.calls.Load() < n/2 {
		t.Fatalf("replica memory calls %d and %d: the proxy did not interleave", pa.calls.Load(), pb.calls.Load())
	}
}

// TestSlowMemoryDefersOnBothTransports: with a slow memory service the HTTP
// response is an ephemeral defer and the reply arrives by editing the
// original response, exactly as on the gateway.
func TestSlowMemoryDefersOnBothTransports(t *testing.T) {
	for _, transport := range []string{"gateway", "http"} {
		t.Run(transport, func(t *testing.T) {
			l := newLogs()
			mem := startMemory(t, l.log)
			slow := slowProxy(t, mem.url, 2200*time.Millisecond)
			fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
			ctx := ctxFor(t, 15*time.Second)
			spec := pm(guildID, textA, alice, "propose", person(alice), str("fact", "slow but kept"))
			var in *discordtest.Interaction
			if transport == "http" {
				_, endpoint := startHTTPText(t, httpTextConfig(fake, slow), l, true)
				in = fake.InteractHTTP(ctx, endpoint, spec)
			} else {
				startText(t, fake, slow, l)
				in = fake.Interact(ctx, spec)
			}
			m, err := in.WaitReply(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cbs := in.Callbacks()
			if len(cbs) != 1 || cbs[0].Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || !cbs[0].Ephemeral() || cbs[0].After > 3*time.Second {
				t.Fatalf("callbacks %+v", cbs)
			}
			if m.Via != discordtest.ViaEdit || !m.Ephemeral() || !strings.Contains(strings.ToLower(m.Content), "remember") {
				t.Fatalf("reply %+v", m)
			}
			if facts := mem.export(t, alice); len(facts) != 1 {
				t.Fatalf("stored %d facts", len(facts))
			}
		})
	}
}

// TestTextSyncRegistersOnce is `clankie bridge text sync`: it registers the
// commands and writes nothing the second time.
func TestTextSyncRegistersOnce(t *testing.T) {
	l := newLogs()
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	tb, err := NewText(httpTextConfig(fake, deadURL(t)), tokens.TextBridge, l.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := tb.SyncCommands(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if puts := fake.CommandPuts(guildID); len(puts) != 1 {
		t.Fatalf("%d registrations", len(puts))
	}
	if n := len(fake.Identifies()); n != 0 {
		t.Fatalf("sync opened a gateway")
	}
}

// TestInteractionsAddrBarePortIsLoopback: DISCORD_INTERACTIONS_ADDR=:0
// binds 127.0.0.1, as CLANKIE_METRICS_ADDR does; the endpoint speaks
// plaintext, so every interface takes 0.0.0.0 written out.
func TestInteractionsAddrBarePortIsLoopback(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	for _, tc := range []struct {
		addr     string
		loopback bool
	}{{":0", true}, {"0.0.0.0:0", false}} {
		cfg := httpTextConfig(fake, deadURL(t))
		cfg.InteractionsAddr = tc.addr
		_, endpoint := startHTTPText(t, cfg, newLogs(), false)
		u, _ := url.Parse(endpoint)
		if ip := net.ParseIP(u.Hostname()); ip.IsLoopback() != tc.loopback || !tc.loopback && !ip.IsUnspecified() {
			t.Errorf("DISCORD_INTERACTIONS_ADDR=%s listens on %s (loopback only: %v)", tc.addr, u.Host, tc.loopback)
		}
	}
}

// TestHTTPReplicasAnswerAnInteractionOnce: one signed interaction (someone's
// ephemeral /person-memory mine) POSTed to two replicas sharing one memory
// service is answered by the first only; the second, and the first after a
// restart, answer 409 with none of it. The memory service's claims decide,
// not each process's memory.
func TestHTTPReplicasAnswerAnInteractionOnce(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	cfg := httpTextConfig(fake, mem.url)
	_, ea := startHTTPText(t, cfg, l, true)
	if got, _ := httpReply(t, fake, ea, pm(guildID, textA, alice, "propose", person(alice), str("fact", "alice keeps bees"))); !strings.Contains(strings.ToLower(got), "remember") {
		t.Fatalf("propose answered %q", got)
	}
	in, err := fake.BuildInteraction(pm(guildID, textA, alice, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 10*time.Second)
	res, err := fake.PostSigned(ctx, ea, discordtest.SignedPost{Body: in.Payload()})
	if err != nil || res.Status != http.StatusOK || !strings.Contains(string(res.Body), "alice keeps bees") {
		t.Fatalf("first delivery answered %d %s, %v", res.Status, res.Body, err)
	}
	_, eb := startHTTPText(t, cfg, newLogs(), false)
	restartedA, ea2 := startHTTPText(t, cfg, newLogs(), false) // replica A after a restart: a new process state
	_ = restartedA
	for name, endpoint := range map[string]string{"another replica": eb, "a restarted replica": ea2, "the same replica": ea} {
		res, err := fake.PostSigned(ctx, endpoint, discordtest.SignedPost{Body: in.Payload()})
		if err != nil || res.Status != http.StatusConflict || strings.Contains(string(res.Body), "bees") {
			t.Errorf("%s answered the replay %d %s, %v; want 409 without content", name, res.Status, res.Body, err)
		}
	}
	l.assertClean(t, fake.Token(), tokens.TextBridge, "alice keeps bees")
}

// TestHTTPInteractionsFailClosedWithoutMemory: with the memory service
// unreachable an interaction cannot be claimed, so nothing is done and the
// person reads, ephemerally, that memory is unreachable (a callback Discord
// accepts); autocomplete gets no choices.
func TestHTTPInteractionsFailClosedWithoutMemory(t *testing.T) {
	l := newLogs()
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	_, endpoint := startHTTPText(t, httpTextConfig(fake, deadURL(t)), l, true)
	if err := fake.PingHTTP(ctxFor(t, 5*time.Second), endpoint); err != nil {
		t.Fatalf("the portal's PING needs no memory: %v", err)
	}
	got, _ := httpReply(t, fake, endpoint, pm(guildID, textA, alice, "propose", person(alice), str("fact", "never stored")))
	if !strings.Contains(got, "can't reach my memory") {
		t.Fatalf("answered %q", got)
	}
	ctx := ctxFor(t, 10*time.Second)
	ac := fake.InteractHTTP(ctx, endpoint, discordtest.InteractionSpec{GuildID: guildID, ChannelID: textA, UserID: alice,
		Command: "person-memory", Subcommand: "forget", Autocomplete: true, Options: []discordtest.OptionValue{str("fact", "").Focus()}})
	cb, err := ac.WaitCallback(ctx)
	if err != nil || cb.Type != discordgo.InteractionApplicationCommandAutocompleteResult || len(cb.Choices) != 0 {
		t.Fatalf("autocomplete callback %+v, %v", cb, err)
	}
}
