// Package ingest is the write path: it decodes and validates batches of
// points all-or-nothing, routes each point to its raw or late partition,
// and records what the rollups and reads need — the series' span, the
// windows that changed, the buckets that hold late points — without reading
// anything first.
package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Store is what the write path writes to.
type Store interface {
	tiers.PartitionWriter
	// SetLabels labels a series (tiers.LabelIndex).
	SetLabels(ctx context.Context, id string, labels tiers.Labels) error
	NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error
	MarkRewritten(ctx context.Context, ids []string) error
	tiers.LateIndex
	MarkDirty(ctx context.Context, slot, retention int64, windows []tiers.DirtyWindow) error
}

// LayoutSource tells which raw layout a series has; nil means the raw
// tier's default. It is usually a cache: layouts change rarely and only
// from a future boundary on.
type LayoutSource interface {
	Layout(ctx context.Context, series string) (tiers.Layout, error)
}

// RegistryLayouts reads layouts straight from the registry, without a
// cache: for tools and tests; gateway serve puts the series cache in front.
type RegistryLayouts struct {
	Registry interface {
		LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	}
}

// Layout returns the series' layout; nil for a series not written yet.
func (r RegistryLayouts) Layout(ctx context.Context, id string) (tiers.Layout, error) {
	info, err := r.Registry.LookupSeries(ctx, id)
	if errors.Is(err, tiers.ErrNotFound) {
		return nil, nil
	}
	return info.Layout, err
}

// BlockSource tells whether a series is blocked; a batch holding points of
// a blocked series is refused whole.
type BlockSource interface {
	IsBlocked(ctx context.Context, series string) (tiers.BlockedSeries, bool, error)
}

// Config tunes the write path.
type Config struct {
	// Lateness is how old a point may be on arrival and still go to the
	// time-ordered raw table; older points go to the late table. Rollups of
	// a window wait this long before they run.
	Lateness time.Duration
	// ClockSkew is how far in the future a point may be.
	ClockSkew time.Duration
	// MaxLabels bounds the labels of one series (0: unbounded).
	MaxLabels int
}

// DefaultConfig returns the write path's defaults.
func DefaultConfig() Config {
	return Config{Lateness: 15 * time.Minute, ClockSkew: 5 * time.Minute, MaxLabels: params.DefaultMaxLabels}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Lateness < time.Second {
		return errors.New("lateness must be at least 1s")
	}
	if c.ClockSkew < 0 {
		return errors.New("clock skew allowance must not be negative")
	}
	if c.MaxLabels < 0 {
		return errors.New("--max-labels must not be negative")
	}
	return nil
}

// Writer writes batches of points.
type Writer struct {
	store   Store
	layouts LayoutSource
	raw     tiers.Tier
	// dirtyStep is the width of the windows marked for rollup: the finest
	// rollup tier's step (0: the pyramid has no rollup tier).
	dirtyStep int64
	cfg       Config
	now       func() time.Time
	blocks    BlockSource
	// series tells which series exist, with their labels.
	series SeriesLookup
}

// KnowSeries makes the writer compare the labels a batch gives a series
// with the labels the series has, through reg (usually the series cache).
// Without it every labelled series of a batch is taken as new.
func (w *Writer) KnowSeries(reg SeriesLookup) { w.series = reg }

// RefuseBlocked makes the writer refuse batches holding points of a series
// that b says is blocked.
func (w *Writer) RefuseBlocked(b BlockSource) { w.blocks = b }

// NewWriter returns a writer into the raw tier of p.
func NewWriter(store Store, layouts LayoutSource, p tiers.Pyramid, cfg Config, now func() time.Time) *Writer {
	return &Writer{store: store, layouts: layouts, raw: *p.Raw(), dirtyStep: p.DirtyStep(), cfg: cfg, now: now}
}

// Result says what a write did.
type Result struct {
	Accepted int
	Late     int
}

// Write validates points against the raw tier's retention and the clock
// skew allowance and, when every point is valid, writes them all. It
// returns a *ValidationError, and writes nothing, when any point is
// invalid. It returns after every point is durable; on a store error some
// points may be written, and a retry of the whole batch is safe.
func (w *Writer) Write(ctx context.Context, points []Point) (Result, error) {
	return w.write(ctx, Batch{Points: points}, false)
}

// WriteBatch is Write for a batch that may give series labels: labels of
// a new series are checked (params.Labels) and written to the label index
// before anything is acknowledged; labels given for a series that exists
// must be its labels, else the batch is refused (series_labels.<id>).
// Nothing is written when anything of the batch is invalid.
func (w *Writer) WriteBatch(ctx context.Context, b Batch) (Result, error) {
	return w.write(ctx, b, false)
}

// Backfill writes points like Write, but as if each had arrived on time:
// all go to the raw table, none to the late table. It is for bulk loads of
// history (the demo data, imports), where the late path's purpose — keeping
// the raw table time-ordered — is served by loading in time order.
func (w *Writer) Backfill(ctx context.Context, points []Point) (Result, error) {
	return w.write(ctx, Batch{Points: points}, true)
}

// BackfillBatch is Backfill for a batch that may give series labels,
// checked and written as WriteBatch does.
func (w *Writer) BackfillBatch(ctx context.Context, b Batch) (Result, error) {
	return w.write(ctx, b, true)
}

// timeError says what is wrong with a point's time at now: older than the
// raw tier keeps, or further in the future than the clock skew allows.
func (w *Writer) timeError(t, now int64) (string, bool) {
	oldest := now - w.raw.Retention
	newest := now + w.cfg.ClockSkew.Milliseconds()
	switch {
	case t < oldest:
		return fmt.Sprintf("is older than the raw tier's retention of %s (oldest accepted now: %d)", tiers.FormatDuration(w.raw.Retention), oldest), true
	case t > newest:
		return fmt.Sprintf("is more than %s in the future (newest accepted now: %d)", tiers.FormatDuration(w.cfg.ClockSkew.Milliseconds()), newest), true
	}
	return "", false
}

// Check completes a decoder's rejection of a batch with the checks Write
// would make of the points that did decode, so that the answer names every
// bad point at once, in batch order.
func (w *Writer) Check(verr *ValidationError) { w.check(verr, w.timeError) }

// check adds timeError's verdict on each point that did decode.
func (w *Writer) check(verr *ValidationError, timeError func(t, now int64) (string, bool)) {
	now := w.now().UnixMilli()
	type indexed struct {
		i int
		e params.Error
	}
	var all []indexed
	for _, e := range verr.Errors {
		all = append(all, indexed{pointIndex(e.Param), e})
	}
	for k, p := range verr.points {
		if msg, bad := timeError(p.T, now); bad {
			verr.Invalid++
			i := verr.decoded[k]
			all = append(all, indexed{i, params.Error{Param: fmt.Sprintf("points[%d].t", i), Message: msg}})
		}
	}
	slices.SortStableFunc(all, func(a, b indexed) int { return cmp.Compare(a.i, b.i) })
	verr.Errors = verr.Errors[:0]
	for _, x := range all {
		verr.add(x.e.Param, x.e.Message)
	}
	verr.points, verr.decoded = nil, nil
}

// pointIndex is the i of a parameter points[i]...; -1 for others.
func pointIndex(param string) int {
	var i int
	if _, err := fmt.Sscanf(param, "points[%d]", &i); err != nil {
		return -1
	}
	return i
}

func (w *Writer) write(ctx context.Context, batch Batch, onTime bool) (Result, error) {
	points := batch.Points
	now := w.now().UnixMilli()
	// A blocked series refuses the whole batch, so its partitions are
	// never touched, nor its registry entry.
	blocked, err := w.blockedIn(ctx, points)
	if err != nil {
		return Result{}, err
	}
	verr := &ValidationError{}
	fresh, err := w.checkLabels(ctx, batch.Labels, verr)
	if err != nil {
		return Result{}, err
	}
	for i, p := range points {
		bad := false
		if msg, late := w.timeError(p.T, now); late {
			bad = true
			verr.add(fmt.Sprintf("points[%d].t", i), msg)
		}
		if b, ok := blocked[p.Series]; ok {
			bad = true
			verr.add(fmt.Sprintf("points[%d].series", i), fmt.Sprintf("series %s is blocked: %s", b.Series, b.Reason))
		}
		if bad {
			verr.Invalid++
		}
	}
	if verr.Invalid > 0 {
		verr.Total = len(points)
		return Result{}, verr
	}
	// The index knows a new series' labels before any of its points is
	// acknowledged, so a selector finds every series a client was told
	// is written.
	if err := w.setLabels(ctx, fresh); err != nil {
		return Result{}, err
	}
	if len(points) == 0 {
		return Result{}, nil
	}

	lateBefore := now - w.cfg.Lateness.Milliseconds()
	// Points of a backfill go to the raw partitions whatever their age;
	// buckets that begin before the lateness window may be cached as final
	// by readers, so they get a rewrite mark once written.
	rewriteBefore := tiers.MinTime
	if onTime {
		lateBefore, rewriteBefore = tiers.MinTime, lateBefore
	}
	type seriesState struct {
		layout tiers.Layout
		span   tiers.SeriesInfo
	}
	series := map[string]*seriesState{}
	parts := map[tiers.PartitionKey]int{} // index into writes
	var writes []tiers.PartitionWrite
	// Within a batch the last write of a (series, t) wins, as it would
	// across batches; the store sees each row once.
	seen := map[seriesT]int{} // -> the row's index in its partition write
	dirty := map[tiers.DirtyWindow]struct{}{}
	lateMarks := map[tiers.LateMark]struct{}{}
	rewriteMarks := map[tiers.LateMark]struct{}{}
	var res Result
	for _, p := range points {
		st := series[p.Series]
		if st == nil {
			layout, err := w.layouts.Layout(ctx, p.Series)
			if err != nil {
				return Result{}, fmt.Errorf("series layout of %s: %w", p.Series, err)
			}
			if layout == nil {
				layout = w.raw.DefaultLayout()
			}
			st = &seriesState{layout: layout, span: tiers.SeriesInfo{ID: p.Series, First: p.T, Last: p.T}}
			series[p.Series] = st
		}
		st.span.First = min(st.span.First, p.T)
		st.span.Last = max(st.span.Last, p.T)
		b := st.layout.BucketOf(p.T)
		key := tiers.PartitionKey{Table: tiers.TableRaw, Series: p.Series, Bucket: b.Start, EventBucket: tiers.EventBucket(p.T, b.EventBuckets)}
		if p.T < lateBefore {
			key = tiers.PartitionKey{Table: tiers.TableLate, Series: p.Series, Bucket: b.Start}
		}
		if w.dirtyStep > 0 {
			dirty[tiers.DirtyWindow{Series: p.Series, Window: tiers.AlignDown(p.T, w.dirtyStep)}] = struct{}{}
		}
		wi, ok := parts[key]
		if !ok {
			wi = len(writes)
			parts[key] = wi
			writes = append(writes, tiers.PartitionWrite{Key: key, Retention: w.raw.Retention, Open: b.End > now})
			// The bucket's marks, once per partition rather than per point:
			// a late partition is its bucket's; a raw partition of a bucket
			// that begins before the lateness window may be cached as
			// final somewhere.
			mark := tiers.LateMark{Series: p.Series, Bucket: b.Start, Retention: b.End - b.Start + w.raw.Retention}
			switch {
			case key.Table == tiers.TableLate:
				lateMarks[mark] = struct{}{}
			case b.Start < rewriteBefore:
				mark.Rewrite = true
				rewriteMarks[mark] = struct{}{}
			}
		}
		id := seriesT{series: p.Series, t: p.T}
		if ri, dup := seen[id]; dup {
			writes[wi].Rows[ri] = tiers.PointRow(p.T, p.V)
			continue
		}
		seen[id] = len(writes[wi].Rows)
		writes[wi].Rows = append(writes[wi].Rows, tiers.PointRow(p.T, p.V))
		if key.Table == tiers.TableLate {
			res.Late++
		}
	}
	res.Accepted = len(points)

	// The records that rollups and reads depend on go first: if the points
	// then fail to write, the client retries, and a dirty mark or a widened
	// span without points is harmless, whereas points without their dirty
	// mark would never be rolled up.
	spans := make([]tiers.SeriesInfo, 0, len(series))
	for _, st := range series {
		spans = append(spans, st.span)
	}
	windows := make([]tiers.DirtyWindow, 0, len(dirty))
	for d := range dirty {
		windows = append(windows, d)
	}
	marks := make([]tiers.LateMark, 0, len(lateMarks))
	for m := range lateMarks {
		marks = append(marks, m)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.store.NoteSeries(gctx, spans) })
	if len(windows) > 0 {
		g.Go(func() error {
			return w.store.MarkDirty(gctx, tiers.AlignDown(now, tiers.DirtySlot), w.raw.Retention, windows)
		})
	}
	if len(marks) > 0 {
		g.Go(func() error { return w.store.MarkLate(gctx, marks) })
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	if err := w.store.Write(ctx, writes); err != nil {
		return Result{}, err
	}
	for m := range rewriteMarks {
		marks = append(marks, m)
	}
	if len(marks) > 0 {
		// Marked (again) now that the rows are durable: the new version
		// tells readers that cached the late partition, or the whole
		// bucket, under an earlier one that it changed. A reader that saw
		// the new version reads the new rows.
		if err := w.store.MarkLate(ctx, marks); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// checkLabels checks the labels a batch gives series, adding what is
// wrong to verr, and returns the labels of the series that do not exist
// yet: those to write.
func (w *Writer) checkLabels(ctx context.Context, labels map[string]tiers.Labels, verr *ValidationError) (map[string]tiers.Labels, error) {
	if len(labels) == 0 {
		return nil, nil
	}
	fresh := map[string]tiers.Labels{}
	for _, id := range slices.Sorted(maps.Keys(labels)) {
		l := labels[id]
		param := "series_labels." + id
		if err := params.Labels(l, w.cfg.MaxLabels); err != nil {
			verr.Invalid++
			verr.add(param, err.Error())
			continue
		}
		if w.blocks != nil {
			if b, ok, err := w.blocks.IsBlocked(ctx, id); err != nil {
				return nil, fmt.Errorf("blocked series: %w", err)
			} else if ok {
				verr.Invalid++
				verr.add(param, fmt.Sprintf("series %s is blocked: %s", b.Series, b.Reason))
				continue
			}
		}
		if w.series != nil {
			info, err := w.series.LookupSeries(ctx, id)
			switch {
			case err == nil:
				if !info.Labels.Stored().Equal(l.Stored()) {
					verr.Invalid++
					verr.add(param, fmt.Sprintf("the series exists with the labels %s; labels are set when a series is created, and changed only by PUT /v1/admin/series/%s/labels",
						params.CanonicalLabels(info.Labels), id))
				}
				continue
			case !errors.Is(err, tiers.ErrNotFound):
				return nil, fmt.Errorf("series %s: %w", id, err)
			}
		}
		fresh[id] = l.Stored()
	}
	return fresh, nil
}

// setLabels writes the labels of new series to the index, all at once.
func (w *Writer) setLabels(ctx context.Context, fresh map[string]tiers.Labels) error {
	if len(fresh) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for id, l := range fresh {
		g.Go(func() error { return w.store.SetLabels(gctx, id, l) })
	}
	return g.Wait()
}

// blockedIn returns the blocks of the batch's blocked series, by id.
func (w *Writer) blockedIn(ctx context.Context, points []Point) (map[string]tiers.BlockedSeries, error) {
	if w.blocks == nil {
		return nil, nil
	}
	checked := map[string]bool{}
	var out map[string]tiers.BlockedSeries
	for _, p := range points {
		if checked[p.Series] {
			continue
		}
		checked[p.Series] = true
		b, ok, err := w.blocks.IsBlocked(ctx, p.Series)
		if err != nil {
			return nil, fmt.Errorf("blocked series: %w", err)
		}
		if ok {
			if out == nil {
				out = map[string]tiers.BlockedSeries{}
			}
			out[p.Series] = b
		}
	}
	return out, nil
}

type seriesT struct {
	series string
	t      int64
}

// Relabel replaces the labels of an existing series: checked as a write's
// labels are, written to the index (tiers.ErrNotFound for a series the
// registry does not know).
func (w *Writer) Relabel(ctx context.Context, id string, labels tiers.Labels) error {
	if err := params.Labels(labels, w.cfg.MaxLabels); err != nil {
		return params.Bad("labels", "%s", err)
	}
	if w.series != nil {
		if _, err := w.series.LookupSeries(ctx, id); err != nil {
			return err
		}
	}
	return w.store.SetLabels(ctx, id, labels.Stored())
}
