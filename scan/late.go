package scan

import (
	"context"
	"sync"

	"github.com/tsgate/tsgate/tiers"
)

// lateBatch is the late index of the series of one request, read once
// over the span of the first of them to ask (see WithRequestSeries).
type lateBatch struct {
	mu    sync.Mutex
	done  chan struct{}
	span  tiers.Span
	marks map[string][]tiers.LateBucket
	err   error
}

// lateBuckets is the store's LateBuckets, from the request's batch when
// there is one that covers the read.
func (s *Scanner) lateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	rq := requestOf(ctx, series)
	batcher, ok := s.store.(tiers.LateIndexBatch)
	if rq == nil || !ok {
		return s.store.LateBuckets(ctx, series, span)
	}
	b := &rq.late
	b.mu.Lock()
	if b.done == nil {
		b.done, b.span = make(chan struct{}), span
		b.mu.Unlock()
		b.marks, b.err = batcher.LateBucketsOf(ctx, rq.list, span)
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
