// Command clankie is the one binary: the memory service, the Discord bridges,
// the operator CLI and the one-command start.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// exitError carries an exit code to main without printing twice.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// configError is a bad setting: one line naming the variable, exit code 2.
func configError(err error) error { return &exitError{code: 2, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// oneSentence gives every error line the same shape after "clankie: ": a
// sentence that starts in lower case (a capitalised word such as "No", not
// a name such as CLANKIE_MEMORY_DIR or "I") and ends with a full stop.
// Errors come from many places (the service's sentences, config, the
// client), and each wrote its own.
func oneSentence(msg string) string {
	msg = strings.TrimSpace(msg)
	first, size := utf8.DecodeRuneInString(msg)
	second, _ := utf8.DecodeRuneInString(msg[size:])
	if unicode.IsUpper(first) && unicode.IsLower(second) {
		msg = string(unicode.ToLower(first)) + msg[size:]
	}
	if msg != "" && !strings.ContainsRune(".?!", rune(msg[len(msg)-1])) {
		msg += "."
	}
	return msg
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "clankie ") && !strings.HasPrefix(msg, "clankie:") {
		// A usage error already names its command ("clankie memory
		// person needs …"); every other error gets the binary's name once.
		msg = "clankie: " + oneSentence(msg)
	}
	fmt.Fprintln(stderr, msg)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "clankie",
		Short: "Clankie's memory service, Discord bridges and operator CLI",
		Long: `Clankie keeps two durable memories — his own episodes and what people told him
about people — in plain files owned by one memory service (or in PostgreSQL,
shared by several), and puts them in front of people through two Discord bots.

Every setting comes from the environment; 'clankie env' lists them all.`,
		Example: `  clankie up                 # the memory service, plus each bridge whose Discord token is set
  clankie env                # every setting, its default and what it does
  clankie memory status      # what memory holds
  clankie health             # exit 0 when the memory service answers ready
  clankie version            # what this binary was built from`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuildInfo().Version,
	}
	root.SetVersionTemplate(versionTemplate())
	root.SetOut(stdout)
	root.SetErr(stderr)
	// One grammar everywhere: an unknown command or flag at any level is
	// bad usage (exit code 2) with a suggestion; subcommands inherit this.
	parentCommand(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	root.AddCommand(newUpCommand(), newMemoryCommand(), newBridgeCommand(), newEnvCommand(), newVersionCommand(), newHealthCommand())
	return root
}
