//go:build integration

package integration

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

var (
	benchLabelSeries  = flag.Int("bench.label-series", 1_000_000, "series BenchmarkLabelIndex loads")
	benchLabelQueries = flag.Int("bench.label-queries", 300, "selectors of one host BenchmarkLabelIndex times")
)

// BenchmarkLabelIndex loads bench.label-series series of 5 labels
// (storetest.BenchSeries: __name__ among 10 names, host among 10,000, dc
// among 5, job among 20, instance unique) through the store's SetLabels,
// 64 calls at once, and reports the load rate, the CPU it took, and the
// bytes on disk of the index tables once flushed and compacted (when the
// node runs on this machine). Then it times what resolving a selector of
// one host costs: Postings of the pair (100 series of a million, in 16
// shards) and SeriesLabels of the ids it returns (IN over the ids of each
// registry shard), bench.label-queries times, a different host each time,
// and reports the medians and the 99th percentiles.
func BenchmarkLabelIndex(b *testing.B) {
	p := tiers.DefaultPyramid()
	store, cfg := openBenchStore(b, p)
	ctx := context.Background()
	n := *benchLabelSeries

	logLoad(b, "before the load")
	self0, node0 := cpuTimes()
	start := time.Now()
	var next, done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range 64 {
		g.Go(func() error {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				id, labels := storetest.BenchSeries(i)
				if err := store.SetLabels(gctx, id, labels); err != nil {
					return fmt.Errorf("series %d: %w", i, err)
				}
				if d := done.Add(1); d%100_000 == 0 {
					note(b, "%d series labelled after %s", d, time.Since(start).Round(time.Second))
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	load := time.Since(start)
	self1, node1 := cpuTimes()
	note(b, "loaded %d series in %s: %.0f series/s", n, load.Round(time.Millisecond), float64(n)/load.Seconds())
	if node0 >= 0 {
		note(b, "CPU per series: benchmark process (client and store) %.0f µs, Cassandra node %.0f µs",
			float64((self1-self0).Microseconds())/float64(n), float64((node1-node0).Microseconds())/float64(n))
	}
	tables := []string{"label_postings", "label_values", "label_names", "series"}
	if sizes, ok := tableSizes(b, ctx, cfg.Keyspace, tables); ok {
		var index int64
		for _, t := range tables {
			note(b, "%s: %d bytes on disk, %.1f per series", t, sizes[t], float64(sizes[t])/float64(n))
			index += sizes[t]
		}
		note(b, "the index (the three tables and the registry's labels): %.1f bytes per series", float64(index)/float64(n))
		b.ReportMetric(float64(index)/float64(n), "index-bytes/series")
	}

	logLoad(b, "before the selectors")
	hosts := min(storetest.BenchHosts, max(1, n/10))
	want := n / 10 / hosts * 10
	var postings, labels, both []time.Duration
	for q := range *benchLabelQueries + 20 {
		h := (q * 7919) % hosts
		t0 := time.Now()
		ids, err := store.Postings(ctx, "host", storetest.BenchHost(h))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		got, err := store.SeriesLabels(ctx, ids)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if len(ids) < want || len(got) != len(ids) {
			b.Fatalf("host %d: %d postings, labels of %d series; want at least %d", h, len(ids), len(got), want)
		}
		if q < 20 {
			continue // warm-up: prepared statements, connections
		}
		postings, labels, both = append(postings, t1.Sub(t0)), append(labels, t2.Sub(t1)), append(both, t2.Sub(t0))
	}
	logLoad(b, "after the selectors")
	for _, d := range [][]time.Duration{postings, labels, both} {
		slices.Sort(d)
	}
	note(b, "one host's selector, %d times: Postings median %.2f ms p99 %.2f ms; SeriesLabels of its %d series median %.2f ms p99 %.2f ms; together median %.2f ms p99 %.2f ms",
		len(both), ms(median(postings)), ms(percentile(postings, 0.99)), want, ms(median(labels)), ms(percentile(labels, 0.99)),
		ms(median(both)), ms(percentile(both, 0.99)))
	b.ReportMetric(float64(n)/load.Seconds(), "load-series/s")
	b.ReportMetric(ms(median(postings)), "postings-ms")
	b.ReportMetric(ms(median(labels)), "labels-ms")
	b.ReportMetric(ms(median(both)), "select-ms")
	b.ReportMetric(ms(percentile(both, 0.99)), "select-p99-ms")
}

// tableSizes returns the bytes on disk of the keyspace's tables once their
// memtables are flushed and no compaction of the keyspace is running, or
// false when the node's data directory is not on this machine (a node
// scripts/cassandra.sh started). There is no nodetool here: the tables
// are told to flush their memtables every second
// (memtable_flush_period_in_ms), which takes effect at once.
func tableSizes(b *testing.B, ctx context.Context, ks string, tables []string) (map[string]int64, bool) {
	dir := filepath.Join("..", ".cassandra", "node", "data", ks)
	if _, err := os.Stat(dir); err != nil {
		note(b, "no data directory %s on this machine: bytes on disk not measured", dir)
		return nil, false
	}
	s := newSession(b)
	for _, t := range tables {
		if err := s.Query(fmt.Sprintf("ALTER TABLE %s.%s WITH memtable_flush_period_in_ms = 1000", ks, t)).ExecContext(ctx); err != nil {
			b.Fatal(err)
		}
	}
	size := func() map[string]int64 {
		out := map[string]int64{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			table, _, _ := strings.Cut(e.Name(), "-")
			if !slices.Contains(tables, table) {
				continue
			}
			_ = filepath.WalkDir(filepath.Join(dir, e.Name()), func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return nil
				}
				if d.IsDir() && (d.Name() == "snapshots" || d.Name() == "backups") {
					return filepath.SkipDir
				}
				if info, err := d.Info(); err == nil && !d.IsDir() {
					out[table] += info.Size()
				}
				return nil
			})
		}
		return out
	}
	// Flushed once the sizes stop changing and no compaction of the
	// keyspace is left.
	deadline := time.Now().Add(10 * time.Minute)
	last := map[string]int64{}
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Second)
		var compacting int
		if err := s.Query("SELECT count(*) FROM system_views.sstable_tasks WHERE keyspace_name = ? ALLOW FILTERING", ks).ScanContext(ctx, &compacting); err != nil {
			note(b, "reading the compactions in progress: %v", err)
		}
		cur := size()
		if compacting == 0 && fmt.Sprint(cur) == fmt.Sprint(last) {
			return cur, true
		}
		last = cur
	}
	note(b, "compactions still running after 10 minutes: sizes as they are")
	return last, true
}
