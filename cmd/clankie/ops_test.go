package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBin runs the built binary with env and returns its exit code and output.
func runBin(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// startBin starts a long-running clankie process and stops it (SIGTERM,
// then kill) when the test ends.
func startBin(t *testing.T, bin string, env []string, args ...string) (stdout, stderr *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return stdout, stderr
}

// waitReady polls url/readyz until it answers 200.
func waitReady(t *testing.T, url string, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered ready\n%s", url, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBinaryVersion (issue 14, item 2): `clankie version` and `--version`
// print the same line with the module version, the VCS revision and time
// and the Go version; a build without VCS stamps says "unknown" rather than
// failing; -X stamps (what the Dockerfile passes) fill them in; and every
// process logs the build as its first line.
func TestBinaryVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	build := func(name string, args ...string) string {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build", "-trimpath", "-o", bin}, args...), ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
		return bin
	}
	plain := build("plain", "-buildvcs=false")
	stamped := build("stamped", "-buildvcs=false", "-ldflags=-X main.stampVersion=v1.2.3 -X main.stampRevision=0123456789abcdef -X main.stampTime=2026-11-30T12:00:00Z")
	env := newcomerEnv(t.TempDir())

	code, out, errOut := runBin(t, plain, env, "version")
	if code != 0 || errOut != "" {
		t.Fatalf("version: exit %d, stderr %q", code, errOut)
	}
	want := "clankie (devel) (revision unknown, committed unknown, " + runtime.Version() + ")\n"
	if out != want {
		t.Fatalf("version without VCS stamps printed %q, want %q", out, want)
	}
	if code, flag, _ := runBin(t, plain, env, "--version"); code != 0 || flag != out {
		t.Fatalf("--version: exit %d, %q; want the same line as version", code, flag)
	}
	_, out, _ = runBin(t, stamped, env, "version")
	if out != "clankie v1.2.3 (revision 0123456789abcdef, committed 2026-11-30T12:00:00Z, "+runtime.Version()+")\n" {
		t.Fatalf("stamped build printed %q", out)
	}

	// The first log line of a process is the build.
	addr := freeAddr(t)
	_, stderr := startBin(t, stamped, newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+t.TempDir(), "CLANKIE_MEMORY_ADDR="+addr, "CLANKIE_LOG_LEVEL=warn"), "memory", "serve")
	waitReady(t, "http://"+addr, stderr)
	first, _, _ := strings.Cut(stderr.String(), "\n")
	for _, w := range []string{`"msg":"clankie starting"`, `"version":"v1.2.3"`, `"revision":"0123456789abcdef"`, `"go":"` + runtime.Version() + `"`} {
		if !strings.Contains(first, w) {
			t.Fatalf("first log line lacks %s (even at CLANKIE_LOG_LEVEL=warn):\n%s", w, first)
		}
	}
}

// TestBinaryHealth (issue 14, item 3): `clankie health` exits 1 with a
// sentence when nothing answers, 0 once the service is ready, 2 on bad
// usage; the Dockerfile's HEALTHCHECK uses it.
func TestBinaryHealth(t *testing.T) {
	bin := buildBinary(t)
	addr := freeAddr(t)
	env := newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+t.TempDir(), "CLANKIE_MEMORY_ADDR="+addr, "CLANKIE_MEMORY_URL=http://"+addr)

	code, _, errOut := runBin(t, bin, env, "health")
	if code != 1 || !strings.Contains(errOut, "is not answering: the connection was refused") {
		t.Fatalf("health with nothing listening: exit %d, %q", code, errOut)
	}
	_, stderr := startBin(t, bin, env, "memory", "serve")
	waitReady(t, "http://"+addr, stderr)
	if code, out, errOut := runBin(t, bin, env, "health"); code != 0 || out != "ready: memory service at http://"+addr+"\n" {
		t.Fatalf("health: exit %d, %q %q", code, out, errOut)
	}
	if code, _, _ := runBin(t, bin, newcomerEnv(t.TempDir()), "health", "--url", "http://"+addr); code != 0 {
		t.Fatalf("health --url: exit %d", code)
	}
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"not_ready","message":"The memory root is not writable."}`))
	}))
	defer notReady.Close()
	if code, _, errOut := runBin(t, bin, env, "health", "--url", notReady.URL); code != 1 || !strings.Contains(errOut, "not ready (HTTP 503): The memory root is not writable.") {
		t.Fatalf("health of a service that is not ready: exit %d, %q", code, errOut)
	}
	if code, _, _ := runBin(t, bin, env, "health", "--url", "ftp://x"); code != 2 {
		t.Fatalf("health --url ftp://x: exit %d, want 2", code)
	}
	// --local follows CLANKIE_MEMORY_ADDR (a wildcard host means loopback),
	// whatever CLANKIE_MEMORY_URL says: a container that moves the port
	// stays healthy.
	_, port, _ := net.SplitHostPort(addr)
	local := newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_ADDR=0.0.0.0:"+port, "CLANKIE_MEMORY_URL=http://127.0.0.1:1")
	if code, out, errOut := runBin(t, bin, local, "health", "--local"); code != 0 || out != "ready: memory service at http://127.0.0.1:"+port+"\n" {
		t.Fatalf("health --local: exit %d, %q %q", code, out, errOut)
	}

	docker, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^HEALTHCHECK .*\n?.*CMD \["/usr/local/bin/clankie", "health", "--local"\]`).Match(docker) {
		t.Fatalf("the Dockerfile has no HEALTHCHECK running clankie health:\n%s", docker)
	}
}

// TestBinaryRootOwnedByAnotherUser (issue 14, item 3): a memory root owned
// by another uid (a host bind mount in Docker) is reported as ownership,
// with the uids and the chown, not as "fix its permissions". It needs root
// to run the binary as a second user.
func TestBinaryRootOwnedByAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to create a directory owned by another uid and run as a third")
	}
	built := buildBinary(t)
	// Everything the second user runs or reads must be reachable by it:
	// t.TempDir's parents are 0700.
	base, err := os.MkdirTemp("", "clankie-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "clankie")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o755, 0o700} {
		dir := filepath.Join(base, "data"+mode.String())
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "memory", "serve")
		cmd.Env = newcomerEnv(base, "CLANKIE_MEMORY_DIR="+dir, "CLANKIE_MEMORY_ADDR="+freeAddr(t))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("mode %v: exit %v\n%s", mode, err, out)
		}
		if !strings.Contains(string(out), "is owned by uid 1000, but clankie runs as uid 65532") ||
			!strings.Contains(string(out), "chown -R 65532 "+dir) || strings.Contains(string(out), "fix its permissions") {
			t.Fatalf("mode %v: want an ownership sentence, got:\n%s", mode, out)
		}
	}
}

// TestBinaryValidatesBeforeStarting (issue 14, item 5): a bad bridge
// setting stops `clankie up` at once naming the variable even when that
// bridge's token is unset, and a port in use fails before the data
// directory, the tokens or the LOCK exist.
func TestBinaryValidatesBeforeStarting(t *testing.T) {
	bin := buildBinary(t)
	dir := filepath.Join(t.TempDir(), "memory")
	addr := freeAddr(t)
	for _, bad := range []string{"DISCORD_VOICE_CONSENT_POLICY=maybe", "DISCORD_VOICE_USER_IDS=alice", "CLANKIE_METRICS_ADDR=nowhere"} {
		name, _, _ := strings.Cut(bad, "=")
		code, out, errOut := runBin(t, bin, newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+dir, "CLANKIE_MEMORY_ADDR="+addr, bad), "up")
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], name) || out != "" {
			t.Errorf("%s clankie up: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", bad, code, out, errOut, name)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused setting left the data directory behind: %v", err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, env := range [][]string{
		{"CLANKIE_MEMORY_ADDR=" + busy.Addr().String()},
		{"CLANKIE_MEMORY_ADDR=" + addr, "CLANKIE_METRICS_ADDR=" + busy.Addr().String()},
	} {
		code, _, errOut := runBin(t, bin, newcomerEnv(t.TempDir(), append(env, "CLANKIE_MEMORY_DIR="+dir)...), "up")
		if code == 0 || !strings.Contains(errOut, busy.Addr().String()+" is already in use") {
			t.Errorf("%v: exit %d, stderr %q", env, code, errOut)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v: a port in use left the data directory (and so tokens, LOCK) behind: %v", env, err)
		}
	}
}

// TestBinarySaysWhatWentWrongInWords (issue 14, item 6): Discord failures
// name the cause, a wildcard bind is printed as every interface, debug
// logs every successful call content-free, and console logs written to a
// file carry no colour codes.
func TestBinarySaysWhatWentWrongInWords(t *testing.T) {
	bin := buildBinary(t)

	plainHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plainHTTP.Close()
	closed := freeAddr(t)
	for _, tc := range []struct{ api, want string }{
		{"http://" + closed + "/api/v10", "the connection was refused"},
		{"https://" + strings.TrimPrefix(plainHTTP.URL, "http://") + "/api/v10", "TLS: the server did not speak TLS"},
		{"https://discord.invalid/api/v10", "DNS: "},
	} {
		dir := t.TempDir()
		env := newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+dir, "DISCORD_TEXT_BOT_TOKEN=x", "DISCORD_API_URL="+tc.api,
			"CLANKIE_TEXT_BRIDGE_TOKEN=abcdefghijklmnopqrstuvwxyz012345")
		code, _, errOut := runBin(t, bin, env, "bridge", "text")
		last := errOut[strings.LastIndex(strings.TrimSpace(errOut), "\n")+1:]
		if code == 0 || !strings.Contains(last, tc.want) || strings.Contains(errOut, "*url.Error") || strings.Contains(errOut, "*net.") {
			t.Errorf("%s: exit %d, want %q in the last line:\n%s", tc.api, code, tc.want, errOut)
		}
	}

	// A wildcard bind is what it is.
	port := freeAddr(t)[len("127.0.0.1:"):]
	dir := t.TempDir()
	env := newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+dir, "CLANKIE_MEMORY_ADDR=0.0.0.0:"+port,
		"CLANKIE_MEMORY_URL=http://127.0.0.1:"+port, "CLANKIE_LOG_FORMAT=console", "CLANKIE_LOG_LEVEL=debug")
	stdout, stderr := startBin(t, bin, env, "up")
	waitReady(t, "http://127.0.0.1:"+port, stderr)
	want := "memory service: 0.0.0.0:" + port + " on every interface (port " + port + "; from this host http://127.0.0.1:" + port + ")"
	// The line reaches stdout through a pipe the test copies from, so a
	// ready service can be seen before it arrives: wait for it, don't read
	// once.
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(stdout.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("clankie up on 0.0.0.0 printed:\n%s\nwant %q", stdout.String(), want)
			break
		}
	}
	if strings.Contains(stderr.String(), "\x1b[") {
		t.Errorf("console logs into a pipe carry colour codes:\n%q", stderr.String())
	}

	// Debug logs each successful call, by route template, never ids.
	code, _, errOut := runBin(t, bin, env, "memory", "person", "123456789012345678", "234567890123456789")
	if code != 0 || !strings.Contains(errOut, "memory call") || !strings.Contains(errOut, "/v1/memory/discord-people/{guildId}/{userId}/export") ||
		!strings.Contains(errOut, "200") || strings.Contains(errOut, "123456789012345678") || strings.Contains(errOut, "\x1b[") {
		t.Errorf("CLANKIE_LOG_LEVEL=debug memory person: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestBinaryOneGrammar (issue 14, item 7): unknown commands and flags exit
// 2 at every level with a suggestion, one prefix, one sentence; the exit
// codes are in `clankie memory --help` once, not in every leaf; examples
// use ids shaped like real ones.
func TestBinaryOneGrammar(t *testing.T) {
	bin := buildBinary(t)
	env := newcomerEnv(t.TempDir(), "CLANKIE_MEMORY_DIR="+t.TempDir(), "CLANKIE_MEMORY_URL=http://"+freeAddr(t))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"memroy"}, `clankie: unknown command "memroy"; did you mean "memory"? See 'clankie --help'.`},
		{[]string{"--bogus"}, "clankie: unknown flag: --bogus. See 'clankie --help'."},
		{[]string{"memory", "stauts"}, `clankie memory: unknown command "stauts"; did you mean "status"? See 'clankie memory --help'.`},
		{[]string{"memory", "status", "--bogus"}, "clankie memory status: unknown flag: --bogus. See 'clankie memory status --help'."},
		{[]string{"memory", "person", "123456789012345678"}, "clankie memory person: needs GUILD USER (got 1 argument). See 'clankie memory person --help'."},
		{[]string{"bridge", "txt"}, `clankie bridge: unknown command "txt"; did you mean "text"?`},
		{[]string{"up", "now"}, "clankie up: "},
		{[]string{"env", "--bogus"}, "clankie env: unknown flag: --bogus."},
		{[]string{"memory", "episodes", "--search", "x", "--limit", "0"}, "--limit must be 1 to 32 (got 0)"},
		{[]string{"memory", "fact", "edit", "1", "2", "fq7mk2xa", "--expires", "2y"}, `--expires "2y" is not a duration or a date. Use a duration like 90m, 12h, 7d or 2w`},
	} {
		code, out, errOut := runBin(t, bin, env, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "clankie: clankie") {
			t.Errorf("clankie %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}

	_, help, _ := runBin(t, bin, env, "memory", "--help")
	if strings.Count(help, "Exit codes:") != 1 {
		t.Errorf("clankie memory --help shows the exit codes %d times:\n%s", strings.Count(help, "Exit codes:"), help)
	}
	ids := regexp.MustCompile(`\b(ep-[a-z2-7]{10}|f[a-km-z2-9]{7}|[0-9]{17,20})\b`)
	idLike := regexp.MustCompile(`\b(ep-[A-Za-z0-9]+|f-[a-z0-9]+|[0-9]{5,})\b`)
	for _, leaf := range [][]string{{"memory", "status"}, {"memory", "person"}, {"memory", "fact", "edit"}, {"memory", "episode", "keep"}, {"memory", "episodes"}, {"memory", "forget-person"}} {
		_, h, _ := runBin(t, bin, env, append(leaf, "--help")...)
		if strings.Contains(h, "Exit codes:") || !strings.Contains(h, "'clankie memory --help'") {
			t.Errorf("%v --help repeats the exit codes or does not point to them:\n%s", leaf, h)
		}
		for _, id := range idLike.FindAllString(h, -1) {
			if !ids.MatchString(id) {
				t.Errorf("%v --help has an id %q that does not look like a real one", leaf, id)
			}
		}
	}
}
