package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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

// BenchmarkStoreFloor is what any durable HTTP write or read through
// PostgreSQL costs on this machine, whatever the schema: the floor under
// the postgres figures of the benchmarks above, as startFloorService is
// under the file store's. A bare net/http handler (serveFloor) runs one
// statement through a pgx pool of the service's size (8) and answers as
// many bytes as the route it stands for. A write is one autocommitted
// UPDATE of one row (the writer's own, of 64) carrying a journal record's
// bytes: one round trip and one WAL flush, less than any transaction that
// reads before it writes. A read is one SELECT of one value. The requests
// are the benchmarks' own (the same proposal bodies, the same client).
func BenchmarkStoreFloor(b *testing.B) {
	dsn := os.Getenv(testPostgresEnv)
	if dsn == "" {
		b.Skipf("%s is unset", testPostgresEnv)
	}
	// The sizes the floor stands for, from the file store's answers.
	dir := filepath.Join(b.TempDir(), "memory")
	subjects, _ := seedPeople(b, dir, benchWriters, 16)
	pr := newProposer(subjects, 16)
	_, proposalAnswer := pr.propose(b, startBenchService(b, dir), 0, 1<<30)
	record := journalRecordBytes(b, dir)
	fullDir := filepath.Join(b.TempDir(), "memory")
	full, _ := seedPeople(b, fullDir, 1, api.MaxFactsPerPerson)
	recallRoute := fmt.Sprintf("/v1/memory/discord-people/%s/%s?channelId=%s&limit=%d", full[0].GuildID, full[0].UserID, benchChannel, api.MaxFactsPerPerson)
	status, answer := startBenchService(b, fullDir).call(b, txt, "GET", recallRoute, nil)
	if status != http.StatusOK {
		b.Fatalf("recall: %d", status)
	}
	recallAnswer := len(answer)

	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 8
	schema := testSchema(dir)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { // after the servers', registered later
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	})
	for _, stmt := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE floor (id int PRIMARY KEY, n bigint NOT NULL, body text NOT NULL)",
		fmt.Sprintf("INSERT INTO floor SELECT g, 0, '' FROM generate_series(0, %d) g", benchWriters-1),
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	payload := strings.Repeat("r", record)
	write := serveFloor(b, proposalAnswer, func(r *http.Request) error {
		row, err := strconv.Atoi(r.URL.Query().Get("row"))
		if err != nil {
			return err
		}
		_, err = pool.Exec(r.Context(), "UPDATE floor SET n = n + 1, body = $2 WHERE id = $1", row, payload)
		return err
	})
	read := serveFloor(b, recallAnswer, func(r *http.Request) error {
		var one int
		return pool.QueryRow(r.Context(), "SELECT 1").Scan(&one)
	})
	propose := func(b *testing.B, p, i int) {
		status, answer := write.call(b, txt, "POST", fmt.Sprintf("/floor?row=%d", p), pr.request(b, p, i))
		var v map[string]any
		if status != http.StatusCreated || json.Unmarshal(answer, &v) != nil {
			b.Fatalf("the floor service answered %d", status)
		}
	}
	b.Run("op=proposal", func(b *testing.B) {
		samples := make([]time.Duration, 0, 1024)
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			propose(b, i%benchPeople, i)
			samples = append(samples, time.Since(start))
		}
		reportPercentiles(b, samples)
	})
	b.Run("op=writers", func(b *testing.B) {
		reportPercentiles(b, runWriters(b, func(w, i int) { propose(b, w, w*1_000_000+i) }))
	})
	b.Run("op=recall", func(b *testing.B) {
		samples := make([]time.Duration, 0, 4096)
		for b.Loop() {
			start := time.Now()
			status, _ := read.call(b, txt, "GET", "/floor", nil)
			samples = append(samples, time.Since(start))
			if status != http.StatusCreated {
				b.Fatalf("the floor service answered %d", status)
			}
		}
		b.StopTimer()
		reportPercentiles(b, samples)
	})
}
