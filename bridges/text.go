// Package bridges wires a Discord bot to the memory service with a lane's
// bearer: the text bridge (discord_presence) and the voice bridge
// (discord_voice, whose sessions, consent and briefings live in package
// voice). It holds wiring only.
package bridges

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/commands"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/memoryclient"
)

// memoryTimeout bounds one memory call from a bridge, retries included. The
// router defers a reply after 1.5 s, so a slow answer is still delivered by
// editing; a dead service is reported at once (connection refused).
const memoryTimeout = 8 * time.Second

// Text is the text bridge: /person-memory and the context menus ("Remember
// this", "What Clankie knows", "Remember about them") over the
// discord_presence bearer,
// served over the gateway (Bot) or, with DISCORD_INTERACTIONS_ADDR, over
// HTTP interactions (HTTP); one router either way.
type Text struct {
	Bot  *bot.Bot
	HTTP *bot.HTTPBot

	router   *bot.Router
	rest     *discordgo.Session
	guildIDs []string
	log      *zap.Logger
}

// NewText builds the text bridge from its settings. bearer is the resolved
// memory token (from the environment or the minted file); metrics, when not
// nil, counts its interactions.
func NewText(cfg config.TextBridge, bearer string, log *zap.Logger, metrics *bot.Metrics) (*Text, error) {
	mem, err := memoryclient.New(cfg.Memory.URL, bearer, memoryclient.WithTimeout(memoryTimeout), memoryclient.WithLogger(log.Named("memoryclient")))
	if err != nil {
		return nil, err
	}
	shards, err := newShards(cfg.DiscordToken, cfg.Discord, discordgo.IntentsGuilds, log)
	if err != nil {
		return nil, err
	}
	cat, err := lang.Load()
	if err != nil {
		return nil, err
	}
	policy := commands.Policy{MemoryRoleIDs: cfg.Discord.MemoryRoleIDs, MemoryUserIDs: cfg.Discord.MemoryUserIDs}
	// The context menus belong to the text bridge: they write and read
	// person memory over the same bearer as /person-memory.
	cmds := append([]interaction.Command{commands.PersonMemory(mem, policy, time.Now, cat)},
		commands.ContextMenus(mem, policy, commands.FormKey(cfg.DiscordToken), time.Now, cat)...)
	router := bot.NewRouter(log, bot.Config{Guilds: cfg.Discord.GuildIDs, Metrics: metrics, Catalog: cat}, cmds...)
	t := &Text{router: router, rest: shards.REST(), guildIDs: cfg.Discord.GuildIDs, log: log}
	if cfg.InteractionsAddr != "" {
		// The memory service's claims, shared by every replica, decide
		// which replica serves an interaction (and that none serves a
		// replay).
		t.HTTP = &bot.HTTPBot{REST: shards.REST(), Router: router, Key: cfg.PublicKeyBytes(), Claims: mem,
			Addr: cfg.InteractionsListenAddr(), GuildIDs: cfg.Discord.GuildIDs, Log: log}
		return t, nil
	}
	t.Bot = &bot.Bot{Shards: shards, Router: router, GuildIDs: cfg.Discord.GuildIDs, Log: log}
	return t, nil
}

// Run serves until ctx is done.
func (t *Text) Run(ctx context.Context) error {
	if t.HTTP != nil {
		return t.HTTP.Run(ctx)
	}
	return t.Bot.Run(ctx)
}

// SyncCommands registers /person-memory and the context menus once, removes the bridge's commands
// from the scopes it no longer serves (PruneCommands), and returns:
// `clankie bridge text sync`, for HTTP replicas that leave registration to
// a separate step and for a move between per-server and global commands.
func (t *Text) SyncCommands(ctx context.Context) error {
	return bot.SyncAndPrune(ctx, t.rest, t.guildIDs, t.router.Definitions(), t.log)
}

// newShards builds a bridge's gateway shards from its settings (validated:
// the plan parses).
func newShards(token string, d config.Discord, intents discordgo.Intent, log *zap.Logger) (*bot.Shards, error) {
	plan, err := d.Shards()
	if err != nil {
		return nil, err
	}
	return bot.NewShards(token, d.APIURL, intents, bot.ShardPlan{Count: plan.Count, IDs: plan.IDs}, log)
}

// TextLane is the lane whose bearer the text bridge holds.
const TextLane = api.LaneDiscordPresence
