package discordtest

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Gateway opcodes.
const (
	opDispatch            = 0
	opHeartbeat           = 1
	opIdentify            = 2
	opPresenceUpdate      = 3
	opVoiceStateUpdate    = 4
	opResume              = 6
	opReconnect           = 7
	opRequestGuildMembers = 8
	opInvalidSession      = 9
	opHello               = 10
	opHeartbeatACK        = 11
)

// Gateway close codes Discord uses (and the fake sends).
const (
	CloseRateLimited          = 4008
	CloseShardingRequired     = 4011
	CloseUnknownError         = 4000
	CloseUnknownOpcode        = 4001
	CloseDecodeError          = 4002
	CloseNotAuthenticated     = 4003
	CloseAuthenticationFailed = 4004
	CloseAlreadyAuthenticated = 4005
	CloseInvalidShard         = 4010
	CloseDisallowedIntents    = 4014
)

const privilegedIntents = discordgo.IntentsGuildMembers | discordgo.IntentsGuildPresences | discordgo.IntentsMessageContent

// maxReplay bounds the per-session event log kept for RESUME.
const maxReplay = 4096

type outFrame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

type inFrame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
}

// session is a gateway session: it outlives a connection so a client can
// RESUME and receive what it missed.
type session struct {
	id       string
	created  time.Time
	seq      int64
	log      []loggedFrame
	conn     *gwConn // nil while disconnected
	intents  discordgo.Intent
	compress bool
	shard    *[2]int
}

type loggedFrame struct {
	seq  int64
	t    string
	data []byte
}

// outMsg is one thing the writer goroutine sends.
type outMsg struct {
	data      []byte
	compress  bool // zlib, as a binary message (IDENTIFY asked for compress)
	closeCode int  // non-zero: send a close frame and hang up
	closeText string
}

// gwConn is one websocket connection. Its writer goroutine is the only writer
// (gorilla allows one), fed by an unbounded queue so dispatching never blocks
// on a slow client and frames keep the order they were queued in.
type gwConn struct {
	f  *Fake
	ws *websocket.Conn

	qmu   sync.Mutex
	queue []outMsg
	wake  chan struct{}

	done     chan struct{}
	doneOnce sync.Once
	// hangingUp is set once the fake sent a close frame: a close frame the
	// client sends back then (discordgo answers with 1000) must not end the
	// session, since Discord has already dropped the connection by then.
	hangingUp atomic.Bool

	version int // the v= query parameter, echoed in READY

	sess  *session // guarded by f.mu
	beats int      // heartbeats received; guarded by f.mu
}

func (c *gwConn) send(m outMsg) {
	c.qmu.Lock()
	c.queue = append(c.queue, m)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *gwConn) sendOp(op int, d any) {
	c.send(outMsg{data: mustJSON(outFrame{Op: op, D: mustJSON(d)})})
}

func (c *gwConn) closeWith(code int, text string) {
	c.send(outMsg{closeCode: code, closeText: text})
}

func (c *gwConn) shutdown() {
	c.doneOnce.Do(func() {
		close(c.done)
		_ = c.ws.Close()
	})
}

func (c *gwConn) writeLoop() {
	defer c.f.wg.Done()
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			c.qmu.Lock()
			if len(c.queue) == 0 {
				c.qmu.Unlock()
				break
			}
			m := c.queue[0]
			c.queue = c.queue[1:]
			c.qmu.Unlock()
			deadline := time.Now().Add(5 * time.Second)
			if m.closeCode != 0 {
				c.hangingUp.Store(true)
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(m.closeCode, m.closeText), deadline)
				c.shutdown()
				return
			}
			_ = c.ws.SetWriteDeadline(deadline)
			var err error
			if m.compress {
				var buf bytes.Buffer
				zw := zlib.NewWriter(&buf)
				_, _ = zw.Write(m.data)
				_ = zw.Close()
				err = c.ws.WriteMessage(websocket.BinaryMessage, buf.Bytes())
			} else {
				err = c.ws.WriteMessage(websocket.TextMessage, m.data)
			}
			if err != nil {
				c.shutdown()
				return
			}
		}
	}
}

// serveGateway upgrades GET /gateway (discordgo dials /gateway/?v=9&encoding=json)
// and runs the connection's read loop.
func (f *Fake) serveGateway(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if enc := q.Get("encoding"); enc != "" && enc != "json" {
		http.Error(w, "discordtest: only encoding=json is supported", http.StatusBadRequest)
		return
	}
	if q.Get("compress") != "" {
		http.Error(w, "discordtest: transport compression is not supported", http.StatusBadRequest)
		return
	}
	ws, err := f.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	c := &gwConn{f: f, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{}), version: 10}
	if v, err := strconv.Atoi(q.Get("v")); err == nil {
		c.version = v
	}
	f.mu.Lock()
	if f.isClosed {
		f.mu.Unlock()
		_ = ws.Close()
		return
	}
	f.conns[c] = struct{}{}
	f.wg.Add(2)
	heartbeatMS := f.cfg.heartbeat.Milliseconds()
	f.mu.Unlock()

	go c.writeLoop()
	defer f.wg.Done()
	c.sendOp(opHello, map[string]any{"heartbeat_interval": heartbeatMS})
	c.readLoop()
}

func (c *gwConn) readLoop() {
	f := c.f
	clientCode := 0
	for {
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				clientCode = ce.Code
			}
			break
		}
		if mt != websocket.TextMessage {
			c.closeWith(CloseDecodeError, "Error while decoding payload.")
			continue
		}
		var in inFrame
		if err := json.Unmarshal(data, &in); err != nil {
			c.closeWith(CloseDecodeError, "Error while decoding payload.")
			continue
		}
		c.handle(in)
	}
	c.shutdown()
	f.mu.Lock()
	delete(f.conns, c)
	if s := c.sess; s != nil && s.conn == c {
		s.conn = nil
		// A client that closes with 1000 or 1001 ends its session; Discord
		// will not let it resume.
		if !c.hangingUp.Load() && (clientCode == websocket.CloseNormalClosure || clientCode == websocket.CloseGoingAway) {
			delete(f.sessions, s.id)
		}
	}
	f.notifyLocked()
	f.mu.Unlock()
}

func (c *gwConn) handle(in inFrame) {
	f := c.f
	f.mu.Lock()
	identified := c.sess != nil
	f.mu.Unlock()
	switch in.Op {
	case opHeartbeat:
		f.mu.Lock()
		f.heartbeats++
		c.beats++
		f.notifyLocked()
		f.mu.Unlock()
		c.send(outMsg{data: mustJSON(outFrame{Op: opHeartbeatACK})})
		return
	case opIdentify:
		if identified {
			c.closeWith(CloseAlreadyAuthenticated, "Already authenticated.")
			return
		}
		c.identify(in.D)
		return
	case opResume:
		if identified {
			c.closeWith(CloseAlreadyAuthenticated, "Already authenticated.")
			return
		}
		c.resume(in.D)
		return
	}
	if !identified {
		c.closeWith(CloseNotAuthenticated, "Not authenticated.")
		return
	}
	switch in.Op {
	case opPresenceUpdate:
		// Accepted and ignored: presence has no effect on what the fake does.
	case opVoiceStateUpdate:
		c.voiceStateUpdate(in.D)
	case opRequestGuildMembers:
		c.requestGuildMembers(in.D)
	default:
		c.closeWith(CloseUnknownOpcode, "Unknown opcode.")
	}
}

func (f *Fake) tokenOK(tok string) bool {
	if f.cfg.rejectToken {
		return false
	}
	return strings.TrimPrefix(tok, "Bot ") == f.cfg.token
}

func (c *gwConn) identify(d json.RawMessage) {
	f := c.f
	var p struct {
		Token          string            `json:"token"`
		Intents        *discordgo.Intent `json:"intents"`
		Compress       bool              `json:"compress"`
		LargeThreshold int               `json:"large_threshold"`
		Shard          *[2]int           `json:"shard"`
		Properties     map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(d, &p); err != nil {
		c.closeWith(CloseDecodeError, "Error while decoding payload.")
		return
	}
	rec := Identify{Token: p.Token, Compress: p.Compress, LargeThreshold: p.LargeThreshold,
		Shard: p.Shard, Properties: p.Properties, Raw: append(json.RawMessage(nil), d...)}
	if p.Intents != nil {
		rec.Intents = *p.Intents
	}
	closeCode, closeText := 0, ""
	switch {
	case !f.tokenOK(p.Token):
		closeCode, closeText = CloseAuthenticationFailed, "Authentication failed."
	case p.Intents == nil:
		// API v8+ requires intents.
		closeCode, closeText = CloseDecodeError, "Error while decoding payload."
	case rec.Intents&privilegedIntents&^f.cfg.privileged != 0:
		closeCode, closeText = CloseDisallowedIntents, "Disallowed intent(s)."
	case p.Shard != nil && (p.Shard[1] < 1 || p.Shard[0] < 0 || p.Shard[0] >= p.Shard[1]):
		closeCode, closeText = CloseInvalidShard, "Invalid shard."
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if closeCode == 0 {
		closeCode, closeText = f.identifyLimitsLocked(p.Shard, time.Now())
	}
	rec.Accepted = closeCode == 0
	f.identifies = append(f.identifies, rec)
	f.notifyLocked()
	if closeCode != 0 {
		c.closeWith(closeCode, closeText)
		return
	}
	s := &session{id: randomHex(16), created: time.Now(), intents: rec.Intents, compress: p.Compress, shard: p.Shard, conn: c}
	f.sessions[s.id] = s
	c.sess = s

	var guilds []map[string]any
	var mine []*guildState
	for _, id := range f.guildOrder {
		if !s.inShard(id) {
			continue
		}
		guilds = append(guilds, map[string]any{"id": id, "unavailable": true})
		mine = append(mine, f.guilds[id])
	}
	if guilds == nil {
		guilds = []map[string]any{}
	}
	ready := map[string]any{
		"v":                       c.version,
		"user":                    f.botUserWire(),
		"guilds":                  guilds,
		"session_id":              s.id,
		"session_type":            "normal",
		"resume_gateway_url":      f.gatewayURL,
		"application":             map[string]any{"id": f.cfg.appID, "flags": 0},
		"private_channels":        []any{},
		"relationships":           []any{},
		"presences":               []any{},
		"user_settings":           map[string]any{},
		"guild_join_requests":     []any{},
		"geo_ordered_rtc_regions": []string{"fake"},
	}
	if s.shard != nil {
		ready["shard"] = s.shard
	}
	f.dispatchLocked(s, "READY", mustJSON(ready))
	if s.intents&discordgo.IntentsGuilds != 0 {
		for _, gs := range mine {
			f.dispatchLocked(s, "GUILD_CREATE", mustJSON(gs.guildCreate(s.intents)))
		}
	}
}

// inShard applies Discord's routing: (guild_id >> 22) % num_shards.
func (s *session) inShard(guildID string) bool {
	if s.shard == nil || s.shard[1] <= 1 {
		return true
	}
	return shardOf(guildID, s.shard[1]) == s.shard[0]
}

// shardOf is the shard of count that carries guildID: (guild_id >> 22) %
// count; an id that is not a snowflake goes to shard 0.
func shardOf(guildID string, count int) int {
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil || count <= 1 {
		return 0
	}
	return int((id >> 22) % uint64(count))
}

func (f *Fake) botUserWire() map[string]any {
	return map[string]any{
		"id": f.cfg.botID, "username": f.cfg.botName, "discriminator": "0", "global_name": nil,
		"avatar": nil, "bot": true, "verified": true, "mfa_enabled": false, "flags": 0,
		"email": nil, "public_flags": 0,
	}
}

// dispatchLocked sends an op 0 frame on s with its next sequence number and
// keeps it for replay; f.mu must be held so sequence order is wire order.
func (f *Fake) dispatchLocked(s *session, t string, d []byte) {
	s.seq++
	seq := s.seq
	frame := mustJSON(outFrame{Op: opDispatch, D: d, S: &seq, T: &t})
	s.log = append(s.log, loggedFrame{seq: seq, t: t, data: frame})
	if len(s.log) > maxReplay {
		s.log = s.log[len(s.log)-maxReplay:]
	}
	if s.conn != nil {
		s.conn.send(outMsg{data: frame, compress: s.compress && (t == "READY" || t == "GUILD_CREATE")})
	}
}

func (c *gwConn) resume(d json.RawMessage) {
	f := c.f
	var p struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	if err := json.Unmarshal(d, &p); err != nil {
		c.closeWith(CloseDecodeError, "Error while decoding payload.")
		return
	}
	if !f.tokenOK(p.Token) {
		c.closeWith(CloseAuthenticationFailed, "Authentication failed.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[p.SessionID]
	if ok && len(s.log) > 0 && p.Seq < s.log[0].seq-1 {
		ok = false // the events it missed are no longer buffered
	}
	if !ok {
		// Not resumable: the client must IDENTIFY again (discordgo does so
		// on op 9 over the same connection).
		c.sendOp(opInvalidSession, false)
		return
	}
	if old := s.conn; old != nil && old != c {
		old.sess = nil
		old.closeWith(CloseUnknownError, "Session resumed elsewhere.")
	}
	s.conn = c
	c.sess = s
	for _, lf := range s.log {
		if lf.seq > p.Seq {
			c.send(outMsg{data: lf.data, compress: s.compress && (lf.t == "READY" || lf.t == "GUILD_CREATE")})
		}
	}
	f.resumes++
	f.dispatchLocked(s, "RESUMED", []byte(`{"_trace":["discordtest"]}`))
	f.notifyLocked()
}

func (c *gwConn) voiceStateUpdate(d json.RawMessage) {
	f := c.f
	var p struct {
		GuildID   string  `json:"guild_id"`
		ChannelID *string `json:"channel_id"`
		SelfMute  bool    `json:"self_mute"`
		SelfDeaf  bool    `json:"self_deaf"`
	}
	if err := json.Unmarshal(d, &p); err != nil {
		c.closeWith(CloseDecodeError, "Error while decoding payload.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	op := VoiceStateOp{GuildID: p.GuildID, SelfMute: p.SelfMute, SelfDeaf: p.SelfDeaf}
	if p.ChannelID != nil {
		op.ChannelID = *p.ChannelID
	}
	if c.sess != nil {
		op.SessionID = c.sess.id
		if c.sess.shard != nil {
			op.Shard = c.sess.shard[0]
		}
	}
	f.voiceOps = append(f.voiceOps, op)
	f.notifyLocked()
	if c.sess != nil && !c.sess.inShard(p.GuildID) {
		// Discord acts on a guild's op 4 only on the shard that owns the
		// guild; elsewhere the bot would never move.
		f.violations = append(f.violations, Violation{Method: "GATEWAY", Path: "op 4 VOICE_STATE_UPDATE",
			Answer: fmt.Sprintf("guild %s belongs to shard %d, sent on shard %d; ignored", p.GuildID, shardOf(p.GuildID, c.sess.shard[1]), c.sess.shard[0])})
		return
	}

	gs, ok := f.guilds[p.GuildID]
	if !ok || !f.cfg.voiceEcho {
		return
	}
	vs := VoiceState{GuildID: p.GuildID, ChannelID: op.ChannelID, UserID: f.cfg.botID,
		SessionID: op.SessionID, SelfMute: p.SelfMute, SelfDeaf: p.SelfDeaf}
	gs.setVoiceState(vs)
	raw := mustJSON(gs.voiceStateWire(vs, true))
	f.broadcastLocked("VOICE_STATE_UPDATE", p.GuildID, func(*session) []byte { return raw })
	if op.ChannelID != "" && c.sess != nil {
		host := strings.TrimPrefix(strings.TrimPrefix(f.gatewayURL, "ws://"), "wss://")
		host, _, _ = strings.Cut(host, "/")
		token := randomHex(8)
		if f.cfg.voiceServer != nil {
			host, token = f.cfg.voiceServer(p.GuildID, f.cfg.botID, op.SessionID)
		}
		f.dispatchLocked(c.sess, "VOICE_SERVER_UPDATE", mustJSON(map[string]any{
			"token": token, "guild_id": p.GuildID, "endpoint": host,
		}))
	}
}

func (c *gwConn) requestGuildMembers(d json.RawMessage) {
	f := c.f
	var p struct {
		GuildID json.RawMessage `json:"guild_id"` // discordgo sends an array
		Query   *string         `json:"query"`
		Limit   int             `json:"limit"`
		UserIDs []string        `json:"user_ids"`
		Nonce   string          `json:"nonce"`
	}
	if err := json.Unmarshal(d, &p); err != nil {
		c.closeWith(CloseDecodeError, "Error while decoding payload.")
		return
	}
	var ids []string
	var one string
	if json.Unmarshal(p.GuildID, &one) == nil {
		ids = []string{one}
	} else if json.Unmarshal(p.GuildID, &ids) != nil {
		c.closeWith(CloseDecodeError, "Error while decoding payload.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		gs, ok := f.guilds[id]
		if !ok || c.sess == nil {
			continue
		}
		members := []*wireMember{}
		notFound := []string{}
		if p.UserIDs != nil {
			for _, uid := range p.UserIDs {
				if m, ok := gs.member(uid); ok {
					members = append(members, memberWire(m, gs.joinedAt, true))
				} else {
					notFound = append(notFound, uid)
				}
			}
		} else {
			q := ""
			if p.Query != nil {
				q = strings.ToLower(*p.Query)
			}
			for _, m := range gs.g.Members {
				name := m.Username
				if name == "" {
					name = defaultUsername(m.UserID)
				}
				if strings.HasPrefix(strings.ToLower(name), q) && (p.Limit == 0 || len(members) < p.Limit) {
					members = append(members, memberWire(m, gs.joinedAt, true))
				}
			}
		}
		chunk := map[string]any{"guild_id": id, "members": members, "chunk_index": 0, "chunk_count": 1, "not_found": notFound}
		if p.Nonce != "" {
			chunk["nonce"] = p.Nonce
		}
		f.dispatchLocked(c.sess, "GUILD_MEMBERS_CHUNK", mustJSON(chunk))
	}
}

// ---- test controls for the gateway ----

// RequestReconnect sends op 7 (Reconnect) on every connection, as Discord does
// before moving a session; a client should reconnect and RESUME.
func (f *Fake) RequestReconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.sendOp(opReconnect, nil)
	}
}

// DropConnections closes every gateway connection with the given close code
// (e.g. 4000 to allow a resume, 4004 to end the session). Sessions stay
// resumable unless the code is one Discord treats as fatal.
func (f *Fake) DropConnections(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fatal := code == CloseAuthenticationFailed || (code >= CloseInvalidShard && code <= CloseDisallowedIntents)
	f.compressTimeLocked()
	for c := range f.conns {
		if fatal && c.sess != nil {
			delete(f.sessions, c.sess.id)
		}
		c.closeWith(code, "discordtest: dropped by test")
	}
}

// InvalidateSessions sends op 9 (Invalid Session, not resumable) on every
// identified connection and forgets those sessions; a client must IDENTIFY
// again on the same connection (discordgo does so immediately).
func (f *Fake) InvalidateSessions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compressTimeLocked()
	for c := range f.conns {
		if c.sess == nil {
			continue
		}
		delete(f.sessions, c.sess.id)
		c.sess.conn = nil
		c.sess = nil
		c.sendOp(opInvalidSession, false)
	}
	f.notifyLocked()
}

// compressTimeLocked forgets when each bucket last identified. A test that
// drops or invalidates sessions moments after they started stands for an
// event that comes long after the identify in production; without this the
// client's re-identify (discordgo sends it at once after op 9) would be
// refused by the 5 s identify rule, which is not what such a test is about.
func (f *Fake) compressTimeLocked() {
	clear(f.lastIdentify)
}
