package bridges

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/memory"
	"github.com/clankie/clankie/memoryclient"
)

// Ids of the test server. Members: alice and bob are ordinary, mod holds the
// memory role, admin has Manage Server, mover has Move Members, helper is a
// bot.
const (
	guildID   = "100000000000000001"
	textA     = "100000000000000011"
	textB     = "100000000000000012"
	voiceRoom = "100000000000000021"
	voiceTwo  = "100000000000000022"
	alice     = "200000000000000001"
	bob       = "200000000000000002"
	carol     = "200000000000000003"
	mod       = "200000000000000004"
	admin     = "200000000000000005"
	mover     = "200000000000000006"
	helperBot = "200000000000000009"
	memRole   = "300000000000000001"
	adminRole = "300000000000000002"
	moverRole = "300000000000000003"
)

var tokens = config.Tokens{
	OperatorToken:    config.OperatorToken{Operator: "operator-e2e-secret-token-001"},
	TextBridgeToken:  config.TextBridgeToken{TextBridge: "text-e2e-secret-token-000002"},
	VoiceBridgeToken: config.VoiceBridgeToken{VoiceBridge: "voice-e2e-secret-token-00003"},
	GameplayToken:    config.GameplayToken{Gameplay: "game-e2e-secret-token-000004"},
}

func testGuild(voiceStates ...discordtest.VoiceState) discordtest.Guild {
	return discordtest.Guild{
		ID: guildID, Name: "test server",
		Roles: []discordtest.Role{
			{ID: memRole, Name: "memory keepers"},
			{ID: adminRole, Name: "admins", Permissions: discordgo.PermissionManageGuild},
			{ID: moverRole, Name: "movers", Permissions: discordgo.PermissionVoiceMoveMembers},
		},
		Members: []discordtest.Member{
			{UserID: alice}, {UserID: bob}, {UserID: carol},
			{UserID: mod, Roles: []string{memRole}},
			{UserID: admin, Roles: []string{adminRole}},
			{UserID: mover, Roles: []string{moverRole}},
			{UserID: helperBot, Bot: true},
		},
		Channels: []discordtest.Channel{
			{ID: textA, Name: "general", Type: discordgo.ChannelTypeGuildText},
			{ID: textB, Name: "other", Type: discordgo.ChannelTypeGuildText},
			{ID: voiceRoom, Name: "lounge", Type: discordgo.ChannelTypeGuildVoice},
			{ID: voiceTwo, Name: "quiet", Type: discordgo.ChannelTypeGuildVoice},
		},
		VoiceStates: voiceStates,
	}
}

// logs gathers every log line of a test, service and bridges alike.
type logs struct {
	obs *observer.ObservedLogs
	log *zap.Logger
}

func newLogs() *logs {
	core, obs := observer.New(zap.DebugLevel)
	return &logs{obs: obs, log: zap.New(core)}
}

// assertClean fails when any log line holds one of the secrets.
func (l *logs) assertClean(t *testing.T, secrets ...string) {
	t.Helper()
	if l.obs.Len() == 0 {
		t.Fatal("nothing was logged; the privacy check would prove nothing")
	}
	for _, e := range l.obs.All() {
		line := fmt.Sprint(e.Message, " ", e.ContextMap())
		for _, s := range secrets {
			if s != "" && strings.Contains(line, s) {
				t.Fatalf("a log line holds %q: %s", s, line)
			}
		}
	}
}

// memoryService runs the real memory service on a temp dir over loopback.
type memoryService struct {
	url      string
	dir      string
	operator *memoryclient.Client
}

func startMemory(t testing.TB, log *zap.Logger) *memoryService {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memory")
	srv, err := memory.Start(config.Memory{Addr: "127.0.0.1:0", MemoryRoot: config.MemoryRoot{Dir: dir}, Tokens: tokens, Log: config.Log{Level: "debug", Format: "json"}}, log.Named("memory"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "http://" + srv.Addr
	op, err := memoryclient.New(url, tokens.Operator)
	if err != nil {
		t.Fatal(err)
	}
	return &memoryService{url: url, dir: dir, operator: op}
}

func (m *memoryService) export(t *testing.T, userID string) []api.Fact {
	t.Helper()
	r, err := m.operator.Export(context.Background(), guildID, userID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Facts
}

// slowProxy answers like the memory service, but only after delay.
func slowProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		rp.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// running is a bridge running in the background until the test ends.
type running struct {
	stop func()
	once sync.Once
}

func runInBackground(t testing.TB, run func(context.Context) error) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	r := &running{}
	r.stop = func() {
		r.once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("bridge stopped with %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

func textConfig(fake *discordtest.Fake, memURL string) config.TextBridge {
	cfg := config.TextBridge{
		DiscordToken: fake.Token(),
		Memory:       config.MemoryClient{URL: memURL},
		Discord:      config.Discord{APIURL: fake.APIURL(), GuildIDs: []string{guildID}, MemoryRoleIDs: []string{memRole}},
		Log:          config.Log{Level: "debug", Format: "json"},
	}
	cfg.TextBridgeToken = tokens.TextBridgeToken
	return cfg
}

// startText runs a text bridge against fake and waits until its commands
// are synced.
func startText(t *testing.T, fake *discordtest.Fake, memURL string, l *logs) *running {
	t.Helper()
	tb, err := NewText(textConfig(fake, memURL), tokens.TextBridge, l.log.Named("text"), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := syncedCount(l)
	r := runInBackground(t, tb.Run)
	waitFor(t, 10*time.Second, "commands synced", func() bool { return syncedCount(l) > before })
	return r
}

func syncedCount(l *logs) int {
	return l.obs.FilterMessage("commands synced").Len()
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// person-memory interaction helpers.
func pm(guild, channel, user, sub string, opts ...discordtest.OptionValue) discordtest.InteractionSpec {
	return discordtest.InteractionSpec{GuildID: guild, ChannelID: channel, UserID: user, Command: "person-memory", Subcommand: sub, Options: opts}
}

func person(id string) discordtest.OptionValue { return discordtest.UserOption("person", id) }
func str(name, v string) discordtest.OptionValue {
	return discordtest.StringOption(name, v)
}

// reply runs an interaction and returns the reply the invoker sees, checking
// that it is ephemeral and mentions nobody.
func reply(t *testing.T, fake *discordtest.Fake, spec discordtest.InteractionSpec) string {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	in := fake.Interact(ctx, spec)
	m, err := in.WaitReply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ephemeral() {
		t.Fatalf("reply is not ephemeral: %q", m.Content)
	}
	if m.AllowedMentions == nil || len(m.AllowedMentions.Parse) != 0 || len(m.AllowedMentions.Users) != 0 || len(m.AllowedMentions.Roles) != 0 {
		t.Fatalf("reply allows mentions: %+v", m.AllowedMentions)
	}
	if n := len([]rune(m.Content)); n > 2000 || n == 0 {
		t.Fatalf("reply has %d characters", n)
	}
	return m.Content
}

func slowProxyListener(t testing.TB, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func newTextClient(url string) (*memoryclient.Client, error) {
	return memoryclient.New(url, tokens.TextBridge)
}

func zapString(k, v string) zap.Field  { return zap.String(k, v) }
func zapInt(k string, v int) zap.Field { return zap.Int(k, v) }
