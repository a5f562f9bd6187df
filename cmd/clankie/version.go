package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// Set by the release build (the Dockerfile passes them with -ldflags -X)
// when the build has no VCS stamp of its own: the Docker context leaves
// .git out, and .ci/run builds with -buildvcs=false.
var (
	stampVersion  string
	stampRevision string
	stampTime     string
)

// buildInfo is what `clankie version` prints and every process logs first.
type buildInfo struct {
	Version  string // module version: a tag, a pseudo-version, or (devel)
	Revision string // VCS revision, "unknown" when the build carries none
	Time     string // VCS commit time (RFC 3339), "unknown" when none
	Modified bool   // the work tree had uncommitted changes
	Go       string // the Go toolchain that built it
}

// readBuildInfo reads the module version, the VCS stamp and the Go version
// from the binary, falling back to the -X stamps and then to "unknown",
// so a build without VCS information still answers.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(devel)", Revision: "unknown", Time: "unknown", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			b.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion
		}
	}
	if stampVersion != "" && b.Version == "(devel)" {
		b.Version = stampVersion
	}
	if stampRevision != "" && b.Revision == "unknown" {
		b.Revision = stampRevision
	}
	if stampTime != "" && b.Time == "unknown" {
		b.Time = stampTime
	}
	return b
}

// String is the one line `clankie version` and `clankie --version` print.
func (b buildInfo) String() string {
	rev := b.Revision
	if b.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("clankie %s (revision %s, committed %s, %s)", b.Version, rev, b.Time, b.Go)
}

// fields are the build's log fields, for the first line of every process.
func (b buildInfo) fields() []zap.Field {
	return []zap.Field{zap.String("version", b.Version), zap.String("revision", b.Revision),
		zap.String("commitTime", b.Time), zap.Bool("modified", b.Modified), zap.String("go", b.Go)}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and commit time, and Go version of this binary",
		Long: `Print what this binary was built from: the module version, the VCS revision
and commit time (or "unknown" when the build carried none, such as a build
with -buildvcs=false), and the Go version. 'clankie --version' prints the same
line, and every clankie process logs it as its first line.`,
		Example: "  clankie version\n  docker run --rm clankie version",
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), readBuildInfo().String()+"\n")
			return err
		},
	}
}

// versionTemplate makes --version print the same line as `clankie version`.
func versionTemplate() string {
	return strings.ReplaceAll(readBuildInfo().String(), "{", "{{`{`}}") + "\n"
}
