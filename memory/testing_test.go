package memory

import (
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
)

func openRootForTest(dir string) (*os.Root, error) { return durable.OpenRoot(dir) }

// testService is the real service over a root at dir, as Start builds it
// but with the test's tokens, logger and clock.
type testService struct {
	handler  http.Handler
	people   *people.Store
	episodes *episodes.Store
}

func newTestService(tb testing.TB, dir string, tokens config.Tokens, log *zap.Logger, now func() time.Time) testService {
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
	ps, err := people.Open(root, log, now)
	if err != nil {
		tb.Fatal(err)
	}
	es, err := episodes.Open(root, log, now)
	if err != nil {
		tb.Fatal(err)
	}
	return testService{handler: NewService(root, dir, bearers, ps, es, log, now).Handler(), people: ps, episodes: es}
}
