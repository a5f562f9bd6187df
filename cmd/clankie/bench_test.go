package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/discordtest"
)

// vmRSS reads a process's resident set size in MiB.
func vmRSS(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// startBinary runs the binary with env and returns it with a stop function.
func startBinary(b *testing.B, bin string, env []string, args ...string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return cmd
}

// BenchmarkIdleTextBridgeRSS measures the resident memory of an idle
// `clankie bridge text` process, connected to a fake Discord served by this
// test process over loopback, against `clankie memory serve` on an empty
// root measured the same way. Run it with -benchtime 1x.
func BenchmarkIdleTextBridgeRSS(b *testing.B) {
	bin := buildBinary(b)
	const guild = "100000000000000001"
	fake := discordtest.New(b, discordtest.WithGuilds(discordtest.Guild{ID: guild,
		Channels: []discordtest.Channel{{ID: "100000000000000011", Name: "general", Type: discordgo.ChannelTypeGuildText}}}))
	dir := filepath.Join(b.TempDir(), "memory")
	addr := freeAddr(b)
	memEnv := newcomerEnv(b.TempDir(), "CLANKIE_MEMORY_DIR="+dir, "CLANKIE_MEMORY_ADDR="+addr)
	mem := startBinary(b, bin, memEnv, "memory", "serve")
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("memory service never answered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	bridge := startBinary(b, bin, append(memEnv, "CLANKIE_MEMORY_URL=http://"+addr, "DISCORD_TEXT_BOT_TOKEN="+fake.Token(),
		"DISCORD_API_URL="+fake.APIURL(), "DISCORD_GUILD_IDS="+guild), "bridge", "text")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := fake.WaitCommandPuts(ctx, guild, 1); err != nil {
		b.Fatalf("the bridge never registered its command: %v", err)
	}
	time.Sleep(time.Second) // idle: connected, synced, nothing to do
	b.ResetTimer()
	var bridgeRSS, memRSS float64
	for range b.N {
		var err error
		if bridgeRSS, err = vmRSS(bridge.Process.Pid); err != nil {
			b.Fatal(err)
		}
		if memRSS, err = vmRSS(mem.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(bridgeRSS, "rss-MiB")
	b.ReportMetric(memRSS, "baseline-rss-MiB")
}
