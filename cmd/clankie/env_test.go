package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/config"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s", dir)
	}
	return dir
}

// varsReadInCode finds every environment variable the code reads: env tags
// of settings structs and direct os.Getenv / os.LookupEnv calls.
func varsReadInCode(t *testing.T, root string) []string {
	t.Helper()
	tag := regexp.MustCompile("env:\"([A-Z][A-Z0-9_]+)")
	call := regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("([A-Z][A-Z0-9_]+)"\)`)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, re := range []*regexp.Regexp{tag, call} {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				seen[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for v := range seen {
		// The shell's own: HOME expands the default root, dev tools find go on
		// PATH. CI is read only by test harnesses (internal/nodetest,
		// voice/realtime/realtimetest) to fail rather than skip, never by clankie.
		if v != "HOME" && v != "PATH" && v != "CI" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func TestEveryVariableIsDocumented(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]config.Var{}
	for _, v := range config.All() {
		listed[v.Name] = v
		if v.Help == "" {
			t.Errorf("%s has no help text", v.Name)
		}
	}
	read := varsReadInCode(t, root)
	if len(read) < 20 {
		t.Fatalf("found only %d variables in the code; the scan is broken", len(read))
	}
	for _, name := range read {
		if _, ok := listed[name]; !ok {
			t.Errorf("%s is read by the code but missing from clankie env", name)
		}
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("%s is read by the code but missing from the README", name)
		}
	}
}

func TestReadmeTableIsClankieEnv(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- env:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- env:end -->")
	if !ok || !ok2 {
		t.Fatal("the README lacks the env:begin / env:end markers")
	}
	if table != envMarkdown() {
		t.Fatalf("the README's configuration table drifted from clankie env; regenerate it with:\n  go run ./cmd/clankie env --markdown\n\nwant:\n%s", envMarkdown())
	}
}

func TestSecretsAreMarked(t *testing.T) {
	for _, v := range config.All() {
		// A public key is what its name says; every other key is a secret.
		// CLANKIE_MEMORY_STORE may be a connection string with a password.
		secretName := strings.HasSuffix(v.Name, "_TOKEN") || strings.HasSuffix(v.Name, "_KEY") && !strings.HasSuffix(v.Name, "_PUBLIC_KEY") ||
			v.Name == "CLANKIE_MEMORY_STORE"
		if secretName != v.Secret {
			t.Errorf("%s: secret=%v", v.Name, v.Secret)
		}
	}
}

// TestEveryCommandHasAnExample walks the command tree: --help shows an
// example on every command a person can run.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Example == "" {
			t.Errorf("%q has no example in its --help", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand(io.Discard, io.Discard))
}
