package scan

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// The groups of a rollup segment's buckets that have ended share batches
// (tiers.PartitionBatch) of consecutive buckets, in read order, at most
// the read parallelism (and 16) each; a bucket that ends after now, raw
// buckets and a read of parallelism 1 have none.
func TestGroupsBatchEndedRollupBuckets(t *testing.T) {
	p := tiers.DefaultPyramid()
	minute, raw := p.Tier(1), p.Tier(tiers.LevelRaw)
	now := time.UnixMilli(tiers.AlignDown(time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC).UnixMilli(), tiers.Day) + 5*tiers.Hour)
	today := tiers.AlignDown(now.UnixMilli(), tiers.Day)
	for _, parallelism := range []int{1, 4, 16, 40} {
		for _, desc := range []bool{false, true} {
			for _, days := range []int64{1, 2, 5, 11, 40} {
				sc := New(&lateStore{}, p, Config{Parallelism: parallelism, PageSize: 100, Lookahead: 1}, func() time.Time { return now })
				segs := []Segment{
					{Span: tiers.Span{From: today - days*tiers.Day + tiers.Hour, To: today + 2*tiers.Hour}, Tier: minute, Layout: minute.DefaultLayout()},
					{Span: tiers.Span{From: today + 2*tiers.Hour, To: now.UnixMilli()}, Tier: raw, Layout: raw.DefaultLayout()},
				}
				if desc {
					segs[0], segs[1] = segs[1], segs[0]
				}
				groups, _, err := sc.Groups(context.Background(), "s", segs, desc)
				if err != nil {
					t.Fatal(err)
				}
				var ended []int64 // the ended minute buckets, in read order
				var batches []*tiers.PartitionBatch
				for g := range groups {
					var batch *tiers.PartitionBatch
					for i, r := range g.Reads {
						if i > 0 && r.Batch != batch {
							t.Fatalf("the reads of bucket %d have different batches", g.Bucket.Start)
						}
						batch = r.Batch
					}
					if g.Reads[0].Key.Table != minute.Table || g.Bucket.End > now.UnixMilli() {
						if batch != nil {
							t.Fatalf("parallelism %d, desc %v: %s bucket %d (ends %d, now %d) in a batch", parallelism, desc, g.Reads[0].Key.Table, g.Bucket.Start, g.Bucket.End, now.UnixMilli())
						}
						continue
					}
					ended = append(ended, g.Bucket.Start)
					if batch == nil {
						batches = append(batches, nil)
						continue
					}
					if !batch.Has(g.Bucket.Start) {
						t.Fatalf("bucket %d read under a batch of %v", g.Bucket.Start, batch.Buckets)
					}
					if len(batches) == 0 || batches[len(batches)-1] != batch {
						batches = append(batches, batch)
					}
				}
				// The batches tile the ended buckets in read order, each as
				// large as the parallelism allows but the last; a lone
				// bucket needs none.
				size := min(parallelism, 16)
				var tiled []int64
				for i, b := range batches {
					switch {
					case b == nil && (size > 1 && i < len(batches)-1):
						t.Fatalf("parallelism %d, %d days: bucket %d of %d outside a batch", parallelism, days, i, len(ended))
					case b == nil:
						tiled = append(tiled, ended[len(tiled)])
					case len(b.Buckets) < 2 || len(b.Buckets) > size || i < len(batches)-1 && len(b.Buckets) != size:
						t.Fatalf("parallelism %d, %d days: a batch of %d buckets", parallelism, days, len(b.Buckets))
					default:
						tiled = append(tiled, b.Buckets...)
					}
				}
				if len(tiled) != len(ended) {
					t.Fatalf("parallelism %d, desc %v, %d days: batches of %d buckets, %d ended", parallelism, desc, days, len(tiled), len(ended))
				}
				for i := range ended {
					if tiled[i] != ended[i] {
						t.Fatalf("parallelism %d, desc %v, %d days: batched %v, read %v", parallelism, desc, days, tiled, ended)
					}
				}
				if want := days; int64(len(ended)) != want {
					t.Fatalf("%d days: %d ended buckets read", days, len(ended))
				}
			}
		}
	}
}

// Under WithRequestSeries, the reads of a bucket that has not ended,
// ascending and without extras, share one tiers.SeriesReads per table and
// bucket across the request's series, which knows the bucket's event
// buckets; ended buckets, descending reads, reads with extras and series
// outside the request have none.
func TestOpenBucketsSharedAcrossSeries(t *testing.T) {
	p := tiers.DefaultPyramid()
	minute, hour, raw := p.Tier(1), p.Tier(2), p.Tier(tiers.LevelRaw)
	now := time.Date(2026, 11, 29, 6, 20, 0, 0, time.UTC)
	sc := New(&lateStore{}, p, Config{Parallelism: 4, PageSize: 100, Lookahead: 1}, func() time.Time { return now })
	ms := now.UnixMilli()
	ctx := WithRequestSeries(context.Background(), []string{"a", "b"})
	type read struct {
		table        tiers.Table
		bucket       int64
		ended        bool
		eventBuckets int
		across       *tiers.SeriesReads
	}
	reads := func(series string, desc, extras bool) []read {
		segs := []Segment{
			{Span: tiers.Span{From: ms - 40*tiers.Day, To: ms - 2*tiers.Day}, Tier: hour, Layout: hour.DefaultLayout(), Extras: extras},
			{Span: tiers.Span{From: ms - 2*tiers.Day, To: ms - tiers.Hour}, Tier: minute, Layout: minute.DefaultLayout(), Extras: extras},
			{Span: tiers.Span{From: ms - tiers.Hour, To: ms}, Tier: raw, Layout: raw.DefaultLayout()},
		}
		if desc {
			slices.Reverse(segs)
		}
		groups, _, err := sc.Groups(ctx, series, segs, desc)
		if err != nil {
			t.Fatal(err)
		}
		var out []read
		for g := range groups {
			for _, r := range g.Reads {
				out = append(out, read{r.Key.Table, r.Key.Bucket, g.Bucket.End <= ms, g.Bucket.EventBuckets, r.Across})
			}
		}
		return out
	}
	a, b := reads("a", false, false), reads("b", false, false)
	if len(a) != len(b) {
		t.Fatalf("%d and %d reads", len(a), len(b))
	}
	shared := 0
	for i := range a {
		open := !a[i].ended
		switch {
		case open && (a[i].across == nil || a[i].across != b[i].across):
			t.Fatalf("%s bucket %d: reads of a and b share %p and %p", a[i].table, a[i].bucket, a[i].across, b[i].across)
		case open && (!slices.Equal(a[i].across.Series, []string{"a", "b"}) || a[i].across.EventBuckets != a[i].eventBuckets):
			t.Fatalf("%s bucket %d of %d event buckets: shared by %v over %d", a[i].table, a[i].bucket, a[i].eventBuckets, a[i].across.Series, a[i].across.EventBuckets)
		case !open && (a[i].across != nil || b[i].across != nil):
			t.Fatalf("%s bucket %d (ended %v): shared", a[i].table, a[i].bucket, a[i].ended)
		case open:
			shared++
			for j := range i {
				if a[j].across == a[i].across && a[j].bucket != a[i].bucket {
					t.Fatalf("%s bucket %d shares the reads of %s bucket %d", a[i].table, a[i].bucket, a[j].table, a[j].bucket)
				}
			}
		}
	}
	if shared != 2+raw.EventBuckets {
		t.Fatalf("%d reads of open buckets shared, want the hour's, the minute's and the raw bucket's %d", shared, raw.EventBuckets)
	}
	for k, c := range [][]read{reads("a", true, false), reads("a", false, true), reads("c", false, false)} {
		for _, r := range c {
			if r.across != nil && (k != 1 || r.table != raw.Table) { // raw reads have no extras
				t.Fatalf("%s bucket %d: shared", r.table, r.bucket)
			}
		}
	}
}
