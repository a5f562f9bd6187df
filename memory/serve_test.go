package memory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

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
