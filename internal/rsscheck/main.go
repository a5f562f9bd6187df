// Command rsscheck measures how much resident memory the memory service
// needs for a large memory: it writes a fresh memory root holding -people
// person files of -facts facts each (in the store's on-disk format), starts
// `clankie memory serve` on it, checks that the service counts every person
// and fact, and reads VmRSS from /proc/<pid>/status. For the ratio it
// measures the same binary serving an empty root the same way, and, as the
// bridge-less baseline of the one-process start, `clankie up` with no Discord
// token (the memory service alone).
//
//	go run ./internal/rsscheck -people 10000 -facts 10
//
// Output, one measurement a line, key=value first:
//
//	scan_rss_mib=<x> people=N facts=N*M peak_mib=<x> ready_ms=<x> (first start: no catalog, every log read)
//	rss_mib=<x> people=N facts=N*M peak_mib=<x> ready_ms=<x>      (next start: the catalog, no person log read)
//	baseline_rss_mib=<x> people=0 facts=0 peak_mib=<x> ready_ms=<x> (…)
//	up_rss_mib=<x> peak_mib=<x> ready_ms=<x> (…)
//
// -tag T prefixes every key with T (benchreport runs 10k and 100k people).
// ready_ms is from exec to the first 200 of /healthz, polled every 2 ms.
//
// It is Linux-only (/proc).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/internal/benchtext"
	"github.com/clankie/clankie/memory/personfiles"
)

func main() {
	nPeople := flag.Int("people", 10000, "person files to write")
	nFacts := flag.Int("facts", 10, "facts per person (at most 128)")
	bin := flag.String("bin", "", "the clankie binary to measure; empty: build ./cmd/clankie as the release build does")
	baseline := flag.Bool("baseline", true, "also measure the same binary serving an empty root")
	up := flag.Bool("up", true, "also measure `clankie up` with no Discord token (memory service only)")
	settle := flag.Duration("settle", 0, "wait this long after the service is ready before reading its RSS")
	keep := flag.Bool("keep", false, "keep the temporary directory (memory roots, binary)")
	tag := flag.String("tag", "", "prefix of every output key")
	flag.Parse()
	if *nPeople < 0 || *nFacts < 1 || *nFacts > api.MaxFactsPerPerson {
		fmt.Fprintf(os.Stderr, "rsscheck: -people must be ≥ 0 and -facts between 1 and %d\n", api.MaxFactsPerPerson)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, options{people: *nPeople, facts: *nFacts, bin: *bin, baseline: *baseline, up: *up, settle: *settle, keep: *keep, tag: *tag})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rsscheck:", err)
		os.Exit(1)
	}
}

type options struct {
	people, facts int
	bin           string
	baseline, up  bool
	settle        time.Duration
	keep          bool
	tag           string
}

func run(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "rsscheck-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "rsscheck: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	bin := o.bin
	if bin == "" {
		if bin, err = build(ctx, tmp); err != nil {
			return err
		}
	}
	loaded := filepath.Join(tmp, "loaded")
	start := time.Now()
	if err := writeRoot(loaded, o.people, o.facts); err != nil {
		return fmt.Errorf("write the memory root: %w", err)
	}
	fmt.Fprintf(os.Stderr, "rsscheck: wrote %d person files of %d facts in %s\n", o.people, o.facts, time.Since(start).Round(time.Millisecond))

	// The first start finds no catalog: it reads every person log once and
	// writes the catalog (as after an upgrade); the next reads the catalog.
	m, err := measure(ctx, bin, tmp, []string{"memory", "serve"}, loaded, o.people, o.people*o.facts, o.settle)
	if err != nil {
		return fmt.Errorf("clankie memory serve with %d people, first start: %w", o.people, err)
	}
	fmt.Printf("%sscan_rss_mib=%.1f people=%d facts=%d peak_mib=%.1f ready_ms=%.1f (first start: no catalog, every person log read)\n",
		o.tag, m.rss, o.people, o.people*o.facts, m.peak, ms(m.ready))
	m, err = measure(ctx, bin, tmp, []string{"memory", "serve"}, loaded, o.people, o.people*o.facts, o.settle)
	if err != nil {
		return fmt.Errorf("clankie memory serve with %d people: %w", o.people, err)
	}
	fmt.Printf("%srss_mib=%.1f people=%d facts=%d peak_mib=%.1f ready_ms=%.1f\n", o.tag, m.rss, o.people, o.people*o.facts, m.peak, ms(m.ready))
	if o.baseline {
		m, err := measure(ctx, bin, tmp, []string{"memory", "serve"}, filepath.Join(tmp, "empty"), 0, 0, o.settle)
		if err != nil {
			return fmt.Errorf("clankie memory serve on an empty root: %w", err)
		}
		fmt.Printf("%sbaseline_rss_mib=%.1f people=0 facts=0 peak_mib=%.1f ready_ms=%.1f (clankie memory serve, empty root)\n", o.tag, m.rss, m.peak, ms(m.ready))
	}
	if o.up {
		m, err := measure(ctx, bin, tmp, []string{"up"}, filepath.Join(tmp, "up"), 0, 0, o.settle)
		if err != nil {
			return fmt.Errorf("clankie up: %w", err)
		}
		fmt.Printf("%sup_rss_mib=%.1f peak_mib=%.1f ready_ms=%.1f (clankie up: memory service only, no Discord token, empty root)\n", o.tag, m.rss, m.peak, ms(m.ready))
	}
	// The idle bridge is measured by BenchmarkIdleTextBridgeRSS (cmd/clankie), which can serve it a fake Discord.
	return nil
}

// build compiles clankie as the release build does (.ci/run, Dockerfile).
func build(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", errors.New("run rsscheck inside the clankie module, or give -bin")
	}
	bin := filepath.Join(dir, "clankie")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/clankie")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build clankie: %v\n%s", err, out)
	}
	return bin, nil
}

const idAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// factID returns an id of the store's form: "f" and seven characters.
func factID(n int) string {
	b := []byte("f0000000")
	for i := 7; i >= 1; i-- {
		b[i] = idAlphabet[n%len(idAlphabet)]
		n /= len(idAlphabet)
	}
	return string(b)
}

// writeRoot writes n people of m facts each into <dir>/discord-people, as
// person logs (personfiles.EncodeFile) with no catalog, with the service's modes
// (0700 directories, 0600 files), four files at a time. The files are not
// fsynced: the service only has to read them.
func writeRoot(dir string, n, m int) error {
	pdir := filepath.Join(dir, personfiles.Dir)
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	base := time.Now().UTC().Add(-90 * 24 * time.Hour).Truncate(time.Second)
	const workers = 4
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for p := w; p < n; p += workers {
				if err := writePerson(pdir, base, p, n, m); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// writePerson writes the p-th of n people, with m facts.
func writePerson(pdir string, base time.Time, p, n, m int) error {
	s := api.Subject{GuildID: "100000000000000001", UserID: strconv.Itoa(200000000000000000 + p)}
	facts := make([]api.Fact, 0, m)
	proposals := make([]string, 0, m)
	for i := range m {
		k := p*m + i
		at := base.Add(time.Duration(k) * time.Second)
		event := strconv.Itoa(1300000000000000000 + k)
		proposer := s.UserID
		if i%3 == 2 { // every third fact was reported by someone else
			proposer = strconv.Itoa(200000000000000000 + (p+1)%n)
		}
		f := api.Fact{
			FactID: factID(i), Subject: s, Kind: api.KindPersonFact, Body: benchtext.Body(k),
			Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, CreatedAt: at, UpdatedAt: at,
			Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: event,
				CorrelationID: fmt.Sprintf("%016x", k), ProposerUserID: proposer, ChannelID: "100000000000000011"},
		}
		facts = append(facts, f)
		proposals = append(proposals, "discord-interaction-"+event)
	}
	data, err := personfiles.EncodeFile(s, facts, proposals)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pdir, personfiles.FileName(s)), data, 0o600)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

type measurement struct {
	rss, peak float64 // MiB
	ready     time.Duration
}

// measure starts bin with args on the memory root dir, waits until it
// answers /healthz, checks the catalog counts wantPeople and wantFacts,
// reads VmRSS and VmHWM, and stops it with SIGTERM.
func measure(ctx context.Context, bin, tmp string, args []string, dir string, wantPeople, wantFacts int, settle time.Duration) (measurement, error) {
	addr, err := freeAddr()
	if err != nil {
		return measurement{}, err
	}
	token := randomToken()
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return measurement{}, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// A newcomer's environment: nothing inherited but PATH, so no Discord
	// token from the caller's shell starts a bridge.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"CLANKIE_MEMORY_DIR=" + dir, "CLANKIE_MEMORY_ADDR=" + addr, "CLANKIE_MEMORY_URL=http://" + addr,
		"CLANKIE_OPERATOR_TOKEN=" + token}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return measurement{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("did not stop within 20 s of SIGTERM; killed")
		}
	}
	defer stop()
	fail := func(err error) (measurement, error) {
		stop()
		return measurement{}, fmt.Errorf("%w\n%s", err, tail(out.String(), 2000))
	}

	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	base := "http://" + addr
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if resp, err := client.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			stopped = true
			return measurement{}, fmt.Errorf("exited before it was ready (%v)\n%s", err, tail(out.String(), 2000))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(errors.New("not ready within 2 minutes"))
		}
	}
	ready := time.Since(start)

	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/memory", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return fail(fmt.Errorf("GET /v1/memory: %w", err))
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cat api.Catalog
	if err := json.Unmarshal(b, &cat); err != nil || resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("GET /v1/memory answered %d: %.300s", resp.StatusCode, b))
	}
	if cat.People != wantPeople || cat.Facts != wantFacts {
		return fail(fmt.Errorf("the service counts %d people and %d facts, the root holds %d and %d", cat.People, cat.Facts, wantPeople, wantFacts))
	}
	if settle > 0 {
		time.Sleep(settle)
	}
	rss, peak, err := procMemory(cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	if err := stop(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return measurement{}, err
		}
		return measurement{}, fmt.Errorf("stopped with %v\n%s", err, tail(out.String(), 2000))
	}
	return measurement{rss: rss, peak: peak, ready: ready}, nil
}

// procMemory reads VmRSS and VmHWM (peak RSS) in MiB.
func procMemory(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read VmRSS (Linux only): %w", err)
	}
	kib := func(key string) (float64, error) {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, key+":"); ok {
				f := strings.Fields(v)
				if len(f) == 2 && f[1] == "kB" {
					n, err := strconv.ParseFloat(f[0], 64)
					return n / 1024, err
				}
			}
		}
		return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
	}
	if rss, err = kib("VmRSS"); err != nil {
		return 0, 0, err
	}
	peak, err = kib("VmHWM")
	return rss, peak, err
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// lockedBuffer collects a child's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
