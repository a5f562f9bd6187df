package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/personfiles"
	"github.com/clankie/clankie/memory/pgstore"
)

// schemaV2 is the PostgreSQL schema at version 2 (pgstore's migrations 1
// and 2, which never change), for the test of migration 3.
const schemaV2 = `CREATE TABLE clankie_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
	INSERT INTO clankie_schema (version) VALUES (1), (2);
	CREATE TABLE people (
		name       text COLLATE "C" PRIMARY KEY,
		guild_id   text NOT NULL,
		user_id    text NOT NULL,
		facts      integer NOT NULL,
		state      jsonb NOT NULL,
		updated_at timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX people_with_facts ON people (name) WHERE facts > 0;
	CREATE TABLE episodes (
		episode_id   text PRIMARY KEY,
		lane         text NOT NULL,
		retained     boolean NOT NULL,
		asked_retain boolean,
		record       jsonb NOT NULL
	);
	CREATE TABLE episode_clock (id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL);
	INSERT INTO episode_clock VALUES (1, 0);
	CREATE TABLE interaction_claims (
		interaction_id text COLLATE "C" PRIMARY KEY,
		claimed_at     timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX interaction_claims_claimed_at ON interaction_claims (claimed_at);`

// v2State is a person's state as the version-2 schema's people.state held
// it (people.Person's whole-state encoding of the time).
type v2State struct {
	Subject   api.Subject             `json:"subject"`
	Seq       uint64                  `json:"seq"`
	Facts     []api.Fact              `json:"facts"`
	Proposals []people.ProposalRecord `json:"proposals"`
}

// TestPostgresSchema3KeepsEveryPerson writes people in the version-2
// schema's jsonb rows (taken from a file store the real service filled:
// instants with nanoseconds and an offset, facts stored out of time order,
// a superseded and a forgotten fact, records with and without digests),
// lets pgstore.Open migrate them, and checks that every fact comes back
// the same to the byte through encoding/json, every record in its order,
// the change counters, the counts and the list order, and that a retried
// proposal is still a replay.
func TestPostgresSchema3KeepsEveryPerson(t *testing.T) {
	requirePostgres(t)
	ctx := context.Background()
	// Near the database's clock, which the PostgreSQL service reads (an
	// expiry must not have passed there), with nanoseconds.
	clock := time.Now().UTC().Truncate(time.Second).Add(-time.Hour + 123456789)
	base := t.TempDir()
	dirA, dirPG := filepath.Join(base, "a"), filepath.Join(base, "pg")
	serve := func(dir string, pg bool) *harness {
		svc := newTestServiceOn(t, dir, testTokens, zap.NewNop(), func() time.Time { return clock }, pg)
		srv := httptest.NewServer(svc.handler)
		t.Cleanup(srv.Close)
		return &harness{t: t, url: srv.URL, dir: dir, now: &clock}
	}

	a := serve(dirA, false)
	for u := range 3 {
		for i := range 4 {
			req := migrated(u, i, fromMsg)
			if u == 1 && i == 2 {
				// An expiry in another offset, to the nanosecond.
				at := clock.Add(90 * 24 * time.Hour).In(time.FixedZone("", 5*3600+1800)).Add(987)
				req.Fact.ExpiresAt = &at
			}
			if u == 0 && i == 3 {
				req.Fact.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "30"}
				req.Fact.Body = "a <tag> & \"quotes\", ünïcode\nand a second line"
				req.Fact.Confidence = 0.1
			}
			a.propose(txt, req)
			// Time runs backwards now and then, so the stored order is not
			// the order of createdAt: the conversion must keep the former.
			clock = clock.Add(time.Duration(7-3*(i%2)*3) * time.Second).Add(1)
		}
	}
	old := a.propose(txt, fact("s0", "10", "21", "21", "30", "an old fact of 21"))
	corr := fact("s1", "10", "21", "21", "30", "a correction of 21")
	corr.Fact.SupersedesFactID = old.Fact.FactID
	a.propose(txt, corr)
	gone := a.propose(txt, fact("g0", "10", "22", "22", "30", "forgotten"))
	if r := a.do(txt, "DELETE", "/v1/memory/discord-people/10/22/"+gone.Fact.FactID+"?requesterUserId=22", nil); r.status != http.StatusNoContent {
		t.Fatalf("forget: %d %s", r.status, r.body)
	}
	private := fact("priv", "10", "20", "", "", "operator-only note")
	private.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	a.propose(op, private)

	// The people as the file store keeps them: what version 2 held.
	root, err := durable.OpenRoot(dirA)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files, err := personfiles.Open(root, zap.NewNop(), func() time.Time { return clock }, durable.Disk{}, personfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []*people.Person
	if err := files.Each(ctx, func(p *people.Person) error { want = append(want, p.Clone()); return nil }); err != nil {
		t.Fatal(err)
	}
	_ = files.Close()
	if len(want) != 3 {
		t.Fatalf("the file store holds %d people, want 3", len(want))
	}

	// The version-2 schema, its rows written as version 2 wrote them,
	// with a person whose only fact was forgotten (a row kept for its
	// record, not counted) and one whose state has null lists.
	dsn := os.Getenv(testPostgresEnv)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := pgx.Identifier{testSchema(dirPG)}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema+"; SET search_path = "+schema+";\n"+schemaV2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	forgotten := &people.Person{Subject: api.Subject{GuildID: "10", UserID: "23"}, Seq: 2, Facts: []api.Fact{},
		Proposals: []people.ProposalRecord{{ProposalID: "only", FactID: "fgone234"}}}
	nulls := &people.Person{Subject: api.Subject{GuildID: "10", UserID: "24"}, Seq: 5}
	for _, p := range append(slices.Clone(want), forgotten, nulls) {
		state, err := json.Marshal(v2State{Subject: p.Subject, Seq: p.Seq, Facts: p.Facts, Proposals: p.Proposals})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO people (name, guild_id, user_id, facts, state) VALUES ($1, $2, $3, $4, $5)",
			personfiles.FileName(p.Subject), p.Subject.GuildID, p.Subject.UserID, len(p.Facts), state); err != nil {
			t.Fatal(err)
		}
	}
	nanos := 0
	for _, p := range want {
		for _, f := range p.Facts {
			if f.CreatedAt.Nanosecond()%1000 != 0 {
				nanos++
			}
		}
	}
	if nanos == 0 {
		t.Fatal("no fact has an instant finer than timestamptz keeps: the test proves nothing")
	}

	// Opening migrates.
	pg := serve(dirPG, true)
	db, err := pgstore.Open(ctx, dsn, nil, nil, pgstore.Options{Schema: testSchema(dirPG), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	var oldTable bool
	if err := conn.QueryRow(ctx, "SELECT max(version), to_regclass('people') IS NOT NULL FROM clankie_schema").Scan(&version, &oldTable); err != nil {
		t.Fatal(err)
	}
	if version != 4 || oldTable {
		t.Fatalf("after Open the schema is version %d, the people table still there: %v", version, oldTable)
	}
	// Migration 4 gave every person a version of their own.
	var rows, versions int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT version) FROM person").Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || versions != rows {
		t.Fatalf("%d person rows hold %d versions; want one each", rows, versions)
	}
	var got []*people.Person
	if err := db.People().Each(ctx, func(p *people.Person) error { got = append(got, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d people with facts after the migration, want %d", len(got), len(want))
	}
	for i := range want {
		samePerson(t, got[i], want[i])
	}

	// Counts and list order: the forgotten and the empty are not counted.
	ps := db.People()
	if err := ps.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	facts := 0
	for _, p := range want {
		facts += len(p.Facts)
	}
	if st := ps.Stats(); st.People != 3 || st.Facts != facts {
		t.Fatalf("stats %+v, want 3 people and %d facts", st, facts)
	}
	var names []string
	for cursor := ""; ; {
		page, err := ps.List(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.People {
			names = append(names, fmt.Sprintf("%s/%s:%d", s.Subject.GuildID, s.Subject.UserID, s.Facts))
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	var wantNames []string
	for _, p := range want {
		wantNames = append(wantNames, fmt.Sprintf("%s/%s:%d", p.Subject.GuildID, p.Subject.UserID, len(p.Facts)))
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("listed %v, want %v", names, wantNames)
	}

	// The records answer retries: a replay, one naming another message a
	// conflict, and the forgotten person's a replay of a forgotten fact.
	for _, h := range []*harness{a, pg} {
		if r := h.do(txt, "POST", proposals, migrated(2, 3, fromMsg)); r.status != http.StatusOK {
			t.Fatalf("a retry: %d %s", r.status, r.body)
		}
		if r := h.do(txt, "POST", proposals, migrated(2, 3, "1300000000000000078")); r.status != http.StatusConflict {
			t.Fatalf("a retry from another message: %d %s", r.status, r.body)
		}
		if r := h.do(txt, "POST", proposals, fact("g0", "10", "22", "22", "30", "forgotten")); r.status != http.StatusOK {
			t.Fatalf("a retry of a forgotten fact's proposal: %d %s", r.status, r.body)
		}
	}
	for u := range 3 {
		user := fmt.Sprint(20 + u)
		x, y := a.do(op, "GET", "/v1/memory/discord-people/10/"+user+"/export", nil), pg.do(op, "GET", "/v1/memory/discord-people/10/"+user+"/export", nil)
		if string(x.body) != string(y.body) {
			t.Fatalf("export of %s:\n files %s\n    pg %s", user, x.body, y.body)
		}
	}
}

// samePerson fails unless got is want: subject, change counter, every fact
// to the byte through encoding/json and every record, in their order.
func samePerson(t *testing.T, got, want *people.Person) {
	t.Helper()
	if got.Subject != want.Subject || got.Seq != want.Seq {
		t.Fatalf("person %v seq %d, want %v seq %d", got.Subject, got.Seq, want.Subject, want.Seq)
	}
	g, _ := json.Marshal(got.Facts)
	w, _ := json.Marshal(want.Facts)
	if string(g) != string(w) {
		t.Fatalf("the facts of %v:\n got %s\nwant %s", want.Subject, g, w)
	}
	if len(got.Proposals) != len(want.Proposals) {
		t.Fatalf("%v has %d records, want %d", want.Subject, len(got.Proposals), len(want.Proposals))
	}
	for i, r := range want.Proposals {
		x := got.Proposals[i]
		if x.ProposalID != r.ProposalID || x.Digest != r.Digest || x.FactID != r.FactID {
			t.Fatalf("%v's record %d is %+v, want %+v", want.Subject, i, x, r)
		}
	}
}

// TestPostgresPersonRowsFollowEveryChange puts whole states over one
// person through people.Memory on pgstore.People (a migration's put, which
// may reorder, change, add and drop facts and records at once) and checks
// after each that the person reads back exactly, that a put of the same
// state writes no row, and that forgetting the person leaves no row.
func TestPostgresPersonRowsFollowEveryChange(t *testing.T) {
	requirePostgres(t)
	ctx := context.Background()
	db := openTestDB(t, t.TempDir(), zap.NewNop(), nil)
	mem := people.New(db.People())
	s := api.Subject{GuildID: "10", UserID: "20"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	expiry := at.Add(1000 * time.Hour).In(time.FixedZone("", -7*3600))
	f := func(id, body string) api.Fact {
		return api.Fact{FactID: id, Subject: s, Kind: api.KindPersonFact, Body: body,
			Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.3, CreatedAt: at, UpdatedAt: at.Add(1),
			Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: "e-" + id, ProposerUserID: "20", ChannelID: "30"}}
	}
	r := func(p, digest, fact string) people.ProposalRecord {
		return people.ProposalRecord{ProposalID: p, Digest: digest, FactID: fact}
	}
	expiring := f("fc", "expires")
	expiring.ExpiresAt = &expiry
	changed := f("fb", "changed body")
	changed.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "31"}
	changed.SupersedesFactID = "fz"
	for _, step := range []struct {
		name    string
		facts   []api.Fact
		records []people.ProposalRecord
	}{
		{"new", []api.Fact{f("fa", "a"), f("fb", "b"), expiring}, []people.ProposalRecord{r("pa", "d1", "fa"), r("pb", "d2", "fb"), r("pc", "d3", "fc")}},
		{"reordered", []api.Fact{expiring, f("fa", "a"), f("fb", "b")}, []people.ProposalRecord{r("pc", "d3", "fc"), r("pb", "d2", "fb"), r("pa", "d1", "fa")}},
		{"changed", []api.Fact{expiring, f("fa", "a"), changed}, []people.ProposalRecord{r("pc", "", "fc"), r("pb", "d2", "fb"), r("pa", "d1", "fa")}},
		{"dropped and added", []api.Fact{f("fa", "a"), f("fd", "d")}, []people.ProposalRecord{r("pb", "d2", "fb"), r("pd", "d4", "fd")}},
		{"moved to the end", []api.Fact{f("fd", "d"), f("fa", "a"), f("fe", "e")}, []people.ProposalRecord{r("pd", "d4", "fd"), r("pb", "d2", "fb")}},
	} {
		want := &people.Person{Subject: s, Facts: step.facts, Proposals: step.records}
		changed, err := mem.Put(ctx, want, false)
		if err != nil || !changed {
			t.Fatalf("%s: put changed %v, %v", step.name, changed, err)
		}
		var got []*people.Person
		if err := db.People().Each(ctx, func(p *people.Person) error { got = append(got, p); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d people", step.name, len(got))
		}
		want.Seq = got[0].Seq
		samePerson(t, got[0], want)
		before, err := db.Dump(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if changed, err := mem.Put(ctx, want, false); err != nil || changed {
			t.Fatalf("%s: the same state put again changed %v, %v", step.name, changed, err)
		}
		if after, _ := db.Dump(ctx); !maps.Equal(before, after) {
			t.Fatalf("%s: a put of the same state wrote rows", step.name)
		}
	}
	if _, err := mem.ForgetPerson(ctx, s); err != nil {
		t.Fatal(err)
	}
	dump, err := db.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range dump {
		if strings.HasPrefix(k, "person") {
			t.Fatalf("forgetting the person left %s", k)
		}
	}
}

// TestPostgresForgetPersonRacesProposals forgets a person while proposals
// about them arrive on other connections: a proposal that waited for the
// person's lock while the forget deleted their row must create the person
// anew, never fail.
func TestPostgresForgetPersonRacesProposals(t *testing.T) {
	requirePostgres(t)
	ctx := context.Background()
	db := openTestDB(t, t.TempDir(), zap.NewNop(), nil)
	mem := people.New(db.People())
	s := api.Subject{GuildID: "10", UserID: "20"}
	who := api.Principal{Lane: api.LaneOperator}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 3 {
		wg.Go(func() {
			for i := range 40 {
				req := fact(fmt.Sprintf("race-%d-%d", w, i), "10", "20", "20", "30", "racing")
				if _, _, err := mem.Propose(ctx, who, req); err != nil {
					errs <- fmt.Errorf("proposal %d of writer %d: %w", i, w, err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 40 {
			if _, err := mem.ForgetPerson(ctx, s); err != nil {
				errs <- fmt.Errorf("forget: %w", err)
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
