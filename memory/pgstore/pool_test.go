package pgstore

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestPoolSizeFollowsTheConnectionString holds the README's promise: a
// connection string's pool_max_conns sizes each service's pool, never
// below 8.
func TestPoolSizeFollowsTheConnectionString(t *testing.T) {
	dsn := testDSN(t, "the pool size check")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		param string
		want  int32
	}{
		{"", 8},
		{"pool_max_conns=32", 32},
		{"pool_max_conns=4", 8},
	} {
		url := dsn
		if tc.param != "" {
			url += sep + tc.param
		}
		db, err := Open(context.Background(), url, nil, nil, Options{Unchanged: true})
		if err != nil {
			t.Fatalf("%q: %v", tc.param, err)
		}
		if got := db.pool.Config().MaxConns; got != tc.want {
			t.Errorf("%q: a pool of %d connections, want %d", tc.param, got, tc.want)
		}
		db.Close()
	}
}

// testDSN is the server CLANKIE_TEST_POSTGRES names; without one, the
// test (what) is skipped as a missing dependency.
func testDSN(tb testing.TB, what string) string {
	dsn := os.Getenv("CLANKIE_TEST_POSTGRES")
	if dsn == "" {
		tb.Skip("missing dependency: CLANKIE_TEST_POSTGRES (a PostgreSQL server; scripts/test starts one): " + what)
	}
	return dsn
}
