package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/bot"
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
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

func runUp(ctx context.Context, out io.Writer) error {
	// Validate every setting, the bridges' included (even one whose token
	// is unset), before anything starts or touches the disk.
	memCfg, err := config.LoadMemory()
	if err != nil {
		return configError(err)
	}
	if err := config.ValidateBridges(); err != nil {
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
	where := memCfg.Dir
	if memCfg.Postgres() {
		where = "the PostgreSQL database CLANKIE_MEMORY_STORE names"
	}
	fmt.Fprintf(out, "memory service: %s (data in %s)\n", describeListen(memCfg.Addr, srv.Addr), where)
	if srv.MetricsAddr != "" {
		fmt.Fprintf(out, "metrics: GET /metrics at %s, no credential\n", describeListen(memCfg.Metrics.ListenAddr(), srv.MetricsAddr))
	} else {
		fmt.Fprintf(out, "metrics: %s/metrics with the operator bearer (set CLANKIE_METRICS_ADDR for a listener without one)\n", memURL)
	}
	if len(srv.Minted) > 0 {
		fmt.Fprintf(out, "minted bearer tokens for %s into %s/%s (0600); the CLI and bridges read them from there\n", strings.Join(srv.Minted, ", "), memCfg.Dir, config.BearersFile)
	}

	for _, w := range config.BridgeWarnings() {
		fmt.Fprintf(out, "warning: %s\n", w)
	}

	runners, err := configuredBridges(memURL, memCfg.Dir, out)
	if err != nil {
		_ = srv.Close()
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
			err := r.run(ctx, log, srv.Registry)
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

// configuredBridges loads each bridge whose Discord token is set, pointed
// at this process's memory service, and says which variable would enable
// the others.
func configuredBridges(memURL, dir string, out io.Writer) ([]bridgeRunner, error) {
	mem := &config.MemoryClient{URL: memURL, MemoryRoot: config.MemoryRoot{Dir: dir}}
	var runners []bridgeRunner
	for _, k := range []struct {
		name, tokenVar string
		load           bridgeLoader
	}{
		{"text bridge", "DISCORD_TEXT_BOT_TOKEN", loadTextBridge},
		{"voice bridge", "DISCORD_VOICE_BOT_TOKEN", loadVoiceBridge},
	} {
		if os.Getenv(k.tokenVar) == "" {
			fmt.Fprintf(out, "%s: skipped; set %s to run it\n", k.name, k.tokenVar)
			continue
		}
		r, err := k.load(mem)
		if err != nil {
			return nil, err
		}
		runners = append(runners, r)
		fmt.Fprintf(out, "%s: starting\n", k.name)
	}
	return runners, nil
}

// describeListen says where a listener is, as it is: a wildcard bind is
// every interface (and reachable from this host over loopback), never
// presented as if it were 127.0.0.1.
//
// configured is the address as set (its host is what the operator wrote:
// 0.0.0.0 stays 0.0.0.0, where the listener would say [::]); actual is the
// one bound (its port is the real one when the setting asked for :0).
func describeListen(configured, actual string) string {
	host, _, err := net.SplitHostPort(configured)
	_, port, err2 := net.SplitHostPort(actual)
	if err != nil || err2 != nil {
		return "http://" + actual
	}
	addr := net.JoinHostPort(host, port)
	if isWildcard(configured) {
		return fmt.Sprintf("%s on every interface (port %s; from this host %s)", addr, port, loopbackURL(addr))
	}
	return "http://" + addr
}

// loopbackURL returns how a process on this host reaches addr: a wildcard
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

// isWildcard reports whether addr binds every interface (0.0.0.0, ::, or
// no host).
func isWildcard(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && (host == "" || ip != nil && ip.IsUnspecified())
}
