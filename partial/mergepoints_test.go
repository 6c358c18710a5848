package partial

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// randomPages returns k pages of distinct ascending times drawn from a
// small range, so that pages share times; points are raw points, or
// rollup rows when rollup is set.
func randomPages(r *rand.Rand, k int, rollup bool) [][]tiers.Row {
	pages := make([][]tiers.Row, k)
	for i := range pages {
		n := r.IntN(40)
		if r.IntN(4) == 0 {
			n = r.IntN(1000)
		}
		seen := map[int64]bool{}
		for range n {
			t := int64(r.IntN(1500))
			if seen[t] {
				continue
			}
			seen[t] = true
			row := tiers.PointRow(t, float64(r.IntN(1e6))/16)
			if rollup {
				row.Count = 2
			}
			pages[i] = append(pages[i], row)
		}
		slices.SortFunc(pages[i], func(a, b tiers.Row) int { return int(a.T - b.T) })
	}
	return pages
}

// MergePages equals the brute force — every row by time, the later page's
// row for a time held by several, ascending — for any number of pages, in
// either order, for raw points and for rollup rows.
func TestMergePagesEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for iter := range 3000 {
		k := r.IntN(7)
		rollup, desc := r.IntN(5) == 0, r.IntN(3) == 0
		pages := randomPages(r, k, rollup)
		last := map[int64]tiers.Row{}
		for _, p := range pages {
			for _, row := range p {
				last[row.T] = row
			}
		}
		var want []tiers.Row
		for _, ts := range slices.Sorted(maps.Keys(last)) {
			want = append(want, last[ts])
		}
		in := make([][]tiers.Row, k)
		for i, p := range pages {
			in[i] = slices.Clone(p)
			if desc {
				slices.Reverse(in[i])
			}
		}
		run := MergePages(in, desc)
		var got []tiers.Row
		for i, ts := range run.T {
			if run.Rows != nil {
				got = append(got, run.Rows[i])
			} else {
				got = append(got, tiers.PointRow(ts, run.V[i]))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (%d pages, rollup %v, desc %v): merged %d rows, want %d\n got %v\nwant %v", iter, k, rollup, desc, len(got), len(want), got, want)
		}
		if (run.Rows != nil) != (rollup && len(want) > 0) || run.Rows == nil && len(run.V) != len(run.T) {
			t.Fatalf("iteration %d: rollup %v, a run of %d rows, %d values", iter, rollup, len(run.Rows), len(run.V))
		}
		for i, p := range pages {
			if desc {
				slices.Reverse(in[i])
			}
			if !slices.Equal(in[i], p) {
				t.Fatalf("iteration %d: MergePages changed page %d", iter, i)
			}
		}
	}
}

// BenchmarkMergePages merges a bucket of 1 Hz raw points read from its
// four event-bucket partitions, as a cold raw read does for every hour,
// in either order (the pairwise merge of points), and the same rows as
// rollup rows (the scan of every page's head, which rollup rows take).
func BenchmarkMergePages(b *testing.B) {
	const n, eb = 3600, 4
	asc := make([][]tiers.Row, eb)
	rows := make([][]tiers.Row, eb)
	for t := range int64(n) {
		i := tiers.EventBucket(t*1000, eb)
		asc[i] = append(asc[i], tiers.PointRow(t*1000, float64(t%1000)))
		row := tiers.PointRow(t*1000, float64(t%1000))
		row.Count = 60
		rows[i] = append(rows[i], row)
	}
	desc := make([][]tiers.Row, eb)
	for i, p := range asc {
		desc[i] = slices.Clone(p)
		slices.Reverse(desc[i])
	}
	for _, c := range []struct {
		name  string
		pages [][]tiers.Row
		desc  bool
	}{{"points/order=asc", asc, false}, {"points/order=desc", desc, true}, {"rollup-rows/order=asc", rows, false}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if run := MergePages(c.pages, c.desc); len(run.T) != n {
					b.Fatalf("%d points", len(run.T))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/point")
		})
	}
}
