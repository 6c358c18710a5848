// Package query answers reads: it resolves the series, plans the read with
// router, enumerates the partitions of every segment from the series'
// layout, fans the reads out under the request's latency budget with
// partial, re-aggregates rows into the answer's windows, and pages the
// answer with signed cursors.
//
// A Result is pulled item by item, so an answer streams from the store to
// the client without the range ever being held in memory: memory is bounded
// by the partitions in flight times the page size.
package query

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// Store is what the engine reads from.
type Store interface {
	tiers.PartitionReader
	tiers.LateIndex
	// LookupSeries is the registry's, usually behind a cache.
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
}

// Config tunes the engine.
type Config struct {
	// Parallelism is how many partitions one request reads at once. It is
	// raised to the largest bucket's partition count (event buckets plus the
	// late partition), which must all be open to merge the bucket.
	Parallelism int
	// PageSize is the number of rows fetched per store round trip.
	PageSize int
	// Lookahead is how many pages per partition are buffered ahead.
	Lookahead int
	// DefaultSLO and MaxSLO bound the latency budget of a request.
	DefaultSLO, MaxSLO time.Duration
	// DefaultLimit and MaxLimit bound the points of one page.
	DefaultLimit, MaxLimit int
}

// DefaultConfig returns the engine's defaults.
func DefaultConfig() Config {
	return Config{
		Parallelism: 16, PageSize: 5000, Lookahead: 1,
		DefaultSLO: 10 * time.Second, MaxSLO: 60 * time.Second,
		DefaultLimit: 10000, MaxLimit: 100000,
	}
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
	if c.DefaultSLO <= 0 || c.MaxSLO < c.DefaultSLO {
		errs = append(errs, errors.New("the default SLO must be positive and at most the maximum SLO"))
	}
	if c.DefaultLimit < 1 || c.MaxLimit < c.DefaultLimit {
		errs = append(errs, errors.New("the default limit must be positive and at most the maximum limit"))
	}
	return errors.Join(errs...)
}

// Engine answers reads.
type Engine struct {
	store      Store
	pyramid    tiers.Pyramid
	router     router.Config
	watermarks func(context.Context) router.Watermarks
	signer     *partial.Signer
	cfg        Config
	now        func() time.Time
}

// New returns an engine. watermarks reports how far each tier is rolled up;
// now is the clock.
func New(store Store, p tiers.Pyramid, rc router.Config, watermarks func(context.Context) router.Watermarks, signer *partial.Signer, cfg Config, now func() time.Time) *Engine {
	return &Engine{store: store, pyramid: p, router: rc, watermarks: watermarks, signer: signer, cfg: cfg, now: now}
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Pyramid returns the tiers the engine reads.
func (e *Engine) Pyramid() *tiers.Pyramid { return &e.pyramid }

// Request is one read of one series. Span, Resolution and friends are
// already parsed; Binding digests the request's normalized parameters so
// that a cursor is only accepted by the request it was issued for.
type Request struct {
	Series     string
	Span       tiers.Span
	Resolution router.Resolution
	MaxPoints  int64
	Aggs       []Agg
	Desc       bool
	Limit      int
	Cursor     string
	Binding    partial.Binding
	SLO        time.Duration
	// Deny turns a cut-short answer into an error (ErrBudget or
	// ErrUnavailable) instead of a partial page.
	Deny bool
	// Start is when the request arrived, on the wall clock; the budget runs
	// from it.
	Start time.Time
}

// Errors the engine returns; the HTTP layer maps each to a status.
var (
	ErrSeriesNotFound = errors.New("series not found")
	// ErrBudget: the budget ran out under partial=deny (504).
	ErrBudget = errors.New("the read did not complete within its latency budget")
	// ErrUnavailable: the store failed under partial=deny, or for the
	// series lookup itself (503).
	ErrUnavailable = errors.New("the store did not answer for some partitions")
)

// ParamError is a request the engine cannot serve as asked; Param names
// the parameter to fix.
type ParamError struct {
	Param string
	Err   error
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

// Stats is the work one page did.
type Stats struct {
	Buckets, Partitions, RowsRead, CacheHits int64
	Elapsed                                  time.Duration
}

// Trailer is what is known once a page has been produced.
type Trailer struct {
	Partial bool
	// Reason is "slo" or "unavailable" when Partial.
	Reason string
	// Covered is the part of the request's range whose points have all been
	// delivered by this page and the ones before it.
	Covered    tiers.Span
	NextCursor string
	Stats      Stats
	// Err is set under partial=deny when the page could not be completed:
	// ErrBudget or ErrUnavailable. Nothing of the page may then be shown.
	Err error
}

func (e *Engine) lookup(ctx context.Context, id string) (tiers.SeriesInfo, error) {
	info, err := e.store.LookupSeries(ctx, id)
	if errors.Is(err, tiers.ErrNotFound) {
		return info, ErrSeriesNotFound
	}
	if err != nil {
		if errors.Is(context.Cause(ctx), partial.ErrBudgetExceeded) {
			return info, fmt.Errorf("%w: %w", ErrBudget, err)
		}
		return info, fmt.Errorf("%w: series lookup: %w", ErrUnavailable, err)
	}
	return info, nil
}

// plan routes a fresh request or rebuilds the plan a cursor carries; it
// returns the position to start from (the start of the read range when
// there is no cursor).
func (e *Engine) plan(ctx context.Context, req Request) (router.Plan, *partial.Cursor, error) {
	now := e.now().UnixMilli()
	wm := e.watermarks(ctx)
	if req.Cursor == "" {
		plan, err := router.Route(router.Request{Span: req.Span, Resolution: req.Resolution, MaxPoints: req.MaxPoints}, now, &e.pyramid, e.router, wm)
		if err != nil {
			var re *router.Error
			if errors.As(err, &re) {
				return plan, nil, &ParamError{Param: re.Param, Err: errors.New(re.Message)}
			}
			return plan, nil, err
		}
		return plan, nil, nil
	}
	c, err := e.signer.Decode(req.Cursor, req.Binding)
	if err != nil {
		return router.Plan{}, nil, &ParamError{Param: "cursor", Err: err}
	}
	if int(c.Tier) >= len(e.pyramid) {
		return router.Plan{}, nil, &ParamError{Param: "cursor", Err: partial.ErrCursorMalformed}
	}
	span := tiers.Span{From: c.From, To: c.To}
	return router.Resume(span, tiers.Level(c.Tier), c.Step, now, &e.pyramid, wm), &c, nil
}

// Result is one page of an answer. Read Items with Next and Item, then
// Trailer; Close releases it in any case.
type Result struct {
	Series   string
	Span     tiers.Span // the request's range, as resolved for its first page
	Plan     router.Plan
	Aggs     []Agg
	Desc     bool
	Warnings []string

	e        *Engine
	req      Request
	ctx      context.Context
	cancel   context.CancelFunc
	stream   *partial.Stream
	stats    partial.Stats
	windows  *merge.Windower[tiers.Row, tiers.Row]
	page     tiers.Span // the part of the read range this page covers
	limit    int
	n        int
	item     Item
	last     int64 // position right after the last delivered item
	hasPeek  bool
	peek     Item
	finished bool
	trailer  Trailer
	early    error // a budget or store failure before the fan-out started
}

// Item is one point (raw answers: T and the row's value) or one window
// (aggregated answers: T is the window start, Row the folded aggregates).
type Item struct {
	T   int64
	Row tiers.Row
}

// Query starts answering req. Errors returned here come before any output:
// a bad parameter (*ParamError), an unknown series, or — under
// partial=deny, or when the series lookup fails — ErrBudget and
// ErrUnavailable.
func (e *Engine) Query(ctx context.Context, req Request) (*Result, error) {
	if req.Start.IsZero() {
		// The budget is real latency, measured on the wall clock even when
		// the engine's clock (which decides what data is current) is not.
		req.Start = time.Now()
	}
	slo := req.SLO
	if slo <= 0 {
		slo = e.cfg.DefaultSLO
	}
	slo = min(slo, e.cfg.MaxSLO)
	limit := req.Limit
	if limit == 0 {
		limit = e.cfg.DefaultLimit
	}
	if limit < 1 || limit > e.cfg.MaxLimit {
		return nil, &ParamError{Param: "limit", Err: fmt.Errorf("must be between 1 and %d", e.cfg.MaxLimit)}
	}
	if len(req.Aggs) == 0 {
		req.Aggs = []Agg{Avg}
	}
	ctx, cancel := partial.WithBudget(ctx, req.Start, slo)
	plan, cur, err := e.plan(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	span := req.Span
	pos := plan.Read.From
	if req.Desc {
		pos = plan.Read.To
	}
	if cur != nil {
		span = tiers.Span{From: cur.From, To: cur.To}
		pos = cur.Position
	}
	r := &Result{
		Series: req.Series, Span: span, Plan: plan, Aggs: req.Aggs, Desc: req.Desc,
		Warnings: plan.Warnings, e: e, req: req, ctx: ctx, cancel: cancel, limit: limit,
	}
	r.page = plan.Read
	if req.Desc {
		r.page.To = min(r.page.To, pos)
	} else {
		r.page.From = max(r.page.From, pos)
	}
	r.last = pos

	info, err := e.lookup(ctx, req.Series)
	if err != nil {
		if errors.Is(err, ErrBudget) && !req.Deny {
			r.early = err // an empty partial page that resumes where it started
			return r, nil
		}
		cancel()
		return nil, err
	}
	groups, maxGroup, err := e.groups(ctx, req.Series, info, plan, r.page, req.Desc)
	if err != nil {
		if req.Deny || !errors.Is(context.Cause(ctx), partial.ErrBudgetExceeded) {
			cancel()
			if errors.Is(context.Cause(ctx), partial.ErrBudgetExceeded) {
				return nil, fmt.Errorf("%w: %w", ErrBudget, err)
			}
			return nil, fmt.Errorf("%w: late index: %w", ErrUnavailable, err)
		}
		r.early = err
		return r, nil
	}
	opts := partial.FetchOptions{Parallelism: max(e.cfg.Parallelism, maxGroup), Lookahead: e.cfg.Lookahead}
	r.stream = partial.Fetch(ctx, e.store, r.page, groups, req.Desc, opts, &r.stats)
	if plan.Step > 0 {
		r.windows = merge.NewWindower(merge.Iterator[tiers.Row](r.stream), plan.Step,
			func(row tiers.Row) int64 { return row.T },
			func(acc *tiers.Row, row tiers.Row) { acc.Add(row) })
	}
	return r, nil
}

// segment is one part of a page and how its partitions are laid out.
type segment struct {
	span   tiers.Span
	tier   *tiers.Tier
	layout tiers.Layout
}

// segments lays out the page's segments, in read order, each bounded by the
// series' first and last point.
func (e *Engine) segments(info tiers.SeriesInfo, plan router.Plan, page tiers.Span, desc bool) []segment {
	now := e.now().UnixMilli()
	var segs []segment
	for _, s := range plan.Segments {
		t := e.pyramid.Tier(s.Tier)
		// Rows of a rollup tier are stamped with their window's start, which
		// may precede the series' first point.
		exist := info.Span()
		if t.Step > 0 {
			exist.From = tiers.AlignDown(exist.From, t.Step)
		}
		// Rows older than the tier's retention have expired: never enumerate
		// their buckets, which would cost a query each for nothing.
		exist.From = max(exist.From, t.OldestAvailable(now))
		span := s.Span.Intersect(page).Intersect(exist)
		if span.Empty() {
			continue
		}
		layout := t.DefaultLayout()
		if t.Level == tiers.LevelRaw && info.Layout != nil {
			layout = info.Layout
		}
		segs = append(segs, segment{span: span, tier: t, layout: layout})
	}
	if desc {
		for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
			segs[i], segs[j] = segs[j], segs[i]
		}
	}
	return segs
}

// groups enumerates the partitions of page, segment by segment in read
// order. It returns the size of the largest group.
func (e *Engine) groups(ctx context.Context, series string, info tiers.SeriesInfo, plan router.Plan, page tiers.Span, desc bool) (iter.Seq[partial.Group], int, error) {
	segs := e.segments(info, plan, page, desc)
	maxGroup := 1
	var late map[int64]int64 // bucket -> version of its late mark
	for _, s := range segs {
		if s.tier.Level != tiers.LevelRaw {
			continue
		}
		// Which raw buckets hold late points: one index read per page.
		from := s.layout.BucketOf(s.span.From).Start
		buckets, err := e.store.LateBuckets(ctx, series, tiers.Span{From: from, To: s.span.To})
		if err != nil {
			return nil, 0, err
		}
		late = make(map[int64]int64, len(buckets))
		for _, b := range buckets {
			late[b.Bucket] = b.Version
		}
		for _, le := range s.layout {
			maxGroup = max(maxGroup, le.EventBuckets+1)
		}
	}
	pageSize := e.cfg.PageSize
	return func(yield func(partial.Group) bool) {
		for _, s := range segs {
			for b := range s.layout.Buckets(s.span, desc) {
				gs := b.Span().Intersect(s.span)
				g := partial.Group{Span: gs, Reads: make([]tiers.ReadRequest, 0, b.EventBuckets+1)}
				for eb := range b.EventBuckets {
					g.Reads = append(g.Reads, tiers.ReadRequest{
						Key:  tiers.PartitionKey{Table: s.tier.Table, Series: series, Bucket: b.Start, EventBucket: eb},
						Span: gs, Desc: desc, PageSize: pageSize,
					})
				}
				if v, ok := late[b.Start]; ok && s.tier.Level == tiers.LevelRaw {
					// Last, so that on equal timestamps the late write wins.
					g.Reads = append(g.Reads, tiers.ReadRequest{
						Key:  tiers.PartitionKey{Table: tiers.TableLate, Series: series, Bucket: b.Start},
						Span: gs, Desc: desc, PageSize: pageSize, Version: v,
					})
				}
				if !yield(g) {
					return
				}
			}
		}
	}, maxGroup, nil
}

// PlannedBucket is one bucket a read would touch.
type PlannedBucket struct {
	Span       tiers.Span
	Tier       tiers.Level
	Partitions int
}

// Explanation is the plan of a read and the buckets it would read, in read
// order; nothing is read but the series' registry entry.
type Explanation struct {
	Plan    router.Plan
	Buckets iter.Seq[PlannedBucket]
}

// Explain plans req without reading any point.
func (e *Engine) Explain(ctx context.Context, req Request) (Explanation, error) {
	info, err := e.lookup(ctx, req.Series)
	if err != nil {
		return Explanation{}, err
	}
	plan, cur, err := e.plan(ctx, req)
	if err != nil {
		return Explanation{}, err
	}
	page := plan.Read
	if cur != nil {
		if req.Desc {
			page.To = min(page.To, cur.Position)
		} else {
			page.From = max(page.From, cur.Position)
		}
	}
	segs := e.segments(info, plan, page, req.Desc)
	return Explanation{Plan: plan, Buckets: func(yield func(PlannedBucket) bool) {
		for _, s := range segs {
			for b := range s.layout.Buckets(s.span, req.Desc) {
				if !yield(PlannedBucket{Span: b.Span().Intersect(s.span), Tier: s.tier.Level, Partitions: b.EventBuckets}) {
					return
				}
			}
		}
	}}, nil
}

// Next advances to the next item of the page.
func (r *Result) Next() bool {
	if r.finished {
		return false
	}
	if r.n >= r.limit {
		r.finish(true)
		return false
	}
	it, ok := r.pull()
	if !ok {
		r.finish(false)
		return false
	}
	r.item = it
	r.n++
	if r.Plan.Step > 0 {
		if r.Desc {
			r.last = it.T
		} else {
			r.last = it.T + r.Plan.Step
		}
	} else if r.Desc {
		r.last = it.T
	} else {
		r.last = it.T + 1
	}
	return true
}

func (r *Result) pull() (Item, bool) {
	if r.hasPeek {
		r.hasPeek = false
		return r.peek, true
	}
	if r.stream == nil {
		return Item{}, false
	}
	if r.windows != nil {
		if !r.windows.Next() {
			return Item{}, false
		}
		w := r.windows.At()
		return Item{T: w.Start, Row: w.Acc}, true
	}
	if !r.stream.Next() {
		return Item{}, false
	}
	row := r.stream.At()
	return Item{T: row.T, Row: row}, true
}

// Item returns the current item.
func (r *Result) Item() Item { return r.item }

// finish computes the trailer once the page ends, by limit (limited) or
// because the stream stopped.
func (r *Result) finish(limited bool) {
	r.finished = true
	t := &r.trailer
	end := r.Plan.Read.To
	if r.Desc {
		end = r.Plan.Read.From
	}
	var pos int64
	var stopErr error // why the page ended before its range did, if it did
	switch err := r.streamErr(); {
	case limited:
		// More remains exactly when one more item exists; looking costs at
		// most one more bucket read. If looking fails, whether more remains
		// is unknown and the cursor resumes after the last item.
		pos = r.last
		if it, ok := r.pull(); ok {
			r.peek, r.hasPeek = it, true
		} else if r.streamErr() == nil {
			pos = end
		}
	case err != nil:
		pos = r.watermark()
		if pos != end {
			// A stream can fail after its last bucket (the budget ran out
			// just then): that page is complete.
			stopErr = err
		}
	default:
		pos = end
	}
	if stopErr != nil {
		if errors.Is(context.Cause(r.ctx), partial.ErrBudgetExceeded) {
			// Once the budget is gone every read fails, whatever the error
			// says.
			stopErr = fmt.Errorf("%w: %w", partial.ErrBudgetExceeded, stopErr)
		}
		if r.req.Deny {
			if partial.Reason(stopErr) == "slo" {
				t.Err = fmt.Errorf("%w: %w", ErrBudget, stopErr)
			} else {
				t.Err = fmt.Errorf("%w: %w", ErrUnavailable, stopErr)
			}
		}
		t.Partial = true
		t.Reason = partial.Reason(stopErr)
	}
	if pos != end {
		t.NextCursor = r.e.signer.Encode(partial.Cursor{
			Binding: r.req.Binding, From: r.Span.From, To: r.Span.To, Position: pos,
			Tier: uint8(r.Plan.Tier), Step: r.Plan.Step,
		})
	}
	// Covered is stated in the request's own range.
	switch {
	case pos == end:
		t.Covered = r.Span
	case r.Desc:
		t.Covered = tiers.Span{From: max(min(pos, r.Span.To), r.Span.From), To: r.Span.To}
	default:
		t.Covered = tiers.Span{From: r.Span.From, To: min(max(pos, r.Span.From), r.Span.To)}
	}
	t.Stats = Stats{
		Buckets: r.stats.Buckets.Load(), Partitions: r.stats.Partitions.Load(),
		RowsRead: r.stats.RowsRead.Load(), CacheHits: r.stats.CacheHits.Load(),
		Elapsed: time.Since(r.req.Start),
	}
}

func (r *Result) streamErr() error {
	if r.early != nil {
		return r.early
	}
	if r.stream == nil {
		return nil
	}
	return r.stream.Err()
}

// watermark converts the stream's watermark into a resume position: for
// windows, the boundary of the last window known to be complete.
func (r *Result) watermark() int64 {
	if r.stream == nil {
		return r.last
	}
	wm := r.stream.Watermark()
	if r.Plan.Step > 0 {
		// The window being filled when the stream stopped is not delivered,
		// even if all its rows were read: resume at it.
		if start, ok := r.windows.Dropped(); ok {
			if r.Desc {
				return start + r.Plan.Step
			}
			return start
		}
		if r.Desc {
			wm = tiers.AlignUp(wm, r.Plan.Step)
		} else {
			wm = tiers.AlignDown(wm, r.Plan.Step)
		}
	}
	// Never before what was already delivered (the watermark can only be
	// behind it if nothing was read since the cursor's position).
	if r.Desc {
		return min(wm, r.last)
	}
	return max(wm, r.last)
}

// Trailer returns the page's trailer; call it after Next returned false.
func (r *Result) Trailer() Trailer {
	if !r.finished {
		r.finish(false)
	}
	return r.trailer
}

// Close stops any read still in flight.
func (r *Result) Close() {
	if r.stream != nil {
		r.stream.Close()
	}
	r.cancel()
}

// ReadTier streams the rows of one tier of a series over span, in
// ascending order, merging the late partitions in for raw rows. The rollup
// worker reads with it; the caller closes the stream.
func (e *Engine) ReadTier(ctx context.Context, info tiers.SeriesInfo, level tiers.Level, span tiers.Span, stats *partial.Stats) (*partial.Stream, error) {
	plan := router.Plan{Tier: level, Read: span, Segments: []router.Segment{{Span: span, Tier: level}}}
	groups, maxGroup, err := e.groups(ctx, info.ID, info, plan, span, false)
	if err != nil {
		return nil, err
	}
	opts := partial.FetchOptions{Parallelism: max(e.cfg.Parallelism, maxGroup), Lookahead: e.cfg.Lookahead}
	return partial.Fetch(ctx, e.store, span, groups, false, opts, stats), nil
}
