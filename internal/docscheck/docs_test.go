package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clankie/clankie/config"
)

// documents are the files a reader trusts to describe the code.
var documents = []string{"README.md", "PRIVACY.md", "ARCHITECTURE.md", "api/openapi.yaml"}

// testOnlyVars are environment variables the tests and scripts read, which
// config does not declare because the binary never reads them. Each must
// still appear in a file of the tree (checked below), so a stale one here
// fails too.
var testOnlyVars = []string{"CLANKIE_TEST_POSTGRES", "CLANKIE_CRASH_CYCLES"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root is not two levels up: %v", err)
	}
	return root
}

func read(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPrivacyNamesWhereDataGoes holds PRIVACY.md to the two settings that
// decide where content leaves the memory directory: the voice model's
// endpoint (a third party hears consented speakers) and the store (a
// database with its own copies).
func TestPrivacyNamesWhereDataGoes(t *testing.T) {
	text := read(t, repoRoot(t), "PRIVACY.md")
	for _, v := range []string{"CLANKIE_REALTIME_URL", "CLANKIE_MEMORY_STORE"} {
		if !strings.Contains(text, v) {
			t.Errorf("PRIVACY.md does not name %s", v)
		}
	}
}

var envVar = regexp.MustCompile(`\b(?:CLANKIE|DISCORD)_[A-Z0-9_]*[A-Z0-9]\b`)

// TestDocumentsNameDeclaredVariables fails when a document names an
// environment variable that config does not declare (and no test reads).
func TestDocumentsNameDeclaredVariables(t *testing.T) {
	root := repoRoot(t)
	declared := map[string]bool{}
	for _, v := range config.All() {
		declared[v.Name] = true
	}
	for _, v := range testOnlyVars {
		if declared[v] {
			t.Errorf("%s is declared by config; drop it from testOnlyVars", v)
		}
		if !treeMentions(t, root, v) {
			t.Errorf("%s is listed as read by a test, but no file outside the documents names it", v)
		}
		declared[v] = true
	}
	for _, doc := range documents {
		for _, name := range envVar.FindAllString(read(t, root, doc), -1) {
			if !declared[name] {
				t.Errorf("%s names %s, which no setting declares", doc, name)
			}
		}
	}
}

// treeMentions reports whether a Go file or a script names s.
func treeMentions(t *testing.T, root, s string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() {
			if d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".git") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") && !strings.HasPrefix(filepath.Base(filepath.Dir(p)), "scripts") && filepath.Base(p) != "run" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), s) {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// TestDocumentsNameExistingPaths fails when a document names, in a code
// span, a repository file or package directory that does not exist. A span
// counts as a path when it starts with one of the tree's top-level entries
// and holds no placeholder (<…>, *, …, $).
func TestDocumentsNameExistingPaths(t *testing.T) {
	root := repoRoot(t)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var tops []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops = append(tops, e.Name()+"/")
		}
	}
	tops = append(tops, ".ci/")
	for _, doc := range documents {
		for _, m := range codeSpan.FindAllStringSubmatch(read(t, root, doc), -1) {
			p := repoPath(m[1], tops)
			if p == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which is not in the tree", doc, p)
			}
		}
	}
}

// repoPath returns the repository path a code span names, or "" when it
// names none: the first word, without a trailing `:line`, a Go symbol
// (`voice/session.go` of `voice/session.go:42`) or punctuation.
func repoPath(span string, tops []string) string {
	word, _, _ := strings.Cut(strings.TrimSpace(span), " ")
	if strings.ContainsAny(word, "<>*…$(){}[]|=") || strings.Contains(word, "...") {
		return ""
	}
	if !slices.ContainsFunc(tops, func(top string) bool { return strings.HasPrefix(word, top) }) {
		return ""
	}
	word, _, _ = strings.Cut(word, ":")
	return strings.TrimRight(word, ".,;/")
}

// TestDocumentsStandAlone fails when a document sends its reader outside
// the repository for the map of the code (the team's shared/ folder is not
// part of a clone).
func TestDocumentsStandAlone(t *testing.T) {
	root := repoRoot(t)
	for _, doc := range documents {
		text := read(t, root, doc)
		for _, outside := range []string{"../shared", "shared/spec", "shared/seeds"} {
			if strings.Contains(text, outside) {
				t.Errorf("%s points at %s, which a clone of the repository does not have", doc, outside)
			}
		}
	}
}

// TestReadmeLayoutIsTheTree: each entry of README's Layout block (a name at
// the start of a line, or two spaces in for a package inside the one
// above) is a directory of the repository, so the map cannot place a
// package where it is not.
func TestReadmeLayoutIsTheTree(t *testing.T) {
	root := repoRoot(t)
	readme := read(t, root, "README.md")
	_, rest, ok := strings.Cut(readme, "## Layout\n\n```\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no Layout block")
	}
	entry := regexp.MustCompile(`^( {2})?([a-z][a-z0-9]*(?:/[a-z0-9]+)*)/?(?:\s|$)`)
	parent, checked := "", 0
	for _, line := range strings.Split(block, "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			continue // a continuation of the description above
		}
		path := m[2]
		if m[1] == "" {
			parent = path
		} else {
			path = parent + "/" + path
		}
		checked++
		if st, err := os.Stat(filepath.Join(root, path)); err != nil || !st.IsDir() {
			t.Errorf("README's Layout places %s, which is not a directory of the repository", path)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d Layout entries read; the pattern is broken", checked)
	}
}
