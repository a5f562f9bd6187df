package discordtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// apiPrefix is where the fake serves REST; the path mirrors discord.com so
// request logs read the same.
const apiPrefix = "/api/v10"

// GlobalScope names global application commands in CommandPuts and Commands;
// any other scope is a guild id.
const GlobalScope = ""

// DefaultHeartbeatInterval is what Discord sends in HELLO today.
const DefaultHeartbeatInterval = 41250 * time.Millisecond

// Defaults for the bot identity when no option overrides them.
const (
	DefaultBotID       = "1300000000000000001"
	DefaultBotUsername = "clankie-test"
)

// ErrClosed is returned by waits when the fake shut down before the awaited
// thing happened.
var ErrClosed = errors.New("discordtest: fake closed")

// Fake is a running fake Discord. All methods are safe for concurrent use.
type Fake struct {
	t          testing.TB
	cfg        config
	srv        *httptest.Server
	apiURL     string
	gatewayURL string
	upgrader   websocket.Upgrader
	ids        snowflakes

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // gateway goroutines

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every recorded change
	isClosed     bool
	guilds       map[string]*guildState
	guildOrder   []string
	commands     map[string][]storedCommand // scope -> registered commands
	puts         []CommandPut
	requests     []Request
	identifies   []Identify
	voiceOps     []VoiceStateOp
	heartbeats   int
	sessions     map[string]*session
	conns        map[*gwConn]struct{}
	interactions map[string]*Interaction // by id
	posted       []ChannelMessage        // the bot's channel messages
	deniedPosts  []string                // channels refusing them (DenyMessages)
	byToken      map[string]*Interaction
	delays       map[string]time.Duration
	faults       map[string]*fault
	violations   []Violation
	resumes      int
	keys         httpKeys
	httpClient   *http.Client
	httpPosts    map[string]int // interactions endpoint -> requests sent
	started      time.Time
	startsLeft   int
	lastIdentify map[int]time.Time // max_concurrency bucket -> last IDENTIFY
}

type config struct {
	botID       string
	botName     string
	appID       string
	token       string
	guilds      []Guild
	rejectToken bool
	heartbeat   time.Duration
	deadline    time.Duration
	privileged  discordgo.Intent
	voiceEcho   bool
	voiceServer VoiceServer
	spec        *Spec

	startLimit        SessionStartLimit
	identifyInterval  time.Duration
	recommendedShards int
}

// Option configures a Fake at New.
type Option func(*config)

// WithBotUser sets the bot's user id and username (READY, /users/@me). The
// application id is the user id, as for every bot created since 2020.
func WithBotUser(id, username string) Option {
	return func(c *config) { c.botID, c.botName = id, username }
}

// WithGuilds sets the guilds the bot is in; each gets a GUILD_CREATE after
// READY, in the given order.
func WithGuilds(gs ...Guild) Option {
	return func(c *config) { c.guilds = append(c.guilds, gs...) }
}

// WithRejectedToken makes the fake behave as Discord does for a revoked token:
// every REST call answers 401 and IDENTIFY is closed with 4004.
func WithRejectedToken() Option { return func(c *config) { c.rejectToken = true } }

// WithHeartbeatInterval sets the interval sent in HELLO (default 41.25 s).
// discordgo heartbeats once right after HELLO and then at this interval.
func WithHeartbeatInterval(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// SetVoiceEcho turns the answer to the bot's op 4 (the bot's
// VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE dispatches) on or off from now
// on; the op is still recorded. Off is Discord's silence for a full
// channel, or one the bot may not connect to.
func (f *Fake) SetVoiceEcho(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.voiceEcho = on
}

// VoiceServer admits the bot's voice session on a voice server: given the
// guild, the bot's user id and the session id its VOICE_STATE_UPDATE
// carries (its gateway session's, as on Discord), it returns the endpoint
// (host:port, no scheme, as Discord sends it) and the token for
// VOICE_SERVER_UPDATE. It is called with the fake's lock held and must not
// call back into the fake. internal/voicetest's Server.Admit fits it.
type VoiceServer func(guildID, userID, sessionID string) (endpoint, token string)

// WithVoiceServer makes the fake play Discord's part in a voice join: the
// bot's op 4 for a channel is answered, on the shard that sent it (the
// guild's), with VOICE_STATE_UPDATE for the bot and a VOICE_SERVER_UPDATE
// whose endpoint and token vs issued. Without it the endpoint is the fake's
// own host and the token random, good for nothing but the event's shape.
func WithVoiceServer(vs VoiceServer) Option { return func(c *config) { c.voiceServer = vs } }

// WithSpec checks request bodies against this copy of Discord's OpenAPI
// description. Without it each fake loads its own (a few hundred
// milliseconds); a test package keeps one Spec for all its fakes.
func WithSpec(s *Spec) Option { return func(c *config) { c.spec = s } }

// New starts a fake Discord on 127.0.0.1 (one random port for REST and the
// gateway) and registers Close with t.Cleanup.
func New(t testing.TB, opts ...Option) *Fake {
	t.Helper()
	cfg := config{
		botID:     DefaultBotID,
		botName:   DefaultBotUsername,
		heartbeat: DefaultHeartbeatInterval,
		deadline:  discordgo.InteractionDeadline,
		voiceEcho: true,

		startLimit:       SessionStartLimit{Total: 1000, Remaining: 1000, ResetAfter: 24 * time.Hour, MaxConcurrency: 1},
		identifyInterval: DefaultIdentifyInterval,
	}
	for _, o := range opts {
		o(&cfg)
	}
	// Every fake has its own random token, which catches a session wired
	// to the wrong fake.
	cfg.appID = cfg.botID
	cfg.token = base64.RawStdEncoding.EncodeToString([]byte(cfg.botID)) + ".fake." + randomHex(16)
	f := &Fake{
		t:            t,
		cfg:          cfg,
		closed:       make(chan struct{}),
		changed:      make(chan struct{}),
		guilds:       map[string]*guildState{},
		commands:     map[string][]storedCommand{},
		sessions:     map[string]*session{},
		conns:        map[*gwConn]struct{}{},
		interactions: map[string]*Interaction{},
		byToken:      map[string]*Interaction{},
		delays:       map[string]time.Duration{},
		faults:       map[string]*fault{},
		upgrader:     websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		started:      time.Now(),
		keys:         newHTTPKeys(),
		httpClient:   &http.Client{},
		httpPosts:    map[string]int{},
		startsLeft:   cfg.startLimit.Remaining,
		lastIdentify: map[int]time.Time{},
	}
	now := time.Now()
	for _, g := range cfg.guilds {
		if g.ID == "" {
			t.Fatalf("discordtest: guild without ID")
		}
		if _, dup := f.guilds[g.ID]; !dup {
			f.guildOrder = append(f.guildOrder, g.ID)
		}
		f.guilds[g.ID] = &guildState{g: f.normalizeGuild(g), joinedAt: now}
	}
	f.useSpec()
	f.srv = httptest.NewServer(f.routes())
	f.apiURL = f.srv.URL + apiPrefix
	f.gatewayURL = "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/gateway"
	// Cleanups run last-registered first: Close, then the check that no
	// request was refused.
	t.Cleanup(f.assertNoViolations)
	t.Cleanup(f.Close)
	return f
}

// useSpec loads Discord's OpenAPI description for the fake. Missing, it
// fails the test on CI (CI=true), where shared/ is always cloned beside the
// repository; elsewhere the fake says so and keeps its own rules.
func (f *Fake) useSpec() {
	f.t.Helper()
	if f.cfg.spec == nil {
		f.cfg.spec = NewSpec()
	}
	if !f.cfg.spec.Available() {
		if os.Getenv("CI") == "true" {
			f.t.Errorf("discordtest: Discord's OpenAPI description is missing (looked for %s, and %s beside the module root)", f.cfg.spec.Path(), specRelPath)
		} else {
			f.t.Logf("discordtest: Discord's OpenAPI description not found at %s; request bodies are checked by the fake's own rules only", f.cfg.spec.Path())
		}
		f.cfg.spec = nil
		return
	}
	if err := f.cfg.spec.load(); err != nil {
		f.t.Errorf("discordtest: %v", err)
		f.cfg.spec = nil
	}
}

// APIURL is the REST base to hand to bot.NewRESTTransport (like
// DISCORD_API_URL), e.g. http://127.0.0.1:PORT/api/v10.
func (f *Fake) APIURL() string { return f.apiURL }

// GatewayURL is what GET /gateway answers; discordgo appends a slash and
// ?v=9&encoding=json.
func (f *Fake) GatewayURL() string { return f.gatewayURL }

// Token is the bot token the fake accepts (without the "Bot " prefix).
func (f *Fake) Token() string { return f.cfg.token }

// BotID is the bot's user id.
func (f *Fake) BotID() string { return f.cfg.botID }

// AppID is the application id.
func (f *Fake) AppID() string { return f.cfg.appID }

// Close stops the fake: it drops gateway connections, stops the HTTP server
// and waits for the fake's goroutines. It is idempotent and also runs at test
// cleanup. Close the discordgo session first, or it will keep reconnecting.
func (f *Fake) Close() {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.isClosed = true
		close(f.closed)
		conns := make([]*gwConn, 0, len(f.conns))
		for c := range f.conns {
			conns = append(conns, c)
		}
		f.mu.Unlock()
		for _, c := range conns {
			c.shutdown()
		}
		f.srv.Close()
		f.httpClient.CloseIdleConnections()
		f.wg.Wait()
	})
}

// notifyLocked wakes every waiter; f.mu must be held.
func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor blocks until cond (called with f.mu held) is true, ctx ends or the
// fake closes.
func (f *Fake) waitFor(ctx context.Context, cond func() bool) error {
	for {
		f.mu.Lock()
		ok := cond()
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-f.closed:
			f.mu.Lock()
			ok = cond()
			f.mu.Unlock()
			if ok {
				return nil
			}
			return ErrClosed
		}
	}
}

// ---- recorded state ----

// Request is one REST call the fake received.
type Request struct {
	Method string
	Path   string // below the API base, e.g. "/users/@me"
	Query  string
	Route  string // the Route* constant that matched; "" for an unknown route
	Status int    // what the fake answered
	Body   []byte
	At     time.Time
}

// Requests returns every REST call so far, in the order they were answered.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// UnknownRequests returns the REST calls that matched no route (answered 404),
// which usually means the bot called something this fake (and the test) did
// not expect.
func (f *Fake) UnknownRequests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Request
	for _, r := range f.requests {
		if r.Route == "" {
			out = append(out, r)
		}
	}
	return out
}

// Identify is one IDENTIFY payload a client sent.
type Identify struct {
	Token          string
	Intents        discordgo.Intent
	Compress       bool
	LargeThreshold int
	Shard          *[2]int
	Properties     map[string]string
	Raw            json.RawMessage
	// Accepted is false when the fake closed the connection instead of
	// answering READY (bad token, disallowed intents, bad shard).
	Accepted bool
}

// Identifies returns every IDENTIFY so far.
func (f *Fake) Identifies() []Identify {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.identifies)
}

// VoiceStateOp is one gateway op 4 (Update Voice State) the bot sent, which is
// what discordgo's ChannelVoiceJoinManual and ChannelVoiceJoin send.
type VoiceStateOp struct {
	GuildID   string
	ChannelID string // "" when the bot asked to leave (channel_id null)
	SelfMute  bool
	SelfDeaf  bool
	SessionID string // the gateway session that sent it
	Shard     int    // the shard of the connection it came on (0 unsharded)
}

// VoiceStateOps returns every op 4 so far.
func (f *Fake) VoiceStateOps() []VoiceStateOp {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.voiceOps)
}

// WaitVoiceStateOps waits until at least n op 4 payloads were received and
// returns all of them.
func (f *Fake) WaitVoiceStateOps(ctx context.Context, n int) ([]VoiceStateOp, error) {
	var out []VoiceStateOp
	err := f.waitFor(ctx, func() bool {
		out = slices.Clone(f.voiceOps)
		return len(out) >= n
	})
	return out, err
}

// Heartbeats returns how many op 1 heartbeats the fake acknowledged.
func (f *Fake) Heartbeats() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats
}

// WaitHeartbeat waits until every identified gateway connection has sent at
// least one heartbeat (and there is one).
//
// Call it before closing a discordgo session that (re)connected moments ago:
// discordgo's heartbeat goroutine sends its first heartbeat without checking
// whether Close already ran, and when that write fails it calls reconnect,
// which then retries forever against a fake that is gone (a goroutine leak).
// Once the first heartbeat went out, Close stops the goroutine cleanly.
func (f *Fake) WaitHeartbeat(ctx context.Context) error {
	return f.waitFor(ctx, func() bool {
		n := 0
		for c := range f.conns {
			if c.sess == nil {
				continue
			}
			if c.beats == 0 {
				return false
			}
			n++
		}
		return n > 0
	})
}

// WaitReady waits until some gateway session has been sent READY and is still
// connected, i.e. the bot identified successfully.
func (f *Fake) WaitReady(ctx context.Context) error {
	return f.waitFor(ctx, func() bool {
		for _, s := range f.sessions {
			if s.conn != nil {
				return true
			}
		}
		return false
	})
}

// Guild returns the fake's current view of a guild, including voice states
// changed by VoiceStateUpdate and by the bot's own op 4.
func (f *Fake) Guild(id string) (Guild, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, ok := f.guilds[id]
	if !ok {
		return Guild{}, false
	}
	return cloneGuild(gs.g), true
}

// ---- dispatching ----

// eventIntents maps gateway events to the intent Discord requires before it
// sends them; the fake drops them for sessions without it.
var eventIntents = map[string]discordgo.Intent{
	"GUILD_CREATE":        discordgo.IntentsGuilds,
	"GUILD_UPDATE":        discordgo.IntentsGuilds,
	"GUILD_DELETE":        discordgo.IntentsGuilds,
	"GUILD_ROLE_CREATE":   discordgo.IntentsGuilds,
	"GUILD_ROLE_UPDATE":   discordgo.IntentsGuilds,
	"GUILD_ROLE_DELETE":   discordgo.IntentsGuilds,
	"CHANNEL_CREATE":      discordgo.IntentsGuilds,
	"CHANNEL_UPDATE":      discordgo.IntentsGuilds,
	"CHANNEL_DELETE":      discordgo.IntentsGuilds,
	"GUILD_MEMBER_ADD":    discordgo.IntentsGuildMembers,
	"GUILD_MEMBER_UPDATE": discordgo.IntentsGuildMembers,
	"GUILD_MEMBER_REMOVE": discordgo.IntentsGuildMembers,
	"VOICE_STATE_UPDATE":  discordgo.IntentsGuildVoiceStates,
	"PRESENCE_UPDATE":     discordgo.IntentsGuildPresences,
}

// Dispatch sends an op 0 event of type eventType with data (marshalled to
// JSON; a discordgo struct or a map both work) to every identified session,
// with the session's next sequence number. Events gated by an intent the
// session did not ask for are dropped, as Discord does. It returns how many
// connected sessions it was sent to; sessions waiting to resume get it when
// they resume.
func (f *Fake) Dispatch(eventType string, data any) int {
	raw, err := json.Marshal(data)
	if err != nil {
		f.t.Errorf("discordtest: Dispatch(%s): %v", eventType, err)
		return 0
	}
	var about struct {
		GuildID string `json:"guild_id"`
	}
	_ = json.Unmarshal(raw, &about)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.broadcastLocked(eventType, about.GuildID, func(*session) []byte { return raw })
}

// broadcastLocked dispatches to every session whose intents allow the event
// and, for a guild's event (guildID not ""), whose shard owns the guild, as
// Discord does; payload may tailor the data per session.
func (f *Fake) broadcastLocked(eventType, guildID string, payload func(*session) []byte) int {
	need := eventIntents[eventType]
	n := 0
	for _, s := range f.sessionList() {
		if need != 0 && s.intents&need == 0 {
			continue
		}
		if guildID != "" && !s.inShard(guildID) {
			continue
		}
		f.dispatchLocked(s, eventType, payload(s))
		if s.conn != nil {
			n++
		}
	}
	return n
}

// sessionList returns live sessions in creation order, so events reach
// several sessions in a stable order.
func (f *Fake) sessionList() []*session {
	out := make([]*session, 0, len(f.sessions))
	for _, s := range f.sessions {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *session) int { return a.created.Compare(b.created) })
	return out
}

// GuildCreate adds or replaces a guild in the fake's model and dispatches
// GUILD_CREATE for it (as when the bot is added to a server or a guild becomes
// available again).
func (f *Fake) GuildCreate(g Guild) int {
	if g.ID == "" {
		f.t.Errorf("discordtest: GuildCreate without ID")
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, ok := f.guilds[g.ID]
	if !ok {
		gs = &guildState{joinedAt: time.Now()}
		f.guilds[g.ID] = gs
		f.guildOrder = append(f.guildOrder, g.ID)
	}
	gs.g = f.normalizeGuild(g)
	f.notifyLocked()
	return f.broadcastLocked("GUILD_CREATE", g.ID, func(s *session) []byte {
		return mustJSON(gs.guildCreate(s.intents))
	})
}

// VoiceStateUpdate changes a user's voice state in the fake's model (join,
// move, or leave when ChannelID is "") and dispatches VOICE_STATE_UPDATE with
// the member attached, as Discord does.
func (f *Fake) VoiceStateUpdate(vs VoiceState) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, ok := f.guilds[vs.GuildID]
	if !ok {
		f.t.Errorf("discordtest: VoiceStateUpdate for unknown guild %q", vs.GuildID)
		return 0
	}
	if vs.SessionID == "" {
		vs.SessionID = randomHex(16)
		for _, old := range gs.g.VoiceStates {
			if old.UserID == vs.UserID {
				vs.SessionID = old.SessionID
			}
		}
	}
	gs.setVoiceState(vs)
	f.notifyLocked()
	raw := mustJSON(gs.voiceStateWire(vs, true))
	return f.broadcastLocked("VOICE_STATE_UPDATE", vs.GuildID, func(*session) []byte { return raw })
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("discordtest: " + err.Error())
	}
	return b
}
