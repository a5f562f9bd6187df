package journal

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// BenchmarkAppend is the log alone: one writer, or 64 at once sharing
// fdatasyncs; records/sync is the group-commit factor.
func BenchmarkAppend(b *testing.B) {
	r := []byte(`{"person":"p-100000000000000001_200000000000000001.jsonl","facts":5,"change":{"seq":6,"put":[{"body":"a fact of ordinary length, about tea and maps and the harbour"}]}}`)
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			root, err := os.OpenRoot(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			l, err := Open(root, "j", Options{Size: 16 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			work := make(chan struct{})
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for range work {
						if err := l.Append(r); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for b.Loop() {
				if l.Used() > 12<<20 {
					b.StopTimer()
					if err := l.Reset(2, false); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			st := l.Stats()
			b.ReportMetric(float64(st.Records)/float64(st.Syncs), "records/sync")
		})
	}
}
