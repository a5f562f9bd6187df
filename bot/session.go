package bot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
)

// ErrTokenRejected means Discord refused the bot token at start.
var ErrTokenRejected = errors.New("discord rejected the bot token")

// NewSession builds a discordgo session whose REST calls go to apiURL (the
// gateway URL then comes from that REST API as usual). The State cache is
// off: the bridges keep their own rosters, and discordgo's cache races
// between guild updates and voice-state reads.
func NewSession(token, apiURL string, intents discordgo.Intent) (*discordgo.Session, error) {
	s, err := newSession(token, intents)
	if err != nil {
		return nil, err
	}
	rt, err := NewRESTTransport(apiURL, nil)
	if err != nil {
		return nil, err
	}
	s.Client = &http.Client{Transport: rt, Timeout: 20 * time.Second}
	return s, nil
}

// newSession is a session with our settings and discordgo's own REST client.
func newSession(token string, intents discordgo.Intent) (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("build discord session: %w", err)
	}
	s.StateEnabled = false
	// Events reach handlers in gateway order: a voice bridge must see a
	// member leave after they joined, never before. Handlers that do slow
	// work (the interaction router) start their own goroutine.
	s.SyncEvents = true
	s.Identify.Intents = intents
	s.Identify.Compress = false
	s.LogLevel = discordgo.LogError
	s.ShouldRetryOnRateLimit = true
	s.MaxRestRetries = 2
	return s, nil
}

// CheckToken asks Discord who the bot is, so a wrong token is one clear
// line at start rather than a reconnect loop.
//
// Discord having a bad moment at start (a 5xx) is retried a few times with
// a growing pause before the start gives up: a deploy that lands on a brief
// outage should not exit at once. A refusal (401, any other 4xx) and a
// network failure (usually a setting: DNS, TLS, a wrong URL) are final.
func CheckToken(ctx context.Context, s *discordgo.Session) (*discordgo.User, error) {
	return checkToken(ctx, s, time.Second, startRetries)
}

// startRetries is how many times CheckToken tries again: pauses of 1, 2, 4
// and 8 s, 15 s in all.
const startRetries = 4

// checkToken asks Discord who the token belongs to, pausing first, then
// twice as long each time, between at most retries more attempts.
func checkToken(ctx context.Context, s *discordgo.Session, first time.Duration, retries int) (*discordgo.User, error) {
	pause := first
	for attempt := 0; ; attempt++ {
		u, err := s.User("@me", discordgo.WithContext(ctx))
		if err == nil {
			return u, nil
		}
		status := 0 // no answer: a network failure
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil {
			status = re.Response.StatusCode
		}
		switch {
		case status == http.StatusUnauthorized:
			return nil, ErrTokenRejected
		case status < 500:
			// A refusal, or a network failure (DNS, TLS, a refused
			// connection) that is a setting to fix: one line, at once.
			return nil, fmt.Errorf("reach discord to check the bot token: %s", restError(err))
		}
		if attempt >= retries || ctx.Err() != nil {
			return nil, fmt.Errorf("reach discord to check the bot token (%d attempts): %s", attempt+1, restError(err))
		}
		select {
		case <-time.After(pause):
			pause *= 2
		case <-ctx.Done():
			return nil, fmt.Errorf("reach discord to check the bot token: %w", ctx.Err())
		}
	}
}

// Bot is a connected Discord application serving a Router over its gateway
// shards.
type Bot struct {
	Shards   *Shards
	Router   *Router
	GuildIDs []string
	Log      *zap.Logger
	// SyncCommands says whether this process registers the commands: by
	// default the one that runs shard 0, so processes that split a bot's
	// shards do not all write them.
	SyncCommands *bool
	// BeforeClose runs while the gateway is still connected, so a bridge
	// can leave voice channels before it disconnects.
	BeforeClose func()
}

// Run checks the token, connects this process's shards, syncs commands
// once they are ready, serves interactions until ctx is done, then
// disconnects and waits for replies in flight.
func (b *Bot) Run(ctx context.Context) error {
	rest := b.Shards.REST()
	me, err := CheckToken(ctx, rest)
	if err != nil {
		return err
	}
	b.Shards.AddHandler(b.Router.Handle)
	if m := b.Router.metrics; m != nil {
		b.Shards.AddHandler(m.onConnect)
	}
	readies, err := b.Shards.Open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		if b.BeforeClose != nil {
			b.BeforeClose()
		}
		b.Shards.Close()
		b.Router.Wait()
	}()
	ids := make([]int, 0, len(readies))
	guilds := 0
	appID := me.ID
	for id, r := range readies {
		ids = append(ids, id)
		guilds += len(r.Guilds)
		if r.Application != nil && r.Application.ID != "" {
			appID = r.Application.ID
		}
	}
	slices.Sort(ids)
	doSync := len(ids) > 0 && ids[0] == 0
	if b.SyncCommands != nil {
		doSync = *b.SyncCommands
	}
	if doSync {
		synced, err := SyncCommands(ctx, rest, appID, b.GuildIDs, b.Router.Definitions())
		if err != nil {
			return err
		}
		for scope, wrote := range synced {
			b.Log.Info("commands synced", zap.String("scope", scopeName(scope)), zap.Bool("registered", wrote))
		}
	} else {
		b.Log.Info("commands left to the process running shard 0")
	}
	b.Log.Info("discord bot ready", zap.String("botUserId", me.ID), zap.Int("guilds", guilds),
		zap.Ints("shards", ids), zap.Int("shardCount", b.Shards.Count()))
	<-ctx.Done()
	return nil
}

// RouteDiscordgoLogs sends discordgo's own log lines to zap. Only its error
// level is enabled on sessions; those lines name gateway and decode errors,
// never message content.
func RouteDiscordgoLogs(log *zap.Logger) {
	l := log.Named("discordgo")
	discordgo.Logger = func(level, _ int, format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		if len(msg) > 300 {
			msg = msg[:300]
		}
		switch level {
		case discordgo.LogError:
			l.Error(msg)
		case discordgo.LogWarning:
			l.Warn(msg)
		default:
			l.Debug(msg)
		}
	}
}
