package cache

import (
	"context"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tsgate/tsgate/tiers"
)

// LateIndex is a late index that also reads many series' marks at once.
type LateIndex interface {
	tiers.LateIndex
	tiers.LateIndexBatch
}

// LateMarks holds, for a short time, the late-index marks a read of raw
// buckets asks for before it reads a row: the versions that key cached
// late partitions and buckets rewritten by imports. A repeated read of
// final buckets then asks the store nothing.
//
// This gateway's late points and imports are seen at once: MarkLate
// through LateMarks drops the marks held of the series it marks, and marks
// fetched while it ran are not kept. Other gateways' are seen within the
// TTL (--series-cache-ttl), as their on-time points, new series and labels
// are. A TTL of 0 holds nothing.
type LateMarks struct {
	LateIndex
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	// epoch counts the MarkLate calls: marks fetched under an older epoch
	// may predate one.
	epoch uint64
	held  *lru.LRU[string, heldMarks]
}

type heldMarks struct {
	span  tiers.Span
	marks []tiers.LateBucket
	at    time.Time
}

// NewLateMarks holds the marks of up to size series, each for ttl.
func NewLateMarks(index LateIndex, size int, ttl time.Duration, now func() time.Time) *LateMarks {
	l := &LateMarks{LateIndex: index, ttl: ttl, now: now}
	l.held, _ = lru.NewLRU[string, heldMarks](max(1, size), nil)
	return l
}

// MarkLate marks the buckets and drops the marks held of their series.
func (l *LateMarks) MarkLate(ctx context.Context, marks []tiers.LateMark) error {
	err := l.LateIndex.MarkLate(ctx, marks)
	l.mu.Lock()
	l.epoch++
	for _, m := range marks {
		l.held.Remove(m.Series)
	}
	l.mu.Unlock()
	return err
}

// lookup returns the marks held of series in span; l.mu is held.
func (l *LateMarks) lookup(series string, span tiers.Span) ([]tiers.LateBucket, bool) {
	h, ok := l.held.Get(series)
	if !ok || l.now().Sub(h.at) >= l.ttl || span.From < h.span.From || span.To > h.span.To {
		return nil, false
	}
	lo := 0
	for lo < len(h.marks) && h.marks[lo].Bucket < span.From {
		lo++
	}
	hi := lo
	for hi < len(h.marks) && h.marks[hi].Bucket < span.To {
		hi++
	}
	return slices.Clone(h.marks[lo:hi]), true
}

// LateBuckets returns the series' marks in span, from those held when
// they are fresh and cover it.
func (l *LateMarks) LateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	l.mu.Lock()
	if marks, ok := l.lookup(series, span); ok {
		l.mu.Unlock()
		return marks, nil
	}
	epoch := l.epoch
	l.mu.Unlock()
	at := l.now()
	marks, err := l.LateIndex.LateBuckets(ctx, series, span)
	if err != nil || l.ttl <= 0 {
		return marks, err
	}
	l.mu.Lock()
	if epoch == l.epoch {
		l.held.Add(series, heldMarks{span, slices.Clone(marks), at})
	}
	l.mu.Unlock()
	return marks, nil
}

// LateBucketsOf returns the marks of the series in span: those held that
// are fresh and cover it, the others with one batch read.
func (l *LateMarks) LateBucketsOf(ctx context.Context, series []string, span tiers.Span) (map[string][]tiers.LateBucket, error) {
	out := make(map[string][]tiers.LateBucket, len(series))
	var misses []string
	l.mu.Lock()
	for _, id := range series {
		if marks, ok := l.lookup(id, span); ok {
			if len(marks) > 0 {
				out[id] = marks
			}
			continue
		}
		misses = append(misses, id)
	}
	epoch := l.epoch
	l.mu.Unlock()
	if len(misses) == 0 {
		return out, nil
	}
	at := l.now()
	got, err := l.LateIndex.LateBucketsOf(ctx, misses, span)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	keep := epoch == l.epoch && l.ttl > 0
	for _, id := range misses {
		if marks := got[id]; len(marks) > 0 {
			out[id] = marks
		}
		if keep {
			l.held.Add(id, heldMarks{span, slices.Clone(got[id]), at})
		}
	}
	l.mu.Unlock()
	return out, nil
}
