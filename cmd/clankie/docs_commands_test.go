package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentsNameRealCommands fails when README.md, PRIVACY.md or
// ARCHITECTURE.md shows a `clankie …` command (in a code span or a code
// block) that the binary does not have: an unknown subcommand of a command
// that only holds subcommands, or an unknown flag. internal/docscheck
// checks the rest of what the documents name.
func TestDocumentsNameRealCommands(t *testing.T) {
	invocation := regexp.MustCompile(`(?:^|[\s'"(\x60])clankie((?: +(?:--?[a-z][a-z-]*|[a-z][a-z-]*))+)`)
	checked := 0
	for _, doc := range []string{"README.md", "PRIVACY.md", "ARCHITECTURE.md"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range codeOf(string(b)) {
			if strings.Contains(text, "docker build") { // clankie is the image's tag there
				continue
			}
			if i := strings.Index(text, " #"); i >= 0 { // a shell comment is prose
				text = text[:i]
			}
			for _, m := range invocation.FindAllStringSubmatch(text, -1) {
				words := strings.Fields(m[1])
				if words[0] == "clankie" { // docker exec clankie clankie …: the container, then the binary
					words = words[1:]
				}
				root := newRootCommand(io.Discard, io.Discard)
				root.InitDefaultVersionFlag() // cobra adds --version when it runs
				cmd, rest, err := root.Find(words)
				if err != nil {
					t.Errorf("%s shows `clankie%s`: %v", doc, m[1], err)
					continue
				}
				checked++
				if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && cmd.HasSubCommands() {
					t.Errorf("%s shows `clankie%s`: %q is not a command of %q", doc, m[1], rest[0], cmd.CommandPath())
				}
				for _, w := range rest {
					name, isFlag := strings.CutPrefix(w, "--")
					if isFlag && cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && name != "help" {
						t.Errorf("%s shows `clankie%s`: %q has no flag --%s", doc, m[1], cmd.CommandPath(), name)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d commands found in the documents; the pattern is broken", checked)
	}
}

// codeOf returns a markdown document's code: each code span and each line of
// each fenced block.
func codeOf(doc string) []string {
	var out []string
	inBlock := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			out = append(out, line)
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}
