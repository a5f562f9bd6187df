package memory

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
)

// TestEpisodeCallsCarryTheRequestsContext: the episode store's database
// calls run under the request's context. A read for a client that is gone
// stops there; a write it started still commits, since a hang-up must not
// cut a commit short (DB.write keeps the context's values and drops its
// cancellation, as for people).
func TestEpisodeCallsCarryTheRequestsContext(t *testing.T) {
	if !onPostgres() {
		t.Skip("only the PostgreSQL store's calls wait on a database")
	}
	es := openTestDB(t, t.TempDir(), zap.NewNop(), nil).Episodes()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := es.Refresh(gone); err == nil {
		t.Fatal("a refresh for a client that is gone read the database")
	}
	req := api.EpisodeRequest{SchemaVersion: 1, EpisodeID: "ep-ctx", Lane: api.LaneOperator, Room: "the console",
		Summary: "started, then the client hung up", Visibility: api.EpisodeShareable, OccurredAt: time.Now().Add(-time.Minute)}
	if _, _, err := es.Record(gone, api.LaneOperator, req); err != nil {
		t.Fatalf("a record whose client hung up: %v", err)
	}
	if err := es.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := es.Get("ep-ctx"); !ok {
		t.Fatal("the record the client started was not committed")
	}
}
