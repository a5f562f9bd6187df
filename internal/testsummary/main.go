// Command testsummary reads `go test -json` on standard input and writes
// what a person needs from a run: each package's ok/FAIL line, the whole
// output of every failed test, and at the end the tests that did not run,
// grouped by the reason they gave, then one closing line
// "N passed, N failed, N skipped".
//
// A test that skips for want of something the machine lacks says so with a
// reason that starts "missing dependency:" (Node peers, libfaketime,
// strace, PostgreSQL, the providers' schemas); a package's TestMain says it
// with a line "SKIP (missing dependency: …)". Under CI=true such a skip is a
// failure: CI installs everything, so a skip there means a step is broken
// and the proof it should give is missing.
//
// scripts/test runs `go test -race -json ./...` through it; .ci/run runs
// scripts/test.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of test2json's record this reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// modulePrefix is cut from package paths in the summary, which is read by
// people.
const modulePrefix = "github.com/clankie/clankie/"

// missingDependency starts the reason of a skip the machine could have
// avoided by installing something.
const missingDependency = "missing dependency:"

// summary accumulates a run.
type summary struct {
	passed, failed, skipped int
	// output holds each running test's lines until it ends.
	output map[string][]string
	// skips maps a reason to the tests that gave it, in order.
	skips   map[string][]string
	reasons []string
	// packageFailed counts packages that failed outside any test (a build
	// error, a TestMain that exited non-zero).
	packageFailed int
}

func newSummary() *summary {
	return &summary{output: map[string][]string{}, skips: map[string][]string{}}
}

func (s *summary) skip(reason, what string) {
	what = strings.TrimPrefix(what, modulePrefix)
	if _, ok := s.skips[reason]; !ok {
		s.reasons = append(s.reasons, reason)
	}
	s.skips[reason] = append(s.skips[reason], what)
}

// read consumes the events, writing package lines and failures to w as
// they come. A line that is not JSON (go vet or build output) is copied.
func (s *summary) read(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		s.handle(ev, w)
	}
	return sc.Err()
}

func (s *summary) handle(ev event, w io.Writer) {
	key := ev.Package + " " + ev.Test
	switch {
	case ev.Test == "" && ev.Action == "output":
		out := ev.Output
		if strings.HasPrefix(out, "ok ") || strings.HasPrefix(out, "FAIL") || strings.HasPrefix(out, "---") ||
			strings.HasPrefix(out, "panic:") || strings.HasPrefix(out, "goleak") || strings.Contains(out, "[build failed]") ||
			strings.HasPrefix(out, "=== ") || strings.HasPrefix(out, "SKIP (") || strings.HasPrefix(out, "?") {
			fmt.Fprint(w, out)
		}
		if rest, ok := strings.CutPrefix(out, "SKIP ("); ok {
			reason, what, _ := strings.Cut(rest, "): ")
			s.skip(reason, ev.Package+": "+strings.TrimSpace(what))
		}
	case ev.Test == "" && ev.Action == "fail":
		s.packageFailed++
	case ev.Test == "":
	case ev.Action == "output":
		s.output[key] = append(s.output[key], ev.Output)
	case ev.Action == "pass":
		s.passed++
		delete(s.output, key)
	case ev.Action == "fail":
		s.failed++
		for _, l := range s.output[key] {
			fmt.Fprint(w, l)
		}
		delete(s.output, key)
	case ev.Action == "skip":
		s.skipped++
		s.skip(skipReason(s.output[key]), ev.Package+"."+ev.Test)
		delete(s.output, key)
	}
}

// skipReason finds the message a test skipped with: its last logged line
// (go test -v streams t.Skip's message before the "--- SKIP" line; older
// output put it after), without the file:line prefix.
func skipReason(lines []string) string {
	reason := ""
	for _, l := range lines {
		msg := strings.TrimSpace(l)
		if msg == "" || strings.HasPrefix(msg, "=== ") || strings.HasPrefix(msg, "--- ") {
			continue
		}
		if file, after, ok := strings.Cut(msg, ": "); ok && strings.Contains(file, ".go:") {
			msg = after
		}
		reason = msg
	}
	if reason == "" {
		return "(no reason given)"
	}
	return reason
}

// report writes the skipped groups and the closing line, and returns the
// problems that make the run fail under ci.
func (s *summary) report(w io.Writer, ci bool) []string {
	var problems []string
	if len(s.reasons) > 0 {
		fmt.Fprintln(w, "\nNot run, by reason:")
		reasons := slices.Clone(s.reasons)
		slices.SortStableFunc(reasons, func(a, b string) int { return len(s.skips[b]) - len(s.skips[a]) })
		for _, r := range reasons {
			tests := s.skips[r]
			shown := tests
			if len(shown) > 4 {
				shown = shown[:4]
			}
			more := ""
			if len(tests) > len(shown) {
				more = fmt.Sprintf(" and %d more", len(tests)-len(shown))
			}
			fmt.Fprintf(w, "  %3d  %s\n       %s%s\n", len(tests), r, strings.Join(shown, ", "), more)
			if ci && strings.HasPrefix(r, missingDependency) {
				problems = append(problems, fmt.Sprintf("%d skipped under CI=true (%s)", len(tests), r))
			}
		}
	}
	for _, p := range problems {
		fmt.Fprintf(w, "FAIL: %s\n", p)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
	return problems
}

func main() {
	s := newSummary()
	if err := s.read(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: reading go test -json: %v\n", err)
		os.Exit(2)
	}
	problems := s.report(os.Stdout, os.Getenv("CI") == "true")
	if s.failed > 0 || s.packageFailed > 0 || len(problems) > 0 {
		os.Exit(1)
	}
}
