package scan

import (
	"context"
	"sync"

	"github.com/tsgate/tsgate/tiers"
)

type lateBatchKey struct{}

// lateBatch is the late index of the series of one request, read once
// over the span of the first of them to ask.
type lateBatch struct {
	series map[string]bool
	list   []string

	mu    sync.Mutex
	done  chan struct{}
	span  tiers.Span
	marks map[string][]tiers.LateBucket
	err   error
}

// WithLateBatch returns a context under which the scans of the given
// series, made for one request, read their late index with one read of
// the store (tiers.LateIndexBatch) rather than one each: the first scan to ask
// reads it for all of them over its own span, and the others take their
// part when their span lies within it. A scan of another series, or of a
// span outside the first one's, reads on its own. The read starts within
// the request, after any write the request must see was acknowledged.
func WithLateBatch(ctx context.Context, series []string) context.Context {
	if len(series) < 2 {
		return ctx
	}
	b := &lateBatch{series: make(map[string]bool, len(series)), list: series}
	for _, id := range series {
		b.series[id] = true
	}
	return context.WithValue(ctx, lateBatchKey{}, b)
}

// lateBuckets is the store's LateBuckets, from the request's batch when
// there is one that covers the read.
func (s *Scanner) lateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	b, _ := ctx.Value(lateBatchKey{}).(*lateBatch)
	batcher, ok := s.store.(tiers.LateIndexBatch)
	if b == nil || !ok || !b.series[series] {
		return s.store.LateBuckets(ctx, series, span)
	}
	b.mu.Lock()
	if b.done == nil {
		b.done, b.span = make(chan struct{}), span
		b.mu.Unlock()
		b.marks, b.err = batcher.LateBucketsOf(ctx, b.list, span)
		close(b.done)
	} else {
		done := b.done
		b.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if b.err != nil || span.From < b.span.From || span.To > b.span.To {
		return s.store.LateBuckets(ctx, series, span)
	}
	var out []tiers.LateBucket
	for _, m := range b.marks[series] {
		if span.Contains(m.Bucket) {
			out = append(out, m)
		}
	}
	return out, nil
}
