package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/bot"
	"github.com/clankie/clankie/config"
)

func newHealthCommand() *cobra.Command {
	var (
		url     string
		local   bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health [--url URL]",
		Short: "Exit 0 when the memory service answers ready (for container health checks)",
		Long: `Ask the memory service whether it is ready (GET /readyz: listening, and its
memory root writable) and exit 0 when it is, 1 when it is not or does not
answer, 2 on bad usage. It needs no credential and prints one line. The image
has no shell or curl, so the Dockerfile's HEALTHCHECK runs this. --url
defaults to CLANKIE_MEMORY_URL; --local asks the service this host runs
instead, wherever CLANKIE_MEMORY_ADDR puts it (a wildcard host means
loopback), which is what a container's health check wants.`,
		Example: `  clankie health
  clankie health --url http://127.0.0.1:4310
  clankie health --local         # the service CLANKIE_MEMORY_ADDR binds on this host
  docker exec clankie clankie health`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usagef(cmd, "--timeout must be positive (got %s)", timeout)
			}
			if local && cmd.Flags().Changed("url") {
				return usagef(cmd, "--local and --url name two places; give one")
			}
			if local {
				mem, err := config.LoadMemory()
				if err != nil {
					return configError(err)
				}
				url = loopbackURL(mem.Addr)
			} else if !cmd.Flags().Changed("url") {
				mc, err := config.LoadMemoryClient()
				if err != nil {
					return configError(err)
				}
				url = mc.URL
			} else if err := config.CheckMemoryURL("--url", url); err != nil {
				return usageError(cmd, err)
			}
			return checkReady(cmd.Context(), cmd.OutOrStdout(), strings.TrimRight(url, "/"), timeout)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "where the memory service answers (default: CLANKIE_MEMORY_URL)")
	cmd.Flags().BoolVar(&local, "local", false, "ask the service on this host at CLANKIE_MEMORY_ADDR instead of CLANKIE_MEMORY_URL")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "give up when the service has not answered within this long")
	return cmd
}

// checkReady asks base/readyz and says in one line what it found.
func checkReady(ctx context.Context, out io.Writer, base string, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return configError(fmt.Errorf("cannot build a request for %s: %w", base, err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("memory service at %s is not answering: %s", base, bot.NetReason(err))}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		fmt.Fprintf(out, "ready: memory service at %s\n", base)
		return nil
	}
	var e struct {
		Message string `json:"message"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e)
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("memory service at %s is not ready (HTTP %d): %s", base, resp.StatusCode, e.Message)}
}
