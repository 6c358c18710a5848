package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/tiers"
)

// bucketKeyVersion is part of every bucket key; bump it when the cached
// form changes.
const bucketKeyVersion = 2

// bucketKey names a whole bucket under one layout: the same bucket start
// under another width or event-bucket count is another entry.
type bucketKey struct {
	version    int
	table      tiers.Table
	series     string
	start, end int64
	events     int
	// late says the run includes the bucket's late partition, read under
	// the version of its late mark: every late write changes the version,
	// and so the key.
	late        bool
	lateVersion int64
	// rewritten is the version of the bucket's rewrite mark: an import
	// into the bucket's raw partitions changes it, and so the key.
	// seriesGen is the series' generation, which an import of history
	// into its rollup tiers changes.
	rewritten, seriesGen int64
	// gen is the series' generation (see Invalidate).
	gen uint64
	// extras says the run's rollup rows carry their extras: a run read
	// without them never answers a read that needs them.
	extras bool
	// settled says the run holds the settled start of a raw bucket, up
	// to end (see SettleRaw), not the whole bucket.
	settled bool
}

type bucketEntry struct {
	key bucketKey
	run *partial.Run
	// kept is what the run took after it was cached (its rows encoded,
	// and as windows, see partial.Run.Keep); guarded by the cache's mutex.
	kept int64
}

// Buckets caches whole final buckets: the event-bucket partitions of a
// bucket merged into one ascending run, so that a read of any part of the
// bucket, in either order and under any paging, is a slice of one entry.
// Raw points are held in 16 bytes each, and once a read copies them, once
// more as the JSON answers copy them from (about 31 bytes with its
// offset). It implements partial.Buckets.
type Buckets struct {
	next     tiers.PartitionReader
	final    func(tiers.ReadRequest) bool
	maxBytes int64
	maxEntry int64

	mu    sync.Mutex
	lru   *lru.LRU[bucketKey, *bucketEntry]
	large *lru.LRU[bucketKey, struct{}] // buckets too large for an entry
	gens  map[string]uint64             // series -> generation, for series ever invalidated
	bytes int64
	group singleflight.Group

	hits, misses atomic.Int64

	// settledBefore, when set, is the time before which raw rows are
	// settled (SettleRaw); settledOf remembers, per bucket, the key of its
	// latest settled start, which the next one extends.
	settledBefore func() int64
	settledOf     *lru.LRU[bucketKey, bucketKey]
	settledHits   atomic.Int64
}

// settledStep is what the settled start of a bucket grows by: a read
// within the same step finds the same entry, and the next step's entry
// is the last one's rows and the step's.
const settledStep = tiers.Minute

// NewBuckets caches the buckets of next whose whole span final reports
// final, holding at most maxBytes of runs, and no single run larger than a
// sixteenth of that.
func NewBuckets(next tiers.PartitionReader, final func(tiers.ReadRequest) bool, maxBytes int64) *Buckets {
	b := &Buckets{next: next, final: final, maxBytes: maxBytes, maxEntry: maxBytes / 16}
	// Bounded in bytes below, not in entries.
	b.lru, _ = lru.NewLRU[bucketKey, *bucketEntry](1<<30, nil)
	b.large, _ = lru.NewLRU[bucketKey, struct{}](4096, nil)
	return b
}

// SettleRaw lets the cache hold the settled start of raw buckets that
// are not final yet, such as the bucket a dashboard of the last hour
// reads on every refresh. Rows of a raw partition older than settledBefore()
// no longer change: on-time points stop there (Finality's rule for whole
// buckets), later points go to the late partition, and an import changes
// the bucket's rewrite mark, which is part of the key. Such a bucket's
// rows from its start up to the settled time, rounded down to a minute,
// are cached like a final bucket's, with the late partition's up to
// there when it is read under a version of its mark (also part of the
// key); the read takes only the rest from the store. The entry of the
// next minute is this one's rows and the minute's, read from the store.
func (b *Buckets) SettleRaw(settledBefore func() int64) {
	b.settledBefore = settledBefore
	b.settledOf, _ = lru.NewLRU[bucketKey, bucketKey](1<<16, nil)
}

// SettledHits counts the reads of buckets that were not final and found
// their settled start in the cache.
func (b *Buckets) SettledHits() int64 { return b.settledHits.Load() }

// Stats returns the buckets served from memory and those loaded so far.
func (b *Buckets) Stats() (hits, misses int64) { return b.hits.Load(), b.misses.Load() }

// Bytes is the memory the cached runs take.
func (b *Buckets) Bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// Bucket serves the event-bucket partitions of g's bucket when the whole
// bucket is final.
func (b *Buckets) Bucket(g partial.Group) partial.BucketRead {
	var reads, rest []tiers.ReadRequest
	var late *tiers.ReadRequest
	for i, r := range g.Reads {
		if r.Key.Table != tiers.TableLate {
			reads = append(reads, r)
		} else {
			late = &g.Reads[i]
		}
	}
	if len(reads) == 0 || len(reads) != g.Bucket.EventBuckets || b.maxEntry < 16 {
		return partial.BucketRead{}
	}
	first := reads[0].Key
	whole := tiers.ReadRequest{Key: tiers.PartitionKey{Table: first.Table, Series: first.Series, Bucket: g.Bucket.Start}, Span: g.Bucket.Span(), End: g.Bucket.End}
	if first.Bucket != g.Bucket.Start {
		return partial.BucketRead{}
	}
	k := bucketKey{version: bucketKeyVersion, table: first.Table, series: first.Series, start: g.Bucket.Start, end: g.Bucket.End, events: g.Bucket.EventBuckets,
		rewritten: g.Rewritten, seriesGen: g.Generation, gen: b.generation(first.Series), extras: reads[0].Extras}
	if !b.final(whole) {
		return b.settledStart(g, k, reads, late)
	}
	if late != nil {
		lr := *late
		lr.Span = g.Bucket.Span()
		if b.final(lr) {
			// A late partition under a version of its mark is part of the
			// run, keyed by that version.
			k.late, k.lateVersion = true, lateVersion(lr)
			reads = append(reads, lr)
		} else {
			rest = []tiers.ReadRequest{*late}
		}
	}
	return b.serve(k, reads, rest)
}

// serve answers a group from the entry of k, which covers reads, or
// loads it; rest are the group's reads the entry does not cover.
func (b *Buckets) serve(k bucketKey, reads, rest []tiers.ReadRequest) partial.BucketRead {
	covered := len(reads)
	if e, large := b.get(k); e != nil {
		b.hits.Add(1)
		if k.settled {
			b.settledHits.Add(1)
		}
		return partial.BucketRead{Run: e.run, Rest: rest, Covered: covered}
	} else if large {
		return partial.BucketRead{}
	}
	return partial.BucketRead{Load: func(ctx context.Context) (*partial.Run, error) {
		b.misses.Add(1)
		ch := b.group.DoChan(bucketKeyString(k), func() (any, error) {
			if e, _ := b.get(k); e != nil {
				return e, nil
			}
			run, err := b.loadEntry(ctx, k, reads)
			if err != nil {
				return nil, err
			}
			e := &bucketEntry{key: k, run: run}
			b.put(e)
			return e, nil
		})
		select {
		case r := <-ch:
			if r.Err == nil && r.Val.(*bucketEntry).key == k {
				return r.Val.(*bucketEntry).run, nil
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			// The shared load failed under another read's context (or a
			// key-string collision): load under this read's own.
			return b.loadEntry(ctx, k, reads)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}, Rest: rest, Covered: covered}
}

// settledStart serves a raw bucket that is not final from the entry of
// its settled start (SettleRaw): the entry covers the event-bucket
// partitions up to the settled time; their reads from there on, and the
// late partition's, are the group's rest.
func (b *Buckets) settledStart(g partial.Group, k bucketKey, reads []tiers.ReadRequest, late *tiers.ReadRequest) partial.BucketRead {
	if b.settledBefore == nil || k.table != tiers.TableRaw {
		return partial.BucketRead{}
	}
	upTo := tiers.AlignDown(b.settledBefore(), settledStep)
	if upTo <= g.Bucket.Start || upTo >= g.Bucket.End || g.Span.From >= upTo {
		// Nothing of the bucket settled, or nothing of the read; or the
		// whole bucket, which only a clock that moved between the two
		// looks sees.
		return partial.BucketRead{}
	}
	k.end, k.settled = upTo, true
	var rest []tiers.ReadRequest
	if g.Span.To > upTo {
		for _, r := range reads {
			r.Span.From = max(r.Span.From, upTo)
			rest = append(rest, r)
		}
	}
	if late != nil {
		lr := *late
		lr.Span = tiers.Span{From: g.Bucket.Start, To: upTo}
		switch {
		case b.final(lr):
			// Under a version of its mark, the late partition's rows up to
			// the settled time are part of the entry, merged last; those
			// after it are read last, so that on equal times a late row
			// still wins over an on-time one.
			k.late, k.lateVersion = true, lateVersion(lr)
			reads = append(reads[:len(reads):len(reads)], lr)
			if g.Span.To > upTo {
				after := *late
				after.Span.From = max(after.Span.From, upTo)
				rest = append(rest, after)
			}
		default:
			rest = append(rest, *late)
		}
	}
	return b.serve(k, reads, rest)
}

// loadEntry loads the run of k: a whole bucket, or a settled start, which
// extends the bucket's latest settled start still cached when there is
// one, reading only the rows after it.
func (b *Buckets) loadEntry(ctx context.Context, k bucketKey, reads []tiers.ReadRequest) (*partial.Run, error) {
	if !k.settled {
		return b.load(ctx, k, reads, k.start)
	}
	id := k
	id.end = 0
	b.mu.Lock()
	prev, ok := b.settledOf.Get(id)
	b.mu.Unlock()
	var base *partial.Run
	if ok && prev.end < k.end {
		if e, _ := b.get(prev); e != nil {
			base = e.run
		}
	}
	from := k.start
	if base != nil {
		from = prev.end
	}
	run, err := b.load(ctx, k, reads, from)
	if err != nil {
		return nil, err
	}
	if base != nil {
		run = base.Append(run)
	}
	b.mu.Lock()
	if cur, ok := b.settledOf.Peek(id); !ok || cur.end < k.end {
		b.settledOf.Add(id, k)
		if ok {
			// The settled time only moves on: no read asks for the older
			// start again, which would otherwise hold its bytes until the
			// LRU reached it.
			b.removeLocked(cur)
		}
	}
	b.mu.Unlock()
	return run, nil
}

// removeLocked drops the entry of k, if cached; b.mu must be held.
func (b *Buckets) removeLocked(k bucketKey) {
	if e, ok := b.lru.Peek(k); ok {
		b.bytes -= bucketEntrySize(e)
		b.lru.Remove(k)
	}
}

// load reads the partitions of the whole bucket at once and merges them
// into one ascending run; on equal times the later read wins (the late
// partition comes last). It counts no rows: a read counts the rows of the
// span it takes from the run, loaded or found, so that rows_read says
// what an answer read, not whether the cache held it.
func (b *Buckets) load(ctx context.Context, k bucketKey, reads []tiers.ReadRequest, from int64) (*partial.Run, error) {
	parts := make([][]tiers.Row, len(reads))
	var eg errgroup.Group
	// The reads' spans change: a query their group's reads shared would
	// not answer them.
	var together *tiers.BucketReads
	if len(reads) > 1 {
		together = &tiers.BucketReads{EventBuckets: k.events}
	}
	for i, r := range reads {
		eg.Go(func() error {
			req := r
			req.Span, req.Desc, req.Together = tiers.Span{From: from, To: k.end}, false, together
			req.PageSize = max(req.PageSize, 1)
			pages := b.next.Read(ctx, req)
			defer pages.Close()
			var rows []tiers.Row
			for {
				page, err := pages.Next()
				if errors.Is(err, tiers.ErrDone) {
					parts[i] = rows
					return nil
				}
				if err != nil {
					return err
				}
				if rows == nil {
					rows = page // usually the only page
				} else {
					rows = append(rows, page...)
				}
			}
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	// Not encoded here: the run encodes itself on the first read that
	// copies its rows, charging the cache (partial.Run.Keep).
	return partial.MergePages(parts, false), nil
}

// Invalidate makes every cached bucket of the series unreachable (the LRU
// evicts them in time): an import writes into buckets the cache takes as
// final.
func (b *Buckets) Invalidate(series ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gens == nil {
		b.gens = map[string]uint64{}
	}
	for _, s := range series {
		b.gens[s]++
	}
}

func (b *Buckets) generation(series string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gens[series]
}

func (b *Buckets) get(k bucketKey) (e *bucketEntry, large bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.lru.Get(k); ok && e.key == k {
		return e, false
	}
	_, large = b.large.Get(k)
	return nil, large
}

func (b *Buckets) put(e *bucketEntry) {
	size := bucketEntrySize(e)
	b.mu.Lock()
	defer b.mu.Unlock()
	if size > b.maxEntry {
		b.large.Add(e.key, struct{}{})
		return
	}
	e.run.Keep = func(n int64) bool { return b.keep(e, n) }
	if old, ok := b.lru.Peek(e.key); ok {
		b.bytes -= bucketEntrySize(old)
	}
	b.lru.Add(e.key, e)
	b.bytes += size
	b.evict()
}

// keep charges n more bytes to entry e, evicting the oldest entries to
// stay within the budget. It reports false, charging nothing, when e is
// no longer cached or would outgrow the largest entry.
func (b *Buckets) keep(e *bucketEntry, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.lru.Peek(e.key); !ok || cur != e || bucketEntrySize(e)+n > b.maxEntry {
		return false
	}
	e.kept += n
	b.bytes += n
	b.lru.Get(e.key) // just used
	b.evict()
	return true
}

// evict drops the oldest entries until the cache is within its budget;
// b.mu must be held.
func (b *Buckets) evict() {
	for b.bytes > b.maxBytes {
		_, old, ok := b.lru.RemoveOldest()
		if !ok {
			return
		}
		b.bytes -= bucketEntrySize(old)
	}
}

func bucketEntrySize(e *bucketEntry) int64 {
	return e.run.Bytes() + e.kept + 160 + int64(len(e.key.series)+len(e.key.table))
}

func bucketKeyString(k bucketKey) string {
	b := make([]byte, 0, 64+len(k.series)+len(k.table))
	b = append(b, byte(k.version))
	b = append(b, k.table...)
	b = append(b, 0)
	b = append(b, k.series...)
	b = append(b, 0)
	late := int64(0)
	if k.late {
		late = 1
	}
	if k.extras {
		late |= 2
	}
	if k.settled {
		late |= 4
	}
	for _, n := range []int64{k.start, k.end, int64(k.events), late, k.lateVersion, k.rewritten, k.seriesGen, int64(k.gen)} {
		for i := range 8 {
			b = append(b, byte(n>>(8*i)))
		}
	}
	return string(b)
}

// lateVersion is the version of the late mark a late partition is read
// under (Finality calls a late read final only under one).
func lateVersion(r tiers.ReadRequest) int64 { return r.Version }
