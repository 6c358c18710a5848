package cache

import (
	"context"
	"slices"
	"time"

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
	held *held[string, spanMarks]
}

// spanMarks are a series' marks over a span.
type spanMarks struct {
	span  tiers.Span
	marks []tiers.LateBucket
}

// in returns a copy of the marks of buckets in span.
func (m spanMarks) in(span tiers.Span) []tiers.LateBucket {
	lo := 0
	for lo < len(m.marks) && m.marks[lo].Bucket < span.From {
		lo++
	}
	hi := lo
	for hi < len(m.marks) && m.marks[hi].Bucket < span.To {
		hi++
	}
	return slices.Clone(m.marks[lo:hi])
}

// covering says whether marks held over their span answer a read of span.
func covering(span tiers.Span) func(spanMarks) bool {
	return func(m spanMarks) bool { return m.span.From <= span.From && span.To <= m.span.To }
}

// NewLateMarks holds the marks of up to size series, each for ttl.
func NewLateMarks(index LateIndex, size int, ttl time.Duration, now func() time.Time) *LateMarks {
	return &LateMarks{LateIndex: index, held: newHeld[string, spanMarks](size, ttl, now)}
}

// MarkLate marks the buckets and drops the marks held of their series.
func (l *LateMarks) MarkLate(ctx context.Context, marks []tiers.LateMark) error {
	err := l.LateIndex.MarkLate(ctx, marks)
	series := make([]string, len(marks))
	for i, m := range marks {
		series[i] = m.Series
	}
	l.held.forget(series...)
	return err
}

// LateBuckets returns the series' marks in span, from those held when
// they are fresh and cover it.
func (l *LateMarks) LateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	m, err := l.held.one(series, covering(span), func() (spanMarks, error) {
		marks, err := l.LateIndex.LateBuckets(ctx, series, span)
		return spanMarks{span, marks}, err
	})
	if err != nil {
		return nil, err
	}
	return m.in(span), nil
}

// LateBucketsOf returns the marks of the series in span: those held that
// are fresh and cover it, the others with one batch read.
func (l *LateMarks) LateBucketsOf(ctx context.Context, series []string, span tiers.Span) (map[string][]tiers.LateBucket, error) {
	got, err := l.held.many(series, covering(span), func(misses []string) (map[string]spanMarks, error) {
		found, err := l.LateIndex.LateBucketsOf(ctx, misses, span)
		if err != nil {
			return nil, err
		}
		all := make(map[string]spanMarks, len(misses))
		for _, id := range misses {
			all[id] = spanMarks{span, found[id]}
		}
		return all, nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]tiers.LateBucket, len(got))
	for id, m := range got {
		if marks := m.in(span); len(marks) > 0 {
			out[id] = marks
		}
	}
	return out, nil
}
