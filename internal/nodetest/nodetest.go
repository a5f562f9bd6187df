// Package nodetest finds the test-only Node.js peers that interop tests run:
// @snazzah/davey (the DAVE implementation @discordjs/voice uses) and
// @discordjs/voice itself, installed from this folder's package-lock.json by
// .ci/run (npm ci --prefix internal/nodetest). Nothing here is part of the
// clankie binary.
package nodetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the absolute path of this folder, where package.json and
// node_modules live, so a test can run scripts with their modules resolved.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Node returns the path of the pinned Node binary (node@22 from npm). When the
// modules are not installed it skips the test on a developer's machine and
// fails it in CI (CI=true), where .ci/run must have installed them: an interop
// test that silently skips proves nothing.
func Node(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(Dir(), "node_modules", ".bin", "node")
	if _, err := os.Stat(bin); err != nil {
		msg := "missing dependency: Node peers (scripts/test-deps, or npm ci --prefix internal/nodetest)"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return bin
}

// Command returns a command that runs the pinned Node on script (a path
// relative to this folder, or absolute) with args, its working directory this
// folder so that require finds node_modules.
func Command(tb testing.TB, script string, args ...string) *exec.Cmd {
	tb.Helper()
	node := Node(tb)
	if !filepath.IsAbs(script) {
		script = filepath.Join(Dir(), script)
	}
	cmd := exec.Command(node, append([]string{script}, args...)...)
	cmd.Dir = Dir()
	return cmd
}
