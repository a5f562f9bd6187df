package episodes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
)

// base is the test epoch; dates in tests are offsets from it.
var base = time.Date(2026, 9, 4, 12, 0, 0, 0, time.UTC)

// clock is a settable test clock for correctedAt.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// env is one store over a real temp dir with its logs captured.
type env struct {
	t     testing.TB
	root  *os.Root
	s     *Store
	clock *clock
	logs  *observer.ObservedLogs
}

func openRoot(t testing.TB) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return openEnv(t, openRoot(t))
}

func openEnv(t testing.TB, root *os.Root) *env {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	c := &clock{t: base.Add(1000 * time.Hour)}
	s, err := Open(root, zap.New(core), c.Now, durable.Disk{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &env{t: t, root: root, s: s, clock: c, logs: logs}
}

// reopen loads the same root with a fresh Store, as a restart would.
func (e *env) reopen() *env {
	e.t.Helper()
	return openEnv(e.t, e.root)
}

func request(lane api.Lane, room, summary string, at time.Time) api.EpisodeRequest {
	return api.EpisodeRequest{
		SchemaVersion: 1,
		Lane:          lane,
		Room:          room,
		Summary:       summary,
		OccurredAt:    at,
		Provenance:    api.EpisodeProvenance{CharacterID: "captain", SessionID: "sess-1", SelfAuthored: true},
	}
}

// record records and fails the test on any error.
func (e *env) record(lane api.Lane, req api.EpisodeRequest) (api.EpisodeResponse, RecordInfo) {
	e.t.Helper()
	resp, info, err := e.s.Record(lane, req)
	if err != nil {
		e.t.Fatalf("Record(%s): %v", lane, err)
	}
	return resp, info
}

// files reads every lane file's bytes (nil when missing).
func (e *env) files() map[api.Lane][]byte {
	e.t.Helper()
	out := map[api.Lane][]byte{}
	for _, lane := range api.AllLanes() {
		b, err := e.root.ReadFile(FileName(lane))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			e.t.Fatal(err)
		}
		out[lane] = b
	}
	return out
}

// diskIDs parses every lane file and returns the ids on disk.
func (e *env) diskIDs() map[string]api.Episode {
	e.t.Helper()
	out := map[string]api.Episode{}
	for lane, b := range e.files() {
		for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if line == "" {
				continue
			}
			var ep api.Episode
			if err := json.Unmarshal([]byte(line), &ep); err != nil {
				e.t.Fatalf("%s line %d does not parse: %v", lane, i+1, err)
			}
			out[ep.EpisodeID] = ep
		}
	}
	return out
}

// assertNoContent fails when any captured log entry holds one of secrets.
func (e *env) assertNoContent(secrets ...string) {
	e.t.Helper()
	for _, entry := range e.logs.All() {
		text := entry.Message + fmt.Sprint(entry.ContextMap())
		for _, s := range secrets {
			if strings.Contains(text, s) {
				e.t.Errorf("log entry %q carries memory content %q", entry.Message, s)
			}
		}
	}
}

// seed writes episodes straight into lane files, as an earlier process
// would have, without going through Record.
func seed(t testing.TB, root *os.Root, eps []api.Episode) {
	t.Helper()
	if err := durable.MkdirAll(root, Dir); err != nil {
		t.Fatal(err)
	}
	byLane := map[api.Lane][]byte{}
	for _, ep := range eps {
		b, err := json.Marshal(ep)
		if err != nil {
			t.Fatal(err)
		}
		byLane[ep.Lane] = append(append(byLane[ep.Lane], b...), '\n')
	}
	for lane, b := range byLane {
		if err := durable.WriteFile(root, FileName(lane), b); err != nil {
			t.Fatal(err)
		}
	}
}

func episode(id string, lane api.Lane, at time.Time, retained bool) api.Episode {
	return api.Episode{
		EpisodeID:  id,
		Lane:       lane,
		Room:       "room-" + string(lane),
		Summary:    "note " + id,
		Visibility: api.EpisodeShareable,
		OccurredAt: at,
		Provenance: api.EpisodeProvenance{CharacterID: "captain", SelfAuthored: true},
		Retained:   retained,
	}
}

func wantFault(t testing.TB, err error, kind fault.Kind) *fault.Error {
	t.Helper()
	f, ok := fault.As(err)
	if !ok {
		t.Fatalf("error %v is not a fault (want kind %d)", err, kind)
	}
	if f.Kind != kind {
		t.Fatalf("fault kind %d (%s: %s), want %d", f.Kind, f.Code, f.Message, kind)
	}
	return f
}
