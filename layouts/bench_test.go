package layouts

import (
	"context"
	"fmt"
	"testing"

	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkTrackedWrite is the cost of counting raw partitions on the write
// path: batches of 5,000 rows over 1,000 series (5 rows per partition, the
// tracker's worst case: one count per 5 rows) into the in-memory embedded
// store, bare and through Track.
func BenchmarkTrackedWrite(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracked=%v", tracked), func(b *testing.B) {
			store, err := embedded.OpenInMemory(embedded.Options{SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			var s tiers.Store = store
			if tracked {
				s = Track(store, NewTracker(DefaultConfig(), nil, nil, nil))
			}
			const series, perPartition = 1000, 5
			base := int64(1_800_000_000_000)
			b.ResetTimer()
			for i := range b.N {
				writes := make([]tiers.PartitionWrite, series)
				for j := range writes {
					rows := make([]tiers.Row, perPartition)
					for k := range rows {
						rows[k] = tiers.PointRow(base+int64(i*perPartition+k), 1)
					}
					writes[j] = tiers.PartitionWrite{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: fmt.Sprintf("s%d", j), Bucket: base}, Rows: rows}
				}
				if err := s.Write(context.Background(), writes); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*series*perPartition)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkTrackerWrote is the cost of one count: one partition of one
// write batch, over 50,000 partitions cycling through a tracker of the
// default capacity.
func BenchmarkTrackerWrote(b *testing.B) {
	tr := NewTracker(DefaultConfig(), nil, nil, nil)
	keys := make([]tiers.PartitionKey, 50_000)
	for i := range keys {
		keys[i] = tiers.PartitionKey{Table: tiers.TableRaw, Series: fmt.Sprintf("series.%d", i/4), Bucket: 1_800_000_000_000, EventBucket: i % 4}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		tr.Wrote(ctx, keys[i%len(keys)], 5)
	}
}
