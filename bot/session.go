package bot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	s, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("build discord session: %w", err)
	}
	rt, err := NewRESTTransport(apiURL, nil)
	if err != nil {
		return nil, err
	}
	s.Client = &http.Client{Transport: rt, Timeout: 20 * time.Second}
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
func CheckToken(ctx context.Context, s *discordgo.Session) (*discordgo.User, error) {
	u, err := s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
			return nil, ErrTokenRejected
		}
		return nil, fmt.Errorf("reach discord to check the bot token: %s", restError(err))
	}
	return u, nil
}

// Bot is a connected Discord application serving a Router.
type Bot struct {
	Session  *discordgo.Session
	Router   *Router
	GuildIDs []string
	Log      *zap.Logger
	// OnReady runs once the gateway is ready and commands are synced.
	OnReady func(ctx context.Context, r *discordgo.Ready)
	// BeforeClose runs while the gateway is still connected, so a bridge
	// can leave voice channels before it disconnects.
	BeforeClose func()
}

// Run checks the token, connects, syncs commands once READY arrives, serves
// interactions until ctx is done, then disconnects and waits for replies in
// flight.
func (b *Bot) Run(ctx context.Context) error {
	me, err := CheckToken(ctx, b.Session)
	if err != nil {
		return err
	}
	ready := make(chan *discordgo.Ready, 1)
	removeReady := b.Session.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
		select {
		case ready <- r:
		default:
		}
	})
	defer removeReady()
	removeRoute := b.Session.AddHandler(b.Router.Handle)
	defer removeRoute()
	if m := b.Router.Metrics; m != nil {
		defer b.Session.AddHandler(m.onConnect)()
	}
	if err := b.Session.Open(); err != nil {
		return &reasonError{prefix: "connect to the discord gateway", err: err}
	}
	defer func() {
		if b.BeforeClose != nil {
			b.BeforeClose()
		}
		_ = b.Session.Close()
		b.Router.Wait()
	}()
	var r *discordgo.Ready
	select {
	case r = <-ready:
	case <-ctx.Done():
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("the discord gateway did not send READY within 30s")
	}
	appID := me.ID
	if r.Application != nil && r.Application.ID != "" {
		appID = r.Application.ID
	}
	synced, err := SyncCommands(ctx, b.Session, appID, b.GuildIDs, b.Router.Definitions())
	if err != nil {
		return err
	}
	for scope, wrote := range synced {
		b.Log.Info("commands synced", zap.String("scope", scopeName(scope)), zap.Bool("registered", wrote))
	}
	b.Log.Info("discord bot ready", zap.String("botUserId", me.ID), zap.Int("guilds", len(r.Guilds)))
	if b.OnReady != nil {
		b.OnReady(ctx, r)
	}
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
