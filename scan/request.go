package scan

import (
	"context"
	"sync"

	"github.com/tsgate/tsgate/tiers"
)

type requestKey struct{}

// requestSeries are the series of one request, whose scans share reads
// (WithRequestSeries).
type requestSeries struct {
	list []string
	has  map[string]bool
	late lateBatch

	mu    sync.Mutex
	reads map[acrossBucket]*tiers.SeriesReads // one per table, bucket and event-bucket count
}

type acrossBucket struct {
	table        tiers.Table
	bucket       int64
	eventBuckets int
}

// WithRequestSeries returns a context under which the scans of the given
// series, made for one request, share two reads rather than make one
// each. Their late index is read with one read of the store
// (tiers.LateIndexBatch): the first scan to ask reads it for all of them
// over its own span, and the others take their part when their span lies
// within it. The partitions of each bucket that has not ended are read
// with one query for all of them (tiers.SeriesReads): those are what a
// refreshed panel reads every time, the others coming from the cache. A
// scan of another series reads on its own. The reads start within the
// request, after any write the request must see was acknowledged.
func WithRequestSeries(ctx context.Context, series []string) context.Context {
	if len(series) < 2 {
		return ctx
	}
	rq := &requestSeries{list: series, has: make(map[string]bool, len(series)), reads: map[acrossBucket]*tiers.SeriesReads{}}
	for _, id := range series {
		rq.has[id] = true
	}
	return context.WithValue(ctx, requestKey{}, rq)
}

// requestOf returns the request's series when series is one of them.
func requestOf(ctx context.Context, series string) *requestSeries {
	rq, _ := ctx.Value(requestKey{}).(*requestSeries)
	if rq == nil || !rq.has[series] {
		return nil
	}
	return rq
}

// seriesReads returns the request's shared reads of the bucket's
// partitions of table, or nil when series is not one of the request's.
func seriesReads(ctx context.Context, series string, table tiers.Table, bucket int64, eventBuckets int) *tiers.SeriesReads {
	rq := requestOf(ctx, series)
	if rq == nil {
		return nil
	}
	rq.mu.Lock()
	defer rq.mu.Unlock()
	k := acrossBucket{table: table, bucket: bucket, eventBuckets: eventBuckets}
	r := rq.reads[k]
	if r == nil {
		r = &tiers.SeriesReads{Series: rq.list, EventBuckets: eventBuckets}
		rq.reads[k] = r
	}
	return r
}
