package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory"
)

func newMemoryCommand() *cobra.Command {
	cmd := parentCommand(&cobra.Command{
		Use:   "memory",
		Short: "Run the memory service or inspect what it keeps",
		Long: `Run the memory service ('clankie memory serve') or inspect and correct what
it keeps: every other subcommand is an operator command that reaches the
service over its HTTP API. Each takes --json (the service's records, for
scripts) and --timeout.
` + exitCodesHelp,
		Example: `  clankie memory serve
  clankie memory status
  clankie memory person 123456789012345678 234567890123456789`,
	})
	cmd.AddCommand(newServeCommand())
	cmd.AddCommand(newMigrateCommand())
	cmd.AddCommand(newOperatorCommands()...)
	return cmd
}

func newServeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the memory service (HTTP API over plain files or PostgreSQL)",
		Long: `Run the memory service. It owns CLANKIE_MEMORY_DIR (0700 directories, 0600
files), answers on CLANKIE_MEMORY_ADDR, and mints any bearer token not set in the
environment into <dir>/bearers.json on first start. One service per directory:
a second one exits at once naming the holder's pid. With CLANKIE_MEMORY_STORE
set to a postgres:// URL it keeps memory in PostgreSQL instead, takes no lock,
and several services may share the database. SIGTERM stops it cleanly.`,
		Example: `  CLANKIE_MEMORY_DIR=/var/lib/clankie clankie memory serve
  CLANKIE_LOG_FORMAT=console clankie memory serve`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadMemory()
			if err != nil {
				return configError(err)
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return configError(err)
			}
			defer log.Sync()
			srv, err := memory.Start(cfg, log)
			if err != nil {
				return err
			}
			// addr is the bound address, which scripts and the crash test
			// read; everyInterface says what a wildcard bind means.
			log.Info("memory service listening", zap.String("addr", srv.Addr), zap.Bool("everyInterface", isWildcard(cfg.Addr)), zap.String("metricsAddr", srv.MetricsAddr),
				zap.String("root", cfg.Dir), zap.Bool("postgres", cfg.Postgres()), zap.Strings("mintedLanes", srv.Minted))
			err = srv.Serve(cmd.Context())
			log.Info("memory service stopped")
			return err
		},
	}
}

func newMigrateCommand() *cobra.Command {
	var from, to string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Copy every person and episode between a data directory and PostgreSQL",
		Long: `Copy every person (facts and idempotency records) and every episode from one
store to another: a data directory (CLANKIE_MEMORY_DIR's kind) or a postgres://
connection string, either way round. A directory is locked meanwhile (stop its
service first); a database may stay in use. Running it again writes nothing new.
It prints what it read and wrote; --dry-run reads both sides and writes nothing.
The connection string is never printed, not even in an error.`,
		Example: `  clankie memory migrate --from ~/.clankie/memory --to postgres://clankie@db/clankie --dry-run
  clankie memory migrate --from ~/.clankie/memory --to postgres://clankie@db/clankie
  clankie memory migrate --from postgres://clankie@db/clankie --to /var/backups/clankie-memory`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := memory.Migrate(cmd.Context(), from, to, dryRun, zap.NewNop())
			if errors.Is(err, memory.ErrMigrateUsage) {
				return usageError(cmd, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), c)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the store to read: a data directory or a postgres:// URL")
	cmd.Flags().StringVar(&to, "to", "", "the store to write: a data directory or a postgres:// URL")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "read both stores and print what would be written, writing nothing")
	return cmd
}
