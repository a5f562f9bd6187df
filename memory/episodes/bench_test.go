package episodes

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
)

var benchWords = strings.Fields("redstone nether lobby castle music river quiet storm harvest bridge lantern clock forest village dragon compass")

// seedFullStore writes a full store straight to disk: 128 unretained notes,
// all on the gameplay lane, and 1024 retained spread over the four lanes,
// each with a summary near the 512-character cap. Seeding the files is much
// quicker than 1152 durable Records.
func seedFullStore(b *testing.B) *os.Root {
	b.Helper()
	root := openRoot(b)
	summary := func(i int) string {
		var sb strings.Builder
		for j := 0; sb.Len() < 480; j++ {
			sb.WriteString(benchWords[(i*7+j*3)%len(benchWords)])
			sb.WriteByte(' ')
		}
		return strings.TrimSpace(sb.String())
	}
	var eps []api.Episode
	for i := range api.RetainedCapacity {
		ep := episode(fmt.Sprintf("kept-%04d", i), api.AllLanes()[i%4], base.Add(time.Duration(i)*time.Minute), true)
		ep.Summary = summary(i)
		eps = append(eps, ep)
	}
	for i := range api.EpisodeRingCapacity {
		ep := episode(fmt.Sprintf("ring-%04d", i), api.LaneGameplay, base.Add(time.Duration(2000+i)*time.Minute), false)
		ep.Summary = summary(i + 5000)
		eps = append(eps, ep)
	}
	seed(b, root, eps)
	return root
}

// BenchmarkRecordFullStore records one unretained gameplay note per
// iteration into a full store: each evicts the oldest gameplay note from the
// ring and rewrites the gameplay file (384 notes) durably.
func BenchmarkRecordFullStore(b *testing.B) {
	root := seedFullStore(b)
	s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{})
	if err != nil {
		b.Fatal(err)
	}
	if st := s.Stats(); st.Retained != 1024 || st.Unretained != 128 {
		b.Fatalf("seeded stats %+v", st)
	}
	req := request(api.LaneGameplay, "arena", "a fresh note about the redstone clock", base)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.OccurredAt = base.Add(time.Duration(10000+i) * time.Minute)
		if _, info, err := s.Record(api.LaneGameplay, req); err != nil || info.Evicted != 1 {
			b.Fatalf("record: %+v %v", info, err)
		}
	}
}

// BenchmarkRewriteLaneFiles is the floor under BenchmarkRecordFullStore: a
// bare durable rewrite of the same gameplay file's bytes, nothing else.
func BenchmarkRewriteLaneFiles(b *testing.B) {
	root := seedFullStore(b)
	name := FileName(api.LaneGameplay)
	data, err := root.ReadFile(name)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := durable.WriteFile(root, name, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchFullStore searches all 1152 notes as the operator (who sees
// everything) with two terms and the largest limit.
func BenchmarkSearchFullStore(b *testing.B) {
	root := seedFullStore(b)
	s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, err := s.Search(api.LaneOperator, "Dragon compass", api.MaxEpisodeSearch)
		if err != nil || c.Count == 0 {
			b.Fatalf("search: %+v %v", c.Count, err)
		}
	}
}
