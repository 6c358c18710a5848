package tiers

import (
	"errors"
	"fmt"
	"iter"
)

// LayoutEntry says how a series is partitioned from Since on: buckets of
// Width milliseconds, each split into EventBuckets partitions.
type LayoutEntry struct {
	Since        int64
	Width        int64
	EventBuckets int
}

// Layout is the partitioning history of one series in one tier, ordered by
// Since. Entry i governs the points in [Since_i, Since_i+1); the first entry
// also governs everything before its Since, which then only anchors bucket
// alignment. Buckets of entry i start at Since_i + k*Width_i, and the last
// bucket of an entry ends early, at the next entry's Since, so a layout
// change never makes two buckets overlap, wherever it is placed.
type Layout []LayoutEntry

// Validate checks that the layout is usable for enumeration.
func (l Layout) Validate() error {
	if len(l) == 0 {
		return errors.New("layout has no entries")
	}
	for i, e := range l {
		if e.Width < Second {
			return fmt.Errorf("layout entry %d: bucket width must be at least 1s", i)
		}
		if e.EventBuckets < 1 || e.EventBuckets > MaxEventBuckets {
			return fmt.Errorf("layout entry %d: event buckets must be between 1 and %d", i, MaxEventBuckets)
		}
		if e.Since < MinTime || e.Since >= MaxTime {
			return fmt.Errorf("layout entry %d: since is out of range", i)
		}
		if i > 0 && e.Since <= l[i-1].Since {
			return fmt.Errorf("layout entry %d: since must be after the previous entry's", i)
		}
	}
	return nil
}

// entryAt returns the index of the entry governing time t.
func (l Layout) entryAt(t int64) int {
	i := len(l) - 1
	for i > 0 && l[i].Since > t {
		i--
	}
	return i
}

// entryEnd is where entry i stops governing.
func (l Layout) entryEnd(i int) int64 {
	if i+1 < len(l) {
		return l[i+1].Since
	}
	return MaxTime
}

// Bucket is one time bucket of a series: [Start, End), split into
// EventBuckets partitions.
type Bucket struct {
	Start, End   int64
	EventBuckets int
}

// Span returns the bucket's interval.
func (b Bucket) Span() Span { return Span{From: b.Start, To: b.End} }

// BucketOf returns the bucket holding time t.
func (l Layout) BucketOf(t int64) Bucket {
	i := l.entryAt(t)
	e := l[i]
	start := e.Since + FloorDiv(t-e.Since, e.Width)*e.Width
	end := min(start+e.Width, l.entryEnd(i))
	return Bucket{Start: start, End: end, EventBuckets: e.EventBuckets}
}

// Locate returns the bucket start and event bucket of the one partition that
// holds time t.
func (l Layout) Locate(t int64) (bucket int64, eventBucket int) {
	b := l.BucketOf(t)
	return b.Start, EventBucket(t, b.EventBuckets)
}

// Buckets yields, in ascending time order (descending when desc is set),
// exactly the buckets that intersect span. Nothing is read: it is arithmetic
// on the layout, so callers clip span to the series' first and last point
// before enumerating.
func (l Layout) Buckets(span Span, desc bool) iter.Seq[Bucket] {
	return func(yield func(Bucket) bool) {
		if span.Empty() || len(l) == 0 {
			return
		}
		if !desc {
			for t := span.From; t < span.To; {
				b := l.BucketOf(t)
				if !yield(b) {
					return
				}
				t = b.End
			}
			return
		}
		for t := span.To - 1; t >= span.From; {
			b := l.BucketOf(t)
			if !yield(b) {
				return
			}
			t = b.Start - 1
		}
	}
}

// CountBuckets returns how many buckets and partitions intersect span.
func (l Layout) CountBuckets(span Span) (buckets, partitions int) {
	for b := range l.Buckets(span, false) {
		buckets++
		partitions += b.EventBuckets
	}
	return buckets, partitions
}

// EventBucket maps a timestamp to one of n event buckets. It is a fixed mix
// of the timestamp's bits (the SplitMix64 finaliser), so that the points of a
// busy second spread across all partitions of a bucket and a rewrite of the
// same (series, t) always lands in the same partition.
//
// The function is part of the on-disk format: changing it would strand every
// stored point in the wrong partition. TestEventBucketIsStable pins it.
func EventBucket(t int64, n int) int {
	if n <= 1 {
		return 0
	}
	z := uint64(t) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(n))
}
