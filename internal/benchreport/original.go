package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Issue 16 measures the person store against the original TypeScript
// system's: createFileMemory in Volpestyle/clankie, called in process. That
// code is not ours to commit, so with -original benchreport takes it from a
// git checkout (a work tree or a bare mirror) holding originalCommit, puts
// its two files beside internal/originalbench's harness in a temporary
// directory, installs the harness's pinned Node and zod there (npm ci), and
// runs it in every round of the memory benchmarks: the original's figures
// are then baselines from the same run, like every other.

// originalCommit is the commit issue 16 measured.
const originalCommit = "91309b7ab94137be338d31ea5aa0efd57724f4ff"

// originalIterations is how many calls each of the original's figures is
// the median of.
const originalIterations = 2000

// originalSources maps each file the harness imports to its path in the
// original's repository.
var originalSources = []struct{ name, path string }{
	{"memory.ts", "apps/clankie/src/memory.ts"},
	{"protocol.ts", "packages/protocol/src/index.ts"},
}

// originalEdits are the only changes made to the original's store: its
// protocol package is imported as a sibling file (Node strips types only
// outside node_modules), and memory-fsync.ts, the "original + fsync"
// variant, syncs each person file it writes.
var (
	importEdit = edit{`from "@clankie/protocol";`, `from "./protocol.ts";`}
	fsyncEdits = []edit{
		{`import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";`,
			`import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync, writeSync } from "node:fs";`},
		{`writeFileSync(personPath(identity), JSON.stringify(facts, null, 2), { mode: 0o600 });`,
			`{ const fd = openSync(personPath(identity), "w", 0o600); writeSync(fd, JSON.stringify(facts, null, 2)); fsyncSync(fd); closeSync(fd); }`},
	}
)

type edit struct{ old, new string }

// apply returns src with e made, or an error unless old occurs exactly once
// (the original is not the file this was written against).
func (e edit) apply(src []byte) ([]byte, error) {
	if n := bytes.Count(src, []byte(e.old)); n != 1 {
		return nil, fmt.Errorf("expected %q once in the original's store, found it %d times", e.old, n)
	}
	return bytes.Replace(src, []byte(e.old), []byte(e.new), 1), nil
}

// original is the original's store set up to run.
type original struct {
	dir  string // the temporary directory: harness, sources, node_modules
	node string
}

// setupOriginal prepares the original from the git repository at src.
func setupOriginal(ctx context.Context, moduleRoot, src string, verbose bool) (_ *original, err error) {
	dir, err := os.MkdirTemp("", "clankie-originalbench-")
	if err != nil {
		return nil, err
	}
	o := &original{dir: dir, node: filepath.Join(dir, "node_modules", ".bin", "node")}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	for _, f := range []string{"bench.ts", "package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(moduleRoot, "internal", "originalbench", f))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	files := map[string][]byte{}
	for _, s := range originalSources {
		out, err := exec.CommandContext(ctx, "git", "-C", src, "show", originalCommit+":"+s.path).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
			}
			return nil, fmt.Errorf("read %s at %.7s from %s (a checkout of Volpestyle/clankie): %w", s.path, originalCommit, src, err)
		}
		files[s.name] = out
	}
	plain, err := importEdit.apply(files["memory.ts"])
	if err != nil {
		return nil, err
	}
	synced := plain
	for _, e := range fsyncEdits {
		if synced, err = e.apply(synced); err != nil {
			return nil, err
		}
	}
	files["memory.ts"], files["memory-fsync.ts"] = plain, synced
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--prefix", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm ci for the original's harness: %w\n%s", err, tail(string(out), 2000))
	} else if verbose {
		os.Stderr.Write(out)
	}
	return o, nil
}

// run times one variant ("plain" or "fsync") and returns its benchmark
// lines.
func (o *original) run(ctx context.Context, variant string) (string, error) {
	cmd := exec.CommandContext(ctx, o.node, "bench.ts", variant, fmt.Sprint(originalIterations))
	cmd.Dir = o.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("the original's harness (%s): %w", variant, err)
	}
	return string(out), nil
}

// originalNode returns the Node version the harness printed.
func originalNode(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "node "); ok {
			return v
		}
	}
	return ""
}

func (o *original) close() { os.RemoveAll(o.dir) }
