package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/bridges"
	"github.com/clankie/clankie/config"
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
	return &cobra.Command{
		Use:   "text",
		Short: "Run the text bridge: /person-memory for a Discord application",
		Long: `Run the text bridge. It connects to Discord with DISCORD_TEXT_BOT_TOKEN,
registers /person-memory (in each of DISCORD_GUILD_IDS at once, or globally),
and reaches the memory service at CLANKIE_MEMORY_URL with the text bridge's
bearer (CLANKIE_TEXT_BRIDGE_TOKEN, or the one minted into CLANKIE_MEMORY_DIR).
A token Discord rejects stops it at start with exit code 2.`,
		Example: `  DISCORD_TEXT_BOT_TOKEN=... DISCORD_GUILD_IDS=123456789012345678 clankie bridge text`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBridgeAlone(cmd.Context(), loadTextBridge)
		},
	}
}

func newVoiceBridgeCommand() *cobra.Command {
	return &cobra.Command{
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
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBridgeAlone(cmd.Context(), loadVoiceBridge)
		},
	}
}

// bridgeRunner is a bridge whose settings are loaded and checked.
type bridgeRunner struct {
	name     string
	tokenVar string // the Discord token variable, named when Discord rejects it
	logCfg   config.Log
	build    func(log *zap.Logger) (func(context.Context) error, error)
}

// run builds and runs the bridge, turning a rejected Discord token into one
// line naming the variable (exit code 2).
func (b bridgeRunner) run(ctx context.Context, log *zap.Logger) error {
	run, err := b.build(log)
	if err != nil {
		return configError(err)
	}
	err = run(ctx)
	if errors.Is(err, bot.ErrTokenRejected) {
		return configError(fmt.Errorf("%s was rejected by Discord; copy the bot token again from the Developer Portal", b.tokenVar))
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
	cfg, err := config.LoadTextBridge()
	if err != nil {
		return bridgeRunner{}, configError(err)
	}
	if mem != nil {
		cfg.Memory = *mem
	}
	bearer, err := config.ResolveBearer(cfg.Bearer, "CLANKIE_TEXT_BRIDGE_TOKEN", cfg.Memory.Dir, bridges.TextLane)
	if err != nil {
		return bridgeRunner{}, configError(err)
	}
	return bridgeRunner{name: "text bridge", tokenVar: "DISCORD_TEXT_BOT_TOKEN", logCfg: cfg.Log,
		build: func(log *zap.Logger) (func(context.Context) error, error) {
			tb, err := bridges.NewText(cfg, bearer, log.Named("text"))
			if err != nil {
				return nil, err
			}
			return tb.Run, nil
		}}, nil
}

func loadVoiceBridge(mem *config.MemoryClient) (bridgeRunner, error) {
	cfg, err := config.LoadVoiceBridge()
	if err != nil {
		return bridgeRunner{}, configError(err)
	}
	if mem != nil {
		cfg.Memory = *mem
	}
	bearer, err := config.ResolveBearer(cfg.Bearer, "CLANKIE_VOICE_BRIDGE_TOKEN", cfg.Memory.Dir, bridges.VoiceLane)
	if err != nil {
		return bridgeRunner{}, configError(err)
	}
	return bridgeRunner{name: "voice bridge", tokenVar: "DISCORD_VOICE_BOT_TOKEN", logCfg: cfg.Log,
		build: func(log *zap.Logger) (func(context.Context) error, error) {
			vb, err := bridges.NewVoiceBridge(cfg, bearer, log.Named("voice"))
			if err != nil {
				return nil, err
			}
			return vb.Run, nil
		}}, nil
}

// runBridgeAlone is `clankie bridge text|voice`: one bridge, its own logger.
func runBridgeAlone(ctx context.Context, load bridgeLoader) error {
	b, err := load(nil)
	if err != nil {
		return err
	}
	log, err := newLogger(b.logCfg)
	if err != nil {
		return configError(err)
	}
	defer log.Sync()
	bot.RouteDiscordgoLogs(log)
	return b.run(ctx, log)
}
