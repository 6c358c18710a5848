// Package scan reads the rows of one series from the tiers of the pyramid:
// it lays a planned range out as segments (each a tier and the span it
// serves, clipped to where the series can have rows), enumerates each
// segment's partitions from the series' layout, bucket by bucket with the
// late partition where the late index marks one, and reads them as one
// ordered stream with partial.Fetch.
//
// The query engine reads answers through it and the rollup worker reads the
// tier below the one it recomputes; neither knows the other.
package scan

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// Store is what a scan reads.
type Store interface {
	tiers.PartitionReader
	tiers.LateIndex
}

// Config tunes scans.
type Config struct {
	// Parallelism is how many partitions one scan reads at once. It is
	// raised to the largest bucket's partition count (event buckets plus the
	// late partition), which must all be open to merge the bucket.
	Parallelism int
	// PageSize is the number of rows fetched per store round trip.
	PageSize int
	// Lookahead is how many pages per partition are buffered ahead.
	Lookahead int
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Parallelism < 1 || c.Parallelism > 1024 {
		errs = append(errs, errors.New("read parallelism must be between 1 and 1024"))
	}
	if c.PageSize < 1 || c.PageSize > 100000 {
		errs = append(errs, errors.New("page size must be between 1 and 100000"))
	}
	if c.Lookahead < 1 || c.Lookahead > 16 {
		errs = append(errs, errors.New("lookahead must be between 1 and 16 pages"))
	}
	return errors.Join(errs...)
}

// Scanner reads series from a store.
type Scanner struct {
	store   Store
	pyramid tiers.Pyramid
	cfg     Config
	now     func() time.Time
	// buckets serves whole final buckets from memory when the store
	// offers it.
	buckets partial.Buckets
}

// New returns a scanner of the tiers of p; now is the clock that decides
// which rows have expired.
func New(store Store, p tiers.Pyramid, cfg Config, now func() time.Time) *Scanner {
	sc := &Scanner{store: store, pyramid: p, cfg: cfg, now: now}
	if b, ok := store.(partial.Buckets); ok {
		sc.buckets = b
	}
	return sc
}

// Segment is one part of a read and how its partitions are laid out.
type Segment struct {
	Span   tiers.Span
	Tier   *tiers.Tier
	Layout tiers.Layout
	// Generation is the series' (see tiers.SeriesInfo), which groups carry
	// for a cache of buckets to key on.
	Generation int64
	// Extras reads the rollup rows' extras too (tiers.ReadRequest.Extras):
	// the reads of aggregates that need them set it, ordinary reads do not.
	Extras bool
}

// Segments lays out the parts of page that the plan's segments serve, in
// read order, each bounded by the series' first and last point and by the
// tier's retention.
func (s *Scanner) Segments(info tiers.SeriesInfo, parts []router.Segment, page tiers.Span, desc bool) []Segment {
	now := s.now().UnixMilli()
	var segs []Segment
	for _, part := range parts {
		t := s.pyramid.Tier(part.Tier)
		// Rows of a rollup tier are stamped with their window's start, which
		// may precede the series' first point.
		exist := info.Span()
		if t.Step > 0 {
			exist.From = tiers.AlignDown(exist.From, t.Step)
		}
		// Rows older than the tier's retention have expired: never enumerate
		// their buckets, which would cost a query each for nothing.
		exist.From = max(exist.From, t.OldestAvailable(now))
		span := part.Span.Intersect(page).Intersect(exist)
		if span.Empty() {
			continue
		}
		layout := t.DefaultLayout()
		if t.Level == tiers.LevelRaw && info.Layout != nil {
			layout = info.Layout
		}
		segs = append(segs, Segment{Span: span, Tier: t, Layout: layout, Generation: info.Generation})
	}
	if desc {
		for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
			segs[i], segs[j] = segs[j], segs[i]
		}
	}
	return segs
}

// Groups enumerates the partitions of the segments, bucket by bucket in
// read order, and returns the size of the largest group. It reads the late
// index once for the raw segment.
func (s *Scanner) Groups(ctx context.Context, series string, segs []Segment, desc bool) (iter.Seq[partial.Group], int, error) {
	maxGroup := 1
	var late map[int64]tiers.LateBucket // bucket -> its marks
	for _, seg := range segs {
		if seg.Tier.Level != tiers.LevelRaw {
			continue
		}
		// Which raw buckets hold late points, and which were rewritten
		// after the fact: one index read per page.
		from := seg.Layout.BucketOf(seg.Span.From).Start
		buckets, err := s.lateBuckets(ctx, series, tiers.Span{From: from, To: seg.Span.To})
		if err != nil {
			return nil, 0, err
		}
		late = make(map[int64]tiers.LateBucket, len(buckets))
		for _, b := range buckets {
			late[b.Bucket] = b
		}
		for _, le := range seg.Layout {
			maxGroup = max(maxGroup, le.EventBuckets+1)
		}
	}
	pageSize := s.cfg.PageSize
	now := s.now().UnixMilli()
	return func(yield func(partial.Group) bool) {
		// Groups of ended rollup buckets wait here until a batch of them
		// is complete (see tiers.PartitionBatch).
		var pending []partial.Group
		flush := func() bool {
			if len(pending) > 1 {
				batch := &tiers.PartitionBatch{Buckets: make([]int64, len(pending))}
				for i, g := range pending {
					batch.Buckets[i] = g.Bucket.Start
					for j := range g.Reads {
						g.Reads[j].Batch = batch
					}
				}
			}
			for _, g := range pending {
				if !yield(g) {
					return false
				}
			}
			pending = pending[:0]
			return true
		}
		for _, seg := range segs {
			for b := range seg.Layout.Buckets(seg.Span, desc) {
				gs := b.Span().Intersect(seg.Span)
				g := partial.Group{Span: gs, Bucket: b, Reads: make([]tiers.ReadRequest, 0, b.EventBuckets+1), Generation: seg.Generation}
				var together *tiers.BucketReads
				if b.EventBuckets > 1 {
					together = &tiers.BucketReads{EventBuckets: b.EventBuckets}
				}
				extras := seg.Extras && seg.Tier.Level != tiers.LevelRaw
				var shared *tiers.SeriesReads
				if b.End > now && !desc && !extras {
					shared = seriesReads(ctx, series, seg.Tier.Table, b.Start, b.EventBuckets)
				}
				for eb := range b.EventBuckets {
					g.Reads = append(g.Reads, tiers.ReadRequest{
						Key:  tiers.PartitionKey{Table: seg.Tier.Table, Series: series, Bucket: b.Start, EventBucket: eb},
						Span: gs, Desc: desc, PageSize: pageSize, Extras: extras, End: b.End,
						Together: together, Across: shared,
					})
				}
				if m, ok := late[b.Start]; ok && seg.Tier.Level == tiers.LevelRaw {
					g.Rewritten = m.Rewritten
					if m.Version != 0 {
						// Last, so that on equal timestamps the late write wins.
						g.Reads = append(g.Reads, tiers.ReadRequest{
							Key:  tiers.PartitionKey{Table: tiers.TableLate, Series: series, Bucket: b.Start},
							Span: gs, Desc: desc, PageSize: pageSize, Version: m.Version,
						})
					}
				}
				if seg.Tier.Level != tiers.LevelRaw && b.End <= now {
					// A bucket that has ended is read whole from the store
					// or not at all (the cache holds it); one that has not
					// is read on every refresh, and must not take the
					// others along.
					if pending = append(pending, g); len(pending) < s.batchBuckets() {
						continue
					}
					if !flush() {
						return
					}
					continue
				}
				if !flush() || !yield(g) {
					return
				}
			}
			if !flush() {
				return
			}
		}
	}, maxGroup, nil
}

// batchBuckets is how many ended rollup buckets of a series one batch
// holds: the partitions a read has in flight, so that the store is not
// asked for chunks far ahead of the merge.
func (s *Scanner) batchBuckets() int { return min(s.cfg.Parallelism, 16) }

// Progress says which part of a read must complete whatever its budget
// (see partial.FetchOptions): the reads of the rest stop when Soft is done.
// The zero value reads everything under the read's own context.
type Progress struct {
	Soft context.Context
	Must tiers.Span
	// Rows is how many rows the reader can still take (0: all).
	Rows int
	// KeepStale delivers stale markers (partial.FetchOptions.KeepStale).
	KeepStale bool
}

// Read streams the rows of the segments over span (the range the segments
// tile), in order. The caller closes the stream.
func (s *Scanner) Read(ctx context.Context, series string, segs []Segment, span tiers.Span, desc bool, progress Progress, stats *partial.Stats) (*partial.Stream, error) {
	groups, maxGroup, err := s.Groups(ctx, series, segs, desc)
	if err != nil {
		return nil, err
	}
	opts := partial.FetchOptions{
		Parallelism: max(s.cfg.Parallelism, maxGroup), Lookahead: s.cfg.Lookahead,
		Soft: progress.Soft, Must: progress.Must, Buckets: s.buckets, Rows: progress.Rows,
		KeepStale: progress.KeepStale,
	}
	return partial.Fetch(ctx, s.store, span, groups, desc, opts, stats), nil
}

// ReadTier streams the rows of one tier of a series over span, in
// ascending order, merging the late partitions in for raw rows, with the
// extras of rollup rows when extras is set. The rollup worker reads with
// it; the caller closes the stream.
func (s *Scanner) ReadTier(ctx context.Context, info tiers.SeriesInfo, level tiers.Level, span tiers.Span, extras bool, stats *partial.Stats) (*partial.Stream, error) {
	segs := s.Segments(info, []router.Segment{{Span: span, Tier: level}}, span, false)
	for i := range segs {
		segs[i].Extras = extras
	}
	return s.Read(ctx, info.ID, segs, span, false, Progress{}, stats)
}
