package bridges

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/discordtest"
)

// BenchmarkHTTPInteractions measures the HTTP interactions transport:
// /person-memory recall (a member recalling 8 facts, which reads the real
// memory service) signed by the fake Discord and POSTed through a
// round-robin proxy to one or two text bridge replicas, 8 requests in
// flight. It reports interactions per second and the median and 99th
// percentile from sending the request to the first byte of the response
// (the reply itself, type 4). The fake's own checks of the response are
// left out of the loop (the tests make them); every response is still
// checked to be a 200 reply. Everything shares this machine's cores, so two
// replicas show the cost of the proxy and the split, not two machines.
func BenchmarkHTTPInteractions(b *testing.B) {
	for _, replicas := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			l := benchLogs()
			mem := startMemory(b, l.log)
			fake := discordtest.New(b, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
			var urls []string
			for i := range replicas {
				tb, err := NewText(httpTextConfig(fake, mem.url), tokens.TextBridge, l.log.Named("text"), nil)
				if err != nil {
					b.Fatal(err)
				}
				tb.HTTP.SyncCommands = i == 0
				addr, err := tb.HTTP.Listen()
				if err != nil {
					b.Fatal(err)
				}
				runInBackground(b, tb.Run)
				urls = append(urls, "http://"+addr+"/interactions")
			}
			waitFor(b, 10*time.Second, "replicas listening", func() bool {
				return l.obs.FilterMessage("interactions endpoint listening").Len() == replicas
			})
			endpoint := roundRobinTB(b, urls...)
			benchSeed(b, mem.url, alice, 8)
			// Distinct interactions, built up front: the router answers an id
			// once.
			payloads := make(chan []byte, 1<<16)
			build := func(n int) {
				for range n {
					in, err := fake.BuildInteraction(pm(guildID, textA, alice, "recall", person(alice)))
					if err != nil {
						b.Fatal(err)
					}
					payloads <- in.Payload()
				}
			}
			build(b.N + 16)
			var mu sync.Mutex
			samples := make([]time.Duration, 0, b.N)
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := fake.PostSigned(context.Background(), endpoint, discordtest.SignedPost{Body: <-payloads})
					if err != nil || res.Status != http.StatusOK || !bytes.HasPrefix(res.Body, []byte(`{"type":4`)) {
						b.Errorf("answered %d %.80q, %v", res.Status, res.Body, err)
						return
					}
					mu.Lock()
					samples = append(samples, res.FirstByte)
					mu.Unlock()
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(len(samples))/elapsed.Seconds(), "interactions/s")
			reportLatencies(b, samples)
		})
	}
}
