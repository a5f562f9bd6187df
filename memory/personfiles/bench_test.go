package personfiles

import (
	"fmt"
	"os"
	"path"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

// BenchmarkProposeInProcess is a proposal without HTTP, superseding the
// oldest of 16 facts, on a real root: it reports its median (p50-µs), the
// journal's mean fdatasync time (sync-µs) and compactions per proposal, to
// split a proposal's time between the disk and the rest.
func BenchmarkProposeInProcess(b *testing.B) {
	root, err := os.OpenRoot(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for i := range 16 {
		r, _, err := s.Propose(text, proposal(fmt.Sprintf("seed%d", i), "g", "u", "u", "c", fmt.Sprintf("a fact of ordinary length, number %d, about tea and maps", i)))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, r.Fact.FactID)
	}
	m0 := s.Metrics()
	samples := make([]time.Duration, 0, 1024)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		req := proposal(fmt.Sprintf("p%d", i), "g", "u", "u", "c", fmt.Sprintf("a fact of ordinary length, number %d, about tea and maps", i))
		req.Fact.SupersedesFactID = ids[0]
		r, _, err := s.Propose(text, req)
		if err != nil || !r.Superseded {
			b.Fatal(err)
		}
		ids = append(ids[1:], r.Fact.FactID)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "p50-µs")
	m := s.Metrics()
	syncs := m.JournalSyncs - m0.JournalSyncs
	if syncs > 0 {
		b.ReportMetric(float64((m.JournalSyncTime-m0.JournalSyncTime).Microseconds())/float64(syncs), "sync-µs")
		b.ReportMetric(float64(m.Compactions-m0.Compactions)/float64(b.N), "compactions/op")
	}
	_ = api.SchemaVersion
}

// writeBigCatalog writes a catalog of n people (names only: their logs are
// not needed until they are read) into a fresh root, as a service with n
// people leaves it.
func writeBigCatalog(b *testing.B, root *os.Root, n int) {
	b.Helper()
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		b.Fatal(err)
	}
	var buf []byte
	buf = fmt.Appendf(buf, `{"schemaVersion":2,"generation":1,"people":%d,"facts":%d,"journal":"crc32c"}`+"\n", n, n*10)
	for p := range n {
		buf = fmt.Appendf(buf, "%s 10\n", FileName(api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprint(200000000000000000 + p)}))
	}
	if err := root.WriteFile(path.Join(Dir, CatalogName), buf, 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkForgetWithPeople forgets one fact of a person while the catalog
// holds 10,000 or 100,000 people, beside a proposal to the same person in
// the same run (the baseline: one journal fdatasync): forget-p50-µs against
// propose-p50-µs. A forget must leave nothing of the fact on disk before it
// answers; what that costs should not grow with the number of people.
func BenchmarkForgetWithPeople(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			root, err := os.OpenRoot(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			writeBigCatalog(b, root, n)
			s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			subject := api.Subject{GuildID: "g", UserID: "u"}
			for i := range 16 {
				if _, _, err := s.Propose(text, proposal(fmt.Sprintf("seed%d", i), "g", "u", "u", "c", fmt.Sprintf("a fact of ordinary length, number %d, about tea and maps", i))); err != nil {
					b.Fatal(err)
				}
			}
			var proposeSamples, forgetSamples []time.Duration
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				r, _, err := s.Propose(text, proposal(fmt.Sprintf("p%d", i), "g", "u", "u", "c", fmt.Sprintf("a fact to forget, number %d", i)))
				if err != nil {
					b.Fatal(err)
				}
				proposeSamples = append(proposeSamples, time.Since(start))
				start = time.Now()
				if _, err := s.Forget(operator, subject, r.Fact.FactID, ""); err != nil {
					b.Fatal(err)
				}
				forgetSamples = append(forgetSamples, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(proposeSamples)
			slices.Sort(forgetSamples)
			p, f := proposeSamples[len(proposeSamples)/2], forgetSamples[len(forgetSamples)/2]
			b.ReportMetric(float64(p.Nanoseconds())/1e3, "propose-p50-µs")
			b.ReportMetric(float64(f.Nanoseconds())/1e3, "forget-p50-µs")
			b.ReportMetric(float64(f)/float64(p), "forget/propose")
		})
	}
}

// BenchmarkForgetScanOfAFullJournal is the part of a forget that grows with
// the journal: reading the whole used part (here 12 MiB, where a checkpoint
// starts) to find the person's records, none of which are there.
func BenchmarkForgetScanOfAFullJournal(b *testing.B) {
	root, err := os.OpenRoot(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var recs [][]byte
	for i := 0; s.j.Used() < journalCheckpoint; {
		recs = recs[:0]
		for range 1000 {
			recs = append(recs, fmt.Appendf(nil, `{"person":"p-g_%d.jsonl","subject":{"guildId":"g","userId":"%d"},"facts":1,"change":{"seq":1,"put":[{"body":"a fact of ordinary length, number %d, about tea and maps and the harbour"}]}}`, i, i, i))
			i++
		}
		if err := s.j.Append(recs...); err != nil {
			b.Fatal(err)
		}
	}
	match := personRecords("p-g_u.jsonl")
	for b.Loop() {
		if n, err := s.j.Blank(match, true); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkFirstStart is Open of a root with no catalog: person logs (a
// catalog deleted, or a seeded root) or schema-1 files (the first start
// after an upgrade, which migrates each to a log durably), 10 facts each.
// Its time is ns/op.
func BenchmarkFirstStart(b *testing.B) {
	for _, legacy := range []bool{false, true} {
		for _, n := range benchPeople {
			kind := "logs"
			if legacy {
				kind = "schema-1"
			}
			b.Run(fmt.Sprintf("%s/people=%d", kind, n), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					root, err := os.OpenRoot(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					seedPeople(b, root, n, 10, legacy)
					syscall.Sync() // an upgrade finds files written long ago, not dirty pages
					b.StartTimer()
					s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{}, Options{})
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if st := s.Stats(); st.People != n || st.Facts != 10*n {
						b.Fatalf("counted %+v", st)
					}
					s.Close()
					root.Close()
				}
			})
		}
	}
}

var benchPeople = []int{10_000}
