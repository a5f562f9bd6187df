package main

import (
	"strings"
	"testing"
)

// stream is a run as go test -json writes it: a pass, a failure, two skips
// for a missing dependency, one for -short, and a TestMain's skip line.
const stream = `{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK"}
{"Action":"run","Package":"p/a","Test":"TestBroken"}
{"Action":"output","Package":"p/a","Test":"TestBroken","Output":"    a_test.go:9: the reply said \"no\"\n"}
{"Action":"output","Package":"p/a","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.01s)\n"}
{"Action":"fail","Package":"p/a","Test":"TestBroken"}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.02s\n"}
{"Action":"fail","Package":"p/a"}
{"Action":"run","Package":"p/b","Test":"TestInterop"}
{"Action":"output","Package":"p/b","Test":"TestInterop","Output":"=== RUN   TestInterop\n"}
{"Action":"output","Package":"p/b","Test":"TestInterop","Output":"    nodetest.go:35: missing dependency: Node peers (npm ci --prefix internal/nodetest)\n"}
{"Action":"output","Package":"p/b","Test":"TestInterop","Output":"--- SKIP: TestInterop (0.00s)\n"}
{"Action":"skip","Package":"p/b","Test":"TestInterop"}
{"Action":"run","Package":"p/b","Test":"TestInterop2"}
{"Action":"output","Package":"p/b","Test":"TestInterop2","Output":"--- SKIP: TestInterop2 (0.00s)\n"}
{"Action":"output","Package":"p/b","Test":"TestInterop2","Output":"    nodetest.go:35: missing dependency: Node peers (npm ci --prefix internal/nodetest)\n"}
{"Action":"skip","Package":"p/b","Test":"TestInterop2"}
{"Action":"run","Package":"p/b","Test":"TestSlow"}
{"Action":"output","Package":"p/b","Test":"TestSlow","Output":"--- SKIP: TestSlow (0.00s)\n"}
{"Action":"output","Package":"p/b","Test":"TestSlow","Output":"    slow_test.go:3: skipped with -short\n"}
{"Action":"skip","Package":"p/b","Test":"TestSlow"}
{"Action":"output","Package":"p/b","Output":"SKIP (missing dependency: CLANKIE_TEST_POSTGRES): the memory suite's PostgreSQL run\n"}
{"Action":"output","Package":"p/b","Output":"ok  \tp/b\t0.03s\n"}
{"Action":"pass","Package":"p/b"}
`

func TestSummaryNamesWhatDidNotRun(t *testing.T) {
	tests := []struct {
		name     string
		ci       bool
		want     []string
		problems int
	}{
		{"developer", false, []string{
			"the reply said \"no\"", "FAIL\tp/a", "ok  \tp/b",
			"2  missing dependency: Node peers (npm ci --prefix internal/nodetest)",
			"p/b.TestInterop, p/b.TestInterop2",
			"1  skipped with -short",
			"1  missing dependency: CLANKIE_TEST_POSTGRES",
			"p/b: the memory suite's PostgreSQL run",
			"\n1 passed, 1 failed, 3 skipped\n",
		}, 0},
		{"CI", true, []string{"FAIL: 2 skipped under CI=true (missing dependency: Node peers", "FAIL: 1 skipped under CI=true (missing dependency: CLANKIE_TEST_POSTGRES)"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSummary()
			var out strings.Builder
			if err := s.read(strings.NewReader(stream), &out); err != nil {
				t.Fatal(err)
			}
			problems := s.report(&out, tt.ci)
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if len(problems) != tt.problems {
				t.Errorf("problems = %q, want %d", problems, tt.problems)
			}
			if strings.Contains(out.String(), "=== RUN   TestOK") {
				t.Errorf("a passing test's output was printed:\n%s", out.String())
			}
		})
	}
}
