package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/personfiles"
)

// newTickingHarness is newHarness with a clock that moves one millisecond
// forward on every reading and is safe for concurrent use, so concurrent
// requests get distinct createdAt values and "the newest 128" is defined.
func newTickingHarness(t *testing.T) *harness {
	t.Helper()
	h, _ := newTickingHarnesses(t, 1)
	return h
}

// newTickingHarnesses is newTickingHarness with n services on the same data
// (each its own pool of connections: two processes as far as the database
// can tell), sharing the clock; h talks to the first. Only the PostgreSQL
// store allows n > 1.
func newTickingHarnesses(t *testing.T, n int) (*harness, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memory")
	start := time.Now().UTC().Truncate(time.Second)
	var ticks atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }
	var urls []string
	for range n {
		srv := httptest.NewServer(newTestService(t, dir, testTokens, zap.NewNop(), now).handler)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return &harness{t: t, url: urls[0], dir: dir, now: &start}, urls
}

// post is a request that is safe to send from any goroutine: it reports
// instead of failing the test.
func post(client *http.Client, url, token, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func testClient(t *testing.T) *http.Client {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

const (
	concurrentWriters = 64
	writesEach        = 4
)

// TestConcurrentProposalsToOnePersonKeepTheNewest128 sends 256 proposals
// about one person from 64 goroutines at once. Every one is acknowledged;
// afterwards exactly the 128 newest acknowledged facts (by createdAt) are
// kept, in a file that parses, and the catalog agrees.
func TestConcurrentProposalsToOnePersonKeepTheNewest128(t *testing.T) {
	concurrentProposals(t, 1)
}

// TestTwoServicesConcurrentProposalsKeepTheNewest128 is the same with two
// services on one PostgreSQL database, the writers alternating between
// them: the row lock serialises them across processes.
func TestTwoServicesConcurrentProposalsKeepTheNewest128(t *testing.T) {
	if !onPostgres() {
		t.Skip("two services share only a PostgreSQL store; the file store takes a lock")
	}
	concurrentProposals(t, 2)
}

func concurrentProposals(t *testing.T, services int) {
	h, urls := newTickingHarnesses(t, services)
	client := testClient(t)
	var (
		mu      sync.Mutex
		acked   []api.Fact
		evicted int
		wg      sync.WaitGroup
	)
	for w := range concurrentWriters {
		wg.Go(func() {
			token := txt
			if w%2 == 0 {
				token = op
			}
			for i := range writesEach {
				id := fmt.Sprintf("w%02d-%d", w, i)
				status, body, err := post(client, urls[(w+i)%len(urls)], token, "/v1/memory/discord-people/proposals",
					fact(id, "10", "20", "20", "30", "concurrent fact "+id))
				var resp api.ProposalResponse
				if err == nil && status == http.StatusCreated {
					err = json.Unmarshal(body, &resp)
				}
				if err != nil || status != http.StatusCreated || resp.Fact == nil {
					t.Errorf("proposal %s: %d %v %s", id, status, err, body)
					return
				}
				mu.Lock()
				acked = append(acked, *resp.Fact)
				evicted += resp.Evicted
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	const total = concurrentWriters * writesEach
	if len(acked) != total || evicted != total-api.MaxFactsPerPerson {
		t.Fatalf("%d proposals acknowledged, %d evictions reported; want %d and %d", len(acked), evicted, total, total-api.MaxFactsPerPerson)
	}
	people.NewestFirst(acked)
	for i := 1; i < len(acked); i++ {
		if acked[i].CreatedAt.Equal(acked[i-1].CreatedAt) {
			t.Fatalf("facts %s and %s share createdAt %v", acked[i-1].FactID, acked[i].FactID, acked[i].CreatedAt)
		}
	}
	want := map[string]string{}
	for _, f := range acked[:api.MaxFactsPerPerson] {
		want[f.FactID] = f.Body
	}

	var exp api.RecallResponse
	h.do(op, "GET", "/v1/memory/discord-people/10/20/export", nil).decode(t, &exp)
	if exp.Total != api.MaxFactsPerPerson || len(exp.Facts) != api.MaxFactsPerPerson {
		t.Fatalf("export holds %d facts (total %d), want %d", len(exp.Facts), exp.Total, api.MaxFactsPerPerson)
	}
	checkFactSet(t, "export", exp.Facts, want)

	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	if cat.People != 1 || cat.Facts != api.MaxFactsPerPerson {
		t.Fatalf("catalog: %d people, %d facts; want 1 and 128", cat.People, cat.Facts)
	}
	if onPostgres() {
		return // no file: the export above read the database
	}
	b, err := os.ReadFile(filepath.Join(h.dir, personfiles.Dir, personfiles.FileName(api.Subject{GuildID: "10", UserID: "20"})))
	if err != nil {
		t.Fatal(err)
	}
	_, fileFacts, err := personfiles.DecodeFile(b)
	if err != nil {
		t.Fatalf("the person file does not parse: %v", err)
	}
	checkFactSet(t, "person file", fileFacts, want)
}

func checkFactSet(t *testing.T, where string, facts []api.Fact, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range facts {
		body, ok := want[f.FactID]
		switch {
		case seen[f.FactID]:
			t.Errorf("%s: fact %s twice", where, f.FactID)
		case !ok:
			t.Errorf("%s: fact %s (%s, created %v) is not among the 128 newest acknowledged", where, f.FactID, f.Body, f.CreatedAt)
		case body != f.Body:
			t.Errorf("%s: fact %s holds %q, acknowledged %q", where, f.FactID, f.Body, body)
		}
		seen[f.FactID] = true
	}
	if len(seen) != len(want) {
		t.Errorf("%s: %d distinct facts, want %d", where, len(seen), len(want))
	}
}

// TestConcurrentSupersedesLoseNoUpdate has 64 goroutines each replace a
// different fact of the same person at once: a read-modify-write that lost
// an update would leave an old fact behind or drop a new one.
func TestConcurrentSupersedesLoseNoUpdate(t *testing.T) {
	h := newTickingHarness(t)
	client := testClient(t)
	old := make([]string, concurrentWriters)
	for w := range concurrentWriters {
		old[w] = h.propose(txt, fact(fmt.Sprintf("old-%02d", w), "10", "20", "20", "30", fmt.Sprintf("old fact %02d", w))).Fact.FactID
	}
	replaced := make([]string, concurrentWriters)
	var wg sync.WaitGroup
	for w := range concurrentWriters {
		wg.Go(func() {
			req := fact(fmt.Sprintf("new-%02d", w), "10", "20", "20", "30", fmt.Sprintf("new fact %02d", w))
			req.Fact.SupersedesFactID = old[w]
			token := txt
			if w%2 == 0 {
				token = op
			}
			status, body, err := post(client, h.url, token, "/v1/memory/discord-people/proposals", req)
			var resp api.ProposalResponse
			if err == nil && status == http.StatusCreated {
				err = json.Unmarshal(body, &resp)
			}
			if err != nil || status != http.StatusCreated || resp.Fact == nil || !resp.Superseded {
				t.Errorf("supersede %d: %d %v %s", w, status, err, body)
				return
			}
			replaced[w] = resp.Fact.FactID
		})
	}
	wg.Wait()
	want := map[string]string{}
	for w, id := range replaced {
		want[id] = fmt.Sprintf("new fact %02d", w)
	}
	var exp api.RecallResponse
	h.do(op, "GET", "/v1/memory/discord-people/10/20/export", nil).decode(t, &exp)
	checkFactSet(t, "export after concurrent supersedes", exp.Facts, want)
	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	if cat.Facts != concurrentWriters {
		t.Fatalf("catalog says %d facts, want %d", cat.Facts, concurrentWriters)
	}
}

var laneTokens = []struct {
	lane  api.Lane
	token string
}{
	{api.LaneOperator, op},
	{api.LaneDiscordPresence, txt},
	{api.LaneDiscordVoice, voice},
	{api.LaneGameplay, game},
}

// TestConcurrentEpisodesKeepTheNewest128Unretained records 256 unretained
// episodes from 64 goroutines across the four lanes, each with its lane's
// bearer and a distinct occurredAt. Afterwards exactly the 128 newest remain,
// in the service, in the lane files (whole lines only) and in a store opened
// afresh on the same directory.
func TestConcurrentEpisodesKeepTheNewest128Unretained(t *testing.T) {
	concurrentEpisodes(t, 1)
}

// TestTwoServicesConcurrentEpisodesKeepTheRing is the same with two
// services on one PostgreSQL database: the clock row serialises episode
// writes across processes, so the global ring holds.
func TestTwoServicesConcurrentEpisodesKeepTheRing(t *testing.T) {
	if !onPostgres() {
		t.Skip("two services share only a PostgreSQL store; the file store takes a lock")
	}
	concurrentEpisodes(t, 2)
}

func concurrentEpisodes(t *testing.T, services int) {
	h, urls := newTickingHarnesses(t, services)
	client := testClient(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const total = concurrentWriters * writesEach
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	id := func(n int) string { return fmt.Sprintf("conc-%03d", n) }
	var wg sync.WaitGroup
	for w := range concurrentWriters {
		wg.Go(func() {
			lt := laneTokens[w%len(laneTokens)]
			for i := range writesEach {
				// Interleave the dates across writers, so every goroutine
				// writes both old and new notes.
				n := i*concurrentWriters + w
				req := api.EpisodeRequest{SchemaVersion: 1, EpisodeID: id(n), Lane: lt.lane, Room: "room " + string(lt.lane),
					Summary: "note " + id(n), OccurredAt: at(n), Provenance: api.EpisodeProvenance{SessionID: "s", SelfAuthored: true}}
				status, body, err := post(client, urls[(w+i)%len(urls)], lt.token, "/v1/memory/captain-episodes", req)
				if err != nil || status != http.StatusCreated {
					t.Errorf("record %s: %d %v %s", id(n), status, err, body)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	newest := map[string]bool{}
	for n := total - api.EpisodeRingCapacity; n < total; n++ {
		newest[id(n)] = true
	}

	var cat api.Catalog
	h.do(op, "GET", "/v1/memory", nil).decode(t, &cat)
	if cat.Episodes != api.EpisodeRingCapacity || cat.Unretained != api.EpisodeRingCapacity || cat.Retained != 0 {
		t.Fatalf("catalog: %d episodes, %d unretained, %d retained", cat.Episodes, cat.Unretained, cat.Retained)
	}

	if onPostgres() {
		// A store opened afresh on the same database holds the newest 128.
		es := openTestDB(t, h.dir, zap.NewNop(), nil).Episodes()
		if err := es.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkNewest(t, es, total, id, newest)
		return
	}
	seen := map[string]bool{}
	for _, lt := range laneTokens {
		b, err := os.ReadFile(filepath.Join(h.dir, episodes.FileName(lt.lane)))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("lane %s: the file ends in a torn line", lt.lane)
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var ep api.Episode
			if err := json.Unmarshal(line, &ep); err != nil {
				t.Errorf("lane %s line %d does not parse: %v", lt.lane, i+1, err)
				continue
			}
			if ep.Lane != lt.lane || seen[ep.EpisodeID] || !newest[ep.EpisodeID] {
				t.Errorf("lane %s line %d: %s (lane %s, seen before %v, among the newest %v)", lt.lane, i+1, ep.EpisodeID, ep.Lane, seen[ep.EpisodeID], newest[ep.EpisodeID])
			}
			seen[ep.EpisodeID] = true
		}
	}
	if len(seen) != api.EpisodeRingCapacity {
		t.Errorf("the lane files hold %d episodes, want %d", len(seen), api.EpisodeRingCapacity)
	}

	root, err := openRootForTest(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fresh, err := episodes.Open(root, nil, nil, durable.Disk{})
	if err != nil {
		t.Fatal(err)
	}
	checkNewest(t, fresh, total, id, newest)
}

// checkNewest fails the test unless a store opened afresh holds exactly
// the newest.
func checkNewest(t *testing.T, fresh interface {
	Stats() episodes.Stats
	Get(string) (api.Episode, bool)
}, total int, id func(int) string, newest map[string]bool) {
	t.Helper()
	if st := fresh.Stats(); st.Total != api.EpisodeRingCapacity || st.Unretained != api.EpisodeRingCapacity {
		t.Errorf("a store opened afresh holds %+v", st)
	}
	var missing, kept []string
	for n := range total {
		_, ok := fresh.Get(id(n))
		switch {
		case newest[id(n)] && !ok:
			missing = append(missing, id(n))
		case !newest[id(n)] && ok:
			kept = append(kept, id(n))
		}
	}
	slices.Sort(missing)
	slices.Sort(kept)
	if len(missing) > 0 || len(kept) > 0 {
		t.Errorf("after reopening: newest missing %v, older kept %v", missing, kept)
	}
}
