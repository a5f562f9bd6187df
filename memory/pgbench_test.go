package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/pgstore"
)

// The store benchmarks run the same load against the file store and
// PostgreSQL (CLANKIE_TEST_POSTGRES; skipped without it) with one service,
// and with two services on one database (two pools: two processes as far
// as the database can tell), the writers alternating between them. The
// file store, measured in the same run, is the baseline. People are
// seeded as in BenchmarkProposalRoundTrip (64 people of 16 facts; each
// proposal supersedes the person's oldest), into PostgreSQL by Migrate.

type storeCase struct {
	name     string
	services int
	pg       bool
}

var storeCases = []storeCase{{"file", 1, false}, {"postgres", 1, true}, {"postgres-2svc", 2, true}}

// startStoreServices seeds n people of facts facts and starts the
// services of c, returning them in the order writers use them.
func startStoreServices(b *testing.B, c storeCase, n, facts int) ([]*benchService, *proposer) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "memory")
	subjects, _ := seedPeople(b, dir, n, facts)
	cfg := config.Memory{Addr: "127.0.0.1:0", MemoryRoot: config.MemoryRoot{Dir: dir}, Tokens: testTokens}
	if c.pg {
		dsn := os.Getenv(testPostgresEnv)
		if dsn == "" {
			b.Skipf("%s is unset", testPostgresEnv)
		}
		schema := testSchema(dir)
		db, err := pgstore.Open(context.Background(), dsn, nil, nil, pgstore.Options{Schema: schema, MaxConns: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.DropSchema(context.Background(), schema); db.Close() })
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		cfg.Store = dsn + sep + "search_path=" + schema
		seedDir := dir
		dir = filepath.Join(b.TempDir(), "bearers")
		cfg.Dir = dir
		if _, err := Migrate(context.Background(), seedDir, cfg.Store, false, nil); err != nil {
			b.Fatal(err)
		}
	}
	var svcs []*benchService
	for range c.services {
		svc := startBenchServiceCfg(b, cfg)
		svcs = append(svcs, svc)
	}
	svcs[0].checkCatalog(b, n, n*facts)
	return svcs, newProposer(subjects, facts)
}

// BenchmarkStoreProposalRoundTrip is one proposal at a time, rotating over
// 64 people of 16 facts, per store; p50-µs is the figure to compare.
func BenchmarkStoreProposalRoundTrip(b *testing.B) {
	for _, c := range storeCases {
		b.Run("store="+c.name, func(b *testing.B) {
			svcs, pr := startStoreServices(b, c, benchPeople, 16)
			samples := make([]time.Duration, 0, 1024)
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				pr.propose(b, svcs[i%len(svcs)], i%benchPeople, i)
				samples = append(samples, time.Since(start))
			}
			reportPercentiles(b, samples)
		})
	}
}

// BenchmarkStoreConcurrentProposals is 64 writers at once, each on its own
// person of 16 facts, per store; writes/s is the figure to compare.
func BenchmarkStoreConcurrentProposals(b *testing.B) {
	for _, c := range storeCases {
		b.Run("store="+c.name, func(b *testing.B) {
			svcs, pr := startStoreServices(b, c, benchWriters, 16)
			samples := runWriters(b, func(w, i int) { pr.propose(b, svcs[w%len(svcs)], w, w*1_000_000+i) })
			reportPercentiles(b, samples)
		})
	}
}

// BenchmarkStoreRecall128 recalls a person holding 128 facts, all visible
// in the channel, over loopback HTTP with limit=128 (every fact sent
// back), per store; p50-µs is the figure to compare.
func BenchmarkStoreRecall128(b *testing.B) {
	for _, c := range storeCases[:2] {
		b.Run("store="+c.name, func(b *testing.B) {
			svcs, pr := startStoreServices(b, c, 1, api.MaxFactsPerPerson)
			s := pr.subjects[0]
			route := fmt.Sprintf("/v1/memory/discord-people/%s/%s?channelId=%s&limit=%d", s.GuildID, s.UserID, benchChannel, api.MaxFactsPerPerson)
			samples := make([]time.Duration, 0, 4096)
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				status, answer := svcs[0].call(b, txt, "GET", route, nil)
				samples = append(samples, time.Since(start))
				if status != http.StatusOK {
					b.Fatalf("recall: %d %.200s", status, answer)
				}
				if i%16 == 0 {
					b.StopTimer()
					var resp api.RecallResponse
					if json.Unmarshal(answer, &resp) != nil || resp.Total != api.MaxFactsPerPerson || len(resp.Facts) != api.MaxFactsPerPerson {
						b.Fatalf("recall: %d %.200s", status, answer)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			reportPercentiles(b, samples)
		})
	}
}
