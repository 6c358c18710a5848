package embedded

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/storetest"
)

// benchStore opens a store for a benchmark, on disk unless mem is set.
func benchStore(b *testing.B, mem bool) *Store {
	b.Helper()
	var s *Store
	var err error
	if mem {
		s, err = OpenInMemory(Options{Now: storetest.Start, SweepInterval: -1})
	} else {
		s, err = Open(b.TempDir(), Options{Now: storetest.Start, SweepInterval: -1})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeStore(b, s) })
	return s
}

// BenchmarkWrite writes batches of 1000 raw points, each call synced, into
// hourly partitions of 4 event buckets, as ingest does.
func BenchmarkWrite(b *testing.B) {
	const batch = 1000
	for _, mem := range []bool{false, true} {
		b.Run(map[bool]string{false: "disk", true: "mem"}[mem], func(b *testing.B) {
			s := benchStore(b, mem)
			ctx := context.Background()
			layout := tiers.Layout{{Width: tiers.Hour, EventBuckets: 4}}
			t0 := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
			ts := t0
			writes := make([]tiers.PartitionWrite, 4)
			b.ReportAllocs()
			for b.Loop() {
				for i := range writes {
					writes[i].Rows = writes[i].Rows[:0]
				}
				for range batch {
					ts += 10
					bucket, e := layout.Locate(ts)
					w := &writes[e]
					w.Key = tiers.PartitionKey{Table: tiers.TableRaw, Series: "bench.series", Bucket: bucket, EventBucket: e}
					w.Retention = tiers.Week
					w.Rows = append(w.Rows, tiers.PointRow(ts, float64(ts)))
				}
				if err := s.Write(ctx, writes); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkReadPartition reads one partition of 100,000 raw points in pages
// of 1000, forwards and backwards.
func BenchmarkReadPartition(b *testing.B) {
	const rows = 100_000
	s := benchStore(b, false)
	ctx := context.Background()
	t0 := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "bench.series", Bucket: t0}
	for i := 0; i < rows; i += 10_000 {
		var batch []tiers.Row
		for j := i; j < i+10_000; j++ {
			batch = append(batch, tiers.PointRow(t0+int64(j)*30, float64(j)))
		}
		if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Week, Rows: batch}}); err != nil {
			b.Fatal(err)
		}
	}
	// Read from sstables, as a partition older than the memtable would be.
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	for _, desc := range []bool{false, true} {
		b.Run(fmt.Sprintf("desc=%v", desc), func(b *testing.B) {
			req := tiers.ReadRequest{Key: key, Span: tiers.Span{From: t0, To: t0 + tiers.Hour}, Desc: desc, PageSize: 1000}
			b.ReportAllocs()
			for b.Loop() {
				pages := s.Read(ctx, req)
				n := 0
				for {
					page, err := pages.Next()
					if errors.Is(err, tiers.ErrDone) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += len(page)
				}
				pages.Close()
				if n != rows {
					b.Fatalf("read %d rows, want %d", n, rows)
				}
			}
			b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
