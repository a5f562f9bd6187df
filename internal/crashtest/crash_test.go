package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/personfiles"
)

// The load is shaped so that no bound can remove an acknowledged fact, and
// the one bound that does apply (the episode ring) is accounted for exactly:
//
//   - a person never holds more than 128 facts, counting every proposal still
//     unanswered as one more, so the 128-per-person eviction never runs;
//     from newFactGate on, a person only gets supersedes (which keep the
//     count, or add one when the target is already gone);
//   - episodes carry increasing occurredAt, so "the newest 128 unretained" is
//     known from the test's own record, and an acknowledged unretained episode
//     may be missing only when 128 newer unretained ones are present;
//   - retains asked in a whole run stay under retainBudget, below the 1024
//     ceiling, so every acknowledged retain must be kept.
const (
	defaultCycles   = 30
	proposalWriters = 3
	episodeWriters  = 3
	freshPerCycle   = 3 // new people per cycle, besides the two veterans
	newFactGate     = 100
	retainBudget    = 900
	minKillDelay    = 20 * time.Millisecond
	maxKillDelay    = 300 * time.Millisecond
	maxReports      = 40
	proposalsPath   = "/v1/memory/discord-people/proposals"
	episodesPath    = "/v1/memory/captain-episodes"
)

// epoch is the occurredAt of episode 0; episode n occurred n seconds later.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

type proposal struct {
	id        string
	key       string // personfiles.FileName of the subject
	token     string
	req       api.ProposalRequest
	acked     bool   // a 2xx answer was read in full
	sawStatus bool   // a 2xx status line arrived but the body was lost
	factID    string // the acknowledged fact
}

type episode struct {
	id        string
	seq       int64
	token     string
	req       api.EpisodeRequest
	acked     bool
	sawStatus bool
	retained  bool // what the acknowledgement said
	gone      bool // left the ring (by its rule, or reported lost)
}

type person struct {
	subject    api.Subject
	key        string
	veteran    bool
	live       map[string]string // factId → proposalId: acknowledged and not replaced
	unresolved int               // proposals sent and not yet acknowledged
}

// crashRun is the test's record of everything it asked for and what the
// service acknowledged.
type crashRun struct {
	t   *testing.T
	dir string
	env []string // the service's store: nil for files, CLANKIE_MEMORY_STORE for PostgreSQL
	// readState reads what is stored, directly (the files, or the database's
	// rows), never through the service.
	readState func() (*diskState, error)
	// settle waits, after a kill, until the dead process can change nothing
	// more (a database finishes a COMMIT it had received); nil for files.
	settle func()
	rng    *rand.Rand // the test goroutine's only
	cycle  int

	mu           sync.Mutex
	proposals    map[string]*proposal
	episodes     map[string]*episode
	people       map[string]*person
	peopleOrder  []string
	supersededBy map[string]string // factId → the acknowledged proposal that replaced it
	nextSeq      int64
	retainAsked  int
	pendingProps []*proposal // sent, no full 2xx read; settled by a retry after the restart
	pendingEps   []*episode
	landedFacts  map[string]string // pending proposalId → factId found on disk after the restart
	landedEps    map[string]bool   // pending episodeId found in the ring after the restart
	touched      map[string]bool   // people written this cycle

	// Figures for the summary.
	acked, settled, landedBeforeKill, inFlightAtKill  int
	lost, duplicated, tempsLeft, ringEvicted, reports int
	emptyLogsLeft                                     int
	corrupt                                           map[string]bool // distinct files found torn, unparsable or moved aside
}

func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	runCrash(t, nil, nil, nil)
}

// runCrash is the crash test against the store env names (nil: files);
// readState reads that store (nil: the files under the run's dir).
func runCrash(t *testing.T, env []string, readState func() (*diskState, error), settle func()) {
	if testing.Short() {
		t.Skip("crash test: builds the clankie binary and kills it -9 repeatedly; skipped with -short")
	}
	cycles := defaultCycles
	if v := os.Getenv("CLANKIE_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CLANKIE_CRASH_CYCLES must be a positive whole number (got %q)", v)
		}
		cycles = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CLANKIE_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CLANKIE_CRASH_SEED must be a whole number (got %q)", v)
		}
		seed = n
	}
	t.Logf("seed %d (CLANKIE_CRASH_SEED repeats the choices and kill delays; timing still varies)", seed)
	bin := clankieBinary(t)
	began := time.Now()

	r := &crashRun{
		t:            t,
		dir:          filepath.Join(t.TempDir(), "memory"),
		rng:          rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		proposals:    map[string]*proposal{},
		episodes:     map[string]*episode{},
		people:       map[string]*person{},
		supersededBy: map[string]string{},
		landedFacts:  map[string]string{},
		landedEps:    map[string]bool{},
		corrupt:      map[string]bool{},
		env:          env,
	}
	r.readState, r.settle = readState, settle
	if r.readState == nil {
		r.readState = func() (*diskState, error) { return readDisk(r.dir) }
	}
	for _, u := range []string{"veteran-1", "veteran-2"} {
		r.addPerson(api.Subject{GuildID: "guild-vet", UserID: u}, true)
	}

	srv := startServerEnv(t, bin, r.dir, r.env, nil, 20*time.Second)
	done := 0
	var spent [5]time.Duration // load, check after kill, restart, verify, retry
	lap := func(i int, since time.Time) time.Time { spent[i] += time.Since(since); return time.Now() }
	for c := range cycles {
		r.cycle = c
		r.touched = map[string]bool{}
		at := time.Now()
		r.load(srv)
		at = lap(0, at)
		r.checkAfterKill()
		at = lap(1, at)
		srv = startServerEnv(t, bin, r.dir, r.env, nil, 20*time.Second)
		at = lap(2, at)
		r.verify(srv, false)
		at = lap(3, at)
		r.retry(srv)
		at = lap(4, at)
		r.verify(srv, true)
		lap(3, at)
		done = c + 1
	}
	srv.stop()
	if d, err := r.readState(); err != nil {
		t.Fatal(err)
	} else if len(d.temps) > 0 || len(d.emptyLogs) > 0 || len(d.problems()) > 0 {
		t.Errorf("after a clean stop: temp files %v, empty person logs %v, problems %v", d.temps, d.emptyLogs, d.problems())
	}

	facts, eps := 0, 0
	for _, p := range r.people {
		facts += len(p.live)
	}
	for _, e := range r.episodes {
		if e.acked && !e.gone {
			eps++
		}
	}
	label := ""
	if r.env != nil {
		label = " (postgres)"
	}
	line := fmt.Sprintf("crash test%s: cycles=%d acknowledged=%d lost=%d duplicated=%d corrupt_files=%d",
		label, done, r.acked, r.lost, r.duplicated, len(r.corrupt))
	t.Log(line)
	fmt.Println(line)
	t.Logf("crash test detail: wall=%s in_flight_at_kill=%d settled_by_retry=%d landed_before_kill=%d temp_files_left_by_kills=%d empty_logs_left_by_kills=%d ring_evicted=%d people=%d facts_kept=%d episodes_kept=%d proposals_sent=%d episodes_sent=%d retains_asked=%d",
		time.Since(began).Round(time.Millisecond), r.inFlightAtKill, r.settled, r.landedBeforeKill, r.tempsLeft, r.emptyLogsLeft,
		r.ringEvicted, len(r.people), facts, eps, len(r.proposals), len(r.episodes), r.retainAsked)
	t.Logf("crash test time: load+kill %s, disk check after kill %s, restart %s, verify %s, retry %s",
		spent[0].Round(time.Millisecond), spent[1].Round(time.Millisecond), spent[2].Round(time.Millisecond),
		spent[3].Round(time.Millisecond), spent[4].Round(time.Millisecond))
	if r.acked == 0 {
		t.Error("no write was acknowledged: the load never reached the service")
	}
	if r.lost+r.duplicated+len(r.corrupt) > 0 {
		t.Errorf("the service broke its durability promise: %s", line)
	}
}

// errorf reports a finding, up to maxReports of them.
func (r *crashRun) errorf(format string, args ...any) {
	r.t.Helper()
	r.reports++
	if r.reports <= maxReports {
		r.t.Errorf("cycle %d: "+format, append([]any{r.cycle}, args...)...)
	} else if r.reports == maxReports+1 {
		r.t.Errorf("further findings suppressed")
	}
}

func (r *crashRun) addPerson(s api.Subject, veteran bool) *person {
	p := &person{subject: s, key: personfiles.FileName(s), veteran: veteran, live: map[string]string{}}
	r.people[p.key] = p
	r.peopleOrder = append(r.peopleOrder, p.key)
	return p
}

// load runs the writers against srv and kills it -9 after a random delay.
func (r *crashRun) load(srv *server) {
	r.mu.Lock()
	var active []*person
	for _, key := range r.peopleOrder {
		if p := r.people[key]; p.veteran {
			active = append(active, p)
		}
	}
	for k := range freshPerCycle {
		active = append(active, r.addPerson(api.Subject{
			GuildID: fmt.Sprintf("guild-%d", r.cycle%2),
			UserID:  fmt.Sprintf("user-c%d-%d", r.cycle, k),
		}, false))
	}
	r.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range proposalWriters + episodeWriters {
		rng := rand.New(rand.NewPCG(r.rng.Uint64(), uint64(w)))
		if w < proposalWriters {
			wg.Go(func() { r.proposer(ctx, srv, w, rng, active) })
		} else {
			wg.Go(func() { r.recorder(ctx, srv, w, rng) })
		}
	}
	time.Sleep(minKillDelay + time.Duration(r.rng.Int64N(int64(maxKillDelay-minKillDelay)+1)))
	srv.kill9()
	cancel()
	wg.Wait()
	r.inFlightAtKill += len(r.pendingProps) + len(r.pendingEps)
}

func (r *crashRun) proposer(ctx context.Context, srv *server, w int, rng *rand.Rand, active []*person) {
	for n := 0; ctx.Err() == nil; n++ {
		pr := r.nextProposal(w, n, rng, active)
		if pr == nil {
			return
		}
		status, body, err := srv.do(ctx, pr.token, http.MethodPost, proposalsPath, pr.req)
		if !r.settleProposal(pr, status, body, err, false) {
			return
		}
	}
}

func (r *crashRun) recorder(ctx context.Context, srv *server, w int, rng *rand.Rand) {
	for ctx.Err() == nil {
		e := r.nextEpisode(w, rng)
		status, body, err := srv.do(ctx, e.token, http.MethodPost, episodesPath, e.req)
		if !r.settleEpisode(e, status, body, err, false) {
			return
		}
	}
}

var kinds = []api.Kind{api.KindPersonFact, api.KindPreference, api.KindRelationshipNote}

// nextProposal picks a person under the gate and makes a new fact or a
// supersede of one of its acknowledged facts, from the operator or the text
// bridge (then proposed by the subject, who may replace facts about them).
func (r *crashRun) nextProposal(w, n int, rng *rand.Rand, active []*person) *proposal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var open []*person
	for _, p := range active {
		if n := len(p.live) + p.unresolved; n < newFactGate || (n < api.MaxFactsPerPerson && len(p.live) > 0) {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return nil
	}
	p := open[rng.IntN(len(open))]
	id := fmt.Sprintf("c%d-w%d-%d", r.cycle, w, n)
	fi := api.FactInput{
		Subject:    p.subject,
		Kind:       kinds[rng.IntN(len(kinds))],
		Body:       "crash fact " + id + " " + strings.Repeat("z", rng.IntN(200)) + ".",
		Visibility: api.Visibility{Scope: api.ScopeGuild},
		Confidence: 0.5,
		Provenance: api.Provenance{SourceEventID: "evt-" + id, ProposerUserID: p.subject.UserID, ChannelID: "chan-1"},
	}
	token := textToken
	if rng.IntN(2) == 0 {
		token = opToken
		if rng.IntN(4) == 0 {
			fi.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
		}
	}
	if rng.IntN(4) == 0 && fi.Visibility.Scope == api.ScopeGuild {
		fi.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "chan-1"}
	}
	if len(p.live) > 0 && (rng.IntN(5) < 2 || len(p.live)+p.unresolved >= newFactGate) {
		ids := make([]string, 0, len(p.live))
		for f := range p.live {
			ids = append(ids, f)
		}
		slices.Sort(ids)
		fi.SupersedesFactID = ids[rng.IntN(len(ids))]
	}
	pr := &proposal{id: id, key: p.key, token: token, req: api.ProposalRequest{SchemaVersion: api.SchemaVersion, ProposalID: id, Fact: fi}}
	r.proposals[id] = pr
	p.unresolved++
	r.touched[p.key] = true
	return pr
}

var episodeLanes = []struct {
	lane  api.Lane
	token string
}{
	{api.LaneDiscordVoice, voiceToken},
	{api.LaneGameplay, gameToken},
}

func (r *crashRun) nextEpisode(w int, rng *rand.Rand) *episode {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := r.nextSeq
	r.nextSeq++
	l := episodeLanes[(w-proposalWriters)%len(episodeLanes)]
	if w-proposalWriters >= len(episodeLanes) {
		l = episodeLanes[rng.IntN(len(episodeLanes))]
	}
	retain := r.retainAsked < retainBudget && rng.IntN(6) == 0
	if retain {
		r.retainAsked++
	}
	id := fmt.Sprintf("ck-%07d", seq)
	e := &episode{id: id, seq: seq, token: l.token, req: api.EpisodeRequest{
		SchemaVersion: api.SchemaVersion,
		EpisodeID:     id,
		Lane:          l.lane,
		Room:          "room-" + string(l.lane),
		Summary:       "crash note " + id + " " + strings.Repeat("y", rng.IntN(120)) + ".",
		Retain:        retain,
		OccurredAt:    epoch.Add(time.Duration(seq) * time.Second),
		Provenance:    api.EpisodeProvenance{SessionID: fmt.Sprintf("cycle-%d", r.cycle), SelfAuthored: true},
	}}
	r.episodes[id] = e
	return e
}

// settleProposal records the outcome of one attempt and reports whether the
// writer may go on.
func (r *crashRun) settleProposal(pr *proposal, status int, body []byte, err error, retry bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok2xx := status == http.StatusCreated || status == http.StatusOK
	switch {
	case err == nil && ok2xx:
		var resp api.ProposalResponse
		if jerr := json.Unmarshal(body, &resp); jerr != nil || resp.Fact == nil {
			r.errorf("proposal %s: %d answer without a fact: %s", pr.id, status, body)
			return false
		}
		r.ackProposal(pr, status, resp, retry)
		return true
	case ok2xx:
		pr.sawStatus = true
	case err == nil:
		r.errorf("proposal %s answered %d: %s", pr.id, status, body)
		r.people[pr.key].unresolved--
		return false
	}
	if retry {
		r.errorf("retry of proposal %s after the restart failed: %d %v", pr.id, status, err)
		return false
	}
	r.pendingProps = append(r.pendingProps, pr)
	return false
}

func (r *crashRun) ackProposal(pr *proposal, status int, resp api.ProposalResponse, retry bool) {
	f := resp.Fact
	p := r.people[pr.key]
	in := pr.req.Fact
	if f.Subject != in.Subject || f.Body != in.Body || f.Provenance.SourceEventID != in.Provenance.SourceEventID || f.FactID == "" {
		r.errorf("proposal %s acknowledged a different fact: %+v", pr.id, f)
	}
	if status == http.StatusOK && (!retry || !resp.Replayed) {
		r.errorf("proposal %s answered 200 (replayed=%v) on its first attempt", pr.id, resp.Replayed)
	}
	superseded := resp.Superseded || (status == http.StatusOK && f.SupersedesFactID != "")
	if superseded {
		old := in.SupersedesFactID
		if f.SupersedesFactID != old || old == "" {
			r.errorf("proposal %s replaced %q, asked to replace %q", pr.id, f.SupersedesFactID, old)
		}
		if other, dup := r.supersededBy[old]; dup {
			r.lost++
			r.errorf("fact %s was replaced by two acknowledged proposals, %s and %s: one update was lost", old, other, pr.id)
		}
		r.supersededBy[old] = pr.id
		delete(p.live, old)
	} else if status == http.StatusCreated && in.SupersedesFactID != "" && resp.Reason == "" {
		r.errorf("proposal %s named %s, replaced nothing and gave no reason", pr.id, in.SupersedesFactID)
	}
	if _, dup := p.live[f.FactID]; dup {
		r.duplicated++
		r.errorf("fact id %s acknowledged twice", f.FactID)
	}
	p.live[f.FactID] = pr.id
	p.unresolved--
	pr.acked, pr.factID = true, f.FactID
	if retry {
		r.settled++
	} else {
		r.acked++
	}
}

func (r *crashRun) settleEpisode(e *episode, status int, body []byte, err error, retry bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok2xx := status == http.StatusCreated || status == http.StatusOK
	switch {
	case err == nil && ok2xx:
		var resp api.EpisodeResponse
		if jerr := json.Unmarshal(body, &resp); jerr != nil {
			r.errorf("episode %s: %d answer does not decode: %s", e.id, status, body)
			return false
		}
		got := resp.Episode
		if got.EpisodeID != e.id || got.Lane != e.req.Lane || got.Summary != e.req.Summary || !got.OccurredAt.Equal(e.req.OccurredAt) {
			r.errorf("episode %s acknowledged a different note: %+v", e.id, got)
		}
		if status == http.StatusOK && !retry {
			r.errorf("episode %s answered 200 on its first attempt", e.id)
		}
		if e.req.Retain && !resp.Retained {
			r.errorf("episode %s: retain refused below the ceiling: %s", e.id, resp.RetainReason)
		}
		e.acked, e.retained = true, resp.Retained
		if retry {
			r.settled++
		} else {
			r.acked++
		}
		return true
	case ok2xx:
		e.sawStatus = true
	case err == nil:
		r.errorf("episode %s answered %d: %s", e.id, status, body)
		return false
	}
	if retry {
		r.errorf("retry of episode %s after the restart failed: %d %v", e.id, status, err)
		return false
	}
	r.pendingEps = append(r.pendingEps, e)
	return false
}

func (r *crashRun) noteCorrupt(d *diskState) {
	for _, p := range d.corrupt {
		r.corrupt[p] = true
	}
	for _, p := range d.broken {
		r.corrupt[strings.SplitN(p, ":", 2)[0]] = true
	}
}

// checkAfterKill reads the files the dead process left: each must be whole
// (old or new, never torn); temp files are allowed until the restart.
func (r *crashRun) checkAfterKill() {
	if r.settle != nil {
		r.settle()
	}
	d, err := r.readState()
	if err != nil {
		r.t.Fatal(err)
	}
	r.tempsLeft += len(d.temps)
	r.emptyLogsLeft += len(d.emptyLogs)
	r.noteCorrupt(d)
	for _, p := range d.problems() {
		r.errorf("right after kill -9: %s", p)
	}
}

// verify compares the restarted service and its files with the record.
// Before the retries (exact=false) a write sent but not acknowledged may or
// may not be there; after them (exact=true) every write has an answer and
// the data must equal the record.
func (r *crashRun) verify(srv *server, exact bool) {
	d, err := r.readState()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, p := range d.temps {
		r.errorf("temp file survived the restart: %s", p)
	}
	for _, p := range d.emptyLogs {
		r.errorf("empty person log survived the restart: %s", p)
	}
	r.noteCorrupt(d)
	for _, p := range d.problems() {
		r.errorf("after the restart: %s", p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	wantPeople, wantFacts := r.checkPeople(srv, d, exact)
	ring, kept, perLane := r.checkEpisodes(d, exact)

	var cat api.Catalog
	srv.get(opToken, "/v1/memory", &cat)
	total := 0
	for _, n := range perLane {
		total += n
	}
	if cat.People != wantPeople || cat.Facts != wantFacts || cat.Unretained != ring || cat.Retained != kept || cat.Episodes != total {
		r.errorf("catalog %+v, files hold %d people, %d facts, %d unretained and %d retained episodes", cat, wantPeople, wantFacts, ring, kept)
	}
	for lane, n := range perLane {
		if cat.EpisodesPerLane[lane] != n {
			r.errorf("catalog says lane %s holds %d episodes, the files %d", lane, cat.EpisodesPerLane[lane], n)
		}
	}
}

// checkPeople checks every person file against the record, and for the
// people written this cycle also the operator export. It returns the people
// and facts on disk for the catalog check.
func (r *crashRun) checkPeople(srv *server, d *diskState, exact bool) (nPeople, nFacts int) {
	for name, pf := range d.people {
		if r.people[name] == nil {
			r.errorf("person file %s is about no one this test wrote about", name)
		}
		if len(pf.Facts) > 0 {
			nPeople++
			nFacts += len(pf.Facts)
		}
	}
	for _, key := range r.peopleOrder {
		p := r.people[key]
		pf := d.people[key]
		if !r.touched[key] {
			r.checkFacts("file "+key, p, pf.Facts, exact)
			continue
		}
		var exp api.RecallResponse
		srv.get(opToken, "/v1/memory/discord-people/"+p.subject.GuildID+"/"+p.subject.UserID+"/export", &exp)
		r.checkFacts("export of "+key, p, exp.Facts, exact)
		if !sameFacts(exp.Facts, pf.Facts) {
			r.errorf("export of %s differs from its file (%d and %d facts)", key, len(exp.Facts), len(pf.Facts))
		}
	}
	return nPeople, nFacts
}

func sameFacts(a, b []api.Fact) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]string{}
	for _, f := range a {
		m[f.FactID] = f.Body
	}
	for _, f := range b {
		if body, ok := m[f.FactID]; !ok || body != f.Body {
			return false
		}
	}
	return true
}

func (r *crashRun) checkFacts(where string, p *person, facts []api.Fact, exact bool) {
	if len(facts) > api.MaxFactsPerPerson {
		r.errorf("%s: %d facts, over the bound", where, len(facts))
	}
	seenFact := map[string]bool{}
	seenProp := map[string]string{}
	for _, f := range facts {
		if seenFact[f.FactID] {
			r.duplicated++
			r.errorf("%s: fact %s appears twice", where, f.FactID)
			continue
		}
		seenFact[f.FactID] = true
		pid, _ := strings.CutPrefix(f.Provenance.SourceEventID, "evt-")
		pr := r.proposals[pid]
		if pr == nil || pr.key != p.key {
			r.errorf("%s: fact %s comes from no proposal this test sent about this person", where, f.FactID)
			continue
		}
		if f.Body != pr.req.Fact.Body || f.Subject != p.subject || f.Kind != pr.req.Fact.Kind {
			r.errorf("%s: fact %s does not hold what proposal %s sent", where, f.FactID, pid)
		}
		if other, dup := seenProp[pid]; dup {
			r.duplicated++
			r.errorf("%s: proposal %s stored twice, as %s and %s", where, pid, other, f.FactID)
		}
		seenProp[pid] = f.FactID
		if by, ok := r.supersededBy[f.FactID]; ok {
			r.lost++
			r.errorf("%s: fact %s is still kept though acknowledged proposal %s replaced it", where, f.FactID, by)
		}
		switch {
		case pr.acked && pr.factID != f.FactID:
			r.duplicated++
			r.errorf("%s: proposal %s was acknowledged as fact %s but is stored as %s", where, pid, pr.factID, f.FactID)
		case !pr.acked && exact:
			r.errorf("%s: fact %s of unsettled proposal %s", where, f.FactID, pid)
		case !pr.acked:
			r.landedFacts[pid] = f.FactID
		}
	}
	for factID, pid := range p.live {
		if seenFact[factID] {
			continue
		}
		if !exact && r.pendingSupersedes(factID) {
			continue // an unacknowledged proposal may have replaced it; the retry tells
		}
		r.lost++
		r.errorf("%s: acknowledged fact %s (proposal %s) is missing", where, factID, pid)
	}
	if !exact {
		for _, pr := range r.pendingProps {
			if pr.key == p.key && pr.sawStatus {
				if _, ok := seenProp[pr.id]; !ok {
					r.lost++
					r.errorf("%s: proposal %s got a 2xx status line but is not stored", where, pr.id)
				}
			}
		}
	}
}

func (r *crashRun) pendingSupersedes(factID string) bool {
	for _, pr := range r.pendingProps {
		if pr.req.Fact.SupersedesFactID == factID {
			return true
		}
	}
	return false
}

func (r *crashRun) pendingEpisodeLanes() string {
	var out []string
	for _, e := range r.pendingEps {
		out = append(out, e.id+"@"+string(e.req.Lane))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func epLess(a, b api.Episode) int {
	if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
		return c
	}
	return strings.Compare(a.EpisodeID, b.EpisodeID)
}

// checkEpisodes derives what the store presents from the lane files (every
// retained note, the newest 128 unretained) and checks it against the
// record. It returns the ring size, the retained count and the presented
// episodes per lane, for the catalog check.
func (r *crashRun) checkEpisodes(d *diskState, exact bool) (ring, kept int, perLane map[api.Lane]int) {
	var list []api.Episode
	seen := map[string]api.Lane{}
	for _, lane := range api.AllLanes() {
		for _, ep := range d.lanes[lane] {
			if other, dup := seen[ep.EpisodeID]; dup {
				r.duplicated++
				r.errorf("episode %s is stored twice (lanes %s and %s)", ep.EpisodeID, other, lane)
				continue
			}
			seen[ep.EpisodeID] = lane
			list = append(list, ep)
		}
	}
	slices.SortFunc(list, epLess)
	presented := map[string]api.Episode{}
	var newest []api.Episode // unretained, newest first
	perLane = map[api.Lane]int{}
	for _, lane := range api.AllLanes() {
		perLane[lane] = 0
	}
	for i := len(list) - 1; i >= 0; i-- {
		ep := list[i]
		if ep.Retained {
			kept++
		} else if len(newest) < api.EpisodeRingCapacity {
			newest = append(newest, ep)
		} else {
			continue // over the ring: hidden at load, gone at the next write of its lane
		}
		presented[ep.EpisodeID] = ep
		perLane[ep.Lane]++
	}
	for id, ep := range presented {
		e := r.episodes[id]
		if e == nil {
			r.errorf("episode %s was never sent by this test", id)
			continue
		}
		if ep.Summary != e.req.Summary || ep.Room != e.req.Room || ep.Lane != e.req.Lane || !ep.OccurredAt.Equal(e.req.OccurredAt) {
			r.errorf("episode %s does not hold what was sent", id)
		}
		switch {
		case e.gone:
			r.errorf("episode %s came back after it had left the ring", id)
		case e.acked && ep.Retained != e.retained:
			r.errorf("episode %s: retained=%v on disk, acknowledged as retained=%v", id, ep.Retained, e.retained)
		case !e.acked && exact:
			r.errorf("episode %s of an unsettled request", id)
		case !e.acked:
			r.landedEps[id] = true
		}
	}
	// An acknowledged unretained note may be missing only when the ring's
	// rule removed it: when at least 128 newer unretained notes are kept or
	// acknowledged (a lost newer one counts against its older neighbours
	// exactly once). Anything else is a loss.
	var missing []*episode
	for id, e := range r.episodes {
		if !e.acked || e.gone {
			continue
		}
		if _, ok := presented[id]; ok {
			continue
		}
		if e.retained {
			e.gone = true
			r.lost++
			r.errorf("acknowledged retained episode %s is missing (exact=%v)", id, exact)
			continue
		}
		missing = append(missing, e)
	}
	slices.SortFunc(missing, func(a, b *episode) int { return int(b.seq - a.seq) }) // newest first
	for i, e := range missing {
		ep := api.Episode{EpisodeID: e.id, OccurredAt: e.req.OccurredAt}
		newerKept, _ := slices.BinarySearchFunc(newest, ep, func(kept, target api.Episode) int { return -epLess(kept, target) })
		e.gone = true
		if newerKept+i >= api.EpisodeRingCapacity {
			r.ringEvicted++
			continue
		}
		r.lost++
		oldest := "none"
		if len(newest) > 0 {
			oldest = newest[len(newest)-1].EpisodeID
		}
		r.errorf("acknowledged episode %s (lane %s) is missing with only %d newer unretained notes kept or acknowledged; the ring holds %d, the oldest %s (exact=%v, unsettled %s)",
			e.id, e.req.Lane, newerKept+i, len(newest), oldest, exact, r.pendingEpisodeLanes())
	}
	if !exact {
		for _, e := range r.pendingEps {
			if e.sawStatus && !r.landedEps[e.id] {
				r.lost++
				r.errorf("episode %s got a 2xx status line but is not kept", e.id)
			}
		}
	}
	return len(newest), kept, perLane
}

// retry sends every unsettled request again to the restarted service. What
// was on disk must be replayed (200, the same fact), what was not must be
// stored now (201): anything else is a lost or duplicated write.
func (r *crashRun) retry(srv *server) {
	r.mu.Lock()
	props, eps := r.pendingProps, r.pendingEps
	r.pendingProps, r.pendingEps = nil, nil
	r.mu.Unlock()
	slices.SortFunc(props, func(a, b *proposal) int { return strings.Compare(a.id, b.id) })
	slices.SortFunc(eps, func(a, b *episode) int { return int(a.seq - b.seq) })
	ctx := context.Background()
	for _, pr := range props {
		status, body, err := srv.do(ctx, pr.token, http.MethodPost, proposalsPath, pr.req)
		r.mu.Lock()
		factID, landed := r.landedFacts[pr.id]
		r.mu.Unlock()
		switch {
		case err != nil:
		case status == http.StatusOK && !landed:
			r.errorf("proposal %s replayed after the restart but was not stored: %s", pr.id, body)
		case status == http.StatusCreated && landed:
			r.duplicated++
			r.errorf("proposal %s stored again after the restart though fact %s was kept", pr.id, factID)
		case status == http.StatusOK:
			r.landedBeforeKill++
			var resp api.ProposalResponse
			if json.Unmarshal(body, &resp) == nil && resp.Fact != nil && resp.Fact.FactID != factID {
				r.errorf("proposal %s replayed as fact %s, stored as %s", pr.id, resp.Fact.FactID, factID)
			}
		}
		r.settleProposal(pr, status, body, err, true)
	}
	for _, e := range eps {
		status, body, err := srv.do(ctx, e.token, http.MethodPost, episodesPath, e.req)
		r.mu.Lock()
		landed := r.landedEps[e.id]
		r.mu.Unlock()
		switch {
		case err != nil:
		case status == http.StatusOK && !landed:
			r.errorf("episode %s replayed after the restart but was not kept: %s", e.id, body)
		case status == http.StatusCreated && landed:
			r.duplicated++
			r.errorf("episode %s stored again after the restart though it was kept", e.id)
		case status == http.StatusOK:
			r.landedBeforeKill++
		}
		r.settleEpisode(e, status, body, err, true)
	}
	r.mu.Lock()
	clear(r.landedFacts)
	clear(r.landedEps)
	r.mu.Unlock()
}
