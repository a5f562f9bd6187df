package memory

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the whole suite against the file store, then once more, in
// a child test binary, against PostgreSQL (CLANKIE_TEST_POSTGRES names the
// server; .ci/run starts a throwaway one). Locally an unset variable skips
// the PostgreSQL run with a line saying so; under CI=true it fails. Either
// run fails when any goroutine is still running after every test and its
// cleanups have finished.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	if os.Getenv(testStoreEnv) != "" || fuzzing() {
		os.Exit(code) // the child (PostgreSQL done), or a fuzzing run: its targets fuzz the files
	}
	if os.Getenv(testPostgresEnv) == "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "FAIL: %s is unset under CI=true: the memory suite must also run against PostgreSQL\n", testPostgresEnv)
			os.Exit(1)
		}
		fmt.Printf("SKIP (missing dependency: %s, a PostgreSQL server; scripts/test starts one): the memory suite's PostgreSQL run\n", testPostgresEnv)
		os.Exit(code)
	}
	fmt.Println("=== the memory suite again, against PostgreSQL")
	// Benchmarks run once, in this process: they pick their stores.
	// Profiles are the parent's: the child writing the same files would
	// replace a benchmark's profile with its own.
	var args []string
	for _, a := range os.Args[1:] {
		if !slices.ContainsFunc([]string{"-test.cpuprofile", "-test.memprofile", "-test.blockprofile", "-test.mutexprofile", "-test.trace"},
			func(p string) bool { return strings.HasPrefix(a, p) }) {
			args = append(args, a)
		}
	}
	cmd := exec.Command(os.Args[0], append(args, "-test.bench=^$")...)
	cmd.Env = append(os.Environ(), testStoreEnv+"=postgres")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// fuzzing reports whether this binary is a fuzzing coordinator or worker
// (go test -fuzz), which runs its targets once, on the file store.
func fuzzing() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.fuzzworker" || strings.HasPrefix(a, "-test.fuzz=") && a != "-test.fuzz=" {
			return true
		}
	}
	return false
}
