package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// TestRetryAfterRestartOfARefusedRetainIsReplayed: a client whose record
// got no answer (the service was killed) sends the same bytes again after
// the restart. The spec answers a byte-identical retry with 200 and the
// original. When the original asked to retain at the 1024 ceiling (stored
// unretained, with the reason), that must hold across a restart too.
func TestRetryAfterRestartOfARefusedRetainIsReplayed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the clankie binary and fills the retained shelf; skipped with -short")
	}
	bin := clankieBinary(t)
	dir := filepath.Join(t.TempDir(), "memory")
	srv := startServer(t, bin, dir, nil, 20*time.Second)

	lanes := []struct {
		lane  api.Lane
		token string
	}{
		{api.LaneOperator, opToken}, {api.LaneDiscordPresence, textToken},
		{api.LaneDiscordVoice, voiceToken}, {api.LaneGameplay, gameToken},
	}
	var wg sync.WaitGroup
	for li, l := range lanes {
		wg.Go(func() {
			for i := li; i < api.RetainedCapacity; i += len(lanes) {
				req := api.EpisodeRequest{SchemaVersion: api.SchemaVersion, EpisodeID: fmt.Sprintf("kept-%04d", i), Lane: l.lane,
					Room: "shelf", Summary: "kept note", Retain: true, OccurredAt: epoch.Add(time.Duration(i) * time.Second),
					Provenance: api.EpisodeProvenance{SelfAuthored: true}}
				status, body, err := srv.do(context.Background(), l.token, http.MethodPost, episodesPath, req)
				if err != nil || status != http.StatusCreated {
					t.Errorf("fill the shelf, %s: %d %v %s", req.EpisodeID, status, err, body)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	over := api.EpisodeRequest{SchemaVersion: api.SchemaVersion, EpisodeID: "one-too-many", Lane: api.LaneGameplay,
		Room: "shelf", Summary: "asked to be kept at the ceiling", Retain: true, OccurredAt: epoch.Add(24 * time.Hour),
		Provenance: api.EpisodeProvenance{SelfAuthored: true}}
	send := func(when string, want int) {
		t.Helper()
		status, body, err := srv.do(context.Background(), gameToken, http.MethodPost, episodesPath, over)
		if err != nil || status != want {
			t.Errorf("%s: %d %v %s; want %d", when, status, err, bytes.TrimSpace(body), want)
			return
		}
		var resp api.EpisodeResponse
		if err := json.Unmarshal(body, &resp); err != nil || resp.Retained || resp.Episode.EpisodeID != over.EpisodeID {
			t.Errorf("%s: %s", when, body)
		}
	}
	send("the record at the ceiling", http.StatusCreated)
	send("the same bytes again", http.StatusOK)
	srv.stop()
	srv = startServer(t, bin, dir, nil, 20*time.Second)
	send("the same bytes again after a restart", http.StatusOK)
	srv.stop()
}
