package personfiles

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/internal/benchtext"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

// seedSteadyLogs writes n people of 128 facts as a service leaves them
// after a while: each log a compacted state (128 facts, 128 idempotency
// records) followed by the lines of proposals that each evicted the oldest
// fact, until the log is an eighth past its live size (the mean of a log
// compacted at 5/4, compactAt), written in place with no catalog, so Open scans them as a first
// start does.
func seedSteadyLogs(b testing.TB, root *os.Root, n int) {
	b.Helper()
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for p := range n {
		subject := api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprintf("2000000000%08d", p)}
		fact := func(i int) api.Fact {
			at := base.Add(time.Duration(p*100000+i) * time.Second)
			k := p*100000 + i
			return api.Fact{FactID: fmt.Sprintf("f%07d", i), Subject: subject, Kind: api.KindPersonFact, Body: benchtext.Body(k),
				Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, CreatedAt: at, UpdatedAt: at,
				Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: fmt.Sprintf("13%017d", k),
					CorrelationID: fmt.Sprintf("%016x", k), ProposerUserID: subject.UserID, ChannelID: "100000000000000011"}}
		}
		record := func(i int) people.ProposalRecord {
			return people.ProposalRecord{ProposalID: fmt.Sprintf("discord-interaction-13%017d", p*100000+i),
				Digest: fmt.Sprintf("%032x", p*100000+i), FactID: fmt.Sprintf("f%07d", i)}
		}
		pf := &personFile{Person: people.Person{Subject: subject, Seq: 128}}
		for i := range 128 {
			pf.Facts = append(pf.Facts, fact(i))
			pf.Proposals = append(pf.Proposals, record(i))
		}
		log, err := encodeSnapshot(pf)
		if err != nil {
			b.Fatal(err)
		}
		live := len(log)
		for i := 128; len(log) < live*(4+compactAt)/8; i++ {
			r := record(i)
			ch := &people.Change{Seq: uint64(i + 1), Remove: []string{pf.Facts[0].FactID}, Put: []api.Fact{fact(i)}, Proposal: &r}
			pf.apply(ch)
			line, err := encodeChange(ch)
			if err != nil {
				b.Fatal(err)
			}
			log = append(log, line...)
		}
		if err := root.WriteFile(path.Join(Dir, FileName(subject)), log, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdPeople is issue 31's workload: n people of 128 facts each,
// their logs at a steady size, proposals (each a new fact evicting the
// oldest, as the original's harness does) and recalls of all 128 facts
// rotating over all of them, in process through people.Memory. With
// cache=none nothing is kept decoded, so every call reads and replays the
// person's log (the cold path: a proposal reads it whole, a recall its
// facts alone); with cache=default (128 MiB) everyone is read whole once
// before the timing (a recall alone would keep their facts alone, and the
// first proposal of each would then read the log again, as cache=none's
// proposals do), and every call finds them decoded. It reports the
// medians of both calls (propose-p50-µs includes the journal's fdatasync)
// and the logs' mean size.
func BenchmarkColdPeople(b *testing.B) {
	for _, tc := range []struct {
		people int
		cache  string
		bytes  int
	}{{64, "none", 1}, {1000, "none", 1}, {1000, "default", 0}} {
		b.Run(fmt.Sprintf("people=%d/cache=%s", tc.people, tc.cache), func(b *testing.B) {
			root, err := os.OpenRoot(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			seedSteadyLogs(b, root, tc.people)
			s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{}, Options{CacheBytes: tc.bytes})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			m := people.New(s)
			ctx := context.Background()
			if tc.bytes == 0 { // warm: everyone read whole once, untimed
				for p := range tc.people {
					subject := api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprintf("2000000000%08d", p)}
					unchanged := func(*people.Person, time.Time) (*people.Change, error) { return nil, nil }
					if err := s.Update(ctx, subject, people.Append, unchanged); err != nil {
						b.Fatal(err)
					}
				}
			}
			var propose, recall []time.Duration
			for k := 0; b.Loop(); k++ {
				p := k % tc.people
				subject := api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprintf("2000000000%08d", p)}
				req := api.ProposalRequest{SchemaVersion: 1, ProposalID: fmt.Sprintf("bench-%d", k), Fact: api.FactInput{
					Subject: subject, Kind: api.KindPersonFact, Body: benchtext.Body(k), Visibility: api.Visibility{Scope: api.ScopeGuild},
					Confidence: 0.9, Provenance: api.Provenance{ProposerUserID: subject.UserID, ChannelID: "100000000000000011"}}}
				start := time.Now()
				r, _, err := m.Propose(ctx, text, req)
				propose = append(propose, time.Since(start))
				if err != nil || r.Evicted != 1 {
					b.Fatalf("propose: %+v %v", r, err)
				}
				start = time.Now()
				got, err := m.Recall(ctx, subject, people.RecallQuery{Who: text, RecallQuery: api.RecallQuery{ChannelID: "100000000000000011", Limit: 128}})
				recall = append(recall, time.Since(start))
				if err != nil || len(got.Facts) != 128 {
					b.Fatalf("recall: %d facts, %v", len(got.Facts), err)
				}
			}
			b.StopTimer()
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
			}
			b.ReportMetric(median(propose), "propose-p50-µs")
			b.ReportMetric(median(recall), "recall-p50-µs")
			var total int64
			for p := range tc.people {
				if st, err := root.Stat(path.Join(Dir, FileName(api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprintf("2000000000%08d", p)}))); err == nil {
					total += st.Size()
				}
			}
			b.ReportMetric(float64(total)/float64(tc.people), "log-bytes")
		})
	}
}

// steadyLog returns the log seedSteadyLogs writes for one person, and
// that person's subject.
func steadyLog(tb testing.TB) ([]byte, api.Subject) {
	tb.Helper()
	root, err := os.OpenRoot(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	seedSteadyLogs(tb, root, 1)
	subject := api.Subject{GuildID: "100000000000000001", UserID: "200000000000000000"}
	log, err := root.ReadFile(path.Join(Dir, FileName(subject)))
	if err != nil {
		tb.Fatal(err)
	}
	return log, subject
}

// BenchmarkDecodeSteadyLog is the cold path's own cost: reading one
// person's log of 128 facts at its steady size, the replay included,
// without the disk: whole (decodeLog, a change's read) and for the facts
// alone (decodeLogFacts, a recall's).
func BenchmarkDecodeSteadyLog(b *testing.B) {
	log, _ := steadyLog(b)
	for _, read := range []struct {
		name   string
		decode func([]byte) (*personFile, int, error)
	}{{"whole", decodeLog}, {"facts", decodeLogFacts}} {
		b.Run("read="+read.name, func(b *testing.B) {
			b.SetBytes(int64(len(log)))
			for b.Loop() {
				pf, _, err := read.decode(log)
				if err != nil || len(pf.Facts) != 128 {
					b.Fatal(err)
				}
			}
		})
	}
}
