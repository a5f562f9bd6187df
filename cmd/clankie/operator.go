package main

// The operator CLI: `clankie memory status|people|person|fact|forget-person|
// episodes|episode`. Every command reaches the memory service over its HTTP
// API with the operator's bearer (CLANKIE_OPERATOR_TOKEN, else the one the
// service minted into CLANKIE_MEMORY_DIR), through package memoryclient.
//
// What scripts can rely on: --json prints the service's JSON answer on stdout;
// every failure is one sentence on stderr and an exit code from
// exitCodesHelp. The bearer is never printed, not even in an error.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memoryclient"
)

// Exit codes of the operator commands.
const (
	exitOK          = 0
	exitFailed      = 1 // the service failed or is unreachable
	exitUsage       = 2 // bad usage or configuration, missing credential
	exitNotFound    = 3 // 404
	exitRefused     = 4 // 401, 403, 409
	operatorTimeout = 10 * time.Second
)

// exitCodesHelp ends 'clankie memory --help', once for every operator command.
const exitCodesHelp = `
Exit codes:
  0  success
  1  the memory service failed, or is not reachable
  2  bad usage or configuration: wrong arguments or flags, a value the
     service rejects, or the operator credential is missing
  3  not found: no such fact or episode
  4  refused: the credential was not accepted (401), the route is not
     allowed for it (403), or the change conflicts with what is kept (409,
     such as keeping an episode when 1024 are already kept)

Credential: CLANKIE_OPERATOR_TOKEN, or when it is unset the operator token
the memory service minted into CLANKIE_MEMORY_DIR/bearers.json. The service
is reached at CLANKIE_MEMORY_URL. Set CLANKIE_LOG_LEVEL=debug to log each
call (route templates and statuses only) on stderr.`

func newOperatorCommands() []*cobra.Command {
	return []*cobra.Command{
		newStatusCommand(),
		newCorruptCommand(),
		newPeopleCommand(),
		newPersonCommand(),
		newFactCommand(),
		newForgetPersonCommand(),
		newEpisodesCommand(),
		newEpisodeCommand(),
	}
}

// opFlags are the flags every operator command has.
type opFlags struct {
	json    bool
	timeout time.Duration
}

// operatorCommand finishes an operator command: the shared flags (when fl is
// not nil), usage errors with exit code 2, and the exit codes in its help.
func operatorCommand(cmd *cobra.Command, fl *opFlags) *cobra.Command {
	if fl != nil {
		cmd.Flags().BoolVar(&fl.json, "json", false, "print the memory service's JSON answer (for scripts) instead of text")
		cmd.Flags().DurationVar(&fl.timeout, "timeout", operatorTimeout, "give up when the memory service has not answered within this long")
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	cmd.Long = strings.TrimSpace(cmd.Long) + "\n\nExit codes, the credential and debug logging: 'clankie memory --help'."
	return cmd
}

// usageError is bad usage: exit code 2 and one sentence that names the
// command and points to its help. run prints it without another prefix.
func usageError(cmd *cobra.Command, err error) error {
	msg := strings.TrimSuffix(strings.TrimSpace(err.Error()), ".")
	if !strings.HasSuffix(msg, "?") {
		msg += "."
	}
	// A sentence, so it ends with a full stop (built, not a format literal).
	path := cmd.CommandPath()
	return &exitError{code: exitUsage, err: errors.New(path + ": " + msg + " See '" + path + " --help'.")}
}

// usagef is usageError with a formatted sentence.
func usagef(cmd *cobra.Command, format string, args ...any) error {
	return usageError(cmd, fmt.Errorf(format, args...))
}

// checkLimit is the one rule for every --limit: when given, a whole number
// from 1 to max; when not given, the service's default applies.
func checkLimit(cmd *cobra.Command, limit, max int) error {
	if cmd.Flags().Changed("limit") && (limit < 1 || limit > max) {
		return usagef(cmd, "--limit must be 1 to %d (got %d)", max, limit)
	}
	return nil
}

// argsNamed accepts exactly the named positional arguments and says which
// are missing otherwise.
func argsNamed(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			for i, n := range names {
				// GUILD and USER are Discord ids: a word there matches no
				// one, and "No facts" would hide the mistake.
				if (n == "GUILD" || n == "USER") && !api.ValidSnowflake(args[i]) {
					return usagef(cmd, "%s must be a Discord id, digits only such as 123456789012345678 (got %q)", n, oneLine(args[i]))
				}
			}
			return nil
		}
		if len(names) == 0 {
			return usagef(cmd, "takes no arguments (got %d)", len(args))
		}
		return usagef(cmd, "needs %s (got %d argument%s)", strings.Join(names, " "), len(args), plural(len(args)))
	}
}

// groupCommand is an operator parent such as `fact` or `episode`.
func groupCommand(cmd *cobra.Command) *cobra.Command {
	return operatorCommand(parentCommand(cmd), nil)
}

// parentCommand is a command that only holds subcommands: without arguments
// it shows its help; an unknown subcommand is bad usage (exit code 2), not
// a help page that exits 0 and hides the typo from a script.
func parentCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				return usagef(c, "unknown command %q; did you mean %q?", oneLine(args[0]), s[0])
			}
			return usagef(c, "unknown command %q", oneLine(args[0]))
		}
		return c.Help()
	}
	return cmd
}

// session is one command's connection to the memory service.
type session struct {
	client  *memoryclient.Client
	url     string
	timeout time.Duration
	out     io.Writer
	json    bool
	// tokenSource says where the operator token came from, for a 401's
	// sentence (never the token).
	tokenSource string
}

// connect loads the operator's settings and credential and runs fn with a
// client and a context bounded by --timeout. Failures come back as exit
// errors carrying one plain sentence.
func (fl *opFlags) connect(cmd *cobra.Command, fn func(ctx context.Context, s *session) error) error {
	if fl.timeout <= 0 {
		return usagef(cmd, "--timeout must be positive (got %s)", fl.timeout)
	}
	cfg, err := config.LoadOperator()
	if err != nil {
		return configError(err)
	}
	bearer, err := config.ResolveBearer(cfg.Operator, cfg.Memory.Dir, api.LaneOperator)
	if err != nil {
		return configError(fmt.Errorf("the operator credential is missing, so nothing was read from memory: %w", err))
	}
	client, err := memoryclient.New(cfg.Memory.URL, bearer,
		memoryclient.WithTimeout(fl.timeout),
		memoryclient.WithLogger(cliLogger(cfg.Log, cmd.ErrOrStderr())))
	if err != nil {
		// memoryclient's sentences never quote the URL or the bearer.
		return configError(err)
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, fl.timeout)
	defer cancel()
	source := "from CLANKIE_OPERATOR_TOKEN"
	if cfg.Operator == "" {
		source = "minted into " + filepath.Join(cfg.Memory.Dir, config.BearersFile)
	}
	s := &session{client: client, url: cfg.Memory.URL, timeout: fl.timeout, out: cmd.OutOrStdout(), json: fl.json, tokenSource: source}
	return s.explain(fn(ctx, s))
}

// cliLogger logs the client's calls on stderr only at debug: at other levels
// a failed call is already the one sentence the command prints.
func cliLogger(c config.Log, w io.Writer) *zap.Logger {
	if c.Level != "debug" {
		return zap.NewNop()
	}
	var enc zapcore.Encoder
	if c.Format == "console" {
		enc = zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	} else {
		ec := zap.NewProductionEncoderConfig()
		ec.TimeKey = "time"
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	}
	log := zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), zapcore.DebugLevel))
	logBuild(log)
	return log
}

// explain turns a failed call into the sentence and exit code a person or a
// script needs. It shows the service's own sentence where there is one (a
// 401's names the credential) and never the bearer: *memoryclient.Error
// carries none.
func (s *session) explain(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	e, ok := memoryclient.AsError(err)
	if !ok {
		return &exitError{code: exitFailed, err: err}
	}
	msg := e.Message
	switch e.Kind {
	case memoryclient.KindUnavailable:
		if e.Status == 0 {
			return &exitError{code: exitFailed, err: fmt.Errorf("memory service is not reachable at %s; is `clankie memory serve` running?", s.url)}
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("memory service at %s is unavailable (HTTP %d): %s", s.url, e.Status, msg)}
	case memoryclient.KindTimeout:
		return &exitError{code: exitFailed, err: fmt.Errorf("memory service at %s did not answer within %s; is it overloaded or stuck? (--timeout gives it longer)", s.url, s.timeout)}
	case memoryclient.KindCanceled:
		return &exitError{code: exitFailed, err: errors.New("canceled before the memory service answered")}
	case memoryclient.KindNotFound:
		// The service's record 404s carry a *_not_found code; anything else
		// (an unrouted path, another server's page) means the URL does not
		// lead to a clankie memory service at all.
		if !strings.HasSuffix(e.Code, "_not_found") {
			return &exitError{code: exitUsage, err: fmt.Errorf("%s does not answer as a clankie memory service (HTTP 404 for its API); check CLANKIE_MEMORY_URL", s.url)}
		}
		return &exitError{code: exitNotFound, err: errors.New(msg)}
	case memoryclient.KindUnauthorized:
		// The service's 401 sentence is written for an HTTP caller (which
		// header to send); a person at the CLI needs to know which token.
		return &exitError{code: exitRefused, err: fmt.Errorf("the memory service at %s did not accept the operator token %s; give this command the token that service uses (CLANKIE_OPERATOR_TOKEN, or on the service's host leave it unset to use the one the service minted)", s.url, s.tokenSource)}
	case memoryclient.KindForbidden, memoryclient.KindConflict:
		return &exitError{code: exitRefused, err: fmt.Errorf("the memory service refused: %s", msg)}
	case memoryclient.KindInvalid:
		if e.Status == 0 { // refused by the client before sending
			return &exitError{code: exitUsage, err: errors.New(msg)}
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("the memory service rejected the request: %s", msg)}
	default:
		return &exitError{code: exitFailed, err: fmt.Errorf("the memory service failed: %s", msg)}
	}
}

// writeJSON prints v as the indented JSON scripts read.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newStatusCommand() *cobra.Command {
	var fl opFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what memory holds: people, facts, episodes and the episode bounds",
		Long: `Show the memory service's catalog: how many people and facts are kept, how
many episodes, how many of them are unretained (a ring of 128 across every
lane: the oldest age out) and how many are retained (kept for good, at most
1024), the headroom left for keeping, and the episodes of each lane. When the
headroom is 0 it warns: keeping another episode is refused until one is
released or forgotten.`,
		Example: `  clankie memory status
  clankie memory status --json | jq .retained`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				c, err := s.client.Catalog(ctx)
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, c)
				}
				return renderStatus(s.out, s.url, c)
			})
		},
	}
	return operatorCommand(cmd, &fl)
}

func newCorruptCommand() *cobra.Command {
	var fl opFlags
	cmd := &cobra.Command{
		Use:   "corrupt",
		Short: "List person files set aside because they could not be read",
		Long: `List the person files the memory service could not parse and moved aside
(never overwritten; that person started empty): the file under
CLANKIE_MEMORY_DIR, when it was set aside, and its size. Inspect or restore
one by hand while the service is stopped. 'clankie memory status' counts them.`,
		Example: `  clankie memory corrupt
  clankie memory corrupt --json | jq -r '.files[].file'`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				c, err := s.client.CorruptFiles(ctx)
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, c)
				}
				if len(c.Files) == 0 {
					_, err := fmt.Fprintln(s.out, "No person file has been set aside.")
					return err
				}
				tw := newTable(s.out)
				fmt.Fprintln(tw, "SET ASIDE\tBYTES\tFILE")
				for _, f := range c.Files {
					fmt.Fprintf(tw, "%s\t%d\t%s\n", f.SetAsideAt.UTC().Format(tableTime), f.Bytes, oneLine(f.File))
				}
				return tw.Flush()
			})
		},
	}
	return operatorCommand(cmd, &fl)
}
