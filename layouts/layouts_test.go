package layouts

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tsgate/tsgate/tiers"
)

// NextBoundary agrees with a walk over every millisecond candidate, on
// random layouts (including ones where no common boundary exists).
func TestNextBoundaryIsTheFirstCommonBoundary(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		widths := []int64{tiers.Second, 2 * tiers.Second, 5 * tiers.Second, 6 * tiers.Second}
		l := tiers.Layout{{Since: 0, Width: widths[r.IntN(4)], EventBuckets: 1}}
		if r.IntN(2) == 0 {
			l = append(l, tiers.LayoutEntry{Since: int64(r.IntN(60)) * 1000, Width: widths[r.IntN(4)], EventBuckets: 2})
		}
		after := int64(r.IntN(80_000))
		width := widths[r.IntN(4)]
		got, ok := NextBoundary(l, after, width)
		var want int64 = -1
		for c := after + 1; c < after+200_000; c++ {
			if l.BucketOf(c).Start == c && c%width == 0 {
				want = c
				break
			}
		}
		if ok != (want >= 0) || (ok && got != want) {
			t.Fatalf("layout %+v after %d width %d: got %d %v, want %d", l, after, width, got, ok, want)
		}
	}
}

// fakeRegistry is a registry of one process.
type fakeRegistry struct {
	mu      sync.Mutex
	series  map[string]tiers.SeriesInfo
	appends int
}

func (f *fakeRegistry) LookupSeries(_ context.Context, id string) (tiers.SeriesInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.series[id]
	if !ok {
		return s, tiers.ErrNotFound
	}
	s.Layout = slices.Clone(s.Layout)
	return s, nil
}

func (f *fakeRegistry) AppendLayout(_ context.Context, id string, e tiers.LayoutEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[id]
	s.Layout = append(s.Layout, e)
	slices.SortFunc(s.Layout, func(a, b tiers.LayoutEntry) int { return int(a.Since - b.Since) })
	f.series[id] = s
	f.appends++
	return nil
}

type invalidations []string

func (i *invalidations) Invalidate(id string) { *i = append(*i, id) }

func raw() tiers.Tier { p := tiers.DefaultPyramid(); return *p.Tier(tiers.LevelRaw) }

// The first change of a series stores the default entry before it; the
// instance's cache entry is dropped; a split doubles the event buckets
// from the first boundary after now + margin, only for partitions of the
// layout in force, never twice while one is pending, and never beyond the
// maximum.
func TestChangeAndSplit(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000 + 7*tiers.Minute)
	reg := &fakeRegistry{series: map[string]tiers.SeriesInfo{"s": {ID: "s", First: now.UnixMilli() - tiers.Hour, Last: now.UnixMilli()}}}
	inv := &invalidations{}
	cfg := DefaultConfig()
	cfg.AutoSplit, cfg.MaxEventBuckets = true, 16
	var logs bytes.Buffer
	a := NewAdmin(reg, inv, raw(), cfg, func() time.Time { return now }, slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	ctx := context.Background()
	since := tiers.AlignDown(now.UnixMilli(), tiers.Hour) + tiers.Hour // 53m ahead
	l, err := a.Change(ctx, "s", tiers.LayoutEntry{Since: since, Width: tiers.Hour, EventBuckets: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := tiers.Layout{{Since: 0, Width: tiers.Hour, EventBuckets: 4}, {Since: since, Width: tiers.Hour, EventBuckets: 8}}
	if !slices.Equal(l, want) || !slices.Equal(reg.series["s"].Layout, want) || len(*inv) != 1 {
		t.Fatalf("layout %+v, stored %+v, invalidations %v", l, reg.series["s"].Layout, *inv)
	}
	// A wide partition of the old layout while the change is pending: no split.
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: since - tiers.Hour}
	if ok, err := a.Split(ctx, key, 5e6); ok || err != nil {
		t.Fatalf("split while a change is pending: %v %v", ok, err)
	}
	// Once in force, a wide partition of the new layout splits it.
	now = time.UnixMilli(since + 10*tiers.Minute)
	reg.series["s"] = tiers.SeriesInfo{ID: "s", First: 0, Last: now.UnixMilli(), Layout: reg.series["s"].Layout}
	if ok, err := a.Split(ctx, key, 5e6); ok || err != nil {
		t.Fatalf("split for a partition of the replaced layout: %v %v", ok, err)
	}
	key.Bucket = since
	if ok, err := a.Split(ctx, key, 5e6); !ok || err != nil {
		t.Fatalf("split: %v %v", ok, err)
	}
	// now + 15m is since + 25m: the first hour boundary after it is since + 1h.
	got := reg.series["s"].Layout
	if len(got) != 3 || got[2] != (tiers.LayoutEntry{Since: since + tiers.Hour, Width: tiers.Hour, EventBuckets: 16}) {
		t.Fatalf("after the split: %+v", got)
	}
	if ok, _ := a.Split(ctx, key, 5e6); ok {
		t.Fatal("split twice")
	}
	// At the maximum: logged once, no change.
	now = time.UnixMilli(since + 2*tiers.Hour)
	key.Bucket = since + tiers.Hour
	for range 3 {
		if ok, err := a.Split(ctx, key, 5e6); ok || err != nil {
			t.Fatalf("split at the maximum: %v %v", ok, err)
		}
	}
	if n := strings.Count(logs.String(), "already has the most event buckets"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	if got := value(a.changes.WithLabelValues("auto_split")); got != 1 {
		t.Fatalf("auto splits counted %v", got)
	}
	if got := value(a.changes.WithLabelValues("admin")); got != 1 {
		t.Fatalf("admin changes counted %v", got)
	}
}

// The tracker's estimate of each partition is the larger of the rows
// written and the most rows one read saw; the top list is exact while
// everything fits; each partition over the limit is logged and handed on
// once.
func TestTrackerAgainstAModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var logs bytes.Buffer
	var wide []tiers.PartitionKey
	cfg := DefaultConfig()
	cfg.WideRows, cfg.Tracked = 250, 1000
	reg := prometheus.NewRegistry()
	tr := NewTracker(cfg, slog.New(slog.NewTextHandler(&logs, nil)), reg, func(_ context.Context, k tiers.PartitionKey, rows int64, write bool) {
		wide = append(wide, k)
	})
	written, seen := map[tiers.PartitionKey]int64{}, map[tiers.PartitionKey]int64{}
	for range 5000 {
		k := tiers.PartitionKey{Table: tiers.TableRaw, Series: fmt.Sprintf("s%d", r.IntN(20)), Bucket: int64(r.IntN(10)) * tiers.Hour, EventBucket: r.IntN(3)}
		n := r.IntN(40)
		if r.IntN(3) == 0 {
			tr.Read(context.Background(), k, int64(n)*10)
			seen[k] = max(seen[k], int64(n)*10)
		} else {
			tr.Wrote(context.Background(), k, n)
			written[k] += int64(n)
		}
	}
	var want []Wide
	over := 0
	for k := range mergeKeys(written, seen) {
		rows := max(written[k], seen[k])
		want = append(want, Wide{Key: k, Rows: rows, BytesEstimate: rows * RawRowBytes})
		if rows > cfg.WideRows {
			over++
		}
	}
	got := tr.Wide(len(want) + 10)
	if len(got) != len(want) {
		t.Fatalf("%d tracked, want %d", len(got), len(want))
	}
	for i, w := range got {
		if w.Rows != max(written[w.Key], seen[w.Key]) || w.BytesEstimate != w.Rows*RawRowBytes || (i > 0 && w.Rows > got[i-1].Rows) {
			t.Fatalf("entry %d: %+v (written %d, seen %d)", i, w, written[w.Key], seen[w.Key])
		}
	}
	if len(wide) != over || strings.Count(logs.String(), "wide partition") != over || value(tr.wideTotal) != float64(over) {
		t.Fatalf("%d partitions over the limit; handed on %d, logged %d, counted %v", over, len(wide), strings.Count(logs.String(), "wide partition"), value(tr.wideTotal))
	}
	if over == 0 {
		t.Fatal("no partition went over the limit: the test checks nothing")
	}
	if top := tr.Wide(3); len(top) != 3 || top[0] != got[0] {
		t.Fatalf("Wide(3) = %+v", top)
	}
}

func mergeKeys(a, b map[tiers.PartitionKey]int64) map[tiers.PartitionKey]bool {
	out := map[tiers.PartitionKey]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// Beyond its capacity the tracker forgets the smaller partitions first and
// never the ones it reported, and the widest stays on top.
func TestTrackerIsBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WideRows, cfg.Tracked = 1000, 100
	tr := NewTracker(cfg, nil, nil, nil)
	big := tiers.PartitionKey{Table: tiers.TableRaw, Series: "big"}
	tr.Wrote(context.Background(), big, 5000)
	for i := range 10_000 {
		tr.Wrote(context.Background(), tiers.PartitionKey{Table: tiers.TableRaw, Series: fmt.Sprintf("small%d", i)}, 1+i%50)
	}
	all := tr.Wide(1 << 20)
	if len(all) > cfg.Tracked || len(all) < cfg.Tracked/2 {
		t.Fatalf("%d tracked with a capacity of %d", len(all), cfg.Tracked)
	}
	if all[0].Key != big || all[0].Rows != 5000 {
		t.Fatalf("widest %+v", all[0])
	}
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
