package partial

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/tiers"
)

// Group is the set of partition reads that together hold the rows of Span.
// Reads are merged into time order; when two reads hold a row with the same
// T, the later read in the slice wins (the late table overrides raw).
type Group struct {
	Span  tiers.Span
	Reads []tiers.ReadRequest
	// Bucket is the whole time bucket the group is part of, when the group
	// is one; a bucket cache keys on it rather than on Span, so that any
	// part of the bucket is served from one entry.
	Bucket tiers.Bucket
	// Rewritten is the version of the bucket's last rewrite mark (see
	// tiers.LateBucket), 0 if none, and Generation the series' (see
	// tiers.SeriesInfo): a bucket cache keys on both too, so that rows
	// written into the bucket after the fact are read.
	Rewritten, Generation int64
}

// FetchOptions bounds a fetch.
type FetchOptions struct {
	// Soft, when set, is the budget of the page: the reads of groups that
	// lie outside Must stop when it is done, and no such group is started
	// after it. The reads of the groups that overlap Must run under the
	// fetch's own context, which the caller bounds by its maximum budget:
	// a page always completes the part of the range it needs to make
	// progress, however slow the store.
	Soft context.Context
	// Must is the part of the range the page must complete, besides its
	// first group.
	Must tiers.Span
	// Parallelism is how many partitions may be read at once. It must be at
	// least the size of the largest group, whose partitions must all be open
	// for its merge to make progress; a larger group fails.
	Parallelism int
	// Lookahead is how many pages of one partition may be buffered ahead of
	// the merge; memory is bounded by aheadFactor x Parallelism x
	// (Lookahead+1) pages.
	Lookahead int
	// Buckets, when set, serves whole buckets from memory.
	Buckets Buckets
	// Rows, when positive, is how many rows the reader can still take: the
	// page's limit. Groups are then read ahead only as far as the rows
	// of the groups merged so far suggest the page can still reach, so a
	// page does not open partitions it will drop. The group after those
	// in flight is always opened once they are done.
	Rows int
	// KeepStale delivers the raw tier's stale markers (tiers.IsStale) as
	// rows; otherwise the stream passes over them, as if never written,
	// so that rollups, windows and answers never see them.
	KeepStale bool
}

// Stats counts the work of a fetch. The counters are updated while the
// fetch runs and are safe to read concurrently.
type Stats struct {
	Buckets    atomic.Int64
	Partitions atomic.Int64
	RowsRead   atomic.Int64
	CacheHits  atomic.Int64
}

// CachedPages is implemented by the pages of a read served from a cache, so
// the fetch can count cache hits.
type CachedPages interface {
	FromCache() bool
}

// Stream is the ordered rows of a sequence of groups; it implements
// merge.Iterator[tiers.Row]. It must be closed.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	// soft bounds the groups outside must (ctx when no soft budget).
	soft   context.Context
	must   tiers.Span
	desc   bool
	span   tiers.Span
	groups chan *groupFeeds
	// ahead holds a token for every partition opened whose group the merge
	// has not finished yet; its capacity is aheadFactor times the
	// parallelism.
	ahead chan struct{}
	// reading holds a token for every partition being read; its capacity
	// is the parallelism.
	reading chan struct{}
	eg      *errgroup.Group
	stats   *Stats
	// launched is set by the launcher, before it closes groups, when it
	// has handed over every group; a close without it means the launcher
	// stopped because the context ended.
	launched bool

	// Read-ahead by rows (FetchOptions.Rows): the merge counts the groups
	// and rows it finished, and notifies the launcher.
	aheadMu    sync.Mutex
	doneGroups int
	doneRows   int
	notify     chan struct{}
	groupRows  int

	// The groups come from pull. The merge takes them itself while each is
	// a bucket served whole from memory — no goroutine, no channel, nothing
	// to wake — and starts the launcher at the first group that needs a
	// read, handing it pull. A read of cached buckets never leaves the
	// caller's goroutine.
	pull      func() (Group, bool)
	stopPull  func()
	opts      FetchOptions
	reader    tiers.PartitionReader
	limit     int
	lookahead int
	launchMu  sync.Mutex
	started   bool // the launcher runs and owns pull
	closed    bool
	inlined   int // groups the merge took itself

	cur       *groupFeeds
	it        merge.Iterator[tiers.Row]
	row       tiers.Row
	watermark int64
	err       error
	done      bool
	closeOnce sync.Once
}

type groupFeeds struct {
	span tiers.Span
	// ctx is the context of the group's reads: the fetch's own for a group
	// that must complete, the soft budget's for the others.
	ctx   context.Context
	feeds []*feed
	// run is the group's cached bucket, or load delivers it; the feeds
	// then read only the partitions the run does not cover.
	run  *Run
	load chan loadResult
	// tokens is how many of the fetch's partition tokens the group holds
	// until the merge is done with it.
	tokens int
}

// Fetch reads the groups, in order, from reader and returns their rows as
// one ordered stream (descending when desc is set). span is the whole range
// the groups tile; rows can only exist inside the groups.
//
// The stream stops early when ctx is done or a partition read fails; Err
// then says why and Watermark how far the stream got.
func Fetch(ctx context.Context, reader tiers.PartitionReader, span tiers.Span, groups iter.Seq[Group], desc bool, opts FetchOptions, stats *Stats) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	// Every partition of a group must be open for the group's merge to make
	// progress, so a group may not need more reads at once than there are:
	// the caller sizes Parallelism to its largest group.
	limit := max(1, opts.Parallelism)
	soft := ctx
	if opts.Soft != nil {
		// Cancelled with the fetch, bounded by the page's budget.
		soft = mergeDone(ctx, opts.Soft)
	}
	s := &Stream{
		ctx: ctx, cancel: cancel, desc: desc, span: span, soft: soft, must: opts.Must,
		// Every group queued holds at least one token, so the queue never
		// blocks the launcher: the tokens do.
		groups: make(chan *groupFeeds, aheadFactor*limit), ahead: make(chan struct{}, aheadFactor*limit),
		reading: make(chan struct{}, limit), stats: stats, notify: make(chan struct{}, 1),
	}
	if desc {
		s.watermark = span.To
	} else {
		s.watermark = span.From
	}
	s.pull, s.stopPull = iter.Pull(groups)
	s.opts, s.reader, s.limit, s.lookahead = opts, reader, limit, max(1, opts.Lookahead)
	// The goroutines are the launcher and a read per partition (or a load
	// per bucket) holding tokens of ahead: no limit of their own.
	s.eg = &errgroup.Group{}
	if opts.Buckets == nil {
		// Every group needs reads: start them at once.
		s.startLauncher(nil)
	}
	return s
}

// pendingGroup is a group taken from pull, and its bucket looked up,
// before the launcher started.
type pendingGroup struct {
	g  Group
	br BucketRead
}

// bucketRead looks the group's bucket up in the cache of buckets, if any.
func (s *Stream) bucketRead(g Group) BucketRead {
	if s.opts.Buckets != nil && g.Bucket.End > g.Bucket.Start {
		return s.opts.Buckets.Bucket(g)
	}
	return BucketRead{}
}

// startLauncher starts the goroutine that opens the partitions of the
// groups, head first, then the rest of pull. It reports false when the
// stream is closed.
func (s *Stream) startLauncher(head *pendingGroup) bool {
	s.launchMu.Lock()
	defer s.launchMu.Unlock()
	if s.closed {
		return false
	}
	s.started = true
	ctx, soft, opts, limit, stats := s.ctx, s.soft, s.opts, s.limit, s.stats
	// The groups the merge took itself are done: the first group launched
	// is then not the page's first.
	first := s.inlined == 0
	launchedGroups := s.inlined
	s.eg.Go(func() error {
		defer close(s.groups)
		defer s.stopPull()
		for {
			var g Group
			var br BucketRead
			looked := false // up in the cache of buckets
			if head != nil {
				g, br, looked, head = head.g, head.br, true, nil
			} else {
				var ok bool
				if g, ok = s.pull(); !ok {
					break
				}
			}
			if opts.Rows > 0 && !s.waitRows(ctx, launchedGroups, opts.Rows) {
				return nil
			}
			launchedGroups++
			gctx := ctx
			// The first group always completes: rows may begin anywhere
			// after the page's start, and whatever precedes them moves
			// covered only once a group is done.
			if !first && g.Span.Intersect(s.must).Empty() {
				gctx = soft
				if soft.Err() != nil {
					// The page's budget is spent: start no group it does
					// not need.
					return nil
				}
			}
			first = false
			if !looked {
				br = s.bucketRead(g)
			}
			reads := g.Reads
			if br.Run != nil || br.Load != nil {
				// The run covers the bucket's partitions but Rest.
				reads = br.Rest
			}
			s.countBucket(br)
			gf := &groupFeeds{span: g.Span, ctx: gctx, feeds: make([]*feed, len(reads)), run: br.Run}
			for i := range reads {
				gf.feeds[i] = &feed{ctx: gctx, pages: make(chan []tiers.Row, s.lookahead)}
			}
			oversized := len(reads) > limit
			if oversized {
				// Never deadlock on a misconfigured limit: fail the group.
				for _, f := range gf.feeds {
					f.fail(fmt.Errorf("partial: a group of %d partitions exceeds the read parallelism %d", len(g.Reads), limit))
				}
			}
			// Open the partitions of upcoming groups while the merge works on
			// earlier ones: a group takes a token of ahead per partition (at
			// least one), which the merge gives back once it has moved past
			// the group, and each read a token of reading, which it gives
			// back when it ends. Waiting for either cannot deadlock: tokens
			// are taken in the order the merge takes the groups, so the
			// reads of the group it waits for hold theirs, and once it has
			// finished every group handed over, every token is free.
			gf.tokens = max(1, min(len(reads), limit))
			if br.Load != nil {
				// The load reads the bucket's partitions at once: it holds
				// a token for each, so that read-ahead stays bounded.
				gf.load = make(chan loadResult, 1)
				gf.tokens = min(len(reads)+max(1, br.Covered), limit)
			}
			for range gf.tokens {
				select {
				case s.ahead <- struct{}{}:
				case <-gctx.Done():
					return nil
				}
			}
			select {
			case s.groups <- gf:
			case <-gctx.Done():
				return nil
			}
			if oversized {
				continue
			}
			if br.Load != nil {
				// As many reads as the load makes at once, leaving room for
				// the group's own.
				loadReads := max(1, min(br.Covered, limit-len(reads)))
				if !s.acquireReads(gctx, loadReads) {
					gf.load <- loadResult{err: context.Cause(gctx)}
					gf.abandon(0, context.Cause(gctx))
					return nil
				}
				s.eg.Go(func() error {
					run, err := br.Load(gctx)
					s.releaseReads(loadReads)
					gf.load <- loadResult{run, err}
					return nil
				})
			}
			for i, req := range reads {
				f := gf.feeds[i]
				if !s.acquireReads(gctx, 1) {
					gf.abandon(i, context.Cause(gctx))
					return nil
				}
				stats.Partitions.Add(1)
				s.eg.Go(func() error {
					f.run(s.reader, req, stats)
					s.releaseReads(1)
					return nil // a failed partition stops the merge, not its siblings
				})
			}
		}
		s.launched = true
		return nil
	})
	return true
}

// abandon fails the feeds from i on of a group handed over to the merge
// whose reads will not start: the merge waits for them.
func (gf *groupFeeds) abandon(i int, err error) {
	for _, f := range gf.feeds[i:] {
		f.fail(err)
	}
}

// aheadFactor is how many times the parallelism of partitions the
// launcher opens ahead of the merge. Reads end out of order, and a group
// the merge has not reached holds its tokens of ahead when its reads are
// done: with a factor of one, every read that ends before those of an
// earlier group left the store with a read less to do until the merge
// caught up.
const aheadFactor = 2

// acquireReads takes n tokens of reading, or reports false when ctx ends
// first (the tokens taken are then given back).
func (s *Stream) acquireReads(ctx context.Context, n int) bool {
	for i := range n {
		select {
		case s.reading <- struct{}{}:
		case <-ctx.Done():
			s.releaseReads(i)
			return false
		}
	}
	return true
}

func (s *Stream) releaseReads(n int) {
	for range n {
		<-s.reading
	}
}

// countBucket counts a group handed to the merge: the partitions a run
// covers, and as cache hits when the run was cached already (a load
// counts its own reads).
func (s *Stream) countBucket(br BucketRead) {
	s.stats.Buckets.Add(1)
	if br.Run != nil || br.Load != nil {
		s.stats.Partitions.Add(int64(br.Covered))
	}
	if br.Run != nil {
		s.stats.CacheHits.Add(int64(br.Covered))
	}
}

// nextGroup returns the next group to merge: taken inline while the
// launcher has not started and the group is a cached bucket with nothing
// on top, else from the launcher. ok is false at the end of the groups
// (launched says whether they were all handed over).
func (s *Stream) nextGroup() (gf *groupFeeds, ok bool, err error) {
	if !s.started {
		if s.ctx.Err() != nil {
			return nil, false, context.Cause(s.ctx)
		}
		g, more := s.pull()
		if !more {
			s.launched = true
			return nil, false, nil
		}
		br := s.bucketRead(g)
		if br.Run != nil && len(br.Rest) == 0 {
			s.inlined++
			s.countBucket(br)
			return &groupFeeds{span: g.Span, ctx: s.ctx, run: br.Run}, true, nil
		}
		if !s.startLauncher(&pendingGroup{g, br}) {
			return nil, false, context.Canceled
		}
	}
	select {
	case gf, ok = <-s.groups:
		return gf, ok, nil
	case <-s.ctx.Done():
		return nil, false, context.Cause(s.ctx)
	}
}

// Next advances to the next row in order.
func (s *Stream) Next() bool {
	if s.done {
		return false
	}
	for {
		if s.it == nil {
			var ok bool
			var err error
			if s.cur, ok, err = s.nextGroup(); err != nil {
				return s.stop(err)
			}
			if ok && s.cur.ctx.Err() != nil {
				// A group outside the part the page must complete, after
				// the page's budget ran out.
				return s.stop(context.Cause(s.cur.ctx))
			}
			if !ok {
				if !s.launched {
					// The launcher stopped early: a context ended while it
					// waited to hand a group over, or the page's budget
					// was spent. (The select above may see the closed
					// channel before the context.)
					return s.stop(s.cause())
				}
				// Every group was read completely.
				if s.desc {
					s.watermark = s.span.From
				} else {
					s.watermark = s.span.To
				}
				s.done = true
				return false
			}
			if s.cur.load != nil {
				select {
				case r := <-s.cur.load:
					if r.err != nil {
						return s.stop(r.err)
					}
					s.cur.run = r.run
				case <-s.ctx.Done():
					return s.stop(context.Cause(s.ctx))
				}
			}
			inputs := make([]merge.Iterator[tiers.Row], 0, len(s.cur.feeds)+1)
			if s.cur.run == nil {
				if run, ok := s.bulk(); ok {
					// Its rows were counted as the partitions were read.
					inputs = append(inputs, newRunIter(run, s.cur.span, s.desc))
					s.cur.feeds = nil
				}
			} else {
				// First, so that on equal timestamps the late partition wins.
				ri := newRunIter(s.cur.run, s.cur.span, s.desc)
				s.stats.RowsRead.Add(int64(ri.count()))
				inputs = append(inputs, ri)
			}
			for _, f := range s.cur.feeds {
				inputs = append(inputs, f)
			}
			less := ascRow
			if s.desc {
				less = descRow
			}
			s.it = merge.Iter(less, inputs, merge.Dedup())
			s.advanceWatermark(s.groupStart())
		}
		if s.it.Next() {
			s.row = s.it.At()
			if !s.opts.KeepStale && tiers.IsStale(s.row) {
				continue
			}
			s.groupRows++
			s.passRow()
			return true
		}
		if err := s.it.Err(); err != nil {
			return s.stop(err)
		}
		s.advanceWatermark(s.groupEnd())
		s.aheadMu.Lock()
		s.doneGroups++
		s.doneRows += s.groupRows
		s.aheadMu.Unlock()
		s.groupRows = 0
		select {
		case s.notify <- struct{}{}:
		default:
		}
		for range s.cur.tokens {
			<-s.ahead
		}
		s.it, s.cur = nil, nil
	}
}

// NextRun moves past up to limit rows at once instead of one, when the
// rows that come next are a run's with nothing to merge on top of it — a
// cached bucket, or a group merged in one pass (see bulk): they are handed
// over as a slice of the run, in the stream's order.
// It reports false when the next row must be taken with Next — another
// kind of group, or the end of the current one — and then nothing moved.
func (s *Stream) NextRun(limit int) (RunSlice, bool) {
	if s.done || s.it == nil || limit <= 0 {
		return RunSlice{}, false
	}
	ri, ok := s.it.(*runIter)
	if !ok {
		return RunSlice{}, false
	}
	if !s.opts.KeepStale {
		// A stale marker is taken (and passed over) by Next.
		if limit = ri.freshAhead(limit); limit == 0 {
			return RunSlice{}, false
		}
	}
	lo, hi := ri.take(limit)
	if hi == lo {
		return RunSlice{}, false
	}
	s.row = ri.At()
	s.groupRows += hi - lo
	s.passRow()
	return RunSlice{Run: ri.run, Lo: lo, Hi: hi, Desc: s.desc}, true
}

// bulk merges the current group's partitions in one pass when each of
// them arrived whole in one page — small partitions, as raw buckets'
// usually are — into a run that is handed over like a cached one: a tight
// loop instead of a merge step, a stream step and an item per row. It
// reports false, with every page put back, when a partition has more
// pages, failed, or the read ended: the group is then merged row by row.
func (s *Stream) bulk() (*Run, bool) {
	feeds := s.cur.feeds
	if len(feeds) == 0 {
		return nil, false
	}
	pages := make([][]tiers.Row, len(feeds))
	whole := true
	for i, f := range feeds {
		var ok bool
		if pages[i], ok = f.whole(); !ok {
			whole = false
			break
		}
	}
	if !whole {
		for i, f := range feeds {
			if pages[i] != nil {
				f.pending = append([][]tiers.Row{pages[i]}, f.pending...)
			}
		}
		return nil, false
	}
	return MergePages(pages, s.desc), true
}

// MergePages merges pages, each in descending order when desc is set and
// ascending otherwise, into an ascending run; on equal times the later
// page's row wins. Raw points are held compactly. The run may hold a
// page itself, which nobody may change after.
func MergePages(pages [][]tiers.Row, desc bool) *Run {
	n, points := 0, true
	for _, p := range pages {
		n += len(p)
		for _, r := range p {
			if !points {
				break
			}
			// A stale marker is a point too, though NaN equals nothing.
			points = r == tiers.PointRow(r.T, r.Sum) || tiers.IsStale(r) && r.Count == 1
		}
	}
	if points {
		run := &Run{T: make([]int64, n), V: make([]float64, n)}
		k := mergePoints(pages, desc, run.T, run.V)
		run.T, run.V = run.T[:k], run.V[:k]
		if desc {
			slices.Reverse(run.T)
			slices.Reverse(run.V)
		}
		return run
	}
	if only := lonePage(pages); only >= 0 && !desc {
		// One partition's rows, ascending, as a sealed rollup partition
		// arrives: the run holds the page itself (runs are read only).
		rows := pages[only]
		run := &Run{T: make([]int64, len(rows)), Rows: rows}
		for i, r := range rows {
			run.T[i] = r.T
		}
		return run
	}
	// Rollup rows: a scan of every page's head for each row.
	run := &Run{T: make([]int64, 0, n), Rows: make([]tiers.Row, 0, n)}
	pos := make([]int, len(pages))
	for {
		best := -1
		for i, p := range pages {
			if pos[i] == len(p) {
				continue
			}
			switch {
			case best < 0:
				best = i
			case p[pos[i]].T == pages[best][pos[best]].T:
				pos[best]++ // the later page wins
				best = i
			case (p[pos[i]].T < pages[best][pos[best]].T) != desc:
				best = i
			}
		}
		if best < 0 {
			break
		}
		r := pages[best][pos[best]]
		pos[best]++
		run.T = append(run.T, r.T)
		run.Rows = append(run.Rows, r)
	}
	if desc {
		slices.Reverse(run.T)
		slices.Reverse(run.Rows)
	}
	return run
}

// lonePage returns the index of the one page that holds rows, or -1 when
// none or several do.
func lonePage(pages [][]tiers.Row) int {
	only := -1
	for i, p := range pages {
		if len(p) == 0 {
			continue
		}
		if only >= 0 {
			return -1
		}
		only = i
	}
	return only
}

type loadResult struct {
	run *Run
	err error
}

// waitRows holds the launcher before the group after the launched ones
// while the groups still in flight are expected to hold the rows the page
// can still take (rows, less those merged already), estimated from the
// rows of the groups merged so far. It never waits with no group in
// flight: the merge needs one to go on. It reports false when ctx ended.
func (s *Stream) waitRows(ctx context.Context, launched, rows int) bool {
	for {
		s.aheadMu.Lock()
		done, got := s.doneGroups, s.doneRows
		s.aheadMu.Unlock()
		inFlight := launched - done
		if inFlight <= 0 || done == 0 || got+inFlight*max(1, got/done) < rows {
			return true
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return false
		}
	}
}

func (s *Stream) groupStart() int64 {
	if s.desc {
		return s.cur.span.To
	}
	return s.cur.span.From
}

func (s *Stream) groupEnd() int64 {
	if s.desc {
		return s.cur.span.From
	}
	return s.cur.span.To
}

// passRow moves the watermark past the current row, delivered.
func (s *Stream) passRow() {
	if s.desc {
		s.advanceWatermark(s.row.T)
	} else {
		s.advanceWatermark(s.row.T + 1)
	}
}

// advanceWatermark moves the watermark to t if that is further along: rows
// only exist inside groups, so reaching a group's start (or finishing a
// group) means everything before it was delivered.
func (s *Stream) advanceWatermark(t int64) {
	if s.desc {
		s.watermark = min(s.watermark, t)
	} else {
		s.watermark = max(s.watermark, t)
	}
}

// cause is why the launcher stopped early: the fetch's context, else the
// page's budget.
func (s *Stream) cause() error {
	if err := context.Cause(s.ctx); err != nil {
		return err
	}
	if err := context.Cause(s.soft); err != nil {
		return err
	}
	return context.Canceled
}

// mergeDone returns a context of parent that is also done when other is,
// with other's cause.
func mergeDone(parent, other context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	context.AfterFunc(ctx, func() { stop() })
	return ctx
}

func (s *Stream) stop(err error) bool {
	s.done = true
	s.err = err
	return false
}

// At returns the current row.
func (s *Stream) At() tiers.Row { return s.row }

// Err says why the stream stopped early: the context's cause (for a budget,
// ErrBudgetExceeded) or the joined errors of the partitions that failed. It
// is nil when every group was read.
func (s *Stream) Err() error { return s.err }

// Watermark is the position up to which the stream is complete: ascending,
// every row with T < Watermark has been returned by Next; descending, every
// row with T >= Watermark has. Once the stream is exhausted without error it
// is the end of the span.
func (s *Stream) Watermark() int64 { return s.watermark }

// Close stops the reads still in flight and waits for them. It is not to
// be called while Next or NextRun runs.
func (s *Stream) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.launchMu.Lock()
		s.closed = true
		started := s.started
		s.launchMu.Unlock()
		if !started {
			s.stopPull()
			return
		}
		// Drain the launcher so it is not blocked sending a group.
		go func() {
			for range s.groups {
			}
		}()
		_ = s.eg.Wait()
	})
}

func ascRow(a, b tiers.Row) bool  { return a.T < b.T }
func descRow(a, b tiers.Row) bool { return a.T > b.T }

// feed carries the pages of one partition read from its goroutine to the
// merge; it is the merge's view of the partition.
type feed struct {
	ctx   context.Context
	pages chan []tiers.Row
	err   error // set before pages is closed

	page []tiers.Row
	i    int
	done bool
	ferr error
	// pending are pages taken from the channel and put back (see
	// Stream.bulk), delivered before the channel's.
	pending [][]tiers.Row
}

// whole receives the partition's first page and reports whether it was
// also the last, the read having ended without error. A partition without
// rows is whole with no page. When it reports false, the pages received
// are put back, to be merged row by row.
func (f *feed) whole() ([]tiers.Row, bool) {
	var first []tiers.Row
	for _, want := range [2]bool{true, false} {
		var page []tiers.Row
		var ok bool
		select {
		case page, ok = <-f.pages:
		case <-f.ctx.Done():
			if first != nil {
				f.pending = append(f.pending, first)
			}
			return nil, false
		}
		switch {
		case !ok && f.err == nil:
			return first, true
		case !ok:
			// Failed: the row-by-row merge delivers what came first and
			// then the error.
			if first != nil {
				f.pending = append(f.pending, first)
			}
			return nil, false
		case want:
			first = page
		default:
			f.pending = append(f.pending, first, page)
			return nil, false
		}
	}
	panic("unreachable")
}

func (f *feed) fail(err error) {
	f.err = err
	close(f.pages)
}

func (f *feed) run(reader tiers.PartitionReader, req tiers.ReadRequest, stats *Stats) {
	pages := reader.Read(f.ctx, req)
	defer pages.Close()
	if c, ok := pages.(CachedPages); ok && c.FromCache() {
		stats.CacheHits.Add(1)
	}
	for {
		page, err := pages.Next()
		if errors.Is(err, tiers.ErrDone) {
			f.fail(nil)
			return
		}
		if err != nil {
			f.fail(err)
			return
		}
		stats.RowsRead.Add(int64(len(page)))
		select {
		case f.pages <- page:
		case <-f.ctx.Done():
			f.fail(context.Cause(f.ctx))
			return
		}
	}
}

func (f *feed) Next() bool {
	if f.done {
		return false
	}
	f.i++
	for f.i >= len(f.page) {
		if len(f.pending) > 0 {
			f.page, f.pending, f.i = f.pending[0], f.pending[1:], 0
			continue
		}
		var ok bool
		select {
		case f.page, ok = <-f.pages:
		case <-f.ctx.Done():
			f.done, f.ferr = true, context.Cause(f.ctx)
			return false
		}
		if !ok {
			f.done, f.ferr = true, f.err
			return false
		}
		f.i = 0
	}
	return true
}

func (f *feed) At() tiers.Row { return f.page[f.i] }
func (f *feed) Err() error    { return f.ferr }
