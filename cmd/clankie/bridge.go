package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/bridges"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory"
)

func newBridgeCommand() *cobra.Command {
	cmd := parentCommand(&cobra.Command{
		Use:   "bridge",
		Short: "Run a Discord bridge (text or voice)",
		Example: `  DISCORD_TEXT_BOT_TOKEN=... clankie bridge text
  DISCORD_VOICE_BOT_TOKEN=... clankie bridge voice`,
	})
	cmd.AddCommand(newTextBridgeCommand(), newVoiceBridgeCommand())
	return cmd
}

func newTextBridgeCommand() *cobra.Command {
	var syncCommands bool
	cmd := &cobra.Command{
		Use:   "text",
		Short: "Run the text bridge: /person-memory for a Discord application",
		Long: `Run the text bridge. It connects to Discord with DISCORD_TEXT_BOT_TOKEN,
registers /person-memory (in each of DISCORD_GUILD_IDS at once, or globally),
and reaches the memory service at CLANKIE_MEMORY_URL with the text bridge's
bearer (CLANKIE_TEXT_BRIDGE_TOKEN, or the one minted into CLANKIE_MEMORY_DIR).
A token Discord rejects stops it at start with exit code 2.

Gateway (default): it runs the shards DISCORD_SHARD_IDS names out of
DISCORD_SHARD_COUNT (auto: as many as Discord recommends); the process that
runs shard 0 registers the commands.

HTTP interactions: with DISCORD_INTERACTIONS_ADDR and DISCORD_PUBLIC_KEY it
opens no gateway and answers Discord's Interactions Endpoint URL instead, as
one of any number of stateless replicas behind a TLS reverse proxy. Replicas
do not register commands unless started with --sync-commands; or run
"clankie bridge text sync" once per deploy.`,
		Example: `  DISCORD_TEXT_BOT_TOKEN=... DISCORD_GUILD_IDS=123456789012345678 clankie bridge text
  DISCORD_TEXT_BOT_TOKEN=... DISCORD_SHARD_COUNT=8 DISCORD_SHARD_IDS=0-3 clankie bridge text
  DISCORD_TEXT_BOT_TOKEN=... DISCORD_INTERACTIONS_ADDR=127.0.0.1:8080 DISCORD_PUBLIC_KEY=... clankie bridge text --sync-commands`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBridgeAlone(cmd.Context(), textBridgeLoader(syncCommands))
		},
	}
	cmd.Flags().BoolVar(&syncCommands, "sync-commands", false, "with DISCORD_INTERACTIONS_ADDR: register the commands at start (one replica, or use 'clankie bridge text sync')")
	cmd.AddCommand(&cobra.Command{
		Use:   "sync",
		Short: "Register /person-memory with Discord once and exit",
		Long: `Register the text bridge's slash commands (in each of DISCORD_GUILD_IDS, or
globally) and exit, writing nothing when Discord already holds the same
definitions. It also removes the bridge's commands from every scope it no
longer serves (global ones when DISCORD_GUILD_IDS is set; servers no longer
listed, or every server when it is not), so a server never lists them twice.
Run it once per deploy when HTTP interaction replicas serve the commands, so
no replica needs --sync-commands, and after changing DISCORD_GUILD_IDS.`,
		Example: "  DISCORD_TEXT_BOT_TOKEN=... clankie bridge text sync",
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTextSync(cmd.Context())
		},
	})
	return cmd
}

func newVoiceBridgeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "voice",
		Short: "Run the voice bridge: /person-memory and /voice with consented briefings",
		Long: `Run the voice bridge. It connects to Discord with DISCORD_VOICE_BOT_TOKEN,
registers /person-memory and /voice, tracks who is in voice channels, runs one
session per server with per-speaker consent (DISCORD_VOICE_CONSENT_POLICY), and
hands a briefing of consented speakers' facts to a voice model speaking the
OpenAI Realtime GA protocol at CLANKIE_REALTIME_URL (OpenAI, or Azure OpenAI with
CLANKIE_REALTIME_AUTH=api-key); /voice status says whether that model is
connecting, ready, reconnecting or refused, and why. With a model configured it
carries audio both ways: consented speakers only (checked per packet, before any
decryption), the model's answer in return, stopped when someone talks over it.`,
		Example: `  DISCORD_VOICE_BOT_TOKEN=... CLANKIE_REALTIME_URL=wss://realtime.example/v1/realtime clankie bridge voice`,
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBridgeAlone(cmd.Context(), loadVoiceBridge)
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "sync",
		Short: "Register /person-memory and /voice with Discord once, remove stale copies, and exit",
		Long: `Register the voice bridge's slash commands (in each of DISCORD_GUILD_IDS, or
globally) and exit, writing nothing when Discord already holds the same
definitions, and remove the bridge's commands from every scope it no longer
serves (global ones when DISCORD_GUILD_IDS is set; servers no longer listed,
or every server when it is not), so a server never lists them twice. Run it
after changing DISCORD_GUILD_IDS. It opens no gateway and no voice session.`,
		Example: "  DISCORD_VOICE_BOT_TOKEN=... clankie bridge voice sync",
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVoiceSync(cmd.Context())
		},
	})
	return cmd
}

// runVoiceSync is `clankie bridge voice sync`.
func runVoiceSync(ctx context.Context) error {
	cfg, bearer, err := voiceSettings(nil)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return configError(err)
	}
	defer log.Sync()
	vb, err := bridges.NewVoiceBridge(cfg, bearer, log.Named("voice"), nil)
	if err != nil {
		return configError(err)
	}
	return syncOutcome("voice bridge", "DISCORD_VOICE_BOT_TOKEN", vb.SyncCommands(ctx))
}

// syncOutcome is how `clankie bridge … sync` ends: a token Discord refused
// is one line naming its variable (exit code 2), as at a bridge's start.
func syncOutcome(name, tokenVar string, err error) error {
	if errors.Is(err, bot.ErrTokenRejected) {
		return rejectedToken(tokenVar)
	}
	if err != nil {
		return fmt.Errorf("%s sync: %w", name, err)
	}
	return nil
}

// rejectedToken is the one line for a Discord token Discord refused.
func rejectedToken(tokenVar string) error {
	return configError(fmt.Errorf("%s was rejected by Discord; copy the bot token again from the Developer Portal", tokenVar))
}

// bridgeRunner is a bridge whose settings are loaded and checked.
type bridgeRunner struct {
	name     string
	tokenVar string // the Discord token variable, named when Discord rejects it
	logCfg   config.Log
	metrics  config.Metrics
	// build makes the bridge, its metrics registered in reg.
	build func(log *zap.Logger, reg prometheus.Registerer) (func(context.Context) error, error)
}

// run builds and runs the bridge, turning a rejected Discord token into one
// line naming the variable (exit code 2).
func (b bridgeRunner) run(ctx context.Context, log *zap.Logger, reg prometheus.Registerer) error {
	run, err := b.build(log, reg)
	if err != nil {
		return configError(err)
	}
	err = run(ctx)
	if errors.Is(err, bot.ErrTokenRejected) {
		return rejectedToken(b.tokenVar)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", b.name, err)
	}
	return nil
}

// bridgeLoader reads a bridge's settings; mem, when not nil, replaces where
// it reaches the memory service (clankie up points it at its own listener).
type bridgeLoader func(mem *config.MemoryClient) (bridgeRunner, error)

func loadTextBridge(mem *config.MemoryClient) (bridgeRunner, error) {
	return textBridgeLoader(false)(mem)
}

// textBridgeLoader loads the text bridge; syncCommands makes an HTTP
// interactions replica register the commands at start.
func textBridgeLoader(syncCommands bool) bridgeLoader {
	return func(mem *config.MemoryClient) (bridgeRunner, error) {
		cfg, bearer, err := textSettings(mem)
		if err != nil {
			return bridgeRunner{}, err
		}
		return bridgeRunner{name: "text bridge", tokenVar: "DISCORD_TEXT_BOT_TOKEN", logCfg: cfg.Log, metrics: cfg.Metrics,
			build: func(log *zap.Logger, reg prometheus.Registerer) (func(context.Context) error, error) {
				tb, err := bridges.NewText(cfg, bearer, log.Named("text"), bot.NewMetrics(reg, "text"))
				if err != nil {
					return nil, err
				}
				if tb.HTTP != nil {
					tb.HTTP.SyncCommands = syncCommands
				}
				return tb.Run, nil
			}}, nil
	}
}

func textSettings(mem *config.MemoryClient) (config.TextBridge, string, error) {
	cfg, err := config.LoadTextBridge()
	if err != nil {
		return cfg, "", configError(err)
	}
	if mem != nil {
		cfg.Memory = *mem
	}
	bearer, err := config.ResolveBearer(cfg.TextBridge, cfg.Memory.Dir, bridges.TextLane)
	if err != nil {
		return cfg, "", configError(err)
	}
	return cfg, bearer, nil
}

// runTextSync is `clankie bridge text sync`.
func runTextSync(ctx context.Context) error {
	cfg, bearer, err := textSettings(nil)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return configError(err)
	}
	defer log.Sync()
	tb, err := bridges.NewText(cfg, bearer, log.Named("text"), nil)
	if err != nil {
		return configError(err)
	}
	return syncOutcome("text bridge", "DISCORD_TEXT_BOT_TOKEN", tb.SyncCommands(ctx))
}

func loadVoiceBridge(mem *config.MemoryClient) (bridgeRunner, error) {
	cfg, bearer, err := voiceSettings(mem)
	if err != nil {
		return bridgeRunner{}, err
	}
	return bridgeRunner{name: "voice bridge", tokenVar: "DISCORD_VOICE_BOT_TOKEN", logCfg: cfg.Log, metrics: cfg.Metrics,
		build: func(log *zap.Logger, reg prometheus.Registerer) (func(context.Context) error, error) {
			metrics := bot.NewMetrics(reg, "voice")
			vb, err := bridges.NewVoiceBridge(cfg, bearer, log.Named("voice"), metrics)
			if err != nil {
				return nil, err
			}
			// Voice sessions, briefings delivered and the audio figures:
			// counts and seconds, no ids.
			if err := vb.Voice.RegisterMetrics(metrics.Registerer); err != nil {
				return nil, err
			}
			return vb.Run, nil
		}}, nil
}

func voiceSettings(mem *config.MemoryClient) (config.VoiceBridge, string, error) {
	cfg, err := config.LoadVoiceBridge()
	if err != nil {
		return cfg, "", configError(err)
	}
	if mem != nil {
		cfg.Memory = *mem
	}
	bearer, err := config.ResolveBearer(cfg.VoiceBridge, cfg.Memory.Dir, bridges.VoiceLane)
	if err != nil {
		return cfg, "", configError(err)
	}
	return cfg, bearer, nil
}

// runBridgeAlone is `clankie bridge text|voice`: one bridge, its own logger.
func runBridgeAlone(ctx context.Context, load bridgeLoader) error {
	b, err := load(nil)
	if err != nil {
		return err
	}
	// Bind the metrics listener before connecting anywhere: a port in use
	// fails at once.
	reg := newProcessRegistry()
	var mln net.Listener
	if b.metrics.Addr != "" {
		if mln, err = net.Listen("tcp", b.metrics.ListenAddr()); err != nil {
			return fmt.Errorf("CLANKIE_METRICS_ADDR %s cannot be bound: %s", b.metrics.ListenAddr(), bot.NetReason(err))
		}
	}
	log, err := newLogger(b.logCfg)
	if err != nil {
		return configError(err)
	}
	defer log.Sync()
	bot.RouteDiscordgoLogs(log)
	if mln != nil {
		ms := memory.MetricsServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), log)
		go func() { _ = ms.Serve(mln) }()
		defer ms.Close()
		log.Info("metrics listening", zap.String("addr", mln.Addr().String()))
	}
	return b.run(ctx, log, reg)
}

// newProcessRegistry is a registry for one process with the Go runtime's
// and the process's own collectors (never the global default registry).
func newProcessRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
