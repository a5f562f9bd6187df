package bridges

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/voice"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// briefingRecorder sits in front of the memory service and keeps the body
// of every voice-briefing request, so a test can see exactly whom the bridge
// asked about.
type briefingRecorder struct {
	mu   sync.Mutex
	reqs []api.BriefingRequest
	url  string
}

func recordBriefings(t *testing.T, target string) *briefingRecorder {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	br := &briefingRecorder{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/discord/voice-briefing" {
			b, _ := io.ReadAll(r.Body)
			var req api.BriefingRequest
			_ = json.Unmarshal(b, &req)
			br.mu.Lock()
			br.reqs = append(br.reqs, req)
			br.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	})}
	target2 := slowProxyListener(t, srv)
	br.url = target2
	return br
}

func (b *briefingRecorder) all() []api.BriefingRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]api.BriefingRequest(nil), b.reqs...)
}

type voiceEnv struct {
	t    *testing.T
	l    *logs
	mem  *memoryService
	rec  *briefingRecorder
	fake *discordtest.Fake
	rt   *fakeRealtime
	vb   *VoiceBridge
	run  *running
}

func startVoice(t *testing.T, policy config.ConsentPolicy, withRealtime bool, states ...discordtest.VoiceState) *voiceEnv {
	t.Helper()
	key := ""
	if withRealtime {
		key = realtimeKey
	}
	return startVoiceWithKey(t, policy, key, states...)
}

// startVoiceWithKey runs the voice bridge; a non-empty key configures the
// realtime fake, which accepts only realtimeKey.
func startVoiceWithKey(t *testing.T, policy config.ConsentPolicy, key string, states ...discordtest.VoiceState) *voiceEnv {
	t.Helper()
	return startVoiceWith(t, policy, key, voiceSetup{}, states...)
}

// voiceSetup adds to a voice test's world: options for the fake Discord,
// and for the session manager (after the test defaults: a 30 ms debounce,
// 10 ms rejoin backoff, 300 ms recheck).
type voiceSetup struct {
	fake  []discordtest.Option
	voice []VoiceOption
	// audio keeps the sessions' voice connections on; without a voice
	// server (WithVoiceServer) there is nothing to connect to, so they
	// are off and a session is live once Discord answered.
	audio bool
	// realtime adds options to the realtime fake (a transcription script).
	realtime []realtimetest.Option
}

func startVoiceWith(t *testing.T, policy config.ConsentPolicy, key string, setup voiceSetup, states ...discordtest.VoiceState) *voiceEnv {
	t.Helper()
	withRealtime := key != ""
	e := &voiceEnv{t: t, l: newLogs()}
	e.mem = startMemory(t, e.l.log)
	e.rec = recordBriefings(t, e.mem.url)
	e.fake = discordtest.New(t, append([]discordtest.Option{discordtest.WithGuilds(testGuild(states...))}, setup.fake...)...)
	cfg := config.VoiceBridge{
		DiscordToken:  e.fake.Token(),
		ConsentPolicy: policy,
		VoiceRoleIDs:  []string{},
		Memory:        config.MemoryClient{URL: e.rec.url},
		Discord:       config.Discord{APIURL: e.fake.APIURL(), GuildIDs: []string{guildID}, MemoryRoleIDs: []string{memRole}},
		Log:           config.Log{Level: "debug", Format: "json"},
	}
	cfg.VoiceBridgeToken = tokens.VoiceBridgeToken
	if withRealtime {
		e.rt = newFakeRealtime(t, setup.realtime...)
		cfg.RealtimeURL = e.rt.url()
		cfg.RealtimeAPIKey = key
		cfg.RealtimeModel = realtimeModel
		cfg.RealtimeTranscribe = "gpt-4o-mini-transcribe"
	}
	cfg.VoiceSessions = config.VoiceSessions{JoinTimeout: 10 * time.Second, IdleLeave: 2 * time.Minute, MaxSession: 2 * time.Hour}
	opts := append([]VoiceOption{func(c *voice.Config) {
		c.Debounce, c.RejoinBackoff, c.RecheckAfter = 30*time.Millisecond, 10*time.Millisecond, 300*time.Millisecond
		if !setup.audio {
			c.Audio = nil
		}
	}}, setup.voice...)
	vb, err := NewVoiceBridge(cfg, tokens.VoiceBridge, e.l.log.Named("voice-bridge"), nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e.vb = vb
	before := syncedCount(e.l)
	e.run = runInBackground(t, vb.Run)
	waitFor(t, 10*time.Second, "voice bridge ready", func() bool { return syncedCount(e.l) > before })
	return e
}

// seed stores a fact through the text bridge's bearer, as if proposed there.
func (e *voiceEnv) seed(subject, proposer, channel, body string, scope api.Scope) {
	e.t.Helper()
	vis := api.Visibility{Scope: api.ScopeGuild}
	if scope == api.ScopeChannel {
		vis = api.Visibility{Scope: api.ScopeChannel, ChannelID: channel}
	}
	text, err := newTextClient(e.mem.url)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := text.Propose(context.Background(), api.ProposalRequest{SchemaVersion: 1, ProposalID: "seed-" + subject + "-" + strings.ReplaceAll(body, " ", "-"), Fact: api.FactInput{
		Subject: api.Subject{GuildID: guildID, UserID: subject}, Kind: api.KindPersonFact, Body: body, Visibility: vis, Confidence: 0.9,
		Provenance: api.Provenance{SourceEventID: "seed", ProposerUserID: proposer, ChannelID: channel}}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *voiceEnv) voice(user, sub string, opts ...discordtest.OptionValue) string {
	e.t.Helper()
	return reply(e.t, e.fake, discordtest.InteractionSpec{GuildID: guildID, ChannelID: voiceRoom, UserID: user, Command: "voice", Subcommand: sub, Options: opts})
}

func (e *voiceEnv) move(user, channel string) {
	e.fake.VoiceStateUpdate(discordtest.VoiceState{GuildID: guildID, ChannelID: channel, UserID: user})
}

func inVoice(users ...string) []discordtest.VoiceState {
	var out []discordtest.VoiceState
	for _, u := range users {
		out = append(out, discordtest.VoiceState{ChannelID: voiceRoom, UserID: u})
	}
	return out
}

func TestVoiceJoinBriefsTheConsentedSpeaker(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover, alice, helperBot)...)
	e.seed(mover, mover, textA, "mover likes jazz", api.ScopeGuild)
	e.seed(mover, mover, textA, "said only in general", api.ScopeChannel)
	e.seed(alice, alice, textA, "alice likes tea", api.ScopeGuild)

	got := e.voice(mover, "join")
	if !strings.Contains(got, "listening") || !strings.Contains(got, "<#"+voiceRoom+">") {
		t.Fatalf("join reply %q", got)
	}
	ops, err := e.fake.WaitVoiceStateOps(ctxFor(t, 5*time.Second), 1)
	if err != nil || ops[0].ChannelID != voiceRoom || ops[0].GuildID != guildID {
		t.Fatalf("voice state ops %+v %v", ops, err)
	}
	items := e.rt.waitItems(t, 1)
	evs, _, _ := e.rt.snapshot()
	if evs[0].typ != "session.update" || !strings.Contains(evs[0].raw, "instructions") {
		t.Fatalf("first realtime event %q", evs[0].raw)
	}
	if !strings.Contains(items[0], "mover likes jazz") || strings.Contains(items[0], "alice likes tea") || strings.Contains(items[0], "said only in general") {
		t.Fatalf("briefing item %q", items[0])
	}
	reqs := e.rec.all()
	if len(reqs) != 1 || strings.Join(reqs[0].ConsentedUserIDs, ",") != mover || reqs[0].ChannelID != voiceRoom {
		t.Fatalf("briefing requests %+v", reqs)
	}
	if auth := e.rt.Conn(1).Header.Get("Authorization"); auth != "Bearer "+realtimeKey {
		t.Fatalf("realtime auth header %q", auth)
	}
	waitFor(t, 5*time.Second, "the briefing acknowledged", func() bool {
		return strings.Contains(e.voice(mover, "status"), "Briefings delivered to the model: 1.")
	})
	if got := e.voice(mover, "status"); !strings.Contains(got, "Realtime voice model: ready.") || strings.Contains(got, "jazz") {
		t.Fatalf("status %q", got)
	}
}

func TestVoiceJoinRefusals(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, false, inVoice(alice)...)
	if got := e.voice(mover, "join"); !strings.Contains(got, "voice channel") {
		t.Fatalf("join while not in voice: %q", got)
	}
	if got := e.voice(alice, "join"); !strings.Contains(got, "Move Members") {
		t.Fatalf("join without permission: %q", got)
	}
	if ops := e.fake.VoiceStateOps(); len(ops) != 0 {
		t.Fatalf("a refused join moved the bot: %+v", ops)
	}
	if got := e.voice(alice, "status"); !strings.Contains(got, "no voice session") {
		t.Fatalf("status: %q", got)
	}
	if reqs := e.rec.all(); len(reqs) != 0 {
		t.Fatal("a refused join pulled a briefing")
	}
}

func TestVoiceConsentRefreshes(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover, alice)...)
	e.seed(mover, mover, textA, "mover likes jazz", api.ScopeGuild)
	e.seed(alice, alice, textA, "alice likes tea", api.ScopeGuild)
	e.voice(mover, "join")
	e.rt.waitItems(t, 1)

	// A second member opts in: a refresh with their facts.
	e.voice(alice, "consent", str("action", "opt-in"))
	items := e.rt.waitItems(t, 2)
	if !strings.Contains(items[1], "alice likes tea") || !strings.Contains(strings.ToLower(items[1]), "refresh") {
		t.Fatalf("refresh after opt-in %q", items[1])
	}
	if got := e.voice(alice, "status"); !strings.Contains(got, "2 speakers have consented") || strings.Contains(got, alice) || strings.Contains(got, mover) {
		t.Fatalf("status %q", got)
	}
	// They opt out: a refresh without them.
	e.voice(alice, "consent", str("action", "opt-out"))
	items = e.rt.waitItems(t, 3)
	if strings.Contains(items[2], "alice likes tea") || !strings.Contains(items[2], "mover likes jazz") {
		t.Fatalf("refresh after opt-out %q", items[2])
	}
	// Someone outside the channel cannot manage consent there.
	if got := e.voice(carol, "consent", str("action", "opt-in")); !strings.Contains(got, "voice channel the session is in") {
		t.Fatalf("consent from outside: %q", got)
	}
	// The mover leaves the channel: their opt-in is dropped; nobody is left
	// consented, so the next briefing asks about nobody.
	e.move(mover, voiceTwo)
	waitFor(t, 5*time.Second, "a briefing without the mover", func() bool {
		reqs := e.rec.all()
		return len(reqs) >= 4 && len(reqs[len(reqs)-1].ConsentedUserIDs) == 0
	})
	// Back again: still not consented until they opt in.
	e.move(mover, voiceRoom)
	time.Sleep(100 * time.Millisecond)
	if got := e.voice(alice, "status"); !strings.Contains(got, "0 speakers have consented") {
		t.Fatalf("status after the mover came back: %q", got)
	}
}

func TestVoicePresencePolicyRespectsOptOut(t *testing.T) {
	e := startVoice(t, config.ConsentPresence, false, inVoice(mover, alice, bob)...)
	e.seed(bob, bob, textA, "bob likes chess", api.ScopeGuild)
	e.voice(mover, "join")
	waitFor(t, 5*time.Second, "first briefing", func() bool { return len(e.rec.all()) >= 1 })
	if ids := e.rec.all()[0].ConsentedUserIDs; len(ids) != 3 {
		t.Fatalf("presence briefing asked about %v", ids)
	}
	e.voice(bob, "consent", str("action", "opt-out"))
	e.move(bob, "")
	e.move(bob, voiceRoom)
	time.Sleep(150 * time.Millisecond)
	for _, r := range e.rec.all()[1:] {
		for _, id := range r.ConsentedUserIDs {
			if id == bob {
				t.Fatalf("rejoining under presence undid the opt-out: %+v", r)
			}
		}
	}
	if got := e.voice(alice, "status"); !strings.Contains(got, "2 speakers have consented") || !strings.Contains(got, "presence") {
		t.Fatalf("status %q", got)
	}
}

func TestVoiceSessionEndsWhenTheLastHumanLeaves(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover, helperBot)...)
	e.voice(mover, "join")
	e.rt.waitItems(t, 1)
	e.move(mover, "")
	waitFor(t, 5*time.Second, "the realtime socket to close", func() bool {
		_, conns, closed := e.rt.snapshot()
		return conns == 1 && closed == 1
	})
	// The last consented person leaving shrinks the consented set, but the
	// session ends rather than dialling a fresh model conversation to close.
	time.Sleep(300 * time.Millisecond)
	if _, conns, _ := e.rt.snapshot(); conns != 1 {
		t.Fatalf("%d model connections after the last human left, want 1: a fresh one was dialled for a session that ended", conns)
	}
	ops, err := e.fake.WaitVoiceStateOps(ctxFor(t, 5*time.Second), 2)
	if err != nil || ops[len(ops)-1].ChannelID != "" {
		t.Fatalf("the bot did not leave voice: %+v %v", ops, err)
	}
	if got := e.voice(mover, "status"); !strings.Contains(got, "no voice session") {
		t.Fatalf("status after the session ended: %q", got)
	}
}

func TestVoiceLeaveAndRealtimeReconnect(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover)...)
	e.seed(mover, mover, textA, "mover likes jazz", api.ScopeGuild)
	e.voice(mover, "join")
	e.rt.waitItems(t, 1)
	e.rt.drop()
	items := e.rt.waitItems(t, 2)
	evs, conns, _ := e.rt.snapshot()
	if conns != 2 || !strings.Contains(items[1], "mover likes jazz") {
		t.Fatalf("after a drop: %d connections, item %q", conns, items[1])
	}
	var second []string
	for _, ev := range evs {
		if ev.conn == 1 {
			second = append(second, ev.typ)
		}
	}
	if len(second) < 2 || second[0] != "session.update" || second[1] != "conversation.item.create" {
		t.Fatalf("re-seed order on the new connection: %v", second)
	}
	if got := e.voice(mover, "leave"); !strings.Contains(got, "left voice") {
		t.Fatalf("leave: %q", got)
	}
	waitFor(t, 5*time.Second, "the realtime socket to close", func() bool {
		_, conns, closed := e.rt.snapshot()
		return closed == conns
	})
}

func TestVoiceWithoutRealtimeSaysSo(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, false, inVoice(mover)...)
	e.voice(mover, "join")
	waitFor(t, 5*time.Second, "an egress receipt", func() bool {
		return e.l.obs.FilterField(zapString("receipt", "voice.briefing.egress")).Len() >= 1
	})
	r := e.l.obs.FilterField(zapString("receipt", "voice.briefing.egress")).All()[0].ContextMap()
	if r["outcome"] != "no_realtime_endpoint" {
		t.Fatalf("receipt %v", r)
	}
	if got := e.voice(mover, "status"); !strings.Contains(got, "not configured") {
		t.Fatalf("status %q", got)
	}
}

// TestVoiceLogsHoldNoUserIDsOrContent reads every receipt and log line of a
// voice scenario: no user id, fact body, briefing text or secret.
func TestVoiceLogsHoldNoUserIDsOrContent(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover, alice)...)
	secret := "saxophone-lighthouse-9187"
	e.seed(mover, mover, textA, "mover "+secret, api.ScopeGuild)
	e.seed(alice, alice, textA, "alice "+secret, api.ScopeGuild)
	e.voice(mover, "join")
	e.rt.waitItems(t, 1)
	e.voice(alice, "consent", str("action", "opt-in"))
	items := e.rt.waitItems(t, 2)
	e.voice(alice, "status")
	e.voice(mover, "leave")
	receipts := e.l.obs.FilterField(zapString("receipt", "voice.briefing.egress")).All()
	if len(receipts) < 2 {
		t.Fatalf("%d egress receipts", len(receipts))
	}
	for _, r := range receipts {
		m := r.ContextMap()
		if m["consentedSpeakers"] == nil || m["briefingLength"] == nil || m["latency"] == nil || m["correlationId"] == nil {
			t.Fatalf("receipt lacks a figure: %v", m)
		}
	}
	e.run.stop()
	e.l.assertClean(t, secret, mover, alice, items[0], items[1], realtimeKey,
		tokens.VoiceBridge, tokens.TextBridge, tokens.Operator, e.fake.Token())
}

// TestVoiceRejoinIgnoresTheEarlierLeaveEcho: Discord echoes the bot's own
// voice state updates; the echo of a leave can arrive after the next join
// and must not end the new session.
func TestVoiceRejoinIgnoresTheEarlierLeaveEcho(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, false, inVoice(mover)...)
	for i := range 40 {
		if got := e.voice(mover, "join"); !strings.Contains(got, "listening") {
			t.Fatalf("join %d: %q", i, got)
		}
		if got := e.voice(mover, "leave"); !strings.Contains(got, "left voice") {
			t.Fatalf("leave %d: %q", i, got)
		}
	}
	e.voice(mover, "join")
	time.Sleep(100 * time.Millisecond) // let every echo arrive
	if got := e.voice(mover, "status"); !strings.Contains(got, "Voice session in") {
		t.Fatalf("a stale echo ended the session: %q", got)
	}
}

// TestVoiceBotMovedBySomeoneElseEndsTheSession: a voice state update for
// the bot that the bridge did not ask for is a move or a disconnect by a
// moderator; the session and its consent end.
func TestVoiceBotMovedBySomeoneElseEndsTheSession(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, false, inVoice(mover)...)
	e.voice(mover, "join")
	if _, err := e.fake.WaitVoiceStateOps(ctxFor(t, 5*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the join's own echo arrives first
	if got := e.voice(mover, "status"); !strings.Contains(got, "Voice session in") {
		t.Fatalf("status after join: %q", got)
	}
	e.move(e.fake.BotID(), voiceTwo)
	waitFor(t, 5*time.Second, "the session to end", func() bool {
		return strings.Contains(e.voice(mover, "status"), "no voice session")
	})
}

// TestVoiceConsentDroppedWhenARosterRebuiltAfterAReconnectMissesThem
// (issue 10, item 2): under explicit, a person who opted in and left while
// the bot's gateway re-identified is not in the GUILD_CREATE that rebuilds
// the roster; no VOICE_STATE_UPDATE ever says they left. Rejoining without
// opting in must not brief them again: the rebuilt roster drops their
// consent through the same path as a leave.
func TestVoiceConsentDroppedWhenARosterRebuiltAfterAReconnectMissesThem(t *testing.T) {
	e := startVoice(t, config.ConsentExplicit, true, inVoice(mover, alice)...)
	e.seed(alice, alice, textA, "alice likes tea", api.ScopeGuild)
	e.voice(mover, "join")
	e.rt.waitItems(t, 1)
	e.voice(alice, "consent", str("action", "opt-in"))
	if items := e.rt.waitItems(t, 2); !strings.Contains(items[1], "alice likes tea") {
		t.Fatalf("briefing after alice opted in %q", items[1])
	}

	// The gateway session is invalidated; alice leaves while the bot
	// re-identifies, so the only news of it is the GUILD_CREATE that follows.
	identifies := len(e.fake.Identifies())
	e.fake.InvalidateSessions()
	e.fake.GuildCreate(testGuild(inVoice(mover, e.fake.BotID())...))
	waitFor(t, 5*time.Second, "the bot to identify again", func() bool { return len(e.fake.Identifies()) > identifies })
	waitFor(t, 5*time.Second, "the session to count one consented speaker", func() bool {
		return strings.Contains(e.voice(mover, "status"), "1 speaker has consented")
	})

	// alice comes back without opting in.
	e.move(alice, voiceRoom)
	time.Sleep(150 * time.Millisecond) // longer than the debounce
	if got := e.voice(mover, "status"); !strings.Contains(got, "1 speaker has consented") {
		t.Fatalf("status after alice rejoined: %q", got)
	}
	reqs := e.rec.all()
	last := reqs[len(reqs)-1]
	if slices.Contains(last.ConsentedUserIDs, alice) {
		t.Fatalf("alice is briefed again without opting in: %+v", last.ConsentedUserIDs)
	}
	for _, it := range e.rt.items()[2:] {
		if strings.Contains(it, "alice likes tea") {
			t.Fatalf("a briefing after the rebuild holds alice's fact")
		}
	}
}

// TestVoiceStatusSaysTheModelRefusedTheKey: a wrong realtime key gives one
// plain sentence in /voice status, one log line with the code, no retries,
// and the key in no log line.
func TestVoiceStatusSaysTheModelRefusedTheKey(t *testing.T) {
	wrong := "sk-wrong-realtime-key-4242"
	e := startVoiceWithKey(t, config.ConsentExplicit, wrong, inVoice(mover)...)
	e.voice(mover, "join")
	waitFor(t, 5*time.Second, "the refusal", func() bool { return strings.Contains(e.voice(mover, "status"), "refused") })
	got := e.voice(mover, "status")
	if !strings.Contains(got, "Realtime voice model: refused: the endpoint rejected the API key (invalid_api_key)") ||
		!strings.Contains(got, "Briefings delivered to the model: 0.") {
		t.Fatalf("status %q", got)
	}
	time.Sleep(100 * time.Millisecond)
	if n := e.rt.Attempts(); n != 1 {
		t.Fatalf("%d attempts after the key was refused, want 1", n)
	}
	if n := e.l.obs.FilterMessage("realtime endpoint refused the session; not reconnecting").FilterField(zapString("code", "invalid_api_key")).Len(); n != 1 {
		t.Fatalf("%d refusal log lines with the code, want 1", n)
	}
	e.run.stop()
	e.l.assertClean(t, wrong, realtimeKey)
}
