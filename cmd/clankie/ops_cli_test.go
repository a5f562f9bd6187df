package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory"
	"github.com/clankie/clankie/memory/personfiles"
)

// TestEpisodesJSONIsRecords (issue 14, item 8): `memory episodes --json`
// prints an array of records with id, lane, room, date, marks and summary,
// not the rendered card inside a string; searching too; none is [].
func TestEpisodesJSONIsRecords(t *testing.T) {
	f := startMemory(t)
	if out := f.mustRun(t, "episodes", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("episodes --json with none: %q, want []", out)
	}
	lamp := f.record(t, "#lighthouse", "fixed the lamp during the storm")
	song := f.record(t, "#tavern", "sang a sea shanty badly")
	f.mustRun(t, "episode", "keep", lamp.EpisodeID)

	out := f.mustRun(t, "episodes", "--json")
	if strings.Contains(out, `"card"`) {
		t.Fatalf("episodes --json still prints the card:\n%s", out)
	}
	var raw []map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw) != 2 {
		t.Fatalf("episodes --json is not an array of 2 records (%v):\n%s", err, out)
	}
	// One record shape: what `memory episode … --json` prints for one.
	for _, k := range []string{"episodeId", "lane", "room", "occurredAt", "retained", "visibility", "summary"} {
		if _, ok := raw[1][k]; !ok { // raw[1] is the kept one: retained is left out when false
			t.Errorf("a record lacks %q: %v", k, raw[1])
		}
	}
	recs := decodeJSON[[]api.Episode](t, out)
	if recs[0].EpisodeID != song.EpisodeID || recs[1].EpisodeID != lamp.EpisodeID {
		t.Fatalf("records are not newest first: %+v", recs)
	}
	if r := recs[1]; r.Lane != api.LaneDiscordPresence || r.Room != "#lighthouse" || r.Summary != lamp.Summary ||
		!r.Retained || !r.OccurredAt.Equal(lamp.OccurredAt) {
		t.Errorf("kept record: %+v", r)
	}
	if recs[0].Retained || recs[0].CorrectedAt != nil {
		t.Errorf("unmarked record: %+v", recs[0])
	}
	kept := decodeJSON[api.Episode](t, f.mustRun(t, "episode", "keep", lamp.EpisodeID, "--json"))
	var keptRaw, listedRaw map[string]any
	_ = json.Unmarshal([]byte(f.mustRun(t, "episode", "keep", lamp.EpisodeID, "--json")), &keptRaw)
	listedRaw = raw[1]
	for k := range keptRaw {
		if _, ok := listedRaw[k]; !ok && k != "correctedAt" && k != "schemaVersion" {
			t.Errorf("episode keep --json has %q, which episodes --json lacks", k)
		}
	}
	if kept.EpisodeID != recs[1].EpisodeID {
		t.Errorf("keep --json: %+v", kept)
	}
	found := decodeJSON[[]api.Episode](t, f.mustRun(t, "episodes", "search", "shanty", "--json"))
	if len(found) != 1 || found[0].EpisodeID != song.EpisodeID {
		t.Errorf("episodes search --json: %+v", found)
	}
}

// TestStatusCountsCorruptFilesAndCLIListsThem (issue 14, item 9): a person
// file that cannot be parsed is set aside at start; `memory status` counts
// it and warns, `memory corrupt` lists it (and --json), and a healthy root
// says 0 and "No person file has been set aside."
func TestStatusCountsCorruptFilesAndCLIListsThem(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, personfiles.Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	name := personfiles.FileName(api.Subject{GuildID: "123456789012345678", UserID: "234567890123456789"})
	if err := os.WriteFile(filepath.Join(dir, personfiles.Dir, name), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := memory.Start(config.Memory{Addr: "127.0.0.1:0", MemoryRoot: config.MemoryRoot{Dir: dir}, Log: config.Log{Level: "info", Format: "json"}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	cleanEnv(t, "http://"+srv.Addr, dir)

	code, out, errOut := runChecked(t, nil, "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	mustMatch(t, "status", out, `Corrupt person files\s+1\s`, `Warning: 1 person file could not be read and was set aside`)
	if c := decodeJSON[api.Catalog](t, mustOut(t, "status", "--json")); c.CorruptPersonFiles != 1 {
		t.Errorf("status --json corruptPersonFiles = %d", c.CorruptPersonFiles)
	}
	out = mustOut(t, "corrupt")
	mustMatch(t, "corrupt", out, `SET ASIDE\s+BYTES\s+FILE`, `\s9\s+`+regexp.QuoteMeta(personfiles.Dir+"/"+name+".corrupt-"))
	list := decodeJSON[api.CorruptFiles](t, mustOut(t, "corrupt", "--json"))
	if len(list.Files) != 1 || list.Files[0].Bytes != 9 || time.Since(list.Files[0].SetAsideAt) > time.Minute {
		t.Errorf("corrupt --json: %+v", list)
	}

	f := startMemory(t)
	mustMatch(t, "healthy status", f.mustRun(t, "status"), `Corrupt person files\s+0\s`, `Store\s+files\s`)
	mustMatch(t, "healthy corrupt", f.mustRun(t, "corrupt"), `^No person file has been set aside\.\n$`)
}

func mustOut(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runChecked(t, nil, args...)
	if code != 0 {
		t.Fatalf("memory %v: exit %d %s", args, code, errOut)
	}
	return out
}

// TestEnvShowsWhatIsSetNeverValues (issue 14, item 9): `clankie env` says
// which variables are set (yes, empty, no) and never prints a value.
func TestEnvShowsWhatIsSetNeverValues(t *testing.T) {
	const secret = "s3cret-operator-token-0123456789"
	t.Setenv("CLANKIE_OPERATOR_TOKEN", secret)
	t.Setenv("DISCORD_GUILD_IDS", "987654321098765432")
	t.Setenv("CLANKIE_REALTIME_MODEL", "")
	t.Setenv("CLANKIE_METRICS_ADDR", "") // restored after the test…
	os.Unsetenv("CLANKIE_METRICS_ADDR")  // …and unset during it
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"env"}, &out, &errb); code != 0 {
		t.Fatalf("env: %d %s", code, errb.String())
	}
	if strings.Contains(out.String(), secret) || strings.Contains(out.String(), "987654321098765432") {
		t.Fatalf("clankie env printed a value:\n%s", out.String())
	}
	for name, want := range map[string]string{"CLANKIE_OPERATOR_TOKEN": "yes", "DISCORD_GUILD_IDS": "yes", "CLANKIE_REALTIME_MODEL": "empty", "CLANKIE_METRICS_ADDR": "no"} {
		if !regexp.MustCompile(`(?m)^` + name + `\s+` + want + `\s`).MatchString(out.String()) {
			t.Errorf("clankie env does not say %s is set=%s:\n%s", name, want, out.String())
		}
	}
	if !strings.HasPrefix(out.String(), "VARIABLE") || !strings.Contains(strings.SplitN(out.String(), "\n", 2)[0], "SET") {
		t.Errorf("clankie env has no SET column:\n%s", out.String())
	}
}

// TestReadmeCommandsRunAfterInstall (issue 14, item 1): the README says
// how to put clankie on the PATH (go install, or go build -o), never runs
// it with `go run`, and every `clankie …` command it shows is one the
// binary knows (its help exits 0).
func TestReadmeCommandsRunAfterInstall(t *testing.T) {
	bin := buildBinary(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, w := range []string{"go install ./cmd/clankie", "go build -o", `export PATH="$PATH:$(go env GOPATH)/bin"`} {
		if !strings.Contains(readme, w) {
			t.Errorf("README does not say %q", w)
		}
	}
	if strings.Contains(readme, "go run ./cmd/clankie") {
		t.Errorf("README still runs clankie with go run")
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```")
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	env := newcomerEnv(t.TempDir())
	seen := 0
	for _, m := range block.FindAllStringSubmatch(readme, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			line = strings.TrimSpace(line)
			line = strings.TrimPrefix(line, "docker exec clankie ")
			fields := strings.Fields(line)
			for len(fields) > 0 && strings.Contains(fields[0], "=") { // VAR=value clankie …
				fields = fields[1:]
			}
			if len(fields) == 0 || fields[0] != "clankie" {
				continue
			}
			path := []string{}
			for _, f := range fields[1:] {
				if !word.MatchString(f) {
					break
				}
				if f == "keep" && len(path) > 0 && path[len(path)-1] == "episode" { // keep|release|forget
					path = append(path, f)
					break
				}
				path = append(path, f)
			}
			seen++
			code, _, errOut := runBin(t, bin, env, append(path, "--help")...)
			if code != 0 {
				t.Errorf("README line %q: clankie %s --help exits %d: %s", line, strings.Join(path, " "), code, errOut)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d clankie commands in the README", seen)
	}
}
