package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
)

func testConfig(t *testing.T, dir string) config.Memory {
	return config.Memory{Addr: "127.0.0.1:0", MemoryRoot: config.MemoryRoot{Dir: dir}, Log: config.Log{Level: "info", Format: "json"}}
}

func TestSecondServiceOnTheSameRootExitsNamingTheHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mem")
	first, err := Start(testConfig(t, dir), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Serve(ctx) }()

	_, err = Start(testConfig(t, dir), zap.NewNop())
	if !errors.Is(err, durable.ErrLocked) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("second start: %v", err)
	}
	resp, err := http.Get("http://" + first.Addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first service stopped answering: %v", err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	again, err := Start(testConfig(t, dir), zap.NewNop())
	if err != nil {
		t.Fatalf("after a clean stop the root must be free: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRootIsTightenedAndMintedTokensKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mem")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	srv, err := Start(testConfig(t, dir), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.Minted) != 4 {
		t.Fatalf("minted %v", srv.Minted)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("root mode %04o", st.Mode().Perm())
	}
	tok, err := config.ResolveBearer("", dir, "operator")
	if err != nil || len(tok) < 40 {
		t.Fatalf("minted operator token: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	req, _ := http.NewRequest("GET", "http://"+srv.Addr+"/v1/memory", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("minted token refused: %v %v", err, resp)
	}
	resp.Body.Close()
	cancel()
	<-done
	again, err := Start(testConfig(t, dir), zap.NewNop())
	if err != nil || len(again.Minted) != 0 {
		t.Fatalf("restart minted again: %v %v", err, again.Minted)
	}
	if tok2, _ := config.ResolveBearer("", dir, "operator"); tok2 != tok {
		t.Fatal("restart changed the minted token")
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFsyncHistogramCountsTheJournal holds the fsync histogram to what its
// help says: a proposal's one sync, the journal's fdatasync, is in it (it
// used to see only whole-file writes, so the main write path was missing),
// as are an episode's file and directory fsyncs.
func TestFsyncHistogramCountsTheJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mem")
	cfg := testConfig(t, dir)
	cfg.Tokens = testTokens
	srv := serveForTest(t, cfg)
	syncs := func() uint64 {
		t.Helper()
		fams, err := srv.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "clankie_memory_fsync_duration_seconds" {
				return f.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		t.Fatal("no clankie_memory_fsync_duration_seconds")
		return 0
	}
	post := func(token, route string, body any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+srv.Addr+route, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %v %v", route, err, resp)
		}
		resp.Body.Close()
	}
	for i, step := range []struct {
		what  string
		do    func()
		syncs uint64
	}{
		{"a proposal about a new person", func() {
			post(txt, api.RoutePropose.Path, fact("fsync-p1", "g1", "u1", "u1", "c1", "plays bass"))
		}, 1},
		{"a second proposal", func() {
			post(txt, api.RoutePropose.Path, fact("fsync-p2", "g1", "u1", "u1", "c1", "likes tea"))
		}, 1},
		{"an episode (temp file, then its directory)", func() {
			post(game, api.RouteRecordEpisode.Path, api.EpisodeRequest{SchemaVersion: 1, Lane: api.LaneGameplay, Room: "r", Summary: "a note",
				OccurredAt: time.Now().UTC(), Provenance: api.EpisodeProvenance{SelfAuthored: true}})
		}, 2},
	} {
		before := syncs()
		step.do()
		if got := syncs() - before; got != step.syncs {
			t.Fatalf("step %d, %s: the histogram counted %d syncs, want %d", i, step.what, got, step.syncs)
		}
	}
}
