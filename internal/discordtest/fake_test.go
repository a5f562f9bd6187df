package discordtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/internal/discordtest"
)

// TestMain checks, after every test and cleanup ran, that neither the fakes
// nor the discordgo sessions left goroutines behind. Most tests run in
// parallel (discordgo's Session.Close sleeps a second), so the per-test
// goleak.VerifyNone lives in TestNoGoroutineLeak, which runs alone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	guildID      = "900000000000000001"
	ownerID      = "800000000000000001"
	aliceID      = "800000000000000002"
	bobID        = "800000000000000003"
	otherBotID   = "800000000000000004"
	modRoleID    = "700000000000000001"
	textID       = "600000000000000001"
	voiceID      = "600000000000000002"
	otherVoiceID = "600000000000000003"
)

func testGuild() discordtest.Guild {
	return discordtest.Guild{
		ID:      guildID,
		Name:    "Test Server",
		OwnerID: ownerID,
		Roles: []discordtest.Role{
			{ID: guildID, Name: "@everyone", Permissions: discordgo.PermissionViewChannel | discordgo.PermissionSendMessages},
			{ID: modRoleID, Name: "memory-keeper", Permissions: discordgo.PermissionManageGuild},
		},
		Members: []discordtest.Member{
			{UserID: ownerID, Username: "owner"},
			{UserID: aliceID, Username: "alice", Roles: []string{modRoleID}},
			{UserID: bobID, Username: "bob"},
			{UserID: otherBotID, Username: "otherbot", Bot: true},
		},
		Channels: []discordtest.Channel{
			{ID: textID, Name: "general", Type: discordgo.ChannelTypeGuildText},
			{ID: voiceID, Name: "Lounge", Type: discordgo.ChannelTypeGuildVoice},
			{ID: otherVoiceID, Name: "Quiet", Type: discordgo.ChannelTypeGuildVoice},
		},
		VoiceStates: []discordtest.VoiceState{
			{UserID: aliceID, ChannelID: voiceID},
			{UserID: bobID, ChannelID: voiceID, SelfMute: true},
		},
	}
}

// discordSpec is Discord's OpenAPI description, loaded once for every fake
// in this package.
var discordSpec = discordtest.NewSpec()

// takeRefusals asserts the fake refused exactly n requests since the last
// call (a test that sends bad requests on purpose), so its cleanup does not
// fail the test for them.
func takeRefusals(t *testing.T, f *discordtest.Fake, n int) {
	t.Helper()
	if v := f.TakeViolations(); len(v) != n {
		t.Fatalf("the fake refused %d requests, want %d: %v", len(v), n, v)
	}
}

// timeout bounds a test's waits. TestInteractions shares one bound across
// its subtests, and every request is checked against Discord's description
// (tens of milliseconds each under -race), so it is generous: it only
// decides how long a broken test takes to fail.
func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSession builds a real discordgo session pointed at the fake the way the
// bridges do (bot.NewRESTTransport), without opening the gateway.
func newSession(t *testing.T, f *discordtest.Fake) *discordgo.Session {
	t.Helper()
	s, err := discordgo.New("Bot " + f.Token())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := bot.NewRESTTransport(f.APIURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Client = &http.Client{Transport: rt, Timeout: 5 * time.Second}
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildVoiceStates
	return s
}

// openSession opens the gateway and closes the session at cleanup, which runs
// before the fake's own cleanup (registered earlier by New). It waits for the
// connection's first heartbeat before closing, to dodge discordgo's
// Close/heartbeat race (see Fake.WaitHeartbeat).
func openSession(t *testing.T, f *discordtest.Fake, s *discordgo.Session) {
	t.Helper()
	if err := s.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.WaitHeartbeat(ctx); err != nil {
			t.Errorf("no heartbeat before Close: %v", err)
		}
		_ = s.Close()
	})
}

// recv waits for a value a discordgo handler sent.
func recv[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func restCode(err error) (int, int) {
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		return 0, 0
	}
	code := 0
	if re.Message != nil {
		code = re.Message.Code
	}
	return re.Response.StatusCode, code
}

// router sends each INTERACTION_CREATE to the behaviour a subtest registered
// for its command name, so one session (one discordgo Close, which sleeps a
// second) serves many interaction tests.
type router struct {
	mu sync.Mutex
	m  map[string]func(*discordgo.Session, *discordgo.InteractionCreate)
}

func newRouter(s *discordgo.Session) *router {
	r := &router{m: map[string]func(*discordgo.Session, *discordgo.InteractionCreate){}}
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		r.mu.Lock()
		h := r.m[ic.ApplicationCommandData().Name]
		r.mu.Unlock()
		if h != nil {
			h(s, ic)
		}
	})
	return r
}

func (r *router) on(command string, h func(*discordgo.Session, *discordgo.InteractionCreate)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[command] = h
}

// TestGateway drives one real session through READY, GUILD_CREATE,
// heartbeats and a manual voice join.
func TestGateway(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	// discordgo reconnects when no heartbeat ACK arrives within 5 intervals;
	// at 100 ms a missing ACK would show up as a second IDENTIFY or a RESUME
	// within the heartbeat subtest (shorter intervals flake under -race load).
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()), discordtest.WithBotUser("1400000000000000001", "memorybot"),
		discordtest.WithHeartbeatInterval(100*time.Millisecond))
	s := newSession(t, f)
	// discordgo's State keeps READY's unavailable guild stubs and overwrites
	// them in place (*g = *guild in State.GuildAdd) when GUILD_CREATE arrives,
	// which races with a handler reading Ready.Guilds. Without the State the
	// events are the handler's alone.
	s.StateEnabled = false
	readyCh := make(chan *discordgo.Ready, 1)
	guildCh := make(chan *discordgo.Guild, 1)
	updates := make(chan discordgo.VoiceState, 8)
	servers := make(chan *discordgo.VoiceServerUpdate, 2)
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { readyCh <- r })
	s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { guildCh <- g.Guild })
	s.AddHandler(func(_ *discordgo.Session, v *discordgo.VoiceStateUpdate) { updates <- *v.VoiceState })
	s.AddHandler(func(_ *discordgo.Session, v *discordgo.VoiceServerUpdate) { servers <- v })
	messages := make(chan *discordgo.Message, 1)
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { messages <- m.Message })
	openSession(t, f, s)

	t.Run("ready", func(t *testing.T) { testReady(t, ctx, f, readyCh) })
	t.Run("guild_create", func(t *testing.T) { testGuildCreate(t, ctx, guildCh) })
	t.Run("identify_recorded", func(t *testing.T) { testIdentifyRecorded(t, ctx, f) })
	t.Run("heartbeats_acknowledged", func(t *testing.T) { testHeartbeats(t, ctx, f, s) })
	t.Run("voice_join_manual", func(t *testing.T) { testVoiceJoinManual(t, ctx, f, s, updates, servers) })
	t.Run("dispatch_and_guild_create", func(t *testing.T) {
		g := discordtest.Guild{ID: "900000000000000002", Name: "Second", OwnerID: ownerID,
			Members: []discordtest.Member{{UserID: ownerID, Username: "owner"}}}
		if n := f.GuildCreate(g); n != 1 {
			t.Fatalf("GuildCreate reached %d sessions", n)
		}
		if got := recv(t, ctx, guildCh, "second GUILD_CREATE"); got.ID != g.ID || len(got.Members) != 2 || len(got.Roles) != 1 {
			t.Fatalf("second guild = %s members %d roles %d", got.ID, len(got.Members), len(got.Roles))
		}
		f.Dispatch("MESSAGE_CREATE", map[string]any{"id": "1", "channel_id": textID, "guild_id": guildID, "content": "hi",
			"author": map[string]any{"id": bobID, "username": "bob"}})
		if m := recv(t, ctx, messages, "MESSAGE_CREATE"); m.Content != "hi" || m.Author.ID != bobID {
			t.Fatalf("message = %+v", m)
		}
	})
}

func testReady(t *testing.T, ctx context.Context, f *discordtest.Fake, readyCh <-chan *discordgo.Ready) {

	r := recv(t, ctx, readyCh, "READY")
	if r.User == nil || r.User.ID != "1400000000000000001" || r.User.Username != "memorybot" || !r.User.Bot {
		t.Fatalf("READY user = %+v", r.User)
	}
	if r.SessionID == "" || r.Application == nil || r.Application.ID != "1400000000000000001" {
		t.Fatalf("READY session/application = %q %+v", r.SessionID, r.Application)
	}
	if len(r.Guilds) != 1 || r.Guilds[0].ID != guildID || !r.Guilds[0].Unavailable {
		t.Fatalf("READY guilds = %+v", r.Guilds)
	}
	if r.Version != 9 {
		t.Errorf("READY v = %d, want the 9 discordgo asked for", r.Version)
	}
}

func testGuildCreate(t *testing.T, ctx context.Context, guildCh <-chan *discordgo.Guild) {
	g := recv(t, ctx, guildCh, "GUILD_CREATE")
	if g.ID != guildID || g.Name != "Test Server" || g.OwnerID != ownerID || g.Unavailable {
		t.Fatalf("GUILD_CREATE guild = %s %q owner %s unavailable %v", g.ID, g.Name, g.OwnerID, g.Unavailable)
	}
	if len(g.VoiceStates) != 2 {
		t.Fatalf("voice states = %d, want 2", len(g.VoiceStates))
	}
	for _, vs := range g.VoiceStates {
		if vs.ChannelID != voiceID || vs.GuildID != guildID || vs.SessionID == "" {
			t.Errorf("voice state %+v", vs)
		}
		if vs.UserID == bobID && !vs.SelfMute {
			t.Errorf("bob should be self-muted")
		}
	}
	if len(g.Members) != 5 { // four configured plus the bot itself
		t.Errorf("members = %d, want 5", len(g.Members))
	}
	if len(g.Roles) != 2 || len(g.Channels) != 3 {
		t.Errorf("roles %d channels %d", len(g.Roles), len(g.Channels))
	}
	for _, ro := range g.Roles {
		if ro.ID == modRoleID && ro.Permissions != discordgo.PermissionManageGuild {
			t.Errorf("mod role permissions = %d", ro.Permissions)
		}
	}
}

func testIdentifyRecorded(t *testing.T, ctx context.Context, f *discordtest.Fake) {
	if err := f.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ids := f.Identifies()
	if len(ids) != 1 || !ids[0].Accepted || ids[0].Token != "Bot "+f.Token() ||
		ids[0].Intents != discordgo.IntentsGuilds|discordgo.IntentsGuildVoiceStates {
		t.Fatalf("identifies = %+v", ids)
	}
	if !ids[0].Compress {
		t.Errorf("discordgo asks for compress by default; the fake should have recorded it")
	}
	reqs := f.Requests()
	if len(reqs) == 0 || reqs[0].Route != discordtest.RouteGateway || reqs[0].Status != 200 {
		t.Fatalf("first request = %+v", reqs)
	}
}

func testHeartbeats(t *testing.T, ctx context.Context, f *discordtest.Fake, s *discordgo.Session) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for f.Heartbeats() < 7 { // 600 ms: past the 500 ms discordgo would wait for a missing ACK
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("only %d heartbeats", f.Heartbeats())
		}
	}
	if n := len(f.Identifies()); n != 1 {
		t.Fatalf("identifies = %d: discordgo reconnected, heartbeats not acknowledged?", n)
	}
	s.RLock()
	acked := s.LastHeartbeatAck
	s.RUnlock()
	if time.Since(acked) > time.Second {
		t.Fatalf("last heartbeat ACK %v ago", time.Since(acked))
	}
}

// TestInteractions runs interaction scenarios against one real session; each
// subtest uses its own command name and handler.
func TestInteractions(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	r := newRouter(s)
	openSession(t, f, s)

	t.Run("reply_ephemeral_then_duplicate_delivery", func(t *testing.T) { testReplyEphemeral(t, ctx, f, r) })
	t.Run("deferred_then_edit_and_followup", func(t *testing.T) { testDeferredThenEdit(t, ctx, f, r) })
	t.Run("edit_before_response", func(t *testing.T) { testEditBeforeResponse(t, ctx, f, r) })
	t.Run("message_limits", func(t *testing.T) { testMessageLimits(t, ctx, f, r) })
	t.Run("late_callback", func(t *testing.T) { testLateCallback(t, ctx, f, r) })
	t.Run("autocomplete", func(t *testing.T) { testAutocomplete(t, ctx, f, r) })
	t.Run("direct_message", func(t *testing.T) { testDirectMessage(t, ctx, f, r) })
	t.Run("registered_command_id", func(t *testing.T) { testRegisteredCommandID(t, ctx, f, s, r) })
}

func testReplyEphemeral(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	seen := make(chan *discordgo.Interaction, 4)
	respondErr := make(chan error, 4)
	r.on("person-memory", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		seen <- ic.Interaction
		respondErr <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{
				Content:         "remembered: likes @everyone",
				Flags:           discordgo.MessageFlagsEphemeral,
				AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}},
			},
		})
	})

	in := f.Interact(ctx, discordtest.InteractionSpec{
		GuildID:    guildID,
		UserID:     aliceID,
		Command:    "person-memory",
		Subcommand: "propose",
		Options: []discordtest.OptionValue{
			discordtest.UserOption("person", bobID),
			discordtest.StringOption("fact", "likes @everyone"),
			discordtest.IntegerOption("days", 7),
		},
	})
	got := recv(t, ctx, seen, "INTERACTION_CREATE")
	if got.ID != in.ID || got.Token != in.Token || got.GuildID != guildID || got.ChannelID != textID || got.AppID != f.AppID() {
		t.Fatalf("interaction = %+v", got)
	}
	if got.Type != discordgo.InteractionApplicationCommand || got.Member == nil || got.Member.User.ID != aliceID || got.User != nil {
		t.Fatalf("type/member = %v %+v %+v", got.Type, got.Member, got.User)
	}
	if got.Member.Permissions&discordgo.PermissionManageGuild == 0 || got.Member.Permissions&discordgo.PermissionSendMessages == 0 {
		t.Errorf("member permissions = %d, want @everyone's plus the mod role's", got.Member.Permissions)
	}
	data := got.ApplicationCommandData()
	if data.Name != "person-memory" || len(data.Options) != 1 || data.Options[0].Name != "propose" ||
		data.Options[0].Type != discordgo.ApplicationCommandOptionSubCommand {
		t.Fatalf("data = %+v", data)
	}
	sub := data.Options[0]
	if sub.GetOption("person").UserValue(nil).ID != bobID || sub.GetOption("fact").StringValue() != "likes @everyone" ||
		sub.GetOption("days").IntValue() != 7 {
		t.Fatalf("options = %+v", sub.Options)
	}
	if data.Resolved == nil || data.Resolved.Users[bobID] == nil || data.Resolved.Users[bobID].Username != "bob" ||
		data.Resolved.Members[bobID] == nil {
		t.Fatalf("resolved = %+v", data.Resolved)
	}
	if err := recv(t, ctx, respondErr, "InteractionRespond"); err != nil {
		t.Fatalf("InteractionRespond: %v", err)
	}

	cb, err := in.WaitCallback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cb.Type != discordgo.InteractionResponseChannelMessageWithSource || !cb.Ephemeral() || cb.Content != "remembered: likes @everyone" {
		t.Fatalf("callback = %+v", cb)
	}
	if cb.AllowedMentions == nil || len(cb.AllowedMentions.Parse) != 0 {
		t.Fatalf("allowed mentions = %+v, want parse:[]", cb.AllowedMentions)
	}
	reply, err := in.WaitReply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Via != discordtest.ViaCallback || reply.Content != cb.Content || !reply.Ephemeral() {
		t.Fatalf("reply = %+v", reply)
	}

	// Duplicate delivery: the handler answers again and Discord refuses.
	if n := in.Redeliver(); n != 1 {
		t.Fatalf("redelivered to %d sessions", n)
	}
	again := recv(t, ctx, seen, "redelivered INTERACTION_CREATE")
	if again.ID != in.ID || again.Token != in.Token {
		t.Fatalf("redelivery changed id/token")
	}
	err = recv(t, ctx, respondErr, "second InteractionRespond")
	if status, code := restCode(err); status != http.StatusBadRequest || code != discordtest.CodeAlreadyAcknowledged {
		t.Fatalf("second respond = %v, want 400/40060", err)
	}
	cbs := in.Callbacks()
	if len(cbs) != 2 || !cbs[0].Accepted() || cbs[1].Accepted() {
		t.Fatalf("callbacks = %+v", cbs)
	}
	takeRefusals(t, f, 1)
}

func testDeferredThenEdit(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	errs := make(chan error, 8)
	release := make(chan struct{})
	r.on("mine", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		errs <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
		})
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		content := "memory is unavailable right now; nothing was saved"
		_, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{
			Content:         &content,
			AllowedMentions: &discordgo.MessageAllowedMentions{},
		})
		errs <- err
		m, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "one more thing", Flags: discordgo.MessageFlagsEphemeral})
		if err == nil && (m == nil || m.ID == "") {
			err = errors.New("follow-up answered without a message")
		}
		errs <- err
	})

	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "mine"})
	cb, err := in.WaitCallback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cb.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || !cb.Ephemeral() {
		t.Fatalf("callback = %+v", cb)
	}
	if err := recv(t, ctx, errs, "defer"); err != nil {
		t.Fatal(err)
	}
	if o, ok := in.Original(); !ok || !o.Loading() || !o.Ephemeral() {
		t.Fatalf("original after defer = %+v %v, want loading and ephemeral", o, ok)
	}
	close(release)

	reply, err := in.WaitReply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Via != discordtest.ViaEdit || reply.Content != "memory is unavailable right now; nothing was saved" ||
		!reply.Ephemeral() || reply.Loading() || reply.Edits != 1 {
		t.Fatalf("reply = %+v", reply)
	}
	if reply.AllowedMentions == nil || len(reply.AllowedMentions.Parse) != 0 {
		t.Fatalf("allowed mentions on the edit = %+v", reply.AllowedMentions)
	}
	for i := 0; i < 2; i++ {
		if err := recv(t, ctx, errs, "edit/follow-up"); err != nil {
			t.Fatal(err)
		}
	}
	fu, err := in.WaitFollowups(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if fu[0].Content != "one more thing" || !fu[0].Ephemeral() {
		t.Fatalf("follow-up = %+v", fu[0])
	}
}

func testEditBeforeResponse(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	errs := make(chan error, 2)
	r.on("too-early", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		content := "too early"
		_, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content})
		errs <- err
		_, err = s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "also too early"})
		errs <- err
	})
	f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "too-early"})
	if status, code := restCode(recv(t, ctx, errs, "edit")); status != 404 || code != discordtest.CodeUnknownMessage {
		t.Fatalf("edit before any response = %d/%d, want 404/10008", status, code)
	}
	if status, code := restCode(recv(t, ctx, errs, "follow-up")); status != 404 || code != discordtest.CodeUnknownWebhook {
		t.Fatalf("follow-up before any response = %d/%d, want 404/10015", status, code)
	}
}

func testMessageLimits(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	errs := make(chan error, 4)
	r.on("long", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		// Over Discord's 2000 character limit, then empty, then fine.
		for _, content := range []string{strings.Repeat("x", 2001), "", strings.Repeat("é", 2000)} {
			errs <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
				Type: discordgo.InteractionResponseChannelMessageWithSource,
				Data: &discordgo.InteractionResponseData{Content: content},
			})
		}
	})
	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "long"})
	if status, code := restCode(recv(t, ctx, errs, "too long")); status != 400 || code != discordtest.CodeInvalidFormBody {
		t.Fatalf("2001 characters = %d/%d, want 400/50035", status, code)
	}
	if status, code := restCode(recv(t, ctx, errs, "empty")); status != 400 || code != discordtest.CodeEmptyMessage {
		t.Fatalf("empty message = %d/%d, want 400/50006", status, code)
	}
	if err := recv(t, ctx, errs, "2000 characters"); err != nil {
		t.Fatalf("2000 characters (4000 bytes): %v", err)
	}
	if cb, err := in.WaitCallback(ctx); err != nil || len([]rune(cb.Content)) != 2000 {
		t.Fatalf("accepted callback = %d chars, %v", len([]rune(cb.Content)), err)
	}
	if n := len(in.Callbacks()); n != 3 {
		t.Fatalf("callback attempts = %d, want 3", n)
	}
	takeRefusals(t, f, 2)
}

func testLateCallback(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	errs := make(chan error, 1)
	r.on("slow", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		time.Sleep(80 * time.Millisecond)
		errs <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "late"},
		})
	})
	slow := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "slow", Deadline: 40 * time.Millisecond})
	if status, code := restCode(recv(t, ctx, errs, "late respond")); status != 404 || code != discordtest.CodeUnknownInteraction {
		t.Fatalf("late respond = %d/%d, want 404/10062", status, code)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := slow.WaitCallback(short)
	if err == nil || !strings.Contains(err.Error(), "10062") {
		t.Fatalf("WaitCallback error = %v, want it to mention the rejected 10062", err)
	}
}

func testAutocomplete(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	focused := make(chan string, 1)
	r.on("forget", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		if ic.Type != discordgo.InteractionApplicationCommandAutocomplete {
			return
		}
		for _, o := range ic.ApplicationCommandData().Options {
			if o.Focused {
				focused <- o.Name + "=" + o.StringValue()
			}
		}
		_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionApplicationCommandAutocompleteResult,
			Data: &discordgo.InteractionResponseData{Choices: []*discordgo.ApplicationCommandOptionChoice{
				{Name: "f1: likes tea", Value: "f1"}, {Name: "f2: owns a cat", Value: "f2"},
			}},
		})
	})
	in := f.Interact(ctx, discordtest.InteractionSpec{
		Autocomplete: true, GuildID: guildID, UserID: aliceID, Command: "forget",
		Options: []discordtest.OptionValue{
			discordtest.UserOption("person", bobID),
			discordtest.StringOption("fact", "f").Focus(),
		},
	})
	if got := recv(t, ctx, focused, "focused option"); got != "fact=f" {
		t.Fatalf("focused = %q", got)
	}
	cb, err := in.WaitCallback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cb.Type != discordgo.InteractionApplicationCommandAutocompleteResult || len(cb.Choices) != 2 || cb.Choices[1].Value != "f2" {
		t.Fatalf("callback = %+v", cb)
	}
	if _, err := in.WaitReply(ctx); err == nil {
		t.Fatal("WaitReply on an autocomplete interaction should fail")
	}
}

func testDirectMessage(t *testing.T, ctx context.Context, f *discordtest.Fake, r *router) {
	seen := make(chan *discordgo.Interaction, 1)
	r.on("recall", func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		seen <- ic.Interaction
		_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "person memory belongs to a server", Flags: discordgo.MessageFlagsEphemeral},
		})
	})
	in := f.Interact(ctx, discordtest.InteractionSpec{UserID: bobID, Username: "bob", Command: "recall"})
	got := recv(t, ctx, seen, "DM interaction")
	if got.GuildID != "" || got.Member != nil || got.User == nil || got.User.ID != bobID || got.Context != discordgo.InteractionContextBotDM {
		t.Fatalf("DM interaction = guild %q member %+v user %+v context %d", got.GuildID, got.Member, got.User, got.Context)
	}
	if r, err := in.WaitReply(ctx); err != nil || r.Content != "person memory belongs to a server" {
		t.Fatalf("reply = %+v, %v", r, err)
	}
}

func testRegisteredCommandID(t *testing.T, ctx context.Context, f *discordtest.Fake, s *discordgo.Session, r *router) {
	created, err := s.ApplicationCommandBulkOverwrite(f.AppID(), "", []*discordgo.ApplicationCommand{{Name: "voice", Description: "Voice"}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string, 1)
	r.on("voice", func(_ *discordgo.Session, ic *discordgo.InteractionCreate) { ids <- ic.ApplicationCommandData().ID })
	f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "voice"})
	if got := recv(t, ctx, ids, "interaction"); got != created[0].ID {
		t.Fatalf("data.id = %s, want registered %s", got, created[0].ID)
	}
}

func TestCommandsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f) // REST only: no gateway needed

	cmds := []*discordgo.ApplicationCommand{
		{
			Name: "person-memory", Description: "What Clankie remembers about people",
			Contexts: &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild},
			Options: []*discordgo.ApplicationCommandOption{{
				Type: discordgo.ApplicationCommandOptionSubCommand, Name: "propose", Description: "Remember a fact",
				Options: []*discordgo.ApplicationCommandOption{
					{Type: discordgo.ApplicationCommandOptionUser, Name: "person", Description: "Who", Required: true},
					{Type: discordgo.ApplicationCommandOptionString, Name: "fact", Description: "What", Required: true},
					{Type: discordgo.ApplicationCommandOptionString, Name: "supersedes", Description: "Replaces", Autocomplete: true},
				},
			}},
		},
		{Name: "voice", Description: "Voice sessions", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "join", Description: "Join your channel"},
		}},
	}
	created, err := s.ApplicationCommandBulkOverwrite(f.AppID(), guildID, cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 || created[0].ID == "" || created[0].ApplicationID != f.AppID() || created[0].GuildID != guildID ||
		created[0].Version == "" || created[0].Type != discordgo.ChatApplicationCommand {
		t.Fatalf("created = %+v", created[0])
	}
	listed, err := s.ApplicationCommands(f.AppID(), guildID)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[0].ID != created[0].ID || listed[1].Name != "voice" ||
		len(listed[0].Options[0].Options) != 3 || listed[0].Contexts == nil {
		t.Fatalf("listed = %+v", listed)
	}
	// Overwriting with the same commands keeps ids and versions.
	again, err := s.ApplicationCommandBulkOverwrite(f.AppID(), guildID, cmds)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].ID != created[0].ID || again[0].Version != created[0].Version {
		t.Fatalf("overwrite changed id/version: %s/%s -> %s/%s", created[0].ID, created[0].Version, again[0].ID, again[0].Version)
	}
	if puts := f.CommandPuts(guildID); len(puts) != 2 || puts[0].Status != 200 || len(puts[0].Commands) != 2 {
		t.Fatalf("guild puts = %+v", puts)
	}
	if len(f.CommandPuts(discordtest.GlobalScope)) != 0 || len(f.Commands(discordtest.GlobalScope)) != 0 {
		t.Fatal("no global commands were registered")
	}
	if got := f.Commands(guildID); len(got) != 2 || got[1].ID != created[1].ID {
		t.Fatalf("Commands(guild) = %+v", got)
	}

	// Global scope works the same way.
	if _, err := s.ApplicationCommandBulkOverwrite(f.AppID(), "", cmds[1:]); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ApplicationCommands(f.AppID(), ""); err != nil || len(got) != 1 || got[0].GuildID != "" {
		t.Fatalf("global commands = %+v, %v", got, err)
	}

	// Discord's rules: lowercase names, descriptions 1-100, required first.
	bad := []*discordgo.ApplicationCommand{{Name: "Person", Description: strings.Repeat("d", 101), Options: []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionString, Name: "a", Description: "a"},
		{Type: discordgo.ApplicationCommandOptionString, Name: "b", Description: "b", Required: true},
	}}}
	_, err = s.ApplicationCommandBulkOverwrite(f.AppID(), guildID, bad)
	if status, code := restCode(err); status != 400 || code != discordtest.CodeInvalidFormBody {
		t.Fatalf("invalid commands = %v", err)
	}
	var re *discordgo.RESTError
	errors.As(err, &re)
	for _, want := range []string{"APPLICATION_COMMAND_INVALID_NAME", "BASE_TYPE_BAD_LENGTH", "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID"} {
		if !strings.Contains(string(re.ResponseBody), want) {
			t.Errorf("error body lacks %s: %s", want, re.ResponseBody)
		}
	}
	if got := f.Commands(guildID); len(got) != 2 {
		t.Fatalf("a rejected overwrite must not change the registered commands, got %d", len(got))
	}
	puts, err := f.WaitCommandPuts(ctx, guildID, 3)
	if err != nil || puts[2].Status != 400 {
		t.Fatalf("rejected put recorded as %+v, %v", puts, err)
	}
	takeRefusals(t, f, 1)

	// A guild the bot is not in.
	if _, err := s.ApplicationCommandBulkOverwrite(f.AppID(), "123", cmds); err == nil {
		t.Fatal("overwrite in a foreign guild should fail")
	} else if status, code := restCode(err); status != 403 || code != discordtest.CodeMissingAccess {
		t.Fatalf("foreign guild = %d/%d", status, code)
	}
}

func testVoiceJoinManual(t *testing.T, ctx context.Context, f *discordtest.Fake, s *discordgo.Session,
	updates <-chan discordgo.VoiceState, servers <-chan *discordgo.VoiceServerUpdate) {
	if err := s.ChannelVoiceJoinManual(guildID, voiceID, false, true); err != nil {
		t.Fatal(err)
	}
	ops, err := f.WaitVoiceStateOps(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ops[0].GuildID != guildID || ops[0].ChannelID != voiceID || ops[0].SelfMute || !ops[0].SelfDeaf || ops[0].SessionID == "" {
		t.Fatalf("op 4 = %+v", ops[0])
	}
	// Like Discord, the fake answers with the bot's own voice state and a
	// voice server.
	vs := recv(t, ctx, updates, "bot VOICE_STATE_UPDATE")
	if vs.UserID != f.BotID() || vs.ChannelID != voiceID || vs.GuildID != guildID || vs.Member == nil {
		t.Fatalf("bot voice state = %+v", vs)
	}
	if srv := recv(t, ctx, servers, "VOICE_SERVER_UPDATE"); srv.GuildID != guildID || srv.Token == "" || srv.Endpoint == "" {
		t.Fatalf("voice server = %+v", srv)
	}

	// Someone moves channel; then the bot leaves.
	if n := f.VoiceStateUpdate(discordtest.VoiceState{GuildID: guildID, UserID: aliceID, ChannelID: otherVoiceID}); n != 1 {
		t.Fatalf("VoiceStateUpdate reached %d sessions", n)
	}
	if vs := recv(t, ctx, updates, "alice moved"); vs.UserID != aliceID || vs.ChannelID != otherVoiceID {
		t.Fatalf("alice = %+v", vs)
	}
	if err := s.ChannelVoiceJoinManual(guildID, "", false, false); err != nil {
		t.Fatal(err)
	}
	ops, err = f.WaitVoiceStateOps(ctx, 2)
	if err != nil || ops[1].ChannelID != "" {
		t.Fatalf("leave op = %+v, %v", ops, err)
	}
	if vs := recv(t, ctx, updates, "bot left"); vs.UserID != f.BotID() || vs.ChannelID != "" {
		t.Fatalf("bot left = %+v", vs)
	}
	g, _ := f.Guild(guildID)
	for _, v := range g.VoiceStates {
		if v.UserID == f.BotID() {
			t.Fatalf("bot still in voice in the model: %+v", v)
		}
		if v.UserID == aliceID && v.ChannelID != otherVoiceID {
			t.Fatalf("alice not moved in the model: %+v", v)
		}
	}
}

func TestIntentsGateEvents(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	s.Identify.Intents = discordgo.IntentsGuilds // no voice states
	guildCh := make(chan int, 1)
	s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { guildCh <- len(g.VoiceStates) })
	openSession(t, f, s)
	if n := recv(t, ctx, guildCh, "GUILD_CREATE"); n != 0 {
		t.Fatalf("voice states without GUILD_VOICE_STATES = %d", n)
	}
	if n := f.VoiceStateUpdate(discordtest.VoiceState{GuildID: guildID, UserID: bobID, ChannelID: voiceID}); n != 0 {
		t.Fatalf("VOICE_STATE_UPDATE reached %d sessions without the intent", n)
	}

	// Privileged intents are refused unless enabled.
	s2 := newSession(t, f)
	s2.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMembers
	if err := s2.Open(); err == nil {
		_ = s2.Close()
		t.Fatal("Open with GUILD_MEMBERS should fail")
	} else if !strings.Contains(err.Error(), "4014") {
		t.Fatalf("Open error = %v, want close 4014", err)
	}
}

func TestRejectedToken(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithRejectedToken())
	s := newSession(t, f)
	_, err := s.User("@me")
	if status, _ := restCode(err); status != http.StatusUnauthorized {
		t.Fatalf("User(@me) = %v, want 401", err)
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && !strings.Contains(string(re.ResponseBody), `"401: Unauthorized"`) {
		t.Fatalf("body = %s", re.ResponseBody)
	}
	if err := s.Open(); err == nil {
		_ = s.Close()
		t.Fatal("Open with a rejected token should fail")
	}
}

func TestRESTIdentityAndUnknownRoutes(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()), discordtest.WithBotUser("1400000000000000009", "voicebot"))
	s := newSession(t, f)
	u, err := s.User("@me")
	if err != nil || u.ID != "1400000000000000009" || u.Username != "voicebot" || !u.Bot {
		t.Fatalf("User(@me) = %+v, %v", u, err)
	}
	app, err := s.Application("@me")
	if err != nil || app.ID != f.AppID() {
		t.Fatalf("Application(@me) = %+v, %v", app, err)
	}
	m, err := s.GuildMember(guildID, aliceID)
	if err != nil || m.User.Username != "alice" || len(m.Roles) != 1 {
		t.Fatalf("GuildMember = %+v, %v", m, err)
	}
	if _, err := s.Channel(textID); err != nil {
		t.Fatal(err)
	}

	// A message in a channel of the guild is posted and kept; one where
	// the bot may not post is refused 403 as Discord does.
	if _, err := s.ChannelMessageSend(textID, "posted"); err != nil {
		t.Fatal(err)
	}
	if got := f.ChannelMessages(textID); len(got) != 1 || got[0].Content != "posted" {
		t.Fatalf("channel messages %+v", got)
	}
	f.DenyMessages(textID)
	if _, err := s.ChannelMessageSend(textID, "refused"); func() bool {
		st, code := restCode(err)
		return st != http.StatusForbidden || code != discordtest.CodeMissingPermissions
	}() {
		t.Fatalf("a denied channel answered %v", err)
	}

	// Something the fake does not serve: 404, recorded.
	_, err = s.ChannelMessageEdit(textID, "1", "hello")
	if status, _ := restCode(err); status != http.StatusNotFound {
		t.Fatalf("unknown route = %v", err)
	}
	unk := f.UnknownRequests()
	if len(unk) != 1 || unk[0].Method != http.MethodPatch || unk[0].Path != "/channels/"+textID+"/messages/1" {
		t.Fatalf("unknown requests = %+v", unk)
	}
	var body map[string]any
	if json.Unmarshal(unk[0].Body, &body) != nil || body["content"] != "hello" {
		t.Fatalf("recorded body = %s", unk[0].Body)
	}

	// A session with the wrong token.
	bad, _ := discordgo.New("Bot not-the-token")
	bad.Client = s.Client
	if _, err := bad.User("@me"); err == nil {
		t.Fatal("a wrong token must be refused")
	}
}

func TestDelayAndFaultInjection(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec))
	s := newSession(t, f)
	f.SetDelay(discordtest.RouteCurrentUser, 80*time.Millisecond)
	start := time.Now()
	if _, err := s.User("@me"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Fatalf("delayed call took %v", d)
	}
	f.SetDelay(discordtest.RouteCurrentUser, 0)

	f.FailNext(discordtest.RouteCurrentUser, http.StatusInternalServerError, 1)
	if _, err := s.User("@me"); err == nil {
		t.Fatal("injected 500 should fail")
	}
	// discordgo retries a rate limit after retry_after.
	f.FailNext(discordtest.RouteCurrentUser, http.StatusTooManyRequests, 1)
	if _, err := s.User("@me"); err != nil {
		t.Fatalf("after a 429 discordgo should retry and succeed: %v", err)
	}
	var statuses []int
	for _, r := range f.Requests() {
		statuses = append(statuses, r.Status)
	}
	if want := []int{200, 500, 429, 200}; !equalInts(statuses, want) {
		t.Fatalf("statuses = %v, want %v", statuses, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReconnectResumesAndInvalidSessionReidentifies(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	resumed := make(chan struct{}, 1)
	readies := make(chan string, 4)
	voice := make(chan string, 4)
	s.AddHandler(func(*discordgo.Session, *discordgo.Resumed) { resumed <- struct{}{} })
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { readies <- r.SessionID })
	s.AddHandler(func(_ *discordgo.Session, v *discordgo.VoiceStateUpdate) { voice <- v.UserID })
	openSession(t, f, s)
	first := recv(t, ctx, readies, "READY")
	// Each disruption waits for the connection's first heartbeat: discordgo
	// sends it without checking whether the connection is closing, and when
	// that write fails it calls Close (1000, which ends the session) on
	// whatever connection the reconnect has opened by then (see
	// Fake.WaitHeartbeat). Real Discord never sends op 7 within
	// milliseconds of READY.
	if err := f.WaitHeartbeat(ctx); err != nil {
		t.Fatal(err)
	}

	// op 7: discordgo closes, reconnects and RESUMEs; an event dispatched
	// while it is away is replayed.
	f.RequestReconnect()
	f.VoiceStateUpdate(discordtest.VoiceState{GuildID: guildID, UserID: bobID, ChannelID: otherVoiceID})
	recv(t, ctx, resumed, "RESUMED")
	if got := recv(t, ctx, voice, "replayed VOICE_STATE_UPDATE"); got != bobID {
		t.Fatalf("voice update for %s", got)
	}
	if n := len(f.Identifies()); n != 1 {
		t.Fatalf("identifies after resume = %d, want 1", n)
	}

	// op 9: discordgo identifies again on the same connection.
	f.InvalidateSessions()
	second := recv(t, ctx, readies, "second READY")
	if second == first || second == "" {
		t.Fatalf("session ids %q then %q", first, second)
	}
	if err := f.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	// A dropped connection with a resumable code: discordgo reconnects and
	// RESUMEs the new session.
	if err := f.WaitHeartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	f.DropConnections(discordtest.CloseUnknownError)
	recv(t, ctx, resumed, "RESUMED after drop")
	if n := len(f.Identifies()); n != 2 {
		t.Fatalf("identifies after drop = %d, want still 2", n)
	}
}

// recordingTB captures Errorf so a test can check what the fake reports.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestInteractWithoutSessionReportsError(t *testing.T) {
	t.Parallel()
	rtb := &recordingTB{TB: t}
	f := discordtest.New(rtb, discordtest.WithSpec(discordSpec))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "voice"})
	if _, err := in.WaitReply(context.Background()); err == nil || !strings.Contains(err.Error(), "no identified gateway session") {
		t.Fatalf("WaitReply = %v", err)
	}
	rtb.mu.Lock()
	defer rtb.mu.Unlock()
	if len(rtb.errs) != 1 || !strings.Contains(rtb.errs[0], "Interact") {
		t.Fatalf("reported %q", rtb.errs)
	}
}

// TestGatewayProtocol speaks the gateway protocol by hand to check what
// discordgo does not exercise: close codes, sequence numbers and RESUME
// replay.
func TestGatewayProtocol(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	dial := func() *websocket.Conn {
		t.Helper()
		c, _, err := websocket.DefaultDialer.Dial(f.GatewayURL()+"?v=10&encoding=json", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	type frame struct {
		Op int             `json:"op"`
		S  *int64          `json:"s"`
		T  *string         `json:"t"`
		D  json.RawMessage `json:"d"`
	}
	read := func(c *websocket.Conn) frame {
		t.Helper()
		var fr frame
		if err := c.ReadJSON(&fr); err != nil {
			t.Fatalf("read: %v", err)
		}
		return fr
	}
	closeCode := func(c *websocket.Conn) int {
		t.Helper()
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					return ce.Code
				}
				t.Fatalf("read: %v", err)
			}
		}
	}
	send := func(c *websocket.Conn, op int, d any) {
		t.Helper()
		if err := c.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
			t.Fatal(err)
		}
	}
	identify := func(token string) map[string]any {
		return map[string]any{"token": token, "intents": 1 | 128, "properties": map[string]string{"os": "linux"}}
	}

	c := dial()
	hello := read(c)
	if hello.Op != 10 || !strings.Contains(string(hello.D), `"heartbeat_interval":41250`) {
		t.Fatalf("HELLO = %d %s", hello.Op, hello.D)
	}
	send(c, 4, map[string]any{"guild_id": guildID, "channel_id": voiceID})
	if code := closeCode(c); code != discordtest.CloseNotAuthenticated {
		t.Fatalf("op 4 before IDENTIFY closed with %d", code)
	}

	c = dial()
	read(c) // HELLO
	send(c, 1, nil)
	if ack := read(c); ack.Op != 11 {
		t.Fatalf("heartbeat answered with op %d", ack.Op)
	}
	send(c, 2, identify("wrong"))
	if code := closeCode(c); code != discordtest.CloseAuthenticationFailed {
		t.Fatalf("bad token closed with %d", code)
	}

	c = dial()
	read(c)
	send(c, 2, identify(f.Token())) // without "Bot ", as most libraries send it
	ready := read(c)
	if ready.Op != 0 || *ready.T != "READY" || *ready.S != 1 {
		t.Fatalf("READY frame = %d %v %v", ready.Op, ready.T, ready.S)
	}
	var rd struct {
		SessionID string `json:"session_id"`
		Resume    string `json:"resume_gateway_url"`
	}
	_ = json.Unmarshal(ready.D, &rd)
	if rd.SessionID == "" || rd.Resume != f.GatewayURL() {
		t.Fatalf("READY = %s", ready.D)
	}
	if gc := read(c); *gc.T != "GUILD_CREATE" || *gc.S != 2 {
		t.Fatalf("second frame = %v %v", gc.T, gc.S)
	}
	send(c, 99, nil)
	if code := closeCode(c); code != discordtest.CloseUnknownOpcode {
		t.Fatalf("unknown op closed with %d", code)
	}

	// The session survives a 4001 close: RESUME replays what came after seq 1.
	f.VoiceStateUpdate(discordtest.VoiceState{GuildID: guildID, UserID: bobID, ChannelID: ""})
	c = dial()
	read(c)
	send(c, 6, map[string]any{"token": "Bot " + f.Token(), "session_id": rd.SessionID, "seq": 1})
	for i, want := range []string{"GUILD_CREATE", "VOICE_STATE_UPDATE", "RESUMED"} {
		fr := read(c)
		if fr.T == nil || *fr.T != want || *fr.S != int64(i+2) {
			t.Fatalf("after RESUME frame %d = %v/%v, want %s/%d", i, fr.T, fr.S, want, i+2)
		}
	}
	send(c, 2, identify(f.Token()))
	if code := closeCode(c); code != discordtest.CloseAlreadyAuthenticated {
		t.Fatalf("second IDENTIFY closed with %d", code)
	}

	// An unknown session cannot resume: op 9, d false.
	c = dial()
	read(c)
	send(c, 6, map[string]any{"token": f.Token(), "session_id": "nope", "seq": 3})
	if inv := read(c); inv.Op != 9 || string(inv.D) != "false" {
		t.Fatalf("unknown session resume = %d %s", inv.Op, inv.D)
	}
}

// TestNoGoroutineLeak runs alone (not parallel) so goleak.VerifyNone sees only
// what this test started: a real session that identified, got an interaction
// and answered it, closed before the fake.
func TestNoGoroutineLeak(t *testing.T) {
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "ok"},
		})
	})
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "voice", Subcommand: "status"})
	if _, err := in.WaitReply(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitHeartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f.Close() // idempotent
	goleak.VerifyNone(t)
}

// TestVoiceServerOption: with WithVoiceServer the bot's op 4 for a channel
// is answered with VOICE_STATE_UPDATE carrying its gateway session id and a
// VOICE_SERVER_UPDATE whose endpoint and token the voice server issued for
// that session id; a leave gets no VOICE_SERVER_UPDATE.
func TestVoiceServerOption(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	type admitted struct{ guild, user, session string }
	calls := make(chan admitted, 4)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()),
		discordtest.WithVoiceServer(func(guild, user, session string) (string, string) {
			calls <- admitted{guild, user, session}
			return "127.0.0.1:4443", "voice-token-" + session
		}))
	s := newSession(t, f)
	s.StateEnabled = false
	updates := make(chan discordgo.VoiceState, 8)
	servers := make(chan *discordgo.VoiceServerUpdate, 2)
	s.AddHandler(func(_ *discordgo.Session, v *discordgo.VoiceStateUpdate) { updates <- *v.VoiceState })
	s.AddHandler(func(_ *discordgo.Session, v *discordgo.VoiceServerUpdate) { servers <- v })
	openSession(t, f, s)
	if err := s.ChannelVoiceJoinManual(guildID, voiceID, false, false); err != nil {
		t.Fatal(err)
	}
	vs := recv(t, ctx, updates, "bot VOICE_STATE_UPDATE")
	srv := recv(t, ctx, servers, "VOICE_SERVER_UPDATE")
	call := recv(t, ctx, calls, "the voice server asked")
	if vs.UserID != f.BotID() || vs.SessionID == "" || call != (admitted{guildID, f.BotID(), vs.SessionID}) {
		t.Fatalf("voice state %+v, admitted %+v", vs, call)
	}
	if srv.GuildID != guildID || srv.Endpoint != "127.0.0.1:4443" || srv.Token != "voice-token-"+vs.SessionID {
		t.Fatalf("voice server update %+v", srv)
	}
	if err := s.ChannelVoiceJoinManual(guildID, "", false, false); err != nil {
		t.Fatal(err)
	}
	if vs := recv(t, ctx, updates, "bot left"); vs.ChannelID != "" {
		t.Fatalf("leave = %+v", vs)
	}
	select {
	case srv := <-servers:
		t.Fatalf("a leave got a VOICE_SERVER_UPDATE %+v", srv)
	case c := <-calls:
		t.Fatalf("a leave asked the voice server %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
}
