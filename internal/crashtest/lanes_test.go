package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
)

// TestKillBetweenLaneFilesKeepsAcknowledgedEpisodes is the crash test's
// episode-ring finding made deterministic. With the ring full of
// acknowledged discord_voice notes, a newer gameplay note evicts the oldest
// voice note, so one write rewrites two lane files. strace holds every rename
// for a moment after it returns; the test kills the service -9 as soon as the
// first lane file has been replaced. Whatever file went first, the restarted
// service must not have lost an acknowledged note to a write that never
// reached the disk: either the new note is kept (and the eviction is its
// due), or every acknowledged note is still there.
func TestKillBetweenLaneFilesKeepsAcknowledgedEpisodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the clankie binary and runs it under strace; skipped with -short")
	}
	strace := straceUsable(t)
	bin := clankieBinary(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "memory")
	note := func(lane api.Lane, id string, at time.Time) api.EpisodeRequest {
		return api.EpisodeRequest{SchemaVersion: api.SchemaVersion, EpisodeID: id, Lane: lane, Room: "room",
			Summary: "note " + id, OccurredAt: at, Provenance: api.EpisodeProvenance{SelfAuthored: true}}
	}

	srv := startServer(t, bin, dir, nil, 20*time.Second)
	for i := range api.EpisodeRingCapacity {
		id := fmt.Sprintf("voice-%03d", i)
		status, body, err := srv.do(context.Background(), voiceToken, http.MethodPost, episodesPath,
			note(api.LaneDiscordVoice, id, epoch.Add(time.Duration(i)*time.Second)))
		if err != nil || status != http.StatusCreated {
			t.Fatalf("record %s: %d %v %s", id, status, err, body)
		}
	}
	srv.stop()

	lanes := []api.Lane{api.LaneDiscordVoice, api.LaneGameplay}
	before := map[api.Lane][]byte{}
	for _, lane := range lanes {
		before[lane], _ = os.ReadFile(filepath.Join(dir, episodes.FileName(lane)))
	}
	srv = startServer(t, bin, dir, []string{strace, "-f", "-o", os.DevNull,
		"-e", "trace=rename,renameat,renameat2",
		"-e", "inject=rename,renameat,renameat2:delay_exit=700000"}, 60*time.Second)
	type answer struct {
		status int
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		status, _, err := srv.do(context.Background(), gameToken, http.MethodPost, episodesPath,
			note(api.LaneGameplay, "gameplay-newest", epoch.Add(time.Hour)))
		answered <- answer{status, err}
	}()
	var first api.Lane
	deadline := time.Now().Add(20 * time.Second)
	for first == "" {
		for _, lane := range lanes {
			now, _ := os.ReadFile(filepath.Join(dir, episodes.FileName(lane)))
			if !bytes.Equal(now, before[lane]) {
				first = lane
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no lane file was replaced within 20 s")
		}
		time.Sleep(time.Millisecond)
	}
	srv.kill9()
	a := <-answered
	acked := a.err == nil && a.status == http.StatusCreated
	t.Logf("killed after the %s lane file was replaced; the gameplay note was acknowledged: %v", first, acked)

	srv = startServer(t, bin, dir, nil, 20*time.Second)
	defer srv.stop()
	d, err := readDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := d.problems(); len(p) > 0 {
		t.Fatalf("files after the restart: %v", p)
	}
	ring, present := presentedEpisodes(d)
	newestKept := present["gameplay-newest"]
	if acked && !newestKept {
		t.Errorf("the gameplay note was acknowledged and is missing")
	}
	var lost []string
	for i := range api.EpisodeRingCapacity {
		id := fmt.Sprintf("voice-%03d", i)
		if present[id] || (i == 0 && newestKept) {
			continue
		}
		lost = append(lost, id)
	}
	if len(lost) > 0 {
		t.Errorf("acknowledged episodes %v are gone although the write that would evict them (gameplay-newest, acknowledged: %v) is not kept: "+
			"the %s lane file, with the eviction, reached the disk before the lane file with the new note; the ring holds %d unretained notes after the restart",
			lost, acked, first, ring)
	}
	var cat api.Catalog
	srv.get(opToken, "/v1/memory", &cat)
	if cat.Unretained != ring {
		t.Errorf("catalog says %d unretained, the files present %d", cat.Unretained, ring)
	}
}

// presentedEpisodes returns what the store presents from the lane files:
// every retained note and the newest 128 unretained ones.
func presentedEpisodes(d *diskState) (ring int, present map[string]bool) {
	var list []api.Episode
	for _, lane := range api.AllLanes() {
		list = append(list, d.lanes[lane]...)
	}
	present = map[string]bool{}
	slices.SortFunc(list, epLess)
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Retained {
			present[list[i].EpisodeID] = true
		} else if ring < api.EpisodeRingCapacity {
			ring++
			present[list[i].EpisodeID] = true
		}
	}
	return ring, present
}
