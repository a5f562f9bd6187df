package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/bridges"
	"github.com/clankie/clankie/config"
)

func newBridgeCommand() *cobra.Command {
	cmd := parentCommand(&cobra.Command{
		Use:   "bridge",
		Short: "Run a Discord bridge (text or voice)",
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
			cfg, err := config.LoadTextBridge()
			if err != nil {
				return configError(err)
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return configError(err)
			}
			defer log.Sync()
			bot.RouteDiscordgoLogs(log)
			bearer, err := config.ResolveBearer(cfg.Bearer, "CLANKIE_TEXT_BRIDGE_TOKEN", cfg.Memory.Dir, bridges.TextLane)
			if err != nil {
				return configError(err)
			}
			text, err := bridges.NewText(cfg, bearer, log)
			if err != nil {
				return configError(err)
			}
			if err := text.Run(cmd.Context()); err != nil {
				if errors.Is(err, bot.ErrTokenRejected) {
					return configError(fmt.Errorf("DISCORD_TEXT_BOT_TOKEN was rejected by Discord; copy the bot token again from the Developer Portal"))
				}
				return err
			}
			return nil
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
hands a briefing of consented speakers' facts to the realtime voice model at
CLANKIE_REALTIME_URL. It moves the bot into and out of voice channels but does
not carry audio: discordgo cannot speak today's encrypted voice protocol.`,
		Example: `  DISCORD_VOICE_BOT_TOKEN=... CLANKIE_REALTIME_URL=wss://realtime.example/v1/realtime clankie bridge voice`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadVoiceBridge()
			if err != nil {
				return configError(err)
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return configError(err)
			}
			defer log.Sync()
			bot.RouteDiscordgoLogs(log)
			bearer, err := config.ResolveBearer(cfg.Bearer, "CLANKIE_VOICE_BRIDGE_TOKEN", cfg.Memory.Dir, bridges.VoiceLane)
			if err != nil {
				return configError(err)
			}
			vb, err := bridges.NewVoiceBridge(cfg, bearer, log)
			if err != nil {
				return configError(err)
			}
			if err := vb.Run(cmd.Context()); err != nil {
				if errors.Is(err, bot.ErrTokenRejected) {
					return configError(fmt.Errorf("DISCORD_VOICE_BOT_TOKEN was rejected by Discord; copy the bot token again from the Developer Portal"))
				}
				return err
			}
			return nil
		},
	}
}
