package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built is the one release-style build a test binary makes: every test
// that runs clankie as a process shares it (a build per test cost minutes
// of the suite under -race). TestMain removes it.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
}

// buildBinary builds clankie the way the Dockerfile and .ci/run do, once per
// test binary, and returns its path. Callers must not modify the file.
func buildBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "clankie-test-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "clankie")
		cmd := exec.Command("go", "build", "-trimpath", "-o", built.bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("build: %v\n%s", built.err, built.out)
	}
	return built.bin
}

// TestMain removes the shared build after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newcomerEnv is a newcomer's environment: no clankie or Discord variables.
func newcomerEnv(home string, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, extra...)
}

func TestBinaryUpStatusAndMissingCredential(t *testing.T) {
	bin := buildBinary(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "memory")
	addr := freeAddr(t)
	env := newcomerEnv(home, "CLANKIE_MEMORY_DIR="+dir, "CLANKIE_MEMORY_ADDR="+addr, "CLANKIE_MEMORY_URL=http://"+addr)

	up := exec.Command(bin, "up")
	up.Env = env
	var stdout, stderr syncBuffer
	up.Stdout, up.Stderr = &stdout, &stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() {
		_ = up.Process.Kill()
	})

	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("clankie up never answered /healthz\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The service answers /healthz before up has printed what the bridges
	// need, so the advice is waited for, not read once.
	for _, want := range []string{"DISCORD_TEXT_BOT_TOKEN", "DISCORD_VOICE_BOT_TOKEN", "next:"} {
		for !strings.Contains(stdout.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("clankie up does not say what to set next (%q missing):\n%s", want, stdout.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	status := exec.Command(bin, "memory", "status")
	status.Env = env
	out, err := status.CombinedOutput()
	if err != nil {
		t.Fatalf("memory status: %v\n%s", err, out)
	}
	for _, want := range []string{"of 128", "of 1024", "eople"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("memory status lacks %q:\n%s", want, out)
		}
	}

	// Without a credential: the plain sentence, a non-zero exit, no memory shown.
	lost := exec.Command(bin, "memory", "status")
	lost.Env = newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+filepath.Join(t.TempDir(), "elsewhere"), "CLANKIE_MEMORY_URL=http://"+addr)
	out, err = lost.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("status without a credential exited %v:\n%s", err, out)
	}
	if !strings.Contains(string(out), "operator credential is missing") || strings.Contains(string(out), "of 128") {
		t.Fatalf("status without a credential said:\n%s", out)
	}

	// SIGTERM stops everything cleanly.
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("clankie up exited with %v after SIGTERM\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("clankie up did not stop on SIGTERM")
	}
	if strings.Contains(stderr.String(), `"level":"error"`) {
		t.Fatalf("errors logged:\n%s", stderr.String())
	}
}

func TestBinaryBadSettingNamesTheVariable(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"CLANKIE_LOG_LEVEL=loud", []string{"memory", "serve"}, "CLANKIE_LOG_LEVEL"},
		{"CLANKIE_MEMORY_ADDR=nowhere", []string{"memory", "serve"}, "CLANKIE_MEMORY_ADDR"},
		{"DISCORD_VOICE_CONSENT_POLICY=sometimes", []string{"bridge", "voice"}, "DISCORD_VOICE_CONSENT_POLICY"},
		{"CLANKIE_MEMORY_URL=ftp://x", []string{"bridge", "text"}, "CLANKIE_MEMORY_URL"},
		{"CLANKIE_OPERATOR_TOKEN=short", []string{"memory", "serve"}, "CLANKIE_OPERATOR_TOKEN"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = newcomerEnv(t.TempDir(), tc.env, "DISCORD_TEXT_BOT_TOKEN=x", "DISCORD_VOICE_BOT_TOKEN=y", "CLANKIE_MEMORY_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s: exit %v\n%s", tc.env, err, out)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%s: want one line naming %s, got:\n%s", tc.env, tc.want, out)
		}
		if strings.Contains(string(out), "short") && tc.want == "CLANKIE_OPERATOR_TOKEN" {
			t.Errorf("the token's value was echoed: %s", out)
		}
	}
}
