package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/bridges"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory"
)

func newUpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "Run the memory service and every bridge whose Discord token is set, in one process",
		Long: `Run everything in one process: the memory service, the text bridge when
DISCORD_TEXT_BOT_TOKEN is set, and the voice bridge when DISCORD_VOICE_BOT_TOKEN
is set. Each bridge still talks to the service over loopback HTTP with its own
bearer (from the environment, or minted into CLANKIE_MEMORY_DIR). A bridge
without a token is skipped with one line saying which variable enables it.
SIGTERM or Ctrl-C stops everything cleanly.`,
		Example: `  clankie up
  DISCORD_TEXT_BOT_TOKEN=... DISCORD_GUILD_IDS=123456789012345678 clankie up`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

// bridgeRunner is a configured bridge, ready to run.
type bridgeRunner struct {
	name string
	run  func(context.Context) error
	// tokenVar names the Discord token variable, for a rejected-token line.
	tokenVar string
}

func runUp(ctx context.Context, out io.Writer) error {
	memCfg, err := config.LoadMemory()
	if err != nil {
		return configError(err)
	}
	log, err := newLogger(memCfg.Log)
	if err != nil {
		return configError(err)
	}
	defer log.Sync()
	bot.RouteDiscordgoLogs(log)

	srv, err := memory.Start(memCfg, log.Named("memory"))
	if err != nil {
		return err
	}
	memURL := loopbackURL(srv.Addr)
	fmt.Fprintf(out, "memory service: %s (data in %s)\n", memURL, memCfg.Dir)
	if len(srv.Minted) > 0 {
		fmt.Fprintf(out, "minted bearer tokens for %v into %s/%s (0600); the CLI and bridges read them from there\n", srv.Minted, memCfg.Dir, config.BearersFile)
	}

	runners, err := configuredBridges(memURL, memCfg.Dir, log, out)
	if err != nil {
		stopServer(srv)
		return err
	}
	if len(runners) == 0 {
		fmt.Fprintln(out, "next: create a Discord application for the text bridge, put its bot token in DISCORD_TEXT_BOT_TOKEN and run clankie up again (the README walks through it)")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(runners)+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- srv.Serve(ctx)
	}()
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.run(ctx)
			if errors.Is(err, bot.ErrTokenRejected) {
				err = configError(fmt.Errorf("%s was rejected by Discord; copy the bot token again from the Developer Portal", r.tokenVar))
			} else if err != nil {
				err = fmt.Errorf("%s: %w", r.name, err)
			}
			errs <- err
			if err != nil {
				cancel() // one part failing stops the whole process
			}
		}()
	}
	wg.Wait()
	close(errs)
	var first error
	for err := range errs {
		if err != nil && first == nil {
			first = err
		}
	}
	log.Info("clankie stopped")
	return first
}

// configuredBridges builds each bridge whose Discord token is set and says
// which variable would enable the others.
func configuredBridges(memURL, dir string, log *zap.Logger, out io.Writer) ([]bridgeRunner, error) {
	var runners []bridgeRunner
	if os.Getenv("DISCORD_TEXT_BOT_TOKEN") == "" {
		fmt.Fprintln(out, "text bridge: skipped; set DISCORD_TEXT_BOT_TOKEN to run it")
	} else {
		cfg, err := config.LoadTextBridge()
		if err != nil {
			return nil, configError(err)
		}
		cfg.Memory = config.MemoryClient{URL: memURL, Dir: dir}
		bearer, err := config.ResolveBearer(cfg.Bearer, "CLANKIE_TEXT_BRIDGE_TOKEN", dir, bridges.TextLane)
		if err != nil {
			return nil, configError(err)
		}
		tb, err := bridges.NewText(cfg, bearer, log.Named("text"))
		if err != nil {
			return nil, configError(err)
		}
		runners = append(runners, bridgeRunner{name: "text bridge", run: tb.Run, tokenVar: "DISCORD_TEXT_BOT_TOKEN"})
		fmt.Fprintln(out, "text bridge: starting")
	}
	if os.Getenv("DISCORD_VOICE_BOT_TOKEN") == "" {
		fmt.Fprintln(out, "voice bridge: skipped; set DISCORD_VOICE_BOT_TOKEN to run it")
	} else {
		cfg, err := config.LoadVoiceBridge()
		if err != nil {
			return nil, configError(err)
		}
		cfg.Memory = config.MemoryClient{URL: memURL, Dir: dir}
		bearer, err := config.ResolveBearer(cfg.Bearer, "CLANKIE_VOICE_BRIDGE_TOKEN", dir, bridges.VoiceLane)
		if err != nil {
			return nil, configError(err)
		}
		vb, err := bridges.NewVoiceBridge(cfg, bearer, log.Named("voice"))
		if err != nil {
			return nil, configError(err)
		}
		runners = append(runners, bridgeRunner{name: "voice bridge", run: vb.Run, tokenVar: "DISCORD_VOICE_BOT_TOKEN"})
		fmt.Fprintln(out, "voice bridge: starting")
	}
	return runners, nil
}

// loopbackURL answers how a process on this host reaches addr: a wildcard
// listen address is reached over 127.0.0.1.
func loopbackURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func stopServer(srv *memory.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv.Serve(ctx)
}
