package memory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
)

// TestMigrateFilesToPostgresAndBack fills a data directory through the
// service, migrates it to PostgreSQL (a dry run first, then twice: the
// second run writes nothing) and from there to a fresh directory, and
// checks that every person's export, every episode and a proposal's
// idempotency survive each hop.
func TestMigrateFilesToPostgresAndBack(t *testing.T) {
	requirePostgres(t)
	ctx := context.Background()
	clock := time.Now().UTC()
	now := func() time.Time { return clock }
	serve := func(dir string, pg bool) *harness {
		svc := newTestServiceOn(t, dir, testTokens, zap.NewNop(), now, pg)
		srv := httptest.NewServer(svc.handler)
		t.Cleanup(srv.Close)
		return &harness{t: t, url: srv.URL, dir: dir, now: &clock}
	}
	base := t.TempDir()
	dirA, dirPG, dirB := filepath.Join(base, "a"), filepath.Join(base, "pg"), filepath.Join(base, "b")

	a := serve(dirA, false)
	for u := range 3 {
		for i := range 4 {
			a.propose(txt, migrated(u, i, fromMsg))
		}
	}
	private := fact("priv", "10", "20", "", "", "operator-only note")
	private.Fact.Visibility = api.Visibility{Scope: api.ScopeOperatorPrivate}
	a.propose(op, private)
	for i := range 5 {
		r := a.do(txt, "POST", "/v1/memory/captain-episodes", api.EpisodeRequest{SchemaVersion: 1, EpisodeID: fmt.Sprintf("mig-%d", i),
			Lane: api.LaneDiscordPresence, Room: "room", Summary: fmt.Sprintf("note %d", i), Retain: i == 0,
			OccurredAt: clock.Add(-time.Duration(i) * time.Minute), Provenance: api.EpisodeProvenance{SessionID: "s", SelfAuthored: true}})
		if r.status != http.StatusCreated {
			t.Fatalf("record: %d %s", r.status, r.body)
		}
	}
	exports := func(h *harness) string {
		var b strings.Builder
		for u := range 3 {
			b.WriteString(string(h.do(op, "GET", fmt.Sprintf("/v1/memory/discord-people/10/%d/export", 20+u), nil).body))
		}
		b.WriteString(string(h.do(op, "GET", "/v1/memory/captain-episodes?q=note&limit=32", nil).body))
		return b.String()
	}
	want := exports(a)
	if !strings.Contains(want, `"sourceMessageId":"`+fromMsg+`"`) {
		t.Fatalf("the fact from a message was exported without it: %s", want)
	}
	// A proposal's message id is part of its digest, so the records that
	// came along answer a retry naming it with a replay and one naming
	// another message with 409.
	retries := func(h *harness, where string) {
		t.Helper()
		if r := h.do(txt, "POST", proposals, migrated(2, 3, fromMsg)); r.status != http.StatusOK {
			t.Fatalf("%s: a retry from the same message: %d %s", where, r.status, r.body)
		}
		if r := h.do(txt, "POST", proposals, migrated(2, 3, "1300000000000000078")); r.status != http.StatusConflict {
			t.Fatalf("%s: a retry from another message: %d %s", where, r.status, r.body)
		}
	}

	// The test service holds no LOCK (only Start takes it), so the
	// migration may lock dirA while a still answers reads.
	pgURL := os.Getenv(testPostgresEnv) + "&search_path=" + testSchema(dirPG)
	if !strings.Contains(os.Getenv(testPostgresEnv), "?") {
		pgURL = os.Getenv(testPostgresEnv) + "?search_path=" + testSchema(dirPG)
	}
	pg := serve(dirPG, true) // creates the schema

	dry, err := Migrate(ctx, dirA, pgURL, true, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if dry.People != 3 || dry.Facts != 13 || dry.PeopleWritten != 3 || dry.Episodes != 5 || dry.EpisodesWritten != 5 {
		t.Fatalf("dry run: %s", dry)
	}
	if r := pg.do(op, "GET", "/v1/memory", nil); !strings.Contains(string(r.body), `"people":0`) {
		t.Fatalf("the dry run wrote: %s", r.body)
	}
	first, err := Migrate(ctx, dirA, pgURL, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	again, err := Migrate(ctx, dirA, pgURL, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("files → postgres: %s; again: %s", first, again)
	if first.PeopleWritten != 3 || first.EpisodesWritten != 5 || again.PeopleWritten != 0 || again.EpisodesWritten != 0 {
		t.Fatalf("files → postgres: %s; again: %s", first, again)
	}
	if got := exports(pg); got != want {
		t.Fatalf("after files → postgres:\n got %s\nwant %s", got, want)
	}
	// The idempotency records came along: a retry is a replay.
	if r := pg.do(txt, "POST", "/v1/memory/discord-people/proposals", fact("p0-0", "10", "20", "20", "30", "fact 0 of 20")); r.status != http.StatusOK {
		t.Fatalf("a retry after the migration: %d %s", r.status, r.body)
	}
	retries(pg, "in postgres")

	back, err := Migrate(ctx, pgURL, dirB, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	backAgain, err := Migrate(ctx, pgURL, dirB, false, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres → files: %s; again: %s", back, backAgain)
	if back.PeopleWritten != 3 || back.EpisodesWritten != 5 || backAgain.PeopleWritten != 0 || backAgain.EpisodesWritten != 0 {
		t.Fatalf("postgres → files: %s; again: %s", back, backAgain)
	}
	b := serve(dirB, false)
	if got := exports(b); got != want {
		t.Fatalf("after postgres → files:\n got %s\nwant %s", got, want)
	}
	retries(b, "back in files")

	if _, err := Migrate(ctx, dirA, "postgres://u:"+testDBPassword+"@127.0.0.1:1/x", true, zap.NewNop()); err == nil ||
		strings.Contains(err.Error(), testDBPassword) || !strings.Contains(err.Error(), "--to") {
		t.Fatalf("an unreachable --to: %v", err)
	}
}

// migrated is the migration test's proposal i about user 20+u; the last
// one of the last user is taken from message messageID.
func migrated(u, i int, messageID string) api.ProposalRequest {
	user := fmt.Sprint(20 + u)
	req := fact(fmt.Sprintf("p%d-%d", u, i), "10", user, user, "30", fmt.Sprintf("fact %d of %s", i, user))
	if u == 2 && i == 3 {
		req.Fact.Provenance.SourceMessageID = messageID
	}
	return req
}

// TestMigrateMistakesWriteNothing: a mistyped source is a usage error that
// creates nothing at the typo, and a dry run creates nothing anywhere: no
// target directory, no tables in a target database (the issue: a dry run
// made a memory root and the schema while saying nothing was written).
func TestMigrateMistakesWriteNothing(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	clock := time.Now().UTC()
	svc := newTestServiceOn(t, src, testTokens, zap.NewNop(), func() time.Time { return clock }, false)
	srv := httptest.NewServer(svc.handler)
	t.Cleanup(srv.Close)
	h := &harness{t: t, url: srv.URL, dir: src, now: &clock}
	h.propose(txt, fact("m1", "10", "20", "20", "30", "a fact to migrate"))

	typo := filepath.Join(base, "srcc")
	dst := filepath.Join(base, "dst")
	_, err := Migrate(ctx, typo, dst, true, zap.NewNop())
	if !errors.Is(err, ErrMigrateUsage) || !strings.Contains(err.Error(), "--from "+typo+" is not a data directory") {
		t.Fatalf("a mistyped --from: %v; want a usage error naming it", err)
	}
	if _, err := Migrate(ctx, t.TempDir(), dst, false, zap.NewNop()); !errors.Is(err, ErrMigrateUsage) || !strings.Contains(err.Error(), "holds no clankie memory") {
		t.Fatalf("an empty --from: %v; want a usage error", err)
	}
	for _, p := range []string{typo, dst} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after refused migrations: %v", p, err)
		}
	}

	dry, err := Migrate(ctx, src, dst, true, zap.NewNop())
	if err != nil || dry.People != 1 || dry.PeopleWritten != 1 {
		t.Fatalf("dry run to a new directory: %s, %v", dry, err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("the dry run created %s: %v", dst, err)
	}

	if os.Getenv(testPostgresEnv) == "" {
		return // the database half needs a server; the PostgreSQL run has one
	}
	schema := testSchema(filepath.Join(base, "pg"))
	sep := "?"
	if strings.Contains(os.Getenv(testPostgresEnv), "?") {
		sep = "&"
	}
	pgURL := os.Getenv(testPostgresEnv) + sep + "search_path=" + schema
	dry, err = Migrate(ctx, src, pgURL, true, zap.NewNop())
	if err != nil || dry.People != 1 || dry.PeopleWritten != 1 {
		t.Fatalf("dry run to a database without the schema: %s, %v", dry, err)
	}
	conn, err := pgx.Connect(ctx, os.Getenv(testPostgresEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("after the dry run %s holds %d tables (%v): the dry run created them", schema, tables, err)
	}
}
