package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGoModRequiresPatchedDependenciesAndToolchain holds the floor set by
// published advisories: golang.org/x/net and golang.org/x/crypto at versions
// with the fixes, and a toolchain line at or past the os.Root escape fixes
// (Go 1.26.1, 1.26.2 and 1.26.5), so a build with an older Go fetches a newer one.
func TestGoModRequiresPatchedDependenciesAndToolchain(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	for _, tc := range []struct{ module, floor string }{
		{"golang.org/x/net", "v0.56.0"},
		{"golang.org/x/crypto", "v0.52.0"},
	} {
		m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(tc.module) + `\s+(v\S+)`).FindStringSubmatch(mod)
		if m == nil {
			t.Errorf("go.mod does not require %s", tc.module)
			continue
		}
		if versionLess(m[1], tc.floor) {
			t.Errorf("go.mod requires %s %s; want at least %s", tc.module, m[1], tc.floor)
		}
	}
	m := regexp.MustCompile(`(?m)^toolchain\s+go(\S+)\s*$`).FindStringSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no toolchain line")
	}
	if versionLess("v"+m[1], "v1.26.5") {
		t.Errorf("toolchain go%s predates the os.Root fixes of Go 1.26.5", m[1])
	}
}

// versionLess compares dotted numeric versions ("v1.2.3"); a pre-release
// suffix counts as older than the release.
func versionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			return x < y
		}
	}
	return strings.Contains(a, "-") && !strings.Contains(b, "-")
}

func versionParts(v string) []int {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "-")
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}
