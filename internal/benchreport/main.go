// Command benchreport runs clankie's performance benchmarks and the RSS
// check, and prints one table: each figure beside the baseline measured in
// the same run, their ratio, the goal and whether it was met. Absolute
// timings on a shared machine are noisy; the ratios are what to read.
//
//	go run ./internal/benchreport          # the full run, a few minutes
//	go run ./internal/benchreport -quick   # a smoke run, well under a minute
//	go run ./internal/benchreport -original DIR   # and the original store (original.go)
//
// It exits non-zero when a benchmark or the RSS check fails to run, never
// because a goal was missed: that is a "no" in the met? column.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// suite is one `go test -bench` invocation.
type suite struct {
	name      string
	pkg       string
	benches   []string // top-level benchmark names; sub-benchmarks all run
	benchtime string
	rounds    int
}

func (s suite) args() []string {
	return []string{"test", "-count=1", "-run", "^$", "-bench", "^(" + strings.Join(s.benches, "|") + ")$",
		"-benchtime", s.benchtime, "-timeout", "30m", s.pkg}
}

type config struct {
	quick        bool
	rounds       int
	verbose      bool
	rssPeople    int
	rssBigPeople int
	rssFacts     int
	bridgeN      int
	voiceN       int
	memoryTime   string
	coldN        string // BenchmarkColdPeople's calls per run
	original     string // a git checkout of Volpestyle/clankie, or ""
	postgres     bool   // CLANKIE_TEST_POSTGRES names a server: the store rows run
}

func main() {
	var c config
	flag.BoolVar(&c.quick, "quick", false, "a smoke run for CI: short benchtimes, one round (well under a minute once built)")
	flag.IntVar(&c.rounds, "rounds", 0, "rounds of the memory and episode benchmarks, each figure the median over rounds (default 5, -quick 1)")
	flag.BoolVar(&c.verbose, "v", false, "echo the raw go test and rsscheck output")
	flag.IntVar(&c.rssPeople, "rss-people", 10000, "people in the RSS check's memory root")
	flag.IntVar(&c.rssFacts, "rss-facts", 10, "facts per person in the RSS check")
	flag.IntVar(&c.rssBigPeople, "rss-big-people", 100000, "people in the second start-up and RSS check (0: skip; -quick: 0 unless given)")
	flag.StringVar(&c.original, "original", "", "a git checkout (or bare mirror) of Volpestyle/clankie holding "+originalCommit[:7]+
		": run its person store in process in every round, as the baseline issue 16 names (needs npm and the npm registry)")
	flag.BoolVar(&c.postgres, "postgres", false, "also run the file and PostgreSQL store benchmarks (the memory package's, against the server CLANKIE_TEST_POSTGRES names; scripts/bench sets both)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "benchreport: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	c.memoryTime, c.bridgeN, c.voiceN, c.coldN = "1s", 1000, 200, "2000x"
	if c.quick {
		c.memoryTime, c.bridgeN, c.voiceN, c.coldN = "100ms", 100, 30, "100x"
		bigGiven := false
		flag.Visit(func(f *flag.Flag) { bigGiven = bigGiven || f.Name == "rss-big-people" })
		if !bigGiven {
			c.rssBigPeople = 0
		}
	}
	if c.rounds <= 0 {
		c.rounds = 5
		if c.quick {
			c.rounds = 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, c)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, c config) int {
	root, err := moduleRoot(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		return 2
	}
	suites := []suite{
		{name: "memory", pkg: "./memory/", benchtime: c.memoryTime, rounds: c.rounds, benches: []string{
			"BenchmarkProposalRoundTrip", "BenchmarkProposalBaselineWrite", "BenchmarkRecall128", "BenchmarkRecall128BaselineDecode",
			"BenchmarkConcurrentProposals", "BenchmarkConcurrentBaselineWrite", "BenchmarkConcurrentFloor"}},
		{name: "people store", pkg: "./memory/personfiles/", benchtime: c.memoryTime, rounds: c.rounds, benches: []string{
			"BenchmarkProposeInProcess", "BenchmarkForgetWithPeople"}},
		{name: "people store (cold people)", pkg: "./memory/personfiles/", benchtime: c.coldN, rounds: c.rounds, benches: []string{
			"BenchmarkColdPeople"}},
		{name: "people store (first start)", pkg: "./memory/personfiles/", benchtime: "1x", rounds: 1, benches: []string{
			"BenchmarkFirstStart"}},
		{name: "episodes", pkg: "./memory/episodes/", benchtime: c.memoryTime, rounds: c.rounds, benches: []string{
			"BenchmarkRecordFullStore", "BenchmarkRewriteLaneFiles", "BenchmarkSearchFullStore"}},
		{name: "bridges (interactions)", pkg: "./bridges/", benchtime: fmt.Sprintf("%dx", c.bridgeN), rounds: 1, benches: []string{
			"BenchmarkInteractionToFirstCallback", "BenchmarkInteractionBaselineDM"}},
		{name: "bridges (voice)", pkg: "./bridges/", benchtime: fmt.Sprintf("%dx", c.voiceN), rounds: 1, benches: []string{
			"BenchmarkVoiceJoinToBriefing"}},
		{name: "bridge process", pkg: "./cmd/clankie/", benchtime: "1x", rounds: 1, benches: []string{
			"BenchmarkIdleTextBridgeRSS"}},
	}
	// The PostgreSQL rows (issue 31) need a server: scripts/bench starts
	// one, exports CLANKIE_TEST_POSTGRES for the benchmarks and says
	// -postgres; without it they are skipped.
	if c.postgres {
		suites = append(suites, suite{name: "stores (file and PostgreSQL)", pkg: "./memory/", benchtime: c.memoryTime, rounds: c.rounds, benches: []string{
			"BenchmarkStoreProposalRoundTrip", "BenchmarkStoreConcurrentProposals", "BenchmarkStoreRecall128", "BenchmarkStoreFloor"}})
	} else {
		fmt.Fprintln(os.Stderr, "benchreport: no -postgres: no PostgreSQL rows")
	}
	started := time.Now()
	loadBefore := loadAverage()
	res := results{}
	var failures []string
	var commands []string
	var orig *original
	if c.original != "" {
		fmt.Fprintln(os.Stderr, "benchreport: setting up the original store (npm ci) …")
		if orig, err = setupOriginal(ctx, root, c.original, c.verbose); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport: -original:", err)
			return 2
		}
		defer orig.close()
	}
	nodeVersion := ""

	// Rounds interleave the suites, so a figure and its baseline share
	// whatever else the machine was doing.
	maxRounds := 0
	for _, s := range suites {
		maxRounds = max(maxRounds, s.rounds)
	}
	for r := range maxRounds {
		for _, s := range suites {
			if r >= s.rounds {
				continue
			}
			args := s.args()
			if r == 0 {
				commands = append(commands, "go "+shellJoin(args))
			}
			fmt.Fprintf(os.Stderr, "benchreport: %s benchmarks, round %d of %d …\n", s.name, r+1, s.rounds)
			out, err := goCommand(ctx, root, c.verbose, args...)
			lines := parseBench(out)
			for _, l := range lines {
				res.add(r, l)
			}
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s (round %d): go %s: %v\n%s", s.name, r+1, shellJoin(args), err, tail(out, 3000)))
				continue
			}
			for _, want := range s.benches {
				if !hasBench(lines, want) {
					failures = append(failures, fmt.Sprintf("%s (round %d): %s did not report", s.name, r+1, want))
				}
			}
			if orig == nil || s.name != "memory" {
				continue
			}
			// The original runs right after the memory suite in each
			// round, so its figures share that round's machine.
			for _, variant := range []string{"plain", "fsync"} {
				if r == 0 {
					commands = append(commands, fmt.Sprintf("node bench.ts %s %d   # internal/originalbench beside Volpestyle/clankie@%.7s's store (see -original)", variant, originalIterations, originalCommit))
				}
				fmt.Fprintf(os.Stderr, "benchreport: the original store (%s), round %d of %d …\n", variant, r+1, s.rounds)
				out, err := orig.run(ctx, variant)
				for _, l := range parseBench(out) {
					res.add(r, l)
				}
				nodeVersion = cmp.Or(nodeVersion, originalNode(out))
				if err != nil {
					failures = append(failures, fmt.Sprintf("original (round %d): %v\n%s", r+1, err, tail(out, 3000)))
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
	}

	// The RSS check runs at -rss-people (with the empty-root and `clankie up`
	// baselines) and at -rss-big-people (start-up and RSS only), so the
	// table shows how both grow with the number of people.
	rss := map[string]float64{}
	for _, run := range []struct {
		tag    string
		people int
		extra  []string
	}{{"", c.rssPeople, nil}, {"big_", c.rssBigPeople, []string{"-baseline=false", "-up=false"}}} {
		if run.people <= 0 || ctx.Err() != nil {
			continue
		}
		rssArgs := append([]string{"run", "./internal/rsscheck", "-people", strconv.Itoa(run.people), "-facts", strconv.Itoa(c.rssFacts)}, run.extra...)
		if run.tag != "" {
			rssArgs = append(rssArgs, "-tag", run.tag)
		}
		commands = append(commands, "go "+shellJoin(rssArgs))
		fmt.Fprintf(os.Stderr, "benchreport: RSS and start-up check (%d people × %d facts) …\n", run.people, c.rssFacts)
		out, err := goCommand(ctx, root, c.verbose, rssArgs...)
		for k, v := range parseKV(out) {
			rss[k] = v
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("rsscheck: %v\n%s", err, tail(out, 3000)))
		} else if _, ok := rss[run.tag+"rss_mib"]; !ok {
			failures = append(failures, "rsscheck: no "+run.tag+"rss_mib line\n"+tail(out, 3000))
		}
	}
	if ctx.Err() != nil {
		failures = append(failures, "interrupted")
	}

	fmt.Printf("clankie benchmarks: %s, %s, %d CPUs, %s run, %d round(s) of the memory and episode benchmarks (figures are medians over rounds); load average %s at start, %s at end; took %s\n\n",
		started.UTC().Format("2006-01-02 15:04 UTC"), runtime.Version(), runtime.NumCPU(), map[bool]string{true: "quick", false: "full"}[c.quick],
		c.rounds, loadBefore, loadAverage(), time.Since(started).Round(time.Second))
	printTable(os.Stdout, rows(res, rss, c))
	fmt.Println()
	fmt.Println(notes)
	if orig != nil {
		fmt.Printf("- The original store is Volpestyle/clankie@%.7s's createFileMemory (apps/clankie/src/memory.ts), run in\n"+
			"  process under Node %s after each round's memory benchmarks, %d calls a figure, 64 people rotating, on a\n"+
			"  data dir in the same temp directory; it never fsyncs (writeFileSync), its \"+ fsync\" variant syncs each file it\n"+
			"  writes. It has no supersede: at 16 facts each call replaces the oldest fact by reusing its id.\n", originalCommit, nodeVersion, originalIterations)
	}
	fmt.Println()
	fmt.Println("commands (from the module root):")
	for _, cmd := range commands {
		fmt.Println("  " + cmd)
	}
	if len(failures) > 0 {
		fmt.Fprintln(os.Stderr)
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, "benchreport: FAILED:", f)
		}
		return 1
	}
	return 0
}

// notes explain how to read the table.
const notes = `notes:
- Medians come from per-iteration timings the benchmarks record (p50-µs); "mean" figures are go test's ns/op.
  The episode benchmarks predate this report and give means only; the search goal is a median, and a mean
  under it bounds a right-skewed latency distribution's median too.
- Every ratio is figure ÷ baseline, both measured in this run: over rounds, the value and baseline columns show
  the median of the rounds, the ratio is the median of the per-round ratios (each round runs a figure and its
  baseline in one go test process, seconds apart).
- Proposal files keep their size during the run (the cap evicts; below it each proposal corrects an old fact).
- The interaction and voice figures run the real service, the real bridge and discordgo against the fake
  Discord, in one process over loopback; the voice benchmark's fake does not echo the bot's own voice state.`

// ---- running ----

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.New("run benchreport inside the clankie module (scripts/bench does)")
	}
	return filepath.Dir(gomod), nil
}

// goCommand runs go with args in dir and returns its combined output.
func goCommand(ctx context.Context, dir string, verbose bool, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	if verbose {
		cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	} else {
		cmd.Stdout = &buf
	}
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	return buf.String(), err
}

func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " ^$|()*?[]'\"\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// ---- parsing ----

// benchLine is one result line of `go test -bench`.
type benchLine struct {
	name    string // without the -GOMAXPROCS suffix
	iters   int
	metrics map[string]float64 // unit → value: ns/op, B/op, p50-µs, …
}

var benchRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)

// parseBench reads the result lines: name, iterations, then value-unit
// pairs, the custom metrics of b.ReportMetric included.
func parseBench(out string) []benchLine {
	var lines []benchLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		l := benchLine{name: m[1], iters: n, metrics: map[string]float64{}}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			l.metrics[f[i+1]] = v
		}
		lines = append(lines, l)
	}
	return lines
}

func hasBench(lines []benchLine, top string) bool {
	for _, l := range lines {
		if l.name == top || strings.HasPrefix(l.name, top+"/") {
			return true
		}
	}
	return false
}

// parseKV reads rsscheck's lines. Each measurement line starts with
// <tag>rss_mib=<x>; its other key=value tokens are kept under the tag:
// rss_mib and loaded_peak_mib, baseline_rss_mib and baseline_peak_mib, …
func parseKV(out string) map[string]float64 {
	kv := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		k0, v0, ok := strings.Cut(f[0], "=")
		if !ok || !strings.HasSuffix(k0, "rss_mib") {
			continue
		}
		if v, err := strconv.ParseFloat(v0, 64); err == nil {
			kv[k0] = v
		}
		tag := strings.TrimSuffix(k0, "rss_mib")
		if tag == "" {
			tag = "loaded_"
		}
		for _, tok := range f[1:] {
			if k, v, ok := strings.Cut(tok, "="); ok {
				if x, err := strconv.ParseFloat(v, 64); err == nil {
					kv[tag+k] = x
				}
			}
		}
	}
	return kv
}

// results holds, per benchmark and unit, the value of each round.
type results map[string]map[string]map[int]float64

func (r results) add(round int, l benchLine) {
	if r[l.name] == nil {
		r[l.name] = map[string]map[int]float64{}
	}
	for unit, v := range l.metrics {
		if r[l.name][unit] == nil {
			r[l.name][unit] = map[int]float64{}
		}
		r[l.name][unit][round] = v
	}
}

// get returns the median over rounds, and false when nothing was reported.
func (r results) get(name, unit string) (float64, bool) {
	var vs []float64
	for _, v := range r[name][unit] {
		vs = append(vs, v)
	}
	return median(vs)
}

// ratio returns the median over rounds of figure ÷ baseline, each round's
// pair measured minutes apart at most, in the same go test process.
func (r results) ratio(name, unit, baseName, baseUnit string) (float64, bool) {
	var rs []float64
	for round, v := range r[name][unit] {
		if b, ok := r[baseName][baseUnit][round]; ok && b > 0 {
			rs = append(rs, v/b)
		}
	}
	return median(rs)
}

func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// ---- the table ----

type row struct {
	area, figure, value, baseline, ratio, goal, met string
}

func dur(ns float64, ok bool) string {
	if !ok {
		return "failed"
	}
	switch d := ns; {
	case d < 1e3:
		return fmt.Sprintf("%.0f ns", d)
	case d < 1e6:
		return sig(d/1e3) + " µs"
	case d < 1e9:
		return sig(d/1e6) + " ms"
	}
	return sig(ns/1e9) + " s"
}

// sig formats with three significant digits.
func sig(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func ratioText(r float64, ok bool) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r)
}

func yesNo(ok, met bool) string {
	switch {
	case !ok:
		return "—"
	case met:
		return "yes"
	}
	return "no"
}

func kib(bytes float64, ok bool) string {
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.0f KiB", bytes/1024)
}

func mib(v float64, ok bool) string {
	if !ok {
		return "failed"
	}
	return fmt.Sprintf("%.1f MiB", v)
}

// compared is a benchmark figure beside its baseline: both medians over
// rounds, and the median of the per-round ratios.
type compared struct {
	value, base string
	ratio       float64
	ok          bool // the ratio exists
}

// compare reads a figure and its baseline in unit; a unit ending in -µs
// is turned into ns for formatting.
func compare(res results, name, baseName, unit string) compared {
	scale := 1.0
	if strings.HasSuffix(unit, "-µs") {
		scale = 1e3
	}
	v, okV := res.get(name, unit)
	b, okB := res.get(baseName, unit)
	r, okR := res.ratio(name, unit, baseName, unit)
	return compared{value: dur(v*scale, okV), base: dur(b*scale, okB), ratio: r, ok: okR}
}

// compareUnits is compare for a benchmark that measures its own baseline
// in the same loop and reports it under another unit.
func compareUnits(res results, name, unit, baseUnit string) compared {
	v, okV := res.get(name, unit)
	b, okB := res.get(name, baseUnit)
	r, okR := res.ratio(name, unit, name, baseUnit)
	return compared{value: dur(v*1e3, okV), base: dur(b*1e3, okB), ratio: r, ok: okR}
}

// originalProposeMicros is the original TypeScript store's in-process,
// non-durable propose, median µs, by facts per person, as issue 16 measured
// it on this machine class: the baseline when -original is not given.
var originalProposeMicros = map[int]float64{16: 354, 128: 1270}

// baseline is an original-store figure: re-run in this run (name, a
// benchmark in res) or issue 16's fixed one (micros).
type baseline struct {
	name   string
	micros float64
	ok     bool
	rerun  bool
}

// originalPropose returns the original's propose at n facts: variant
// "plain" or "fsync" from -original, else (plain only) the fixed figure.
func originalPropose(res results, n int, variant string) baseline {
	name := fmt.Sprintf("BenchmarkOriginalPropose/store=%s/facts=%d", variant, n)
	if v, ok := res.get(name, "p50-µs"); ok {
		return baseline{name: name, micros: v, ok: true, rerun: true}
	}
	if variant != "plain" {
		return baseline{}
	}
	return baseline{micros: originalProposeMicros[n], ok: true}
}

// ratioOf returns the figure name/unit over the baseline: the median of
// the per-round ratios for a re-run, else the median figure over the
// fixed one.
func (b baseline) ratioOf(res results, name, unit string) (float64, bool) {
	if b.rerun {
		return res.ratio(name, unit, b.name, "p50-µs")
	}
	v, ok := res.get(name, unit)
	return v / b.micros, ok && b.ok
}

// label says where the baseline comes from, and its value.
func (b baseline) label() string {
	if b.rerun {
		return " (re-run in this run, see notes): " + dur(b.micros*1e3, true)
	}
	return " (issue 16, this machine class, not re-run; -original re-runs it): " + dur(b.micros*1e3, true)
}

func perSecond(v float64, ok bool) string {
	if !ok {
		return "failed"
	}
	return fmt.Sprintf("%.0f/s", v)
}

// postgresRows are issue 31's PostgreSQL goals: each figure against the
// file store's, measured in the same go test process of the same round.
func postgresRows(res results) []row {
	const prop, conc, rec = "BenchmarkStoreProposalRoundTrip/store=", "BenchmarkStoreConcurrentProposals/store=", "BenchmarkStoreRecall128/store="
	const floor = "BenchmarkStoreFloor/op="
	var out []row
	p := compare(res, prop+"postgres", prop+"file", "p50-µs")
	out = append(out, row{"postgres", "proposal, durable, HTTP round trip, 64 people × 16 facts, superseding, one service; median",
		p.value, "the file store, same benchmark: " + p.base, ratioText(p.ratio, p.ok), "≤ 1.3×", yesNo(p.ok, p.ratio <= 1.3)})
	r := compare(res, rec+"postgres", rec+"file", "p50-µs")
	out = append(out, row{"postgres", "recall of all 128 facts of one person over HTTP; median",
		r.value, "the file store, same benchmark: " + r.base, ratioText(r.ratio, r.ok), "≤ 1.5×", yesNo(r.ok, r.ratio <= 1.5)})
	w, okW := res.get(conc+"postgres", "writes/s")
	fw, okF := res.get(conc+"file", "writes/s")
	wr, okR := res.ratio(conc+"postgres", "writes/s", conc+"file", "writes/s")
	p99, ok99 := res.get(conc+"postgres", "p99-µs")
	out = append(out, row{"postgres", fmt.Sprintf("64 concurrent writers, own person (16 facts) each; throughput (p99 %s)", dur(p99*1e3, ok99)),
		perSecond(w, okW), "the file store, same benchmark: " + perSecond(fw, okF), ratioText(wr, okR),
		"≥ 0.6×, p99 < 50 ms", yesNo(okR && ok99, wr >= 0.6 && p99 < 50_000)})
	// Each figure over the database's own floor (BenchmarkStoreFloor): the
	// same requests to a bare handler that runs one statement, which no
	// schema can go below; what is left over it is this store's.
	fp := compare(res, prop+"postgres", floor+"proposal", "p50-µs")
	out = append(out, row{"postgres", "  the proposal over PostgreSQL's floor: one autocommitted UPDATE per request, bare handler",
		fp.value, "the floor, same run: " + fp.base, ratioText(fp.ratio, fp.ok), "—", "—"})
	fr := compare(res, rec+"postgres", floor+"recall", "p50-µs")
	out = append(out, row{"postgres", "  the recall over PostgreSQL's floor: one SELECT per request, bare handler",
		fr.value, "the floor, same run: " + fr.base, ratioText(fr.ratio, fr.ok), "—", "—"})
	fwv, okFW := res.get(floor+"writers", "writes/s")
	fwr, okFWR := res.ratio(conc+"postgres", "writes/s", floor+"writers", "writes/s")
	out = append(out, row{"postgres", "  the 64 writers over PostgreSQL's floor: one autocommitted UPDATE each, bare handler",
		perSecond(w, okW), "the floor, same run: " + perSecond(fwv, okFW), ratioText(fwr, okFWR), "—", "—"})
	two, okT := res.get(conc+"postgres-2svc", "writes/s")
	tr, okTR := res.ratio(conc+"postgres-2svc", "writes/s", conc+"postgres", "writes/s")
	out = append(out, row{"postgres", "  the same, two services on one database, writers alternating",
		perSecond(two, okT), "one service, same benchmark: " + perSecond(w, okW), ratioText(tr, okTR), "≥ 0.9×", yesNo(okTR, tr >= 0.9)})
	t := compare(res, prop+"postgres-2svc", prop+"postgres", "p50-µs")
	out = append(out, row{"postgres", "  proposal round trip, two services alternating on the same people",
		t.value, "one service: " + t.base, ratioText(t.ratio, t.ok), "—", "—"})
	return out
}

func rows(res results, rss map[string]float64, c config) []row {
	var out []row

	// Proposals, median round trip: against the original store's
	// in-process, non-durable time (re-run in this run with -original, else
	// issue 16's fixed figure), and against floors measured in the same
	// run, interleaved.
	for _, n := range []int{16, 128} {
		name := fmt.Sprintf("BenchmarkProposalRoundTrip/facts=%d", n)
		v, okV := res.get(name, "p50-µs")
		size, okS := res.get(name, "file-bytes")
		legacy, okL := res.get(name, "legacy-bytes")
		record, okR := res.get(name, "record-bytes")
		how := "each supersedes the person's oldest fact"
		if n == api128 {
			how = "each evicts the oldest fact (the cap)"
		}
		o := originalPropose(res, n, "plain")
		r, okRatio := o.ratioOf(res, name, "p50-µs")
		out = append(out, row{"memory", fmt.Sprintf("proposal, durable, HTTP round trip, 64 people × %d facts (%s person logs), %s; median", n, kib(size, okS), how),
			dur(v*1e3, okV), "the original store's in-process, non-durable propose" + o.label(),
			ratioText(r, okV && okRatio), "≤ 1.0×", yesNo(okV && okRatio, r <= 1)})
		if of := originalPropose(res, n, "fsync"); of.rerun {
			r, ok := of.ratioOf(res, name, "p50-µs")
			out = append(out, row{"memory", "  the same, against the original with an fsync of each file it writes",
				dur(v*1e3, okV), "the original + fsync, in process" + of.label(), ratioText(r, okV && ok), "—", "—"})
		}
		w := compareUnits(res, name, "p50-µs", "baseline-p50-µs")
		out = append(out, row{"memory", fmt.Sprintf("  the same, against the whole-file write this store did per proposal (%s schema-1 file)", kib(legacy, okL)),
			w.value, "temp+fsync+rename+dir fsync of that file, interleaved: " + w.base, ratioText(w.ratio, w.ok), "< 1×", yesNo(w.ok, w.ratio < 1)})
		a := compareUnits(res, name, "p50-µs", "append-p50-µs")
		out = append(out, row{"memory", fmt.Sprintf("  the same, against a bare append of one journal record (%.0f bytes) + fdatasync", record),
			a.value, "append + fdatasync, interleaved: " + a.base, ratioText(a.ratio, a.ok && okR), "— (the disk's floor)", "—"})
		f := compareUnits(res, name, "p50-µs", "floor-p50-µs")
		out = append(out, row{"memory", "  the same, against the floor of any durable write over HTTP",
			f.value, "a bare net/http handler that reads the body, appends one record, fdatasyncs and answers, interleaved: " + f.base,
			ratioText(f.ratio, f.ok), "— (the floor)", "—"})
		fv, okF := res.get(name, "floor-p50-µs")
		fr, okFR := o.ratioOf(res, name, "floor-p50-µs")
		out = append(out, row{"memory", "  that floor itself, against the original store's in-process, non-durable propose",
			dur(fv*1e3, okF), "the original" + o.label(), ratioText(fr, okF && okFR), "—", "—"})
	}
	ip, okI := res.get("BenchmarkProposeInProcess", "p50-µs")
	is, okIS := res.get("BenchmarkProposeInProcess", "sync-µs")
	o16 := originalPropose(res, 16, "plain")
	ir, okIR := o16.ratioOf(res, "BenchmarkProposeInProcess", "p50-µs")
	out = append(out, row{"memory", "proposal, durable, in process (no HTTP), 16 facts, superseding; median",
		dur(ip*1e3, okI), fmt.Sprintf("the journal's mean fdatasync within it: %s; the original in-process, non-durable%s", dur(is*1e3, okIS), o16.label()),
		ratioText(ir, okI && okIR), "—", "—"})

	// People not in memory (issue 31): every call reads and replays the
	// person's log at its steady size, against the original, which always
	// reads and parses the person's file; and the same people with the
	// default cache, loaded once before the timing.
	o128 := originalPropose(res, 128, "plain")
	const originalList128 = "BenchmarkOriginalList/store=plain/facts=128"
	for _, n := range []int{64, 1000} {
		name := fmt.Sprintf("BenchmarkColdPeople/people=%d/cache=none", n)
		v, okV := res.get(name, "propose-p50-µs")
		size, okS := res.get(name, "log-bytes")
		r, okR := o128.ratioOf(res, name, "propose-p50-µs")
		out = append(out, row{"memory", fmt.Sprintf("proposal to a person not in memory, in process, %d people × 128 facts (%s logs), rotating; median", n, kib(size, okS)),
			dur(v*1e3, okV), "the original store's in-process, non-durable propose" + o128.label(), ratioText(r, okV && okR), "≤ 1.0×", yesNo(okV && okR, r <= 1)})
		rv, okRV := res.get(name, "recall-p50-µs")
		lv, okL := res.get(originalList128, "p50-µs")
		out = append(out, row{"memory", "  recall of all 128 facts of a person not in memory, in process",
			dur(rv*1e3, okRV), "the original's listDiscordPerson, in process: " + dur(lv*1e3, okL), ratioText(rv/lv, okRV && okL), "≤ 0.33×", yesNo(okRV && okL, rv/lv <= 0.33)})
	}
	{
		name := "BenchmarkColdPeople/people=1000/cache=default"
		v, okV := res.get(name, "propose-p50-µs")
		r, okR := o128.ratioOf(res, name, "propose-p50-µs")
		out = append(out, row{"memory", "proposal, in process, 1000 people × 128 facts, all in the default cache (128 MiB); median",
			dur(v*1e3, okV), "the original store's in-process, non-durable propose" + o128.label(), ratioText(r, okV && okR), "—", "—"})
		rv, okRV := res.get(name, "recall-p50-µs")
		lv, okL := res.get(originalList128, "p50-µs")
		out = append(out, row{"memory", "  recall of all 128 facts, in process, the same people",
			dur(rv*1e3, okRV), "the original's listDiscordPerson, in process: " + dur(lv*1e3, okL), ratioText(rv/lv, okRV && okL), "—", "—"})
	}

	// A forget leaves nothing of the fact on disk before it answers; its
	// cost must not grow with the number of people in the catalog.
	for _, n := range []string{"10000", "100000"} {
		name := "BenchmarkForgetWithPeople/people=" + n
		f, okF := res.get(name, "forget-p50-µs")
		p, okP := res.get(name, "propose-p50-µs")
		out = append(out, row{"memory", fmt.Sprintf("forget one fact, %s people in the catalog, in process; median", n),
			dur(f*1e3, okF), "a proposal to the same person, same run: " + dur(p*1e3, okP), ratioText(f/p, okF && okP), "—", "—"})
	}
	// The first start after an upgrade migrates every schema-1 file.
	for _, n := range []string{"10000"} {
		m, okM := res.get("BenchmarkFirstStart/schema-1/people="+n, "ns/op")
		l, okL := res.get("BenchmarkFirstStart/logs/people="+n, "ns/op")
		out = append(out, row{"start-up", fmt.Sprintf("first start after an upgrade: %s schema-1 files × 10 facts, no catalog, in process", n),
			dur(m, okM), "the same people as logs (a deleted catalog: read, not migrated): " + dur(l, okL), ratioText(m/l, okM && okL), "—", "—"})
	}

	if c.postgres {
		out = append(out, postgresRows(res)...)
	}

	// 64 writers, own person each: throughput against the whole-file floor.
	cw, okCW := res.get("BenchmarkConcurrentProposals", "writes/s")
	bw, okBW := res.get("BenchmarkConcurrentBaselineWrite", "writes/s")
	cr, okCR := res.ratio("BenchmarkConcurrentProposals", "writes/s", "BenchmarkConcurrentBaselineWrite", "writes/s")
	out = append(out, row{"memory", "64 concurrent writers over HTTP, own person (16 facts) each, group commit; throughput",
		perSecond(cw, okCW), "64 concurrent whole-file durable writes of 16-fact schema-1 files: " + perSecond(bw, okBW), ratioText(cr, okCR), "≥ 3×", yesNo(okCR, cr >= 3)})
	fw, okFW := res.get("BenchmarkConcurrentFloor", "writes/s")
	fr, okFR := res.ratio("BenchmarkConcurrentProposals", "writes/s", "BenchmarkConcurrentFloor", "writes/s")
	out = append(out, row{"memory", "  the same, against the floor of any durable write over HTTP",
		perSecond(cw, okCW), "64 writers to a bare net/http handler that appends one record each, group-committed: " + perSecond(fw, okFW), ratioText(fr, okFR), "—", "—"})
	cp, okCP := res.get("BenchmarkConcurrentProposals", "p99-µs")
	bp, okBP := res.get("BenchmarkConcurrentBaselineWrite", "p99-µs")
	out = append(out, row{"memory", "  the same, p99 of a proposal's round trip",
		dur(cp*1e3, okCP), "p99 of the whole-file writes: " + dur(bp*1e3, okBP), ratioText(cp/bp, okCP && okBP && bp > 0), "< 20 ms", yesNo(okCP, cp < 20e3)})
	fp, okFP := res.get("BenchmarkConcurrentFloor", "p99-µs")
	out = append(out, row{"memory", "  the same, p99, against the floor's",
		dur(cp*1e3, okCP), "p99 of the bare handler's round trips: " + dur(fp*1e3, okFP), ratioText(cp/fp, okCP && okFP && fp > 0), "—", "—"})
	for _, q := range []struct{ unit, what string }{{"p999-µs", "p99.9"}, {"max-µs", "maximum"}} {
		c, okC := res.get("BenchmarkConcurrentProposals", q.unit)
		bq, okB := res.get("BenchmarkConcurrentBaselineWrite", q.unit)
		out = append(out, row{"memory", fmt.Sprintf("  the same, %s (a checkpoint's stall shows here)", q.what),
			dur(c*1e3, okC), q.what + " of the whole-file writes: " + dur(bq*1e3, okB), ratioText(c/bq, okC && okB && bq > 0), "—", "—"})
	}

	// Recall, median, timed to the answer's last byte, against reading and
	// decoding the person as one schema-1 file.
	for _, limit := range []int{20, api128} {
		p := compare(res, fmt.Sprintf("BenchmarkRecall128/limit=%d", limit), "BenchmarkRecall128BaselineDecode", "p50-µs")
		what, goal, max := "limit 20 as /person-memory recall asks", "≤ 0.51× (issue 16's today: 0.302 ms ÷ 0.595 ms)", 0.51
		if limit == api128 {
			what, goal, max = "limit 128, every fact sent back", "≤ 0.33×", 0.33
		}
		out = append(out, row{"memory", fmt.Sprintf("recall of a person holding 128 facts, HTTP, %s; median", what),
			p.value, "os.ReadFile + json.Unmarshal of that person's schema-1 file: " + p.base, ratioText(p.ratio, p.ok), goal, yesNo(p.ok, p.ratio <= max)})
	}
	const originalList = "BenchmarkOriginalList/store=plain/facts=128"
	if _, ran := res.get(originalList, "p50-µs"); ran {
		p := compare(res, fmt.Sprintf("BenchmarkRecall128/limit=%d", api128), originalList, "p50-µs")
		out = append(out, row{"memory", "  recall of all 128 facts, against the original store's list of the same person",
			p.value, "the original's listDiscordPerson, in process (re-run in this run): " + p.base,
			ratioText(p.ratio, p.ok), "≤ 0.33×", yesNo(p.ok, p.ratio <= 0.33)})
	}
	// Episodes (the existing benchmarks report means only).
	p := compare(res, "BenchmarkRecordFullStore", "BenchmarkRewriteLaneFiles", "ns/op")
	out = append(out, row{"episodes", "record one note into a full store (1152 notes), rewriting the 384-note lane file; mean",
		p.value, "bare durable rewrite of that lane file: " + p.base, ratioText(p.ratio, p.ok), "≈ 1×, fsync-bound (≤ 1.25×)", yesNo(p.ok, p.ratio <= 1.25)})
	v, okV := res.get("BenchmarkSearchFullStore", "ns/op")
	out = append(out, row{"episodes", "search the full store (1152 notes, 2 terms, limit 32); mean per search",
		dur(v, okV), "—", "—", "< 1 ms median", yesNo(okV, v < 1e6)})

	// Start-up to ready and RSS at two sizes, so the growth shows.
	for _, sz := range []struct {
		tag    string
		people int
	}{{"loaded_", c.rssPeople}, {"big_", c.rssBigPeople}} {
		if sz.people <= 0 {
			continue
		}
		prefix := strings.TrimPrefix(sz.tag, "loaded_") // rsscheck's -tag
		ready, okR := rss[sz.tag+"ready_ms"]
		mem, okM := rss[prefix+"rss_mib"]
		scan, okS := rss[prefix+"scan_ready_ms"]
		out = append(out, row{"start-up", fmt.Sprintf("clankie memory serve, %d people × %d facts, catalog present: exec to first /healthz 200", sz.people, c.rssFacts),
			fmt.Sprintf("%.1f ms", ready), fmt.Sprintf("first start of the same root (no catalog, every person log read): %.0f ms", scan),
			ratioText(ready/scan, okR && okS && scan > 0), "≤ 100 ms at 100,000", yesNo(okR, ready <= 100)})
		out = append(out, row{"start-up", fmt.Sprintf("  the same, VmRSS once ready (%d people)", sz.people),
			mib(mem, okM), "", "—", "< 32 MiB at 100,000", yesNo(okM, mem < 32)})
	}
	if r1, ok1 := rss["loaded_ready_ms"]; ok1 {
		if r2, ok2 := rss["big_ready_ms"]; ok2 && c.rssBigPeople > 0 {
			m1, m2 := rss["rss_mib"], rss["big_rss_mib"]
			b := rss["baseline_rss_mib"]
			out = append(out, row{"start-up", fmt.Sprintf("growth from %d to %d people (×%.0f)", c.rssPeople, c.rssBigPeople, float64(c.rssBigPeople)/float64(c.rssPeople)),
				fmt.Sprintf("ready ×%.2f; RSS above the empty root ×%.2f", r2/r1, (m2-b)/(m1-b)), fmt.Sprintf("empty root: %.1f MiB", b), "—", "—", "—"})
		}
	}

	// RSS, one measurement each.
	lr, okL := rss["rss_mib"]
	er, okE := rss["baseline_rss_mib"]
	peak := ""
	if p, ok := rss["loaded_peak_mib"]; ok {
		peak = fmt.Sprintf(" (peak %.1f MiB", p)
		if ms, ok := rss["loaded_ready_ms"]; ok {
			peak += fmt.Sprintf("; ready %.1f ms after start", ms)
		}
		peak += ")"
	}
	out = append(out, row{"rss", fmt.Sprintf("clankie memory serve, idle, %d people × %d facts; VmRSS once ready", c.rssPeople, c.rssFacts),
		mib(lr, okL) + peak, "same binary, empty root: " + mib(er, okE), ratioText(lr/er, okL && okE && er > 0), "< 64 MiB", yesNo(okL, lr < 64)})
	ur, okU := rss["up_rss_mib"]
	out = append(out, row{"rss", "clankie up, idle, memory service only (no Discord token), empty root",
		mib(ur, okU), "clankie memory serve, empty root: " + mib(er, okE), ratioText(ur/er, okU && okE && er > 0), "—", "—"})
	br, okB := res.get("BenchmarkIdleTextBridgeRSS", "rss-MiB")
	bm, okM := res.get("BenchmarkIdleTextBridgeRSS", "baseline-rss-MiB")
	out = append(out, row{"rss", "clankie bridge text, idle (connected to a fake Discord, commands synced)",
		mib(br, okB), "clankie memory serve, empty root: " + mib(bm, okM), ratioText(br/bm, okB && okM && bm > 0), "—", "—"})

	// Interactions: percentiles over one run of many.
	for _, q := range []string{"p50", "p99"} {
		p := compare(res, "BenchmarkInteractionToFirstCallback", "BenchmarkInteractionBaselineDM", q+"-µs")
		v, okV := res.get("BenchmarkInteractionToFirstCallback", q+"-µs")
		out = append(out, row{"bridges", fmt.Sprintf("interaction → first callback, /person-memory recall (8 facts), %d sequential; %s", c.bridgeN, q),
			p.value, "same command refused in a DM, no memory call: " + p.base, ratioText(p.ratio, p.ok), "well under 3 s (< 300 ms)", yesNo(okV, v*1e3 < 300e6)})
	}
	// Voice.
	chars, okC := res.get("BenchmarkVoiceJoinToBriefing", "briefing-chars")
	charText := "?"
	if okC {
		charText = fmt.Sprintf("%.0f", chars)
	}
	for _, q := range []string{"p50", "p99"} {
		v, okV := res.get("BenchmarkVoiceJoinToBriefing", q+"-µs")
		goal, met := "< 50 ms", yesNo(okV, v*1e3 < 50e6)
		if q == "p99" {
			goal, met = "—", "—"
		}
		out = append(out, row{"voice", fmt.Sprintf("/voice join → briefing at the realtime endpoint, 25 consented × 8 facts (%s chars), %d joins; %s", charText, c.voiceN, q),
			dur(v*1e3, okV), "—", "—", goal, met})
	}
	return out
}

// api128 is the per-person cap (api.MaxFactsPerPerson), spelled out so this
// program does not import the service's packages.
const api128 = 128

// printTable prints a Markdown table with aligned columns.
func printTable(w io.Writer, rs []row) {
	header := row{"area", "figure", "value", "baseline (same run)", "ratio", "goal", "met?"}
	all := append([]row{header}, rs...)
	cells := func(r row) []string { return []string{r.area, r.figure, r.value, r.baseline, r.ratio, r.goal, r.met} }
	width := make([]int, 7)
	for _, r := range all {
		for i, c := range cells(r) {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cs []string) {
		var sb strings.Builder
		sb.WriteString("|")
		for i, c := range cs {
			sb.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		fmt.Fprintln(w, sb.String())
	}
	line(cells(header))
	sep := make([]string, 7)
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range rs {
		line(cells(r))
	}
}
