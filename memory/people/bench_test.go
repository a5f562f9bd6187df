package people

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
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
	s, err := Open(root, zap.NewNop(), time.Now)
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
