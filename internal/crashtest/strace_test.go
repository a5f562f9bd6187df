package crashtest

import (
	"bufio"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// sysEvent is one system call in an `strace -f -tt -y` trace. A call that
// another thread interrupted is split over an "<unfinished ...>" line and a
// "<... resumed>" line: entry is the line where it started, exit the line
// where it returned (equal for a call printed whole). Lines are in the order
// strace saw the events, so "a returned before b started" is a.exit < b.entry.
type sysEvent struct {
	pid   string
	name  string
	args  string
	ret   string
	entry int
	exit  int
	text  string // the entry line (and the resumed line), for messages
}

var (
	straceLine = regexp.MustCompile(`^(\d+)\s+(?:\d\d:\d\d:\d\d(?:\.\d+)?\s+)?(.*)$`)
	resumed    = regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	callStart  = regexp.MustCompile(`^([a-z0-9_]+)\((.*)$`)
	fdArg      = regexp.MustCompile(`^(-?\d+|AT_FDCWD)<([^>]*)>`)
	quoted     = `"((?:[^"\\]|\\.)*)"`
	dirfdName  = regexp.MustCompile(`^(-?\d+|AT_FDCWD)<([^>]*)>, ` + quoted + `, (-?\d+|AT_FDCWD)<([^>]*)>, ` + quoted)
	plainNames = regexp.MustCompile(`^` + quoted + `, ` + quoted)
)

// parseStrace reads a trace written with -f (pid first) and optionally -tt.
// Signals and exits are skipped.
func parseStrace(text string) []sysEvent {
	var out []sysEvent
	pending := map[string]int{} // pid → index in out of its unfinished call
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := straceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pid, body := m[1], m[2]
		if strings.HasPrefix(body, "---") || strings.HasPrefix(body, "+++") {
			continue
		}
		if r := resumed.FindStringSubmatch(body); r != nil {
			i, ok := pending[pid]
			if !ok || out[i].name != r[1] {
				continue
			}
			delete(pending, pid)
			rest, ret := splitReturn(r[2])
			out[i].args += rest
			out[i].ret = ret
			out[i].exit = n
			out[i].text += "\n" + line
			continue
		}
		c := callStart.FindStringSubmatch(body)
		if c == nil {
			continue
		}
		ev := sysEvent{pid: pid, name: c[1], entry: n, exit: n, text: line}
		if args, ok := strings.CutSuffix(c[2], " <unfinished ...>"); ok {
			ev.args = args
			pending[pid] = len(out)
		} else {
			ev.args, ev.ret = splitReturn(c[2])
		}
		out = append(out, ev)
	}
	return out
}

// splitReturn cuts "args) = ret" at its last ") = ".
func splitReturn(s string) (args, ret string) {
	i := strings.LastIndex(s, ") = ")
	if i < 0 {
		return strings.TrimSuffix(s, ")"), ""
	}
	return s[:i], strings.TrimSpace(s[i+len(") = "):])
}

// fdPath returns the path strace -y printed for the call's first argument.
func (e sysEvent) fdPath() string {
	if m := fdArg.FindStringSubmatch(e.args); m != nil {
		return m[2]
	}
	return ""
}

// renamePaths returns the full old and new paths of a rename, renameat or
// renameat2 (names relative to a dirfd are joined to the dirfd's path).
func (e sysEvent) renamePaths() (from, to string, ok bool) {
	if m := dirfdName.FindStringSubmatch(e.args); m != nil {
		return joinAt(m[2], m[3]), joinAt(m[5], m[6]), true
	}
	if m := plainNames.FindStringSubmatch(e.args); m != nil && e.name == "rename" {
		return m[1], m[2], true
	}
	return "", "", false
}

func joinAt(dir, name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return path.Join(dir, name)
}

func (e sysEvent) ok() bool { return e.ret == "0" }

func (e sysEvent) isSocketWrite() bool {
	switch e.name {
	case "write", "writev", "sendto", "sendmsg":
		return strings.HasPrefix(e.fdPath(), "socket:") || strings.HasPrefix(e.fdPath(), "TCP")
	}
	return false
}

func (e sysEvent) isFileWrite() bool {
	switch e.name {
	case "write", "pwrite64", "writev", "pwritev", "pwritev2":
		return strings.HasPrefix(e.fdPath(), "/")
	}
	return false
}

func (e sysEvent) isRename() bool {
	return e.name == "rename" || e.name == "renameat" || e.name == "renameat2"
}

func (e sysEvent) isSync() bool { return e.name == "fsync" || e.name == "fdatasync" }

// TestParseStrace pins the parser on lines of the shapes strace 6 prints,
// an interrupted call included.
func TestParseStrace(t *testing.T) {
	trace := `6060  10:30:53.924148 openat(12</d/p>, ".tmp-01", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 13</d/p/.tmp-01>
6060  10:30:53.926809 write(13</d/p/.tmp-01>, "{\"body\":\"a) = b\"}", 17) = 17
6061  10:30:53.926900 fsync(13</d/p/.tmp-01> <unfinished ...>
6060  10:30:53.926901 --- SIGURG {si_signo=SIGURG} ---
6062  10:30:53.926950 write(2</log>, "x", 1) = 1
6061  10:30:53.926957 <... fsync resumed>) = 0
6060  10:30:53.928313 renameat(12</d/p>, ".tmp-01", 13</d/p>, "f.json") = 0
6060  10:30:53.928314 renameat2(AT_FDCWD</d>, "p/.tmp-02", AT_FDCWD</d>, "/abs/g.json", RENAME_NOREPLACE) = 0
6060  10:30:53.928916 fsync(12</d/p>) = 0
6127  10:30:53.929911 write(11<socket:[95813]>, "HTTP/1.1 201 Created\r\n", 22) = 22
6127  +++ exited with 0 +++
`
	ev := parseStrace(trace)
	if len(ev) != 8 {
		t.Fatalf("parsed %d calls: %+v", len(ev), ev)
	}
	if ev[1].name != "write" || ev[1].fdPath() != "/d/p/.tmp-01" || ev[1].ret != "17" || !ev[1].isFileWrite() {
		t.Errorf("write: %+v", ev[1])
	}
	if ev[2].name != "fsync" || ev[2].entry != 3 || ev[2].exit != 6 || !ev[2].ok() || ev[2].fdPath() != "/d/p/.tmp-01" {
		t.Errorf("interrupted fsync: %+v", ev[2])
	}
	if from, to, ok := ev[4].renamePaths(); !ok || from != "/d/p/.tmp-01" || to != "/d/p/f.json" {
		t.Errorf("renameat: %q %q %v", from, to, ok)
	}
	if from, to, ok := ev[5].renamePaths(); !ok || from != "/d/p/.tmp-02" || to != "/abs/g.json" {
		t.Errorf("renameat2: %q %q %v", from, to, ok)
	}
	if !ev[7].isSocketWrite() || !strings.Contains(ev[7].args, "HTTP/1.1 201") {
		t.Errorf("socket write: %+v", ev[7])
	}
}

// TestCheckOrderCatchesEachViolation feeds the order check traces with one
// step missing or out of place, so a passing ordering test means something.
func TestCheckOrderCatchesEachViolation(t *testing.T) {
	const (
		tw   = "1 write(7</r/d/.tmp-1>, \"{mark}\", 6) = 6\n"
		fs   = "1 fsync(7</r/d/.tmp-1>) = 0\n"
		rn   = "1 renameat(5</r/d>, \".tmp-1\", 5</r/d>, \"f.json\") = 0\n"
		ds   = "1 fsync(5</r/d>) = 0\n"
		ans  = "2 write(9<socket:[1]>, \"HTTP/1.1 201 Created\\r\\n\\r\\n{mark}\", 30) = 30\n"
		dsUn = "1 fsync(5</r/d> <unfinished ...>\n"
		dsRe = "1 <... fsync resumed>) = 0\n"
	)
	w := orderedWrite{what: "w", marker: "mark", final: "/r/d/f.json"}
	if _, problem := checkOrder(parseStrace(tw+fs+rn+ds+ans), w); problem != "" {
		t.Fatalf("the right order was refused: %s", problem)
	}
	for name, trace := range map[string]string{
		"no temp write":              fs + rn + ds + ans,
		"no temp fsync":              tw + rn + ds + ans,
		"rename before fsync":        tw + rn + fs + ds + ans,
		"no rename":                  tw + fs + ds + ans,
		"no directory fsync":         tw + fs + rn + ans,
		"directory fsync before":     tw + fs + ds + rn + ans,
		"answer before dir fsync":    tw + fs + rn + ans + ds,
		"answer while fsync pending": tw + fs + rn + dsUn + ans + dsRe,
		"no answer":                  tw + fs + rn + ds,
		"rename onto another file":   tw + fs + strings.Replace(rn, "f.json", "g.json", 1) + ds + ans,
		"target written in place":    tw + fs + rn + ds + "1 write(8</r/d/f.json>, \"x\", 1) = 1\n" + ans,
	} {
		if _, problem := checkOrder(parseStrace(trace), w); problem == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCheckJournalOrderCatchesEachViolation is the same for a journaled
// write: journal write, journal sync, person log append, answer.
func TestCheckJournalOrderCatchesEachViolation(t *testing.T) {
	const (
		jw   = "1 pwrite64(7</r/d/journal>, \"{mark}\\n\", 7, 0) = 7\n"
		js   = "1 fdatasync(7</r/d/journal>) = 0\n"
		jsUn = "1 fdatasync(7</r/d/journal> <unfinished ...>\n"
		jsRe = "1 <... fdatasync resumed>) = 0\n"
		lw   = "3 pwrite64(8</r/d/p-1_2.jsonl>, \"{mark}\\n\", 7, 90) = 7\n"
		ans  = "2 write(9<socket:[1]>, \"HTTP/1.1 201 Created\\r\\n\\r\\n{mark}\", 30) = 30\n"
	)
	w := orderedWrite{what: "w", marker: "mark", final: "/r/d/p-1_2.jsonl", journal: "/r/d/journal"}
	if _, problem := checkOrder(parseStrace(jw+js+lw+ans), w); problem != "" {
		t.Fatalf("the right order was refused: %s", problem)
	}
	for name, trace := range map[string]string{
		"no journal write":          js + lw + ans,
		"no journal sync":           jw + lw + ans,
		"sync before the write":     js + jw + lw + ans,
		"answer before the sync":    jw + ans + js + lw,
		"answer while sync pending": jw + jsUn + lw + ans + jsRe,
		"log written before sync":   jw + lw + js + ans,
		"no log write":              jw + js + ans,
		"no answer":                 jw + js + lw,
	} {
		if _, problem := checkOrder(parseStrace(trace), w); problem == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}

// straceUsable returns strace's path, or skips the test saying why it cannot
// run here.
func straceUsable(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("missing dependency: strace (scripts/test-deps, or apt-get install strace): the syscall-level checks need it")
	}
	if out, err := exec.Command(p, "-f", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace not permitted?): %v: %s", err, out)
	}
	return p
}
