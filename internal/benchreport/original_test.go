package main

import (
	"strings"
	"testing"
)

// TestEditAppliesExactlyOnce holds -original to changing the original's
// store only where it was written against: an edit whose text is missing
// or repeated stops the run instead of benchmarking something else.
func TestEditAppliesExactlyOnce(t *testing.T) {
	e := edit{`from "@clankie/protocol";`, `from "./protocol.ts";`}
	for _, tc := range []struct {
		name, src, want string
		ok              bool
	}{
		{"once", `import { z } from "@clankie/protocol";` + "\nrest", `import { z } from "./protocol.ts";` + "\nrest", true},
		{"missing", `import { z } from "zod";`, "", false},
		{"twice", `from "@clankie/protocol"; from "@clankie/protocol";`, "", false},
	} {
		got, err := e.apply([]byte(tc.src))
		if tc.ok && (err != nil || string(got) != tc.want) {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "@clankie/protocol")) {
			t.Errorf("%s: got %q, %v; want an error naming the text", tc.name, got, err)
		}
	}
}

// TestOriginalBaselines checks where each proposal row's baseline comes
// from: the re-run's per-round ratios when -original ran, else issue 16's
// fixed figure, and no "+ fsync" row without a re-run.
func TestOriginalBaselines(t *testing.T) {
	const ours = "BenchmarkProposalRoundTrip/facts=16"
	res := results{}
	for round, v := range []float64{300, 260} {
		res.add(round, benchLine{name: ours, metrics: map[string]float64{"p50-µs": v}})
	}
	fixed := originalPropose(res, 16, "plain")
	if fixed.rerun || fixed.micros != 354 {
		t.Fatalf("without a re-run the baseline is %+v, want the fixed 354 µs", fixed)
	}
	if r, ok := fixed.ratioOf(res, ours, "p50-µs"); !ok || r != 280.0/354 {
		t.Fatalf("ratio against the fixed figure: %v %v, want the median over 354", r, ok)
	}
	if f := originalPropose(res, 16, "fsync"); f.ok {
		t.Fatalf("an fsync baseline without a re-run: %+v", f)
	}
	for round, v := range []float64{200, 260} {
		res.add(round, benchLine{name: "BenchmarkOriginalPropose/store=plain/facts=16", metrics: map[string]float64{"p50-µs": v}})
	}
	rerun := originalPropose(res, 16, "plain")
	if !rerun.rerun || rerun.micros != 230 {
		t.Fatalf("with a re-run the baseline is %+v, want its median 230 µs", rerun)
	}
	// per round: 300/200 = 1.5 and 260/260 = 1; their median is 1.25
	if r, ok := rerun.ratioOf(res, ours, "p50-µs"); !ok || r != 1.25 {
		t.Fatalf("ratio against the re-run: %v %v, want the median of per-round ratios, 1.25", r, ok)
	}
	if !strings.Contains(rerun.label(), "re-run in this run") || !strings.Contains(fixed.label(), "-original") {
		t.Fatalf("labels: %q / %q", rerun.label(), fixed.label())
	}
}
