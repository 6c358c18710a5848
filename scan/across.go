package scan

import (
	"context"
	"sync"

	"github.com/tsgate/tsgate/tiers"
)

type acrossKey struct{}

// across holds the reads that the scans of one request's series share of
// each bucket that has not ended (tiers.SeriesReads), one per table,
// bucket and event-bucket count.
type across struct {
	series []string
	has    map[string]bool

	mu    sync.Mutex
	reads map[acrossBucket]*tiers.SeriesReads
}

type acrossBucket struct {
	table        tiers.Table
	bucket       int64
	eventBuckets int
}

// WithSeriesReads returns a context under which the scans of the given
// series, made for one request, read the partitions of the buckets that
// have not ended with one query a bucket for all of them
// (tiers.SeriesReads) rather than one each. Those are the partitions a
// refreshed panel reads every time, the others coming from the cache. The
// reads start within the request, after any write the request must see
// was acknowledged.
func WithSeriesReads(ctx context.Context, series []string) context.Context {
	if len(series) < 2 {
		return ctx
	}
	a := &across{series: series, has: make(map[string]bool, len(series)), reads: map[acrossBucket]*tiers.SeriesReads{}}
	for _, id := range series {
		a.has[id] = true
	}
	return context.WithValue(ctx, acrossKey{}, a)
}

// seriesReads returns the request's shared reads of the bucket's
// partitions of table, or nil when series is not one of the request's.
func seriesReads(ctx context.Context, series string, table tiers.Table, bucket int64, eventBuckets int) *tiers.SeriesReads {
	a, _ := ctx.Value(acrossKey{}).(*across)
	if a == nil || !a.has[series] {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := acrossBucket{table: table, bucket: bucket, eventBuckets: eventBuckets}
	r := a.reads[k]
	if r == nil {
		r = &tiers.SeriesReads{Series: a.series, EventBuckets: eventBuckets}
		a.reads[k] = r
	}
	return r
}
