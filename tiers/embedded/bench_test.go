package embedded

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
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

var benchLabelSeries = flag.Int("bench.label-series", 1_000_000, "series BenchmarkLabelIndex loads")

// BenchmarkLabelIndex loads bench.label-series series of 5 labels
// (storetest.BenchSeries) through SetLabels, 64 calls at once, into an
// on-disk store, and reports the load rate and the index's bytes on disk
// per series once flushed and compacted. The timed loop is what a
// selector of one host costs: Postings of the pair (100 series of a
// million) and SeriesLabels of the ids it returns, a different host each
// time.
func BenchmarkLabelIndex(b *testing.B) {
	n := *benchLabelSeries
	s := benchStore(b, false)
	ctx := context.Background()
	cpu0 := cpuTime()
	start := time.Now()
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range 64 {
		g.Go(func() error {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				id, labels := storetest.BenchSeries(i)
				if err := s.SetLabels(gctx, id, labels); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	load, cpu := time.Since(start), cpuTime()-cpu0
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Compact(ctx, []byte{kindLabels}, []byte{kindLabelName + 1}, true); err != nil {
		b.Fatal(err)
	}
	bytes, err := s.db.EstimateDiskUsage([]byte{kindLabels}, []byte{kindLabelName + 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d series in %s: %.0f series/s, %.1f µs of CPU each; index %d bytes on disk, %.1f per series",
		n, load.Round(time.Millisecond), float64(n)/load.Seconds(), float64(cpu.Microseconds())/float64(n), bytes, float64(bytes)/float64(n))

	hosts := min(storetest.BenchHosts, max(1, n/10))
	want := n / 10 / hosts * 10
	var inPostings, inLabels time.Duration
	h := 0
	b.ResetTimer()
	for b.Loop() {
		h = (h + 7919) % hosts
		t0 := time.Now()
		ids, err := s.Postings(ctx, "host", storetest.BenchHost(h))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		labels, err := s.SeriesLabels(ctx, ids)
		if err != nil {
			b.Fatal(err)
		}
		inPostings, inLabels = inPostings+t1.Sub(t0), inLabels+time.Since(t1)
		if len(ids) < want || len(labels) != len(ids) {
			b.Fatalf("host %d: %d postings, labels of %d, want at least %d", h, len(ids), len(labels), want)
		}
	}
	b.ReportMetric(float64(inPostings.Microseconds())/1000/float64(b.N), "postings-ms")
	b.ReportMetric(float64(inLabels.Microseconds())/1000/float64(b.N), "labels-ms")
	b.ReportMetric(float64(n)/load.Seconds(), "load-series/s")
	b.ReportMetric(float64(bytes)/float64(n), "index-bytes/series")
}

// cpuTime is the CPU time the process has used, user and system: on a
// shared machine it measures the work of a load better than its duration.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkReadSmallPartitions reads what a refreshed panel of 20 series
// reads from the store each time: the open raw bucket's four event
// buckets of each series, 90 points each (an hour at 10 s), at the
// scan's page size.
func BenchmarkReadSmallPartitions(b *testing.B) {
	s := benchStore(b, false)
	ctx := context.Background()
	t0 := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
	var keys []tiers.PartitionKey
	for series := range 20 {
		for eb := range 4 {
			key := tiers.PartitionKey{Table: tiers.TableRaw, Series: fmt.Sprintf("bench.%02d", series), Bucket: t0, EventBucket: eb}
			var rows []tiers.Row
			for j := range 90 {
				rows = append(rows, tiers.PointRow(t0+int64(j*4+eb)*10_000, float64(j)))
			}
			if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Week, Rows: rows}}); err != nil {
				b.Fatal(err)
			}
			keys = append(keys, key)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, key := range keys {
			rows, _, err := storetest.ReadAll(s.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: t0, To: t0 + tiers.Hour}, PageSize: 5000}))
			if err != nil {
				b.Fatal(err)
			}
			n += len(rows)
		}
		if n != 20*4*90 {
			b.Fatalf("read %d rows, want %d", n, 20*4*90)
		}
	}
}
