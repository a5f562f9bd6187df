package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeDockerPublishesTheAPIOnLoopbackOnly: the container listens on
// 0.0.0.0 (it must, for the port mapping to reach it), so a bare
// `-p 4310:4310` would publish the memory API on every host interface. The
// README's example binds the host side to 127.0.0.1 and says why.
func TestReadmeDockerPublishesTheAPIOnLoopbackOnly(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	var code strings.Builder // the fenced blocks: what a reader copies
	for i, part := range strings.Split(readme, "```") {
		if i%2 == 1 {
			code.WriteString(part)
		}
	}
	publish := regexp.MustCompile(`(?:-p|--publish)[ =](\S+)`).FindAllStringSubmatch(code.String(), -1)
	if len(publish) == 0 {
		t.Fatal("README shows no docker run -p example")
	}
	for _, m := range publish {
		if !strings.HasPrefix(m[1], "127.0.0.1:") {
			t.Errorf("README publishes %q; want 127.0.0.1:4310:4310 (loopback only)", m[1])
		}
	}
	_, docker, _ := strings.Cut(readme, "## Docker")
	docker, _, _ = strings.Cut(docker, "\n## ")
	if !strings.Contains(docker, "every host interface") {
		t.Error("README's Docker section does not say why the port is bound to 127.0.0.1")
	}
}
