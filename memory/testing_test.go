package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/personfiles"
	"github.com/clankie/clankie/memory/pgstore"
)

const (
	// testPostgresEnv names the PostgreSQL server of the suite's second run.
	testPostgresEnv = "CLANKIE_TEST_POSTGRES"
	// testStoreEnv is set to "postgres" in the child binary that runs the
	// suite against PostgreSQL.
	testStoreEnv = "CLANKIE_TEST_STORE"
)

// onPostgres reports whether this run of the suite uses PostgreSQL.
func onPostgres() bool { return os.Getenv(testStoreEnv) == "postgres" }

// fileOnly skips a test that reads the file store's files: in the
// PostgreSQL run there are none, and the HTTP behaviour it also checks is
// covered by the tests that run on both.
func fileOnly(tb testing.TB) {
	tb.Helper()
	if onPostgres() {
		tb.Skip("reads the file store's files")
	}
}

func openRootForTest(dir string) (*os.Root, error) { return durable.OpenRoot(dir) }

// testService is the real service over a root at dir, as Start builds it
// but with the test's tokens, logger and clock: on files, or, in the
// PostgreSQL run, on a schema of its own named for dir (so a second service
// on the same dir is a restart, or a second process, on the same data).
type testService struct {
	svc      *Service
	handler  http.Handler
	people   *people.Memory
	episodes interface {
		EpisodeStore
		Get(id string) (api.Episode, bool)
	}
	// dump returns the PostgreSQL rows (nil on files).
	dump func() map[string]string
}

func newTestService(tb testing.TB, dir string, tokens config.Tokens, log *zap.Logger, now func() time.Time) testService {
	tb.Helper()
	return newTestServiceOn(tb, dir, tokens, log, now, onPostgres())
}

// newTestServiceOn is newTestService on the store asked for: PostgreSQL
// when pg, else the files.
func newTestServiceOn(tb testing.TB, dir string, tokens config.Tokens, log *zap.Logger, now func() time.Time, pg bool) testService {
	tb.Helper()
	root, err := openRootForTest(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { root.Close() })
	bearers, _, err := LoadBearers(root, tokens)
	if err != nil {
		tb.Fatal(err)
	}
	if pg {
		db := openTestDB(tb, dir, log, now)
		ps, es := db.People(), db.Episodes()
		dump := func() map[string]string {
			m, err := db.Dump(context.Background())
			if err != nil {
				tb.Fatal(err)
			}
			return m
		}
		svc := NewService(root, dir, bearers, ps, es, db.Claims(), log, now, nil)
		return testService{svc: svc, handler: svc.Handler(), people: svc.people, episodes: es, dump: dump}
	}
	ps, err := personfiles.Open(root, log, now, durable.Disk{}, personfiles.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	fes, err := episodes.Open(root, log, now, durable.Disk{})
	if err != nil {
		tb.Fatal(err)
	}
	es := FileEpisodes{fes}
	cs, err := openFileClaims(root, now, durable.Disk{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	svc := NewService(root, dir, bearers, ps, es, cs, log, now, nil)
	return testService{svc: svc, handler: svc.Handler(), people: svc.people, episodes: es}
}

// openTestDB opens the test server's database in the schema named for dir,
// dropped when the test ends.
func openTestDB(tb testing.TB, dir string, log *zap.Logger, now func() time.Time) *pgstore.DB {
	tb.Helper()
	dsn := os.Getenv(testPostgresEnv)
	if dsn == "" {
		tb.Fatalf("%s is unset in the PostgreSQL run", testPostgresEnv)
	}
	schema := testSchema(dir)
	db, err := pgstore.Open(context.Background(), dsn, log, now, pgstore.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		db.Close()
		admin, err := pgstore.Open(context.Background(), dsn, nil, nil, pgstore.Options{MaxConns: 1})
		if err == nil {
			_ = admin.DropSchema(context.Background(), schema)
			admin.Close()
		}
	})
	return db
}

// testSchema is the PostgreSQL schema of the test service on dir.
func testSchema(dir string) string {
	abs, _ := filepath.Abs(dir)
	sum := sha256.Sum256([]byte(abs))
	return "t_" + hex.EncodeToString(sum[:12])
}
