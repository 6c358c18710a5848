package partial

import (
	"context"
	"sort"

	"github.com/tsgate/tsgate/tiers"
)

// Run is the rows of one whole bucket, its event-bucket partitions merged
// into one ascending run. Raw points are held compactly (T and V, 16 bytes
// a point); rollup rows whole (Rows). A run is immutable once built, so
// any number of reads may slice it at once without copying.
type Run struct {
	T    []int64
	V    []float64   // the raw points' values, when Rows is nil
	Rows []tiers.Row // rollup rows, when set (T holds their times too)
}

// Len is the number of rows.
func (r *Run) Len() int { return len(r.T) }

// Row returns the i-th row.
func (r *Run) Row(i int) tiers.Row {
	if r.Rows != nil {
		return r.Rows[i]
	}
	return tiers.PointRow(r.T[i], r.V[i])
}

// Bytes is the memory the run takes.
func (r *Run) Bytes() int64 {
	if r.Rows != nil {
		return int64(len(r.Rows))*40 + int64(len(r.T))*8
	}
	return int64(len(r.T)) * 16
}

// Range returns the indices [lo, hi) of the rows inside span.
func (r *Run) Range(span tiers.Span) (lo, hi int) {
	lo = sort.Search(len(r.T), func(i int) bool { return r.T[i] >= span.From })
	hi = lo + sort.Search(len(r.T)-lo, func(i int) bool { return r.T[lo+i] >= span.To })
	return lo, hi
}

// BucketRead is how a bucket cache serves a group: Run when the bucket is
// cached already, Load to read and cache it. Both nil means the group is
// read partition by partition.
type BucketRead struct {
	Run  *Run
	Load func(ctx context.Context, stats *Stats) (*Run, error)
	// Rest are the reads of the group the run does not cover (a late
	// partition that may still change), merged on top of it.
	Rest []tiers.ReadRequest
	// Covered is how many partitions the run stands for.
	Covered int
}

// Buckets serves whole buckets from memory: the event-bucket partitions,
// and the late partition too when it can no longer change unnoticed.
type Buckets interface {
	Bucket(g Group) BucketRead
}

// runIter iterates over rows [lo, hi) of a run, in either order.
type runIter struct {
	run    *Run
	i, end int
	step   int
	cur    tiers.Row
}

func newRunIter(r *Run, span tiers.Span, desc bool) *runIter {
	lo, hi := r.Range(span)
	if desc {
		return &runIter{run: r, i: hi, end: lo - 1, step: -1}
	}
	return &runIter{run: r, i: lo - 1, end: hi, step: 1}
}

func (it *runIter) count() int { return (it.end - it.i - it.step) * it.step }

func (it *runIter) Next() bool {
	if it.i+it.step == it.end {
		it.i = it.end - it.step // stay exhausted
		return false
	}
	it.i += it.step
	if it.run.Rows != nil {
		it.cur = it.run.Rows[it.i]
	} else {
		it.cur = tiers.PointRow(it.run.T[it.i], it.run.V[it.i])
	}
	return true
}

func (it *runIter) At() tiers.Row { return it.cur }
func (it *runIter) Err() error    { return nil }
