package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"go.uber.org/zap"
)

// IdentifyInterval is Discord's identify rule: one IDENTIFY per
// max_concurrency bucket every 5 seconds.
const IdentifyInterval = 5 * time.Second

// maxGuildsPerShard is the most servers Discord lets one shard carry;
// past it the gateway closes with 4011.
const maxGuildsPerShard = 2500

// ShardPlan says which shards a process runs: Count 0 is "auto" (what GET
// /gateway/bot recommends), IDs nil is every shard of Count.
type ShardPlan struct {
	Count int
	IDs   []int
}

// ErrNoSessionStarts means Discord's session_start_limit has no identify
// left for what this process would start; its text says when it resets.
var ErrNoSessionStarts = errors.New("no gateway session starts left")

// Shards is one process's part of a bot's gateway: one discordgo Session per
// shard it runs, all sharing one REST client and one REST rate limiter, all
// feeding the same handlers. It starts them within Discord's identify rule
// and sends a guild's gateway commands on the shard that owns the guild.
type Shards struct {
	token   string
	intents discordgo.Intent
	plan    ShardPlan
	log     *zap.Logger
	// IdentifyInterval is the spacing of identifies in one bucket; Discord's
	// 5 s unless a test's fake Discord is configured otherwise.
	IdentifyInterval time.Duration

	rest *discordgo.Session // REST only; never opened

	mu       sync.Mutex
	count    int
	sessions map[int]*discordgo.Session
	handlers []any
}

// NewShards builds the shard manager of one bot token. Nothing connects
// until Open. REST calls go to apiURL.
func NewShards(token, apiURL string, intents discordgo.Intent, plan ShardPlan, log *zap.Logger) (*Shards, error) {
	if log == nil {
		log = zap.NewNop()
	}
	rest, err := NewSession(token, apiURL, intents)
	if err != nil {
		return nil, err
	}
	return &Shards{token: token, intents: intents, plan: plan, log: log, IdentifyInterval: IdentifyInterval,
		rest: rest, sessions: map[int]*discordgo.Session{}}, nil
}

// REST returns the session every REST call goes through (command sync,
// interaction callbacks and edits); it never holds a gateway connection.
func (sh *Shards) REST() *discordgo.Session { return sh.rest }

// AddHandler registers a discordgo event handler on every shard, those
// already built and those Open builds later.
func (sh *Shards) AddHandler(h any) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.handlers = append(sh.handlers, h)
	for _, s := range sh.sessions {
		s.AddHandler(h)
	}
}

// Count returns the bot's total shard count once Open resolved it (0 before).
func (sh *Shards) Count() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.count
}

// IDs returns the shards this process runs, in order.
func (sh *Shards) IDs() []int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ids := make([]int, 0, len(sh.sessions))
	for id := range sh.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ShardFor returns the shard that carries guildID's events out of count:
// Discord's (guild_id >> 22) % count.
func ShardFor(guildID string, count int) (int, error) {
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("guild id %q is not a snowflake", guildID)
	}
	if count < 1 {
		count = 1
	}
	return int((id >> 22) % uint64(count)), nil
}

// ErrShardNotHere means a guild's shard runs in another process (or has not
// connected yet), so this one cannot send its gateway commands.
var ErrShardNotHere = errors.New("this server's gateway shard is not connected in this process")

// ChannelVoiceJoinManual sends the voice state update (op 4) for gID on the
// shard that owns gID, so Discord acts on it: Discord ignores op 4 sent on
// another shard. cID "" leaves voice. It satisfies voice.Gateway.
func (sh *Shards) ChannelVoiceJoinManual(gID, cID string, mute, deaf bool) error {
	sh.mu.Lock()
	count := sh.count
	sh.mu.Unlock()
	id, err := ShardFor(gID, count)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	s := sh.sessions[id]
	sh.mu.Unlock()
	if s == nil {
		return fmt.Errorf("shard %d: %w", id, ErrShardNotHere)
	}
	// discordgo writes op 4 to its websocket without checking that one is
	// open, and between a drop and the reconnect there is none. Its own
	// lock orders this: Close clears DataReady before it drops the
	// connection and Open sets the connection before the heartbeat sets
	// DataReady, both under the write lock, so while we hold the read lock
	// a ready session keeps its connection.
	s.RLock()
	defer s.RUnlock()
	if !s.DataReady {
		return fmt.Errorf("shard %d is reconnecting; try again in a moment: %w", id, ErrShardNotHere)
	}
	return s.ChannelVoiceJoinManual(gID, cID, mute, deaf)
}

// maxRecommendedShards bounds the shard count GET /gateway/bot may
// recommend: 65536 shards serve some 65 million servers.
const maxRecommendedShards = 1 << 16

// gatewayInfo is what GET /gateway/bot tells a bot before it connects.
type gatewayInfo struct {
	count          int
	maxConcurrency int
	remaining      int
	known          bool // session_start_limit was present
	resetAfter     time.Duration
}

func (sh *Shards) gatewayBot(ctx context.Context) (gatewayInfo, error) {
	gb, err := sh.rest.GatewayBot(discordgo.WithContext(ctx))
	if err != nil {
		return gatewayInfo{}, fmt.Errorf("ask discord how to connect (GET /gateway/bot): %s", restError(err))
	}
	if gb.Shards > maxRecommendedShards {
		// Discord recommends one shard per 1000 servers or so; a count past
		// this is not an answer to act on, and enumerating it would exhaust
		// memory before a single identify.
		return gatewayInfo{}, fmt.Errorf("discord recommended %d gateway shards (GET /gateway/bot), more than the %d this bot will plan for; set DISCORD_SHARD_COUNT", gb.Shards, maxRecommendedShards)
	}
	l := gb.SessionStartLimit
	gi := gatewayInfo{count: gb.Shards, maxConcurrency: l.MaxConcurrency, remaining: l.Remaining,
		known: l.Total > 0, resetAfter: time.Duration(l.ResetAfter) * time.Millisecond}
	if gi.count < 1 {
		gi.count = 1
	}
	if gi.maxConcurrency < 1 {
		gi.maxConcurrency = 1
	}
	return gi, nil
}

// resolve turns the plan into a shard count and the ids to run here.
func (sh *Shards) resolve(gi gatewayInfo) (int, []int, error) {
	count := sh.plan.Count
	if count == 0 {
		count = gi.count
	}
	ids := slices.Clone(sh.plan.IDs)
	if ids == nil {
		for i := range count {
			ids = append(ids, i)
		}
	}
	for _, id := range ids {
		if id < 0 || id >= count {
			return 0, nil, fmt.Errorf("DISCORD_SHARD_IDS names shard %d, but the bot has %d shards (0 to %d)", id, count, count-1)
		}
	}
	return count, ids, nil
}

// startLimitError says why nothing connects and when it can.
type startLimitError struct {
	need, remaining int
	resetAt         time.Time
	in              time.Duration
}

func (e *startLimitError) Error() string {
	left := "no more gateway session starts"
	if e.remaining > 0 {
		left = fmt.Sprintf("only %d more gateway session starts (this process needs %d)", e.remaining, e.need)
	}
	in := strings.TrimSuffix(e.in.String(), "0s") // 2h30m, not 2h30m0s
	if strings.HasSuffix(in, "h0m") {
		in = strings.TrimSuffix(in, "0m") // 3h, not 3h0m
	}
	if in == "" {
		in = "under a minute"
	}
	return fmt.Sprintf("Discord allows this bot %s until %s (in %s); not connecting, so none is spent",
		left, e.resetAt.Format("2006-01-02 15:04 UTC"), in)
}

func (e *startLimitError) Unwrap() error { return ErrNoSessionStarts }

func startLimitSentence(need int, gi gatewayInfo, now time.Time) error {
	return &startLimitError{need: need, remaining: gi.remaining,
		resetAt: now.Add(gi.resetAfter).UTC().Truncate(time.Minute), in: gi.resetAfter.Round(time.Minute)}
}

// Open resolves the shard count, checks the session start budget, and
// connects every shard of this process, one identify per max_concurrency
// bucket per IdentifyInterval. It returns each shard's READY by shard id.
// On error every shard already connected is closed again.
func (sh *Shards) Open(ctx context.Context) (map[int]*discordgo.Ready, error) {
	gi, err := sh.gatewayBot(ctx)
	if err != nil {
		return nil, err
	}
	count, ids, err := sh.resolve(gi)
	if err != nil {
		return nil, err
	}
	if gi.known && gi.remaining < len(ids) {
		return nil, startLimitSentence(len(ids), gi, time.Now())
	}
	sh.mu.Lock()
	sh.count = count
	for _, id := range ids {
		s, err := newSession(sh.token, sh.intents)
		if err != nil {
			sh.mu.Unlock()
			return nil, err
		}
		// One REST client and one rate limiter for the whole bot: Discord's
		// limits are per token, not per connection.
		s.Client = sh.rest.Client
		s.Ratelimiter = sh.rest.Ratelimiter
		s.ShardID, s.ShardCount = id, count
		s.Identify.Shard = &[2]int{id, count}
		for _, h := range sh.handlers {
			s.AddHandler(h)
		}
		sh.sessions[id] = s
	}
	sh.mu.Unlock()

	readies := map[int]*discordgo.Ready{}
	var rmu sync.Mutex
	buckets := map[int][]int{}
	for _, id := range ids {
		b := id % gi.maxConcurrency
		buckets[b] = append(buckets[b], id)
	}
	errs := make(chan error, len(buckets))
	for _, shardIDs := range buckets {
		go func() {
			errs <- sh.openBucket(ctx, shardIDs, count, func(id int, r *discordgo.Ready) {
				rmu.Lock()
				readies[id] = r
				rmu.Unlock()
			})
		}()
	}
	var first error
	for range buckets {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		sh.Close()
		return nil, first
	}
	sh.log.Info("gateway shards connected", zap.Int("shardCount", count), zap.Ints("shards", ids),
		zap.Int("maxConcurrency", gi.maxConcurrency))
	return readies, nil
}

// openBucket connects one bucket's shards in turn: the next identify waits
// IdentifyInterval after the previous shard's READY arrived, so it is never
// early however long the connection took.
func (sh *Shards) openBucket(ctx context.Context, ids []int, count int, ready func(int, *discordgo.Ready)) error {
	var last time.Time
	for _, id := range ids {
		if !last.IsZero() {
			select {
			case <-time.After(time.Until(last.Add(sh.IdentifyInterval))):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sh.mu.Lock()
		s := sh.sessions[id]
		sh.mu.Unlock()
		r, err := openShard(ctx, s)
		last = time.Now()
		if err != nil {
			return shardError(id, count, err)
		}
		ready(id, r)
	}
	return nil
}

// openShard connects one session and returns its READY.
func openShard(ctx context.Context, s *discordgo.Session) (*discordgo.Ready, error) {
	ch := make(chan *discordgo.Ready, 1)
	remove := s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
		select {
		case ch <- r:
		default:
		}
	})
	defer remove()
	if err := s.Open(); err != nil {
		return nil, &reasonError{prefix: "connect to the discord gateway", err: err}
	}
	var r *discordgo.Ready
	select {
	case r = <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		return nil, errors.New("the discord gateway did not send READY within 30s")
	}
	// The session takes commands (op 4) once its heartbeat runs, at once
	// after Open; wait for it so a caller never sees a fresh shard as
	// reconnecting.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		s.RLock()
		ready := s.DataReady
		s.RUnlock()
		if ready {
			break
		}
	}
	return r, nil
}

// shardError turns a failed connection into a sentence; the gateway's
// close code says what to change.
func shardError(id, count int, err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case 4004:
			return ErrTokenRejected
		case 4010:
			return fmt.Errorf("shard %d of %d: Discord refused the shard (4010); check DISCORD_SHARD_COUNT and DISCORD_SHARD_IDS", id, count)
		case 4011:
			return fmt.Errorf("shard %d of %d: Discord requires more shards for this many servers (4011, at most %d per shard); set DISCORD_SHARD_COUNT=auto or higher",
				id, count, maxGuildsPerShard)
		case 4014:
			return fmt.Errorf("shard %d of %d: Discord refused a privileged intent (4014); enable it in the Developer Portal", id, count)
		}
		return fmt.Errorf("shard %d of %d: Discord closed the gateway with %d", id, count, ce.Code)
	}
	return fmt.Errorf("shard %d of %d: connect to the discord gateway: %w", id, count, err)
}

// Close disconnects every shard. It is safe to call more than once.
func (sh *Shards) Close() {
	sh.mu.Lock()
	sessions := make([]*discordgo.Session, 0, len(sh.sessions))
	for _, s := range sh.sessions {
		sessions = append(sessions, s)
	}
	sh.sessions = map[int]*discordgo.Session{}
	sh.mu.Unlock()
	// discordgo's Close sleeps a second per session; close them together.
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Close()
		}()
	}
	wg.Wait()
}
