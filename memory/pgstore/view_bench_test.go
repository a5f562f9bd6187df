package pgstore

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// BenchmarkViewNotHeld reads a person the cache does not hold, as after a
// start or another service's change: 128 facts, with the records of 128
// proposals and of 64 gone facts beside them. The cache is too small to
// keep anyone, so every read is a whole cold read (the version statement,
// then the facts).
func BenchmarkViewNotHeld(b *testing.B) {
	dsn := testDSN(b, "the cold read benchmark")
	ctx := context.Background()
	schema := fmt.Sprintf("bench_view_%d", os.Getpid())
	db, err := Open(ctx, dsn, nil, nil, Options{Schema: schema, CacheBytes: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.DropSchema(ctx, schema); db.Close() }()
	ps := db.People()
	subject := api.Subject{GuildID: "100000000000000001", UserID: "200000000000000002"}
	propose := func(i int, remove []string) {
		err := ps.Update(ctx, subject, 0, func(p *people.Person, now time.Time) (*people.Change, error) {
			f := api.Fact{FactID: fmt.Sprintf("fact-%04d", i), Subject: subject, Kind: api.KindPersonFact,
				Body: "plays bass in a band that practises on Thursdays, and prefers to be called by a nickname", Confidence: 0.9,
				Visibility: api.Visibility{Scope: api.ScopeGuild}, CreatedAt: now, UpdatedAt: now,
				Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: "1300000000000000001",
					ProposerUserID: subject.UserID, ChannelID: "100000000000000011"}}
			return &people.Change{Seq: p.Seq + 1, Remove: remove, ClearDigest: remove, Put: []api.Fact{f},
				Proposal: &people.ProposalRecord{ProposalID: fmt.Sprintf("proposal-%04d", i), Digest: "0123456789abcdef0123456789abcdef", FactID: f.FactID}}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := range api.MaxFactsPerPerson {
		propose(i, nil)
	}
	for i := range people.MaxGoneRecords {
		propose(api.MaxFactsPerPerson+i, []string{fmt.Sprintf("fact-%04d", i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := ps.View(ctx, subject, func(f []api.Fact, _ time.Time) { n = len(f) }); err != nil || n != api.MaxFactsPerPerson {
			b.Fatalf("read %d facts: %v", n, err)
		}
	}
}
