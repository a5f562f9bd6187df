package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Fixed bearers for the child process (the service wants at least 16 chars).
const (
	opToken    = "crashtest-operator-token-0001"
	textToken  = "crashtest-text-bridge-token-02"
	voiceToken = "crashtest-voice-bridge-token-3"
	gameToken  = "crashtest-gameplay-token-00004"
)

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// clankieBinary builds ./cmd/clankie once per test binary run and returns
// its path.
func clankieBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildDir, err = os.MkdirTemp("", "clankie-crashtest-")
		if err != nil {
			buildErr = err
			return
		}
		bin := filepath.Join(buildDir, "clankie")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/clankie")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/clankie: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// moduleRoot is the directory of the go.mod this test belongs to.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// logLines collects the child's output line by line and notices the line
// that says where the service listens.
type logLines struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	addr    chan string
	sent    bool
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if len(l.lines) < 2000 {
			l.lines = append(l.lines, line)
		}
		var entry struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if !l.sent && json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "memory service listening" && entry.Addr != "" {
			l.sent = true
			l.addr <- entry.Addr
		}
	}
	return len(p), nil
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + string(l.partial)
}

// server is one run of `clankie memory serve` as a child process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	dir    string
	addr   string
	base   string
	pid    int // the service's own pid (not strace's when wrapped)
	logs   *logLines
	exited chan struct{}
	err    error // cmd.Wait's answer, valid once exited is closed
	hc     *http.Client
}

func serverEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLANKIE_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"CLANKIE_MEMORY_DIR="+dir,
		"CLANKIE_MEMORY_ADDR=127.0.0.1:0",
		"CLANKIE_OPERATOR_TOKEN="+opToken,
		"CLANKIE_TEXT_BRIDGE_TOKEN="+textToken,
		"CLANKIE_VOICE_BRIDGE_TOKEN="+voiceToken,
		"CLANKIE_GAMEPLAY_TOKEN="+gameToken,
		"CLANKIE_LOG_LEVEL=info",
		"CLANKIE_LOG_FORMAT=json",
	)
}

// startServer runs the binary (behind wrapper, e.g. strace, when given) on
// dir, waits until it prints its address and answers /healthz, and kills it
// at cleanup if the test did not stop it.
func startServer(t *testing.T, bin, dir string, wrapper []string, startTimeout time.Duration) *server {
	t.Helper()
	return startServerEnv(t, bin, dir, nil, wrapper, startTimeout)
}

// startServerEnv is startServer with more environment (CLANKIE_MEMORY_STORE).
func startServerEnv(t *testing.T, bin, dir string, extraEnv, wrapper []string, startTimeout time.Duration) *server {
	t.Helper()
	args := append(append([]string(nil), wrapper...), bin, "memory", "serve")
	s := &server{t: t, dir: dir, logs: &logLines{addr: make(chan string, 1)}, exited: make(chan struct{})}
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Env = append(serverEnv(dir), extraEnv...)
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", args[0], err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			if s.pid != 0 && s.pid != s.cmd.Process.Pid {
				_ = syscall.Kill(s.pid, syscall.SIGKILL)
			}
			<-s.exited
		}
	})
	select {
	case s.addr = <-s.logs.addr:
	case <-s.exited:
		t.Fatalf("the service exited before listening (%v):\n%s", s.err, s.logs)
	case <-time.After(startTimeout):
		t.Fatalf("the service did not say where it listens within %v:\n%s", startTimeout, s.logs)
	}
	s.base = "http://" + s.addr
	s.hc = &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true},
	}
	t.Cleanup(s.hc.CloseIdleConnections)
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := s.hc.Get(s.base + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"ok":true`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer ok within %v (%v):\n%s", startTimeout, err, s.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The lock file holds the pid of the process that owns the root: the
	// service itself even when a wrapper started it. On PostgreSQL there is
	// no lock file, and no wrapper: the child is the service.
	if len(extraEnv) > 0 && len(wrapper) == 0 {
		s.pid = s.cmd.Process.Pid
		return s
	}
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		t.Fatalf("read LOCK: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("LOCK holds %q, not a pid", b)
	}
	if len(wrapper) == 0 && pid != s.cmd.Process.Pid {
		t.Fatalf("LOCK names pid %d, the child is %d", pid, s.cmd.Process.Pid)
	}
	s.pid = pid
	return s
}

// kill9 sends SIGKILL to the service and waits until it has been reaped.
func (s *server) kill9() {
	s.t.Helper()
	if err := syscall.Kill(s.pid, syscall.SIGKILL); err != nil {
		s.t.Fatalf("kill -9 %d: %v", s.pid, err)
	}
	s.wait(10 * time.Second)
	if s.cmd.Process.Pid == s.pid {
		var ee *exec.ExitError
		if !errors.As(s.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			s.t.Fatalf("the service did not die of SIGKILL: %v", s.err)
		}
	}
	s.hc.CloseIdleConnections()
}

// stop sends SIGTERM and expects a clean exit 0.
func (s *server) stop() {
	s.t.Helper()
	if err := syscall.Kill(s.pid, syscall.SIGTERM); err != nil {
		s.t.Fatalf("kill -TERM %d: %v", s.pid, err)
	}
	s.wait(30 * time.Second)
	if s.err != nil {
		s.t.Fatalf("the service did not stop cleanly on SIGTERM: %v\n%s", s.err, s.logs)
	}
	s.hc.CloseIdleConnections()
}

func (s *server) wait(d time.Duration) {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		s.t.Fatalf("the service did not exit within %v", d)
	}
}

// do sends one request and returns the status and body. A transport error
// (the service is gone) is err; the status is then 0 unless the status line
// arrived and only the body was lost.
func (s *server) do(ctx context.Context, token, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// get is a read that must answer 200 with JSON decoded into v.
func (s *server) get(token, path string, v any) {
	s.t.Helper()
	status, body, err := s.do(context.Background(), token, http.MethodGet, path, nil)
	if err != nil || status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %v %s", path, status, err, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		s.t.Fatalf("GET %s: decode: %v: %s", path, err, body)
	}
}
