// Package query answers reads: it normalises a typed Request, resolves the
// series, plans the read with router, reads the segments' partitions with
// scan under the request's latency budget, re-aggregates rows into the
// answer's windows, and pages the answer with signed cursors.
//
// Front ends hold an Engine, a small interface, so that decorators (limits,
// caches, metrics) can wrap it. A Result is pulled item by item, so an
// answer streams from the store to the client without the range ever being
// held in memory: memory is bounded by the partitions in flight times the
// page size.
package query

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/tsgate/tsgate/cache"
	"github.com/tsgate/tsgate/cursor"
	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/scan"
	"github.com/tsgate/tsgate/tiers"
)

// Engine answers reads.
type Engine interface {
	// Check validates req without reading anything: every bad parameter at
	// once (params.Errors), the cursor's signature and binding included,
	// so that a batch can refuse a request before any of its reads starts.
	Check(req Request) error
	// Query starts answering req. Errors returned here come before any
	// output: bad parameters (params.Errors), an unknown series
	// (ErrSeriesNotFound), or — under partial=deny, or when the series
	// lookup fails — ErrBudget and ErrUnavailable.
	Query(ctx context.Context, req Request) (Result, error)
	// Explain plans req without reading any point.
	Explain(ctx context.Context, req Request) (Explanation, error)
}

// Result is one page of an answer. Read Head, then the items with Next and
// Item, then Trailer; Close releases it in any case.
type Result interface {
	Head() *Head
	Next() bool
	Item() Item
	// NextBatch moves past up to limit items at once instead of one, when
	// they come from a run of rows with nothing to merge on top of it — a
	// cached bucket, or a group whose partitions arrived whole — and are
	// raw points or windows of one rollup row each: an encoder writes them
	// with Batch.AppendJSON, copying what the cache holds encoded. It
	// reports false when the next item must be taken with Next, and then
	// nothing moved; Item is the batch's last item after a true.
	NextBatch(limit int) (Batch, bool)
	// Trailer returns what is known once the page ended; call it after
	// Next returned false.
	Trailer() Trailer
	Close()
}

// Head is what is known of an answer before its first item.
type Head struct {
	Series string
	// Span is the request's range, as resolved for its first page.
	Span     tiers.Span
	Plan     router.Plan
	Aggs     []Agg
	Desc     bool
	Warnings []string
	// Limit is the page size the answer is cut at.
	Limit int
}

// WatermarkSource reports how far each tier is rolled up.
type WatermarkSource interface {
	Watermarks(ctx context.Context) tiers.Watermarks
}

// Store is what the engine reads from.
type Store interface {
	tiers.PartitionReader
	tiers.LateIndex
	// LookupSeries is the registry's, usually behind a cache.
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
}

// Config tunes the engine.
type Config struct {
	// Scan tunes the partition reads of one request.
	Scan scan.Config
	Limits
	// MaxPartitions bounds the partitions one page may plan to read; 0
	// means no bound.
	MaxPartitions int
	// MaxSeriesPerQuery bounds the series a selector may match in one
	// read (0: no bound).
	MaxSeriesPerQuery int
}

// DefaultConfig returns the engine's defaults.
func DefaultConfig() Config {
	return Config{
		Scan: scan.Config{Parallelism: 16, PageSize: 5000, Lookahead: 1},
		Limits: Limits{
			DefaultSLO: 10 * time.Second, MaxSLO: 60 * time.Second,
			DefaultLimit: 10000, MaxLimit: 100000,
		},
		MaxPartitions: 20000, MaxSeriesPerQuery: 1000,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	errs := []error{c.Scan.Validate()}
	if c.DefaultSLO <= 0 || c.MaxSLO < c.DefaultSLO {
		errs = append(errs, errors.New("the default SLO must be positive and at most the maximum SLO"))
	}
	if c.MaxPartitions < 0 {
		errs = append(errs, errors.New("the partition bound must not be negative"))
	}
	if c.DefaultLimit < 1 || c.MaxLimit < c.DefaultLimit {
		errs = append(errs, errors.New("the default limit must be positive and at most the maximum limit"))
	}
	return errors.Join(errs...)
}

// Deps are what an engine reads and how it signs cursors.
type Deps struct {
	Store   Store
	Pyramid tiers.Pyramid
	// Watermarks says how far rollups have run; nil reads as nothing
	// rolled up, which reads finer tiers, never wrong data.
	Watermarks WatermarkSource
	Signer     *cursor.Signer
	// Results, when not nil, caches complete windows of answers: a repeat
	// or a slide of a windowed read takes from it the windows it holds
	// and reads only the rest.
	Results *cache.Windows
	// Now is the clock that decides what data is current and resolves
	// relative times; time.Now when nil. Budgets run on the wall clock
	// whatever it says.
	Now func() time.Time
}

// engine is the Engine that reads the store.
type engine struct {
	Deps
	scan *scan.Scanner
	cfg  Config
}

var _ Engine = (*engine)(nil)

// New returns the engine that reads deps.Store.
func New(deps Deps, cfg Config) Engine {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &engine{Deps: deps, cfg: cfg, scan: scan.New(deps.Store, deps.Pyramid, cfg.Scan, deps.Now)}
}

func (e *engine) watermarks(ctx context.Context) tiers.Watermarks {
	if e.Watermarks == nil {
		return tiers.NoWatermarks(e.Pyramid)
	}
	return e.Watermarks.Watermarks(ctx)
}

// Errors the engine returns; the HTTP layer maps each to a status.
var (
	// ErrSeriesNotFound is the registry's not-found error: one error, one
	// mapping to 404.
	ErrSeriesNotFound = tiers.ErrNotFound
	// ErrBudget: the budget ran out under partial=deny (504).
	ErrBudget = failure.New(failure.BudgetExceeded, "the read did not complete within its latency budget")
	// ErrUnavailable: the store failed under partial=deny, or for the
	// series lookup itself (503).
	ErrUnavailable = failure.New(failure.Unavailable, "the store did not answer for some partitions")
)

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

func (e *engine) lookup(ctx context.Context, id string) (tiers.SeriesInfo, error) {
	info, err := e.Store.LookupSeries(ctx, id)
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

// prepare normalises req at the engine's clock and decodes its cursor.
func (e *engine) prepare(req Request, now int64) (prepared, *cursor.Cursor, error) {
	p, err := req.normalize(e.cfg.Limits, now)
	if err != nil || req.Cursor == "" {
		return p, nil, err
	}
	c, err := e.Signer.Decode(req.Cursor, p.binding)
	if err != nil {
		return p, nil, params.Bad("cursor", "%s", err)
	}
	t, ok := e.Pyramid.ByName(c.TierName)
	if !ok || t.Step != c.TierStep || (t.Step > 0 && c.Step%t.Step != 0) || (t.Step == 0 && c.Step%tiers.Second != 0) {
		return p, nil, params.Bad("cursor", "was issued for a tier (%s) this gateway's pyramid no longer has; start the query again without cursor", c.TierName)
	}
	return p, &c, nil
}

// Check validates req.
func (e *engine) Check(req Request) error {
	_, _, err := e.prepare(req, e.Now().UnixMilli())
	return err
}

// plan routes a fresh request or rebuilds the plan a cursor carries.
func (e *engine) plan(ctx context.Context, p *prepared, cur *cursor.Cursor, now int64) (router.Plan, error) {
	wm := e.watermarks(ctx)
	if cur == nil {
		return router.Route(p.routerRequest(p.span), now, e.Pyramid, wm)
	}
	t, _ := e.Pyramid.ByName(cur.TierName)
	span := tiers.Span{From: cur.From, To: cur.To}
	return router.Resume(p.routerRequest(span), t.Level, cur.Step, now, e.Pyramid, wm), nil
}

// Item is one point (raw answers: T and the row's value) or one window
// (aggregated answers: T is the window start, Row the folded aggregates,
// with the window's extras when the read asked for them: Row.X).
type Item struct {
	T   int64
	Row tiers.Row
}

// Query starts answering req.
func (e *engine) Query(ctx context.Context, req Request) (Result, error) {
	if req.Start.IsZero() {
		// The budget is real latency, measured on the wall clock even when
		// the engine's clock (which decides what data is current) is not.
		req.Start = time.Now()
	}
	now := e.Now().UnixMilli()
	p, cur, err := e.prepare(req, now)
	if err != nil {
		return nil, err
	}
	// Two budgets: the page's own (soft), after which it stops wherever it
	// is, and the server's maximum (hard), up to which it goes on when it
	// has not made progress yet — so that following cursors always ends,
	// however slow the store (see finish). Under partial=deny any cut is an
	// error, so there the page's budget is all there is.
	hardSLO := max(p.slo, e.cfg.MaxSLO)
	if req.Deny {
		hardSLO = p.slo
	}
	hard, cancelHard := partial.WithBudget(ctx, req.Start, hardSLO)
	soft, cancelSoft := partial.WithBudget(hard, req.Start, p.slo)
	cancel := func() { cancelSoft(); cancelHard() }
	ctx = hard
	plan, err := e.plan(ctx, &p, cur, now)
	if err != nil {
		cancel()
		return nil, err
	}
	span := p.span
	pos := plan.Read.From
	if req.Desc {
		pos = plan.Read.To
	}
	if cur != nil {
		span = tiers.Span{From: cur.From, To: cur.To}
		pos = cur.Position
	}
	r := &result{
		head: Head{Series: req.Series, Span: span, Plan: plan, Aggs: p.Aggs, Desc: req.Desc, Warnings: plan.Warnings, Limit: p.limit},
		e:    e, req: p, ctx: ctx, soft: soft, cancel: cancel, limit: p.limit,
	}
	r.page = plan.Read
	if req.Desc {
		r.page.To = min(r.page.To, pos)
	} else {
		r.page.From = max(r.page.From, pos)
	}
	r.last, r.start = pos, pos

	// Before the first row nothing has moved: a failure here can only be
	// answered with an error, never with a page that resumes where it
	// started.
	info, err := e.lookup(ctx, req.Series)
	if err != nil {
		cancel()
		return nil, err
	}
	// Percentiles read the rollup rows' sketches; reads without them
	// never touch the extras.
	r.extras = p.Extras || NeedsExtras(p.Aggs)
	if e.Results != nil && plan.Step > 0 && !req.Desc {
		r.useResults(info, plan, e.watermarks(ctx))
		if r.page.Empty() {
			return r, nil // every window of the page is cached
		}
	}
	segs := e.scan.Segments(info, plan.Segments, r.page, req.Desc)
	if err := e.checkPartitions(ctx, info, &p, plan, segs, r.page, now); err != nil {
		cancel()
		return nil, err
	}
	if r.extras {
		for i := range segs {
			segs[i].Extras = true
		}
	}
	progress := scan.Progress{Soft: soft, Must: r.must(), KeepStale: req.KeepStale}
	if plan.Step == 0 {
		// Raw rows are items one for one: read ahead no further than the
		// page's limit (and the one item past it that says more remains).
		progress.Rows = r.limit + 1
	}
	r.stream, err = e.scan.Read(ctx, req.Series, segs, r.page, req.Desc, progress, &r.stats)
	if err != nil {
		cancel()
		if errors.Is(context.Cause(ctx), partial.ErrBudgetExceeded) {
			return nil, fmt.Errorf("%w: %w", ErrBudget, err)
		}
		return nil, fmt.Errorf("%w: late index: %w", ErrUnavailable, err)
	}
	if plan.Step > 0 && !rowsAreWindows(e.Pyramid, plan) {
		fold := func(acc *tiers.Row, row tiers.Row) { acc.Add(row) }
		if r.extras {
			// Windows from raw points (resolution=90s, the stitched recent
			// part) get a sketch built from their points, windows of
			// several rollup rows their rows' sketches merged.
			fold = func(acc *tiers.Row, row tiers.Row) { acc.AddExtras(row) }
		}
		r.windows = merge.NewWindower(merge.Iterator[tiers.Row](r.stream), plan.Step,
			func(row tiers.Row) int64 { return row.T }, fold)
	}
	return r, nil
}

// useResults takes the windows the results cache holds from the start of
// the page on, moving the page's start past them, and sets up the filling
// of the cache with the windows the page reads whose rows are all final:
// in the plan's segment of its own tier (finer tiers stitch the recent
// part), ending by that tier's watermark. Late corrections and imports
// give the series a new generation, which the key holds.
func (r *result) useResults(info tiers.SeriesInfo, plan router.Plan, wm tiers.Watermarks) {
	if plan.Tier == tiers.LevelRaw || int(plan.Tier) >= len(wm) {
		return
	}
	key := cache.WindowKey{Series: info.ID, Generation: info.Generation, Level: plan.Tier, Step: plan.Step, Extras: r.extras}
	results := r.e.Results
	if span, rows, ok := results.Get(key, r.page.From); ok {
		to := min(span.To, r.page.To)
		r.cached = rows[:searchItems(rows, to)]
		r.page.From = to
		r.last = to
	}
	var final tiers.Span
	for _, seg := range plan.Segments {
		if seg.Tier == plan.Tier {
			final = seg.Span
			break
		}
	}
	final = tiers.Span{From: tiers.AlignUp(final.From, plan.Step), To: tiers.AlignDown(min(final.To, wm[plan.Tier]), plan.Step)}
	if fill := final.Intersect(r.page); !fill.Empty() {
		r.fill = &resultsFill{key: key, span: fill}
	}
}

// resultsFill gathers the windows a page reads for the results cache.
type resultsFill struct {
	key  cache.WindowKey
	span tiers.Span // the windows whose rows are all final
	rows []tiers.Row
}

// record keeps the window starting at t if it is one to cache.
func (f *resultsFill) record(t int64, row tiers.Row) {
	if t >= f.span.From && t < f.span.To {
		row.T = t
		// Cached rows are shared and kept: their extras in a form of
		// their own, the sketch encoded.
		row.X = row.X.Detach(row)
		f.rows = append(f.rows, row)
	}
}

// searchItems is the index of the first row at or after t.
func searchItems(rows []tiers.Row, t int64) int {
	i, _ := slices.BinarySearchFunc(rows, t, func(r tiers.Row, t int64) int { return cmp.Compare(r.T, t) })
	return i
}

// rowsAreWindows tells whether every row the plan reads is a window of its
// step by itself: rows of rollup tiers read at their own step, which need
// no folding. A plan whose recent part reads a finer tier (not rolled up
// yet) folds.
func rowsAreWindows(p tiers.Pyramid, plan router.Plan) bool {
	for _, seg := range plan.Segments {
		if p[seg.Tier].Step != plan.Step {
			return false
		}
	}
	return len(plan.Segments) > 0
}

// countPartitions is how many partitions the segments span.
func countPartitions(segs []scan.Segment) int {
	n := 0
	for _, s := range segs {
		_, p := s.Layout.CountBuckets(s.Span)
		n += p
	}
	return n
}

// checkPartitions refuses a page that would read more partitions than the
// configured bound, naming the parameter to change and the finest coarser
// tier whose step would fit.
func (e *engine) checkPartitions(ctx context.Context, info tiers.SeriesInfo, p *prepared, plan router.Plan, segs []scan.Segment, page tiers.Span, now int64) error {
	limit := e.cfg.MaxPartitions
	n := countPartitions(segs)
	if limit <= 0 || n <= limit {
		return nil
	}
	param := "resolution"
	if p.Resolution.Kind == router.Auto && p.MaxPoints == 0 {
		param = "from"
	}
	hint := "narrow the range"
	wm := e.watermarks(ctx)
	for l := plan.Tier + 1; int(l) < len(e.Pyramid); l++ {
		// As the router would read it: recent windows from finer tiers.
		alt := p.routerRequest(page)
		alt.Resolution, alt.MaxPoints = router.Resolution{Kind: router.Window, Window: e.Pyramid[l].Step}, 0
		altPlan, err := router.Route(alt, now, e.Pyramid, wm)
		if err != nil {
			continue
		}
		if m := countPartitions(e.scan.Segments(info, altPlan.Segments, altPlan.Read, p.Desc)); m <= limit {
			hint = fmt.Sprintf("resolution=%s (the %s tier) reads %d; or narrow the range", tiers.FormatDuration(e.Pyramid[l].Step), e.Pyramid[l].Name, m)
			break
		}
	}
	return partitionsError{pe: params.Bad(param, "this read would plan %d partitions of the %s tier, more than the limit of %d (--max-partitions); %s", n, plan.TierName, limit, hint)}
}

// ErrTooManyPartitions is what a refusal for the partition bound is, besides
// the bad parameter it names: errors.Is tells it apart for the metrics.
var ErrTooManyPartitions = errors.New("the read would plan more partitions than the bound")

// partitionsError is the parameter error of the partition bound.
type partitionsError struct{ pe *params.Error }

func (e partitionsError) Error() string        { return e.pe.Error() }
func (e partitionsError) Unwrap() error        { return e.pe }
func (e partitionsError) Is(target error) bool { return target == ErrTooManyPartitions }

// PlannedBucket is one bucket a read would touch.
type PlannedBucket struct {
	Span       tiers.Span
	Tier       tiers.Level
	TierName   string
	Partitions int
}

// Explanation is the plan of a read and the buckets it would read, in read
// order; nothing is read but the series' registry entry.
type Explanation struct {
	Plan    router.Plan
	Buckets iter.Seq[PlannedBucket]
}

// Explain plans req without reading any point.
func (e *engine) Explain(ctx context.Context, req Request) (Explanation, error) {
	now := e.Now().UnixMilli()
	p, cur, err := e.prepare(req, now)
	if err != nil {
		return Explanation{}, err
	}
	info, err := e.lookup(ctx, req.Series)
	if err != nil {
		return Explanation{}, err
	}
	plan, err := e.plan(ctx, &p, cur, now)
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
	segs := e.scan.Segments(info, plan.Segments, page, req.Desc)
	return Explanation{Plan: plan, Buckets: func(yield func(PlannedBucket) bool) {
		for _, s := range segs {
			for b := range s.Layout.Buckets(s.Span, req.Desc) {
				if !yield(PlannedBucket{Span: b.Span().Intersect(s.Span), Tier: s.Tier.Level, TierName: s.Tier.Name, Partitions: b.EventBuckets}) {
					return
				}
			}
		}
	}}, nil
}

// result is one page of an answer being produced.
type result struct {
	head Head

	e   *engine
	req prepared
	// ctx bounds the page by the server's maximum budget, soft by its own.
	ctx, soft context.Context
	cancel    context.CancelFunc
	stream    *partial.Stream
	stats     partial.Stats
	windows   *merge.Windower[tiers.Row, tiers.Row]
	page      tiers.Span // the part of the read range this page covers
	limit     int
	n         int
	item      Item
	last      int64 // position right after the last delivered item
	start     int64 // the position the page started from
	hasPeek   bool
	peek      Item
	// droppedDone: the window the stream stopped in was delivered whole.
	droppedDone bool
	finished    bool
	trailer     Trailer
	// fields are the rollup-row numbers of the page's aggregates, for
	// batches of windows of one row each.
	fields []int
	// extras: the page reads the rollup rows' extras (percentiles, or
	// Request.Extras).
	extras bool
	// cached are the windows the results cache gave, delivered before
	// the stream's (ci of them so far); fill gathers those to give it.
	cached []tiers.Row
	ci     int
	fill   *resultsFill
}

// windowComplete reports whether the stream has delivered every row of the
// window starting at start.
func (r *result) windowComplete(start int64) bool {
	wm := r.stream.Watermark()
	if r.head.Desc {
		return wm <= start
	}
	return wm >= start+r.head.Plan.Step
}

// must is the part of the page that it completes whatever its budget: the
// first window (or, for raw points, the first group of partitions) after
// the start, so that a page always delivers a point or moves covered.
func (r *result) must() tiers.Span {
	width := max(r.head.Plan.Step, 1)
	if r.head.Desc {
		return tiers.Span{From: r.start - width, To: r.start}.Intersect(r.page)
	}
	return tiers.Span{From: r.start, To: r.start + width}.Intersect(r.page)
}

// Head returns what is known before the first item.
func (r *result) Head() *Head { return &r.head }

// Next advances to the next item of the page.
func (r *result) Next() bool {
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
	r.advance(it.T)
	return true
}

// advance moves the resume position past the item at t, delivered.
func (r *result) advance(t int64) {
	switch {
	case r.head.Desc:
		r.last = t
	case r.head.Plan.Step > 0:
		r.last = t + r.head.Plan.Step
	default:
		r.last = t + 1
	}
}

func (r *result) pull() (Item, bool) {
	if r.hasPeek {
		r.hasPeek = false
		return r.peek, true
	}
	if r.ci < len(r.cached) {
		it := r.itemOf(r.cached[r.ci])
		r.ci++
		return it, true
	}
	if r.stream == nil {
		return Item{}, false
	}
	it, ok := r.pullStream()
	if ok && r.fill != nil {
		r.fill.record(it.T, it.Row)
	}
	return it, ok
}

func (r *result) pullStream() (Item, bool) {
	if r.windows != nil {
		if !r.windows.Next() {
			// The input stopped early. The window it was filling is whole
			// when the stream's watermark is past its end (the stream
			// stopped at a group boundary that is also a window's):
			// deliver it, or a page could end without moving.
			if w, ok := r.windows.DroppedWindow(); ok && !r.droppedDone && r.windowComplete(w.Start) {
				r.droppedDone = true
				return Item{T: w.Start, Row: w.Acc}, true
			}
			return Item{}, false
		}
		w := r.windows.At()
		return Item{T: w.Start, Row: w.Acc}, true
	}
	if !r.stream.Next() {
		return Item{}, false
	}
	return r.itemOf(r.stream.At()), true
}

// itemOf is the item a row of the stream is when no windows are folded: a
// raw point, or a rollup row that is a window by itself (whose row, as a
// folded window's, carries no time of its own).
func (r *result) itemOf(row tiers.Row) Item {
	it := Item{T: row.T, Row: row}
	if r.head.Plan.Step > 0 {
		it.Row.T = 0
	}
	return it
}

// Item returns the current item.
func (r *result) Item() Item { return r.item }

// AppendItem writes one item of the page as answers carry it: a raw
// point as [t,v] (jsonenc.AppendPoint), a window as [t, then the page's
// aggregates in order], counts as integers.
func (h *Head) AppendItem(b []byte, it Item) []byte {
	if h.Plan.Step == 0 {
		return jsonenc.AppendPoint(b, it.T, it.Row.Value())
	}
	b = append(b, '[')
	b = jsonenc.AppendInt(b, it.T)
	aggs := AggsOf(it.Row)
	for _, a := range h.Aggs {
		b = append(b, ',')
		if a == Count {
			b = jsonenc.AppendInt(b, it.Row.Count)
		} else {
			b = jsonenc.AppendFloat(b, aggs.Of(a))
		}
	}
	return append(b, ']')
}

// Batch is consecutive items of a page handed over at once: raw points,
// or windows that are one rollup row each.
type Batch struct {
	s partial.RunSlice
	r *result
}

// Len is the number of items.
func (b Batch) Len() int { return b.s.Len() }

// Item is the i-th item in the page's order.
func (b Batch) Item(i int) Item { return b.r.itemOf(b.s.Row(i)) }

// AppendJSON appends the items as Head.AppendItem writes them, separated
// by commas, in the page's order.
func (b Batch) AppendJSON(dst []byte) []byte {
	if b.r.head.Plan.Step == 0 {
		return b.s.AppendJSON(dst)
	}
	return b.s.AppendRows(dst, b.r.fields)
}

// aggFields maps each aggregate to the number of a rollup row that is its
// value for a window of that row alone.
var aggFields = [...]int{Min: partial.FieldMin, Max: partial.FieldMax, Sum: partial.FieldSum, Count: partial.FieldCount, Avg: partial.FieldMean}

// NextBatch moves past up to limit items at once; see Result.
func (r *result) NextBatch(limit int) (Batch, bool) {
	if r.finished || r.hasPeek || r.windows != nil || r.stream == nil || r.ci < len(r.cached) {
		return Batch{}, false
	}
	if r.head.Plan.Step > 0 && NeedsExtras(r.head.Aggs) {
		// Percentiles are computed row by row from the sketches, not
		// copied from encoded fields.
		return Batch{}, false
	}
	s, ok := r.stream.NextRun(min(limit, r.limit-r.n))
	if !ok {
		return Batch{}, false
	}
	if r.fill != nil {
		for i := range s.Len() {
			row := s.Row(i)
			r.fill.record(row.T, row)
		}
	}
	if r.head.Plan.Step > 0 && r.fields == nil {
		r.fields = make([]int, len(r.head.Aggs))
		for i, a := range r.head.Aggs {
			r.fields[i] = aggFields[a]
		}
	}
	r.item = r.itemOf(s.Last())
	r.n += s.Len()
	r.advance(r.item.T)
	return Batch{s: s, r: r}, true
}

// finish computes the trailer once the page ends, by limit (limited) or
// because the stream stopped.
func (r *result) finish(limited bool) {
	r.finished = true
	t := &r.trailer
	end := r.head.Plan.Read.To
	if r.head.Desc {
		end = r.head.Plan.Read.From
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
		if errors.Is(context.Cause(r.soft), partial.ErrBudgetExceeded) {
			// Once the budget is gone every read fails, whatever the error
			// says.
			stopErr = fmt.Errorf("%w: %w", partial.ErrBudgetExceeded, stopErr)
		}
		// A page that neither delivered a point nor moved covered would
		// be sent again by its own cursor, forever: it is an error,
		// whatever partial says — the budget, when even the maximum one
		// ran out, or the store.
		progressed := r.n > 0 || pos != r.start
		if r.req.Deny || !progressed {
			if partial.Reason(stopErr) == "slo" {
				t.Err = fmt.Errorf("%w: %w", ErrBudget, stopErr)
			} else {
				t.Err = fmt.Errorf("%w: %w", ErrUnavailable, stopErr)
			}
		}
		t.Partial = true
		t.Reason = partial.Reason(stopErr)
	}
	if r.e.Results != nil {
		r.e.Results.Served(r.ci)
		if f := r.fill; f != nil && min(pos, f.span.To) > f.span.From {
			// Every window before pos was delivered: those of the fill's
			// span are complete.
			done := tiers.Span{From: f.span.From, To: min(pos, f.span.To)}
			r.e.Results.Put(f.key, done, f.rows[:searchItems(f.rows, done.To)])
		}
	}
	if pos != end {
		t.NextCursor = r.e.Signer.Encode(cursor.Cursor{
			Binding: r.req.binding, From: r.head.Span.From, To: r.head.Span.To, Position: pos,
			TierName: r.head.Plan.TierName, TierStep: r.e.Pyramid[r.head.Plan.Tier].Step, Step: r.head.Plan.Step,
		})
	}
	// Covered is stated in the request's own range.
	switch {
	case pos == end:
		t.Covered = r.head.Span
	case r.head.Desc:
		t.Covered = tiers.Span{From: max(min(pos, r.head.Span.To), r.head.Span.From), To: r.head.Span.To}
	default:
		t.Covered = tiers.Span{From: r.head.Span.From, To: min(max(pos, r.head.Span.From), r.head.Span.To)}
	}
	t.Stats = Stats{
		Buckets: r.stats.Buckets.Load(), Partitions: r.stats.Partitions.Load(),
		RowsRead: r.stats.RowsRead.Load(), CacheHits: r.stats.CacheHits.Load(),
		Elapsed: time.Since(r.req.Start),
	}
}

// droppedStart is the start of the window being folded when the stream
// stopped, if it was not delivered.
func (r *result) droppedStart() (int64, bool) {
	if r.windows == nil || r.droppedDone {
		return 0, false
	}
	return r.windows.Dropped()
}

func (r *result) streamErr() error {
	if r.stream == nil {
		return nil
	}
	return r.stream.Err()
}

// watermark converts the stream's watermark into a resume position: for
// windows, the boundary of the last window known to be complete.
func (r *result) watermark() int64 {
	if r.stream == nil {
		return r.last
	}
	wm := r.stream.Watermark()
	if r.head.Plan.Step > 0 {
		// The window being filled when the stream stopped is not delivered,
		// even if all its rows were read: resume at it. (Without folding,
		// every row is a whole window, delivered as soon as read.)
		if start, ok := r.droppedStart(); ok {
			if r.head.Desc {
				return start + r.head.Plan.Step
			}
			return start
		}
		if r.head.Desc {
			wm = tiers.AlignUp(wm, r.head.Plan.Step)
		} else {
			wm = tiers.AlignDown(wm, r.head.Plan.Step)
		}
	}
	// Never before what was already delivered (the watermark can only be
	// behind it if nothing was read since the cursor's position).
	if r.head.Desc {
		return min(wm, r.last)
	}
	return max(wm, r.last)
}

// Trailer returns the page's trailer; call it after Next returned false.
func (r *result) Trailer() Trailer {
	if !r.finished {
		r.finish(false)
	}
	return r.trailer
}

// Close stops any read still in flight.
func (r *result) Close() {
	if r.stream != nil {
		r.stream.Close()
	}
	r.cancel()
}

// Observe wraps e so that observe sees the head and trailer of every page
// answered: metrics, logs, tests.
func Observe(e Engine, observe func(*Head, Trailer)) Engine {
	return observed{Engine: e, observe: observe}
}

type observed struct {
	Engine
	observe func(*Head, Trailer)
}

func (o observed) Query(ctx context.Context, req Request) (Result, error) {
	res, err := o.Engine.Query(ctx, req)
	if err != nil {
		return nil, err
	}
	return &observedResult{Result: res, observe: o.observe}, nil
}

type observedResult struct {
	Result
	observe func(*Head, Trailer)
	done    bool
}

func (r *observedResult) Trailer() Trailer {
	tr := r.Result.Trailer()
	if !r.done {
		r.done = true
		r.observe(r.Head(), tr)
	}
	return tr
}
