// Package rollup keeps the aggregation pyramid: it recomputes the minute,
// hour and day rows of every window whose raw points changed, as recorded
// in the rollup log, and reports how far each tier is complete (its
// watermark) so that readers can fill in the rest from finer tiers.
//
// Windows are recomputed, never incremented: a row of the finest rollup
// tier is rebuilt from the window's raw and late points, a row of every
// coarser tier from the rows of the tier below (minute from raw, hour from
// minute, day from hour with the default pyramid), re-aggregating min, max,
// sum and count, and the extras (tiers.Extras): the quantile sketch, built
// from the points and merged from the finer rows', and the counter
// summary a reset-aware increase needs. A window folded from rows written
// before rollups kept extras gets extras that know nothing; recomputing
// it once those rows have theirs fills them in. A rerun writes the same rows, so several gateway instances
// may run the worker at once.
package rollup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/scan"
	"github.com/tsgate/tsgate/tiers"
)

// CheckpointName is the rollup log checkpoint the worker advances.
const CheckpointName = "rollup"

// ForcedName is the checkpoint of forced runs: the write time before which
// a run that took every pending slot, open ones included, has reflected all
// points. Open slots are consumed again by the next regular run, but reads
// can rely on the forced run's result at once.
const ForcedName = "rollup-forced"

// Store is what the worker reads and writes.
type Store interface {
	scan.Store
	tiers.PartitionWriter
	tiers.RollupLog
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	// MarkRewritten gives series new generations: the worker calls it
	// for series whose rows it corrected below the watermarks, where
	// caches may hold them as final.
	MarkRewritten(ctx context.Context, ids []string) error
}

// Config tunes the worker.
type Config struct {
	// Interval is how often the worker runs in the background; 0 disables
	// it (rollups then run only on demand).
	Interval time.Duration
	// Lateness must equal the write path's: windows are recomputed once no
	// more on-time points can arrive for them.
	Lateness time.Duration
	// Grace covers writers whose clocks or requests lag: a log slot is only
	// taken as closed this long after it ended.
	Grace time.Duration
	// Parallelism is how many series are recomputed at once.
	Parallelism int
	// MaxSlots bounds how many log slots one run consumes, so a long backlog
	// is worked off in steps.
	MaxSlots int
}

// DefaultConfig returns the worker's defaults.
func DefaultConfig() Config {
	return Config{Interval: 30 * time.Second, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 8, MaxSlots: 1440}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Interval < 0 {
		errs = append(errs, errors.New("rollup interval must not be negative"))
	}
	if c.Grace < 0 {
		errs = append(errs, errors.New("rollup grace must not be negative"))
	}
	if c.Parallelism < 1 {
		errs = append(errs, errors.New("rollup parallelism must be at least 1"))
	}
	if c.MaxSlots < 1 {
		errs = append(errs, errors.New("rollup max slots must be at least 1"))
	}
	return errors.Join(errs...)
}

// Report says what one run did.
type Report struct {
	// Slots is the number of log slots consumed; From and To bound them.
	Slots    int
	From, To int64
	// Windows counts the rows rewritten per tier.
	Windows map[string]int64
	// RowsRead counts the rows read to recompute them.
	RowsRead int64
	// Checkpoint is where the log is consumed up to after the run.
	Checkpoint int64
	Elapsed    time.Duration
}

// Worker recomputes rollups.
type Worker struct {
	store   Store
	scan    *scan.Scanner
	pyramid tiers.Pyramid
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics

	mu sync.Mutex // one run at a time in this process

	wmMu      sync.Mutex
	wmAt      time.Time
	wmCached  tiers.Watermarks
	wmChecked bool

	// onRewrite is told of every batch of rows the worker writes (see
	// OnRewrite).
	onRewrite func(series string, t tiers.Tier, rows []tiers.Row)
}

// OnRewrite has the worker call f with the rows of a tier it has just
// written for a series, ascending: a rewrite of a partition that was
// sealed leaves rows beside its chunks, which the seal worker folds in
// (seal.Worker.Rewritten). Set it before the worker runs; f must not keep
// rows.
func (w *Worker) OnRewrite(f func(series string, t tiers.Tier, rows []tiers.Row)) {
	w.onRewrite = f
}

// New returns a worker that keeps the rollup tiers of p, reading the tier
// below each with the scan settings sc. metrics may be nil.
func New(store Store, p tiers.Pyramid, sc scan.Config, cfg Config, now func() time.Time, log *slog.Logger, metrics *Metrics) *Worker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{store: store, scan: scan.New(store, p, sc, now), pyramid: p, cfg: cfg, now: now, log: log, metrics: metrics}
}

// Run runs the worker every Interval until ctx is done.
func (w *Worker) Run(ctx context.Context) {
	if w.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		rep, err := w.RunOnce(ctx, false)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("rollup run failed; retrying next interval", "err", err)
		} else if rep.Slots > 0 {
			w.log.Info("rollups recomputed", "slots", rep.Slots, "windows", rep.Windows, "rows_read", rep.RowsRead, "elapsed", rep.Elapsed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce consumes the rollup log. Normally it takes only the slots whose
// windows can no longer receive on-time points; with all set it also
// recomputes what is pending in the newest slots (operators and tests use
// it to see rollups at once), advancing the checkpoint only over closed
// slots so that nothing is skipped.
//
// A run consumes at most MaxSlots slots at a time; with all set it goes on,
// MaxSlots at a time, until the open slot is done, because only then may it
// say that every point written before it is rolled up.
func (w *Worker) RunOnce(ctx context.Context, all bool) (Report, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := Report{Windows: map[string]int64{}}
	for first := true; ; first = false {
		rep, more, err := w.runSlots(ctx, all)
		if first {
			total.From = rep.From
		}
		total.Slots += rep.Slots
		total.To, total.Checkpoint = rep.To, rep.Checkpoint
		for name, n := range rep.Windows {
			total.Windows[name] += n
		}
		total.RowsRead += rep.RowsRead
		total.Elapsed += rep.Elapsed
		if err != nil || !more {
			return total, err
		}
	}
}

// runSlots consumes up to MaxSlots slots of the log and reports whether
// slots that all asked for are left.
func (w *Worker) runSlots(ctx context.Context, all bool) (rep Report, more bool, err error) {
	start := w.now()
	rep = Report{Windows: map[string]int64{}}
	cp, ok, err := w.store.Checkpoint(ctx, CheckpointName)
	if err != nil {
		return rep, false, fmt.Errorf("read rollup checkpoint: %w", err)
	}
	if !ok {
		cp, ok, err = w.store.OldestDirtySlot(ctx)
		if err != nil {
			return rep, false, fmt.Errorf("read oldest rollup slot: %w", err)
		}
		if !ok {
			rep.Elapsed = w.now().Sub(start)
			return rep, false, nil // nothing was ever written
		}
	}
	now := start.UnixMilli()
	closed := tiers.AlignDown(now-w.cfg.Grace.Milliseconds(), tiers.DirtySlot) // slots before it are closed
	ripe := tiers.AlignDown(now-w.cfg.Grace.Milliseconds()-w.cfg.Lateness.Milliseconds()-w.pyramid.DirtyStep(), tiers.DirtySlot)
	end := ripe
	if all {
		end = tiers.AlignDown(now, tiers.DirtySlot) + tiers.DirtySlot // the open slot too
	}
	// The cap stops short of closed slots only: each capped run moves the
	// checkpoint, and the few open slots are never left for another run.
	limit := cp + int64(w.cfg.MaxSlots)*tiers.DirtySlot
	capped := limit < min(end, closed)
	if capped {
		end = limit
	}
	rep.From, rep.To, rep.Checkpoint = cp, max(cp, end), cp
	if end <= cp {
		rep.Elapsed = w.now().Sub(start)
		return rep, false, nil
	}

	// Gather the dirty minute windows of the slots, by series. Most slots of
	// a backlog are empty, so they are read many at a time.
	dirty := map[string][]int64{}
	var mu sync.Mutex
	sg, sctx := errgroup.WithContext(ctx)
	sg.SetLimit(16)
	for slot := cp; slot < end; slot += tiers.DirtySlot {
		rep.Slots++
		sg.Go(func() error {
			ws, err := w.store.DirtyWindows(sctx, slot)
			if err != nil {
				return fmt.Errorf("read rollup log slot %d: %w", slot, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, d := range ws {
				dirty[d.Series] = append(dirty[d.Series], d.Window)
			}
			return nil
		})
	}
	if err := sg.Wait(); err != nil {
		return rep, false, err
	}

	var rowsRead atomic.Int64
	counts := make([]atomic.Int64, len(w.pyramid))
	earliest := map[string][]int64{} // series -> per level, the end of the earliest window rewritten
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.cfg.Parallelism)
	for series, windows := range dirty {
		g.Go(func() error {
			n, ends, err := w.recompute(gctx, series, windows, 1, &rowsRead)
			for l := range n {
				counts[l].Add(n[l])
			}
			mu.Lock()
			earliest[series] = ends
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return rep, false, err
	}
	if err := w.markCorrections(ctx, earliest); err != nil {
		return rep, false, err
	}
	for _, l := range w.pyramid.Rollups() {
		name := w.pyramid[l].Name
		rep.Windows[name] = counts[l].Load()
		if w.metrics != nil {
			w.metrics.windows.WithLabelValues(name).Add(float64(counts[l].Load()))
		}
	}
	rep.RowsRead = rowsRead.Load()
	if all && !capped {
		// Every point written before the run started (less the grace of
		// lagging writers) is reflected now. Not so after a capped run:
		// the slots after it are still to do.
		if err := w.store.AdvanceCheckpoint(ctx, ForcedName, now-w.cfg.Grace.Milliseconds()); err != nil {
			return rep, false, fmt.Errorf("advance forced rollup checkpoint: %w", err)
		}
		w.invalidateWatermarks()
	}
	advance := min(end, closed)
	if advance > cp {
		if err := w.store.AdvanceCheckpoint(ctx, CheckpointName, advance); err != nil {
			return rep, false, fmt.Errorf("advance rollup checkpoint: %w", err)
		}
		rep.Checkpoint = advance
		w.invalidateWatermarks()
	}
	rep.Elapsed = w.now().Sub(start)
	return rep, all && capped, nil
}

// RollUpFrom recomputes the windows of the tiers coarser than level that
// contain the given windows of level (their starts), from level's rows up:
// for rows written straight into a rollup tier, such as history older than
// the finer tiers keep. It returns the rows rewritten per tier name.
func (w *Worker) RollUpFrom(ctx context.Context, series string, level tiers.Level, windows []int64) (map[string]int64, error) {
	out := map[string]int64{}
	if int(level)+1 >= len(w.pyramid) || len(windows) == 0 {
		return out, nil
	}
	var rowsRead atomic.Int64
	// The caller marks the series rewritten: an import rewrites rows
	// below the watermarks by design.
	n, _, err := w.recompute(ctx, series, slices.Clone(windows), level+1, &rowsRead)
	for _, l := range w.pyramid.Levels()[level+1:] {
		if n[l] > 0 {
			out[w.pyramid.Tier(l).Name] = n[l]
		}
	}
	return out, err
}

// recompute rebuilds, from tier first on, the rows of one series' windows
// that contain the given dirty instants (windows of the finest rollup tier
// for the log's entries) and of the windows of every coarser tier that
// contain them. It returns the rows written per level and, per level, the
// end of the earliest window written (tiers.MaxTime where none was).
func (w *Worker) recompute(ctx context.Context, series string, windows []int64, first tiers.Level, rowsRead *atomic.Int64) (counts, earliest []int64, err error) {
	counts = make([]int64, len(w.pyramid))
	earliest = make([]int64, len(w.pyramid))
	for l := range earliest {
		earliest[l] = tiers.MaxTime
	}
	info, err := w.store.LookupSeries(ctx, series)
	if errors.Is(err, tiers.ErrNotFound) {
		return counts, earliest, nil // the registry entry is written first; nothing to do without it
	}
	if err != nil {
		return counts, earliest, fmt.Errorf("series %s: %w", series, err)
	}
	// No watermark reaches past this while the run lasts: windows ending
	// later cannot be held as final by any reader.
	complete := w.now().UnixMilli() - w.cfg.Lateness.Milliseconds()
	dirty := windows
	for _, l := range w.pyramid.Levels()[first:] {
		t := w.pyramid.Tier(l)
		for i, d := range dirty {
			dirty[i] = tiers.AlignDown(d, t.Step)
		}
		slices.Sort(dirty)
		dirty = slices.Compact(dirty)
		src := l - 1
		var stats partial.Stats
		for _, run := range runs(dirty, t.Step) {
			rows, err := w.aggregate(ctx, info, src, run, t.Step, &stats)
			if err != nil {
				return counts, earliest, fmt.Errorf("series %s: recompute %s windows: %w", series, t.Name, err)
			}
			if len(rows) == 0 {
				continue
			}
			if rows[0].T+t.Step <= complete {
				// Rows a cache may hold as final: note where they change,
				// and write only those that do.
				end, changed, err := w.changes(ctx, info, l, rows, complete, &stats)
				if err != nil {
					return counts, earliest, fmt.Errorf("series %s: read %s rows: %w", series, t.Name, err)
				}
				earliest[l] = min(earliest[l], end)
				if rows = changed; len(rows) == 0 {
					continue
				}
			}
			if err := w.write(ctx, series, t, rows); err != nil {
				return counts, earliest, fmt.Errorf("series %s: write %s rows: %w", series, t.Name, err)
			}
			if w.onRewrite != nil {
				w.onRewrite(series, *t, rows)
			}
			counts[l] += int64(len(rows))
		}
		rowsRead.Add(stats.RowsRead.Load())
	}
	return counts, earliest, nil
}

// changes compares the rows about to be written to tier l that end by
// complete with those stored. It returns the end of the first window
// whose row changes (tiers.MaxTime when none does): its aggregates or its
// extras as stored (tiers.SameRow; a row stored before rollups kept extras
// changes when it gains them); and the rows without those stored already.
// Most windows that old are rewritten unchanged — slots a forced run took
// are taken again by the next regular run, an import's log after the
// import wrote its windows — and only a change must reach the caches, or
// the store: a row written to a sealed partition costs its reads until a
// seal folds it in.
func (w *Worker) changes(ctx context.Context, info tiers.SeriesInfo, l tiers.Level, rows []tiers.Row, complete int64, stats *partial.Stats) (int64, []tiers.Row, error) {
	step := w.pyramid.Tier(l).Step
	n, _ := slices.BinarySearchFunc(rows, complete, func(r tiers.Row, c int64) int { return cmp.Compare(r.T+step, c+1) })
	if n == 0 {
		return tiers.MaxTime, rows, nil
	}
	stream, err := w.scan.ReadTier(ctx, info, l, tiers.Span{From: rows[0].T, To: rows[n-1].T + step}, true, stats)
	if err != nil {
		return 0, nil, err
	}
	defer stream.Close()
	same := make([]bool, n)
	i := 0
	for i < n && stream.Next() {
		old := stream.At()
		for i < n && rows[i].T < old.T {
			i++ // a window that had no row
		}
		if i < n && rows[i].T == old.T {
			same[i] = tiers.SameRow(rows[i], old)
			i++
		}
	}
	if err := stream.Err(); err != nil {
		return 0, nil, err
	}
	end := tiers.MaxTime
	changed := make([]tiers.Row, 0, len(rows))
	for i, r := range rows {
		if i < n && same[i] {
			continue
		}
		if i < n && end == tiers.MaxTime {
			end = r.T + step
		}
		changed = append(changed, r)
	}
	return end, changed, nil
}

// markCorrections gives a new generation to every series of which the run
// rewrote a window that ends at or before its tier's watermark: readers
// take such windows as final and cache them (keyed by the generation), so
// a rewrite there — late points, which arrive after the windows were
// complete for on-time ones — must change the key. The watermarks are read
// after the rows were written: a reader that cached a window before the
// write saw a watermark no later than these, and one that reads after it
// gets the new rows.
func (w *Worker) markCorrections(ctx context.Context, earliest map[string][]int64) error {
	if len(earliest) == 0 {
		return nil
	}
	wm, err := w.readWatermarks(ctx)
	if err != nil {
		return fmt.Errorf("read rollup checkpoints: %w", err)
	}
	var ids []string
	for series, ends := range earliest {
		for _, l := range w.pyramid.Rollups() {
			if int(l) < len(ends) && ends[l] <= wm[l] {
				ids = append(ids, series)
				break
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	if err := w.store.MarkRewritten(ctx, ids); err != nil {
		return fmt.Errorf("mark %d series with corrected rollups: %w", len(ids), err)
	}
	if w.metrics != nil {
		w.metrics.corrected.Add(float64(len(ids)))
	}
	return nil
}

// runs merges sorted window starts into contiguous spans of whole windows.
func runs(starts []int64, step int64) []tiers.Span {
	var out []tiers.Span
	for _, s := range starts {
		if n := len(out); n > 0 && out[n-1].To == s {
			out[n-1].To = s + step
			continue
		}
		out = append(out, tiers.Span{From: s, To: s + step})
	}
	return out
}

// aggregate reads the source tier over span, its rollup rows with their
// extras, and folds it into windows of step, extras included: each
// window's sketch and counter are built from the raw points, or merged
// from the finer tier's.
func (w *Worker) aggregate(ctx context.Context, info tiers.SeriesInfo, src tiers.Level, span tiers.Span, step int64, stats *partial.Stats) ([]tiers.Row, error) {
	stream, err := w.scan.ReadTier(ctx, info, src, span, true, stats)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	win := merge.NewWindower(merge.Iterator[tiers.Row](stream), step,
		func(r tiers.Row) int64 { return r.T },
		func(acc *tiers.Row, r tiers.Row) { acc.AddExtras(r) })
	var rows []tiers.Row
	for win.Next() {
		wnd := win.At()
		row := wnd.Acc
		row.T = wnd.Start
		rows = append(rows, row)
	}
	if err := win.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// write stores rows of tier t, one partition write per bucket.
func (w *Worker) write(ctx context.Context, series string, t *tiers.Tier, rows []tiers.Row) error {
	layout := t.DefaultLayout()
	now := w.now().UnixMilli()
	var writes []tiers.PartitionWrite
	for _, r := range rows {
		b := layout.BucketOf(r.T)
		if n := len(writes); n == 0 || writes[n-1].Key.Bucket != b.Start {
			writes = append(writes, tiers.PartitionWrite{
				Key:       tiers.PartitionKey{Table: t.Table, Series: series, Bucket: b.Start},
				Retention: t.Retention,
				Open:      b.End > now,
			})
		}
		writes[len(writes)-1].Rows = append(writes[len(writes)-1].Rows, r)
	}
	return w.store.Write(ctx, writes)
}

// readWatermarks computes the watermarks from the checkpoints in the store.
func (w *Worker) readWatermarks(ctx context.Context) (tiers.Watermarks, error) {
	wm := tiers.NoWatermarks(w.pyramid)
	cp, ok, err := w.store.Checkpoint(ctx, CheckpointName)
	if err != nil {
		return nil, err
	}
	forced, forcedOK, err := w.store.Checkpoint(ctx, ForcedName)
	if err != nil {
		return nil, err
	}
	if forcedOK && (!ok || forced > cp) {
		cp, ok = forced, true
	}
	if ok {
		// Points of a window that ends before cp - lateness were all written
		// before cp, so the log slots before cp hold every change to it.
		complete := cp - w.cfg.Lateness.Milliseconds()
		for _, l := range w.pyramid.Rollups() {
			wm[l] = tiers.AlignDown(complete, w.pyramid.Tier(l).Step)
		}
	}
	return wm, nil
}

func (w *Worker) invalidateWatermarks() {
	w.wmMu.Lock()
	w.wmChecked = false
	w.wmMu.Unlock()
}

// Watermarks reports how far each tier is rolled up: every window that
// ends before a tier's watermark reflects every on-time point. It is cached
// for a few seconds (readers call it on every request) and falls back to
// "nothing rolled up" — which reads finer tiers, never wrong data — when
// the checkpoint cannot be read.
func (w *Worker) Watermarks(ctx context.Context) tiers.Watermarks {
	w.wmMu.Lock()
	defer w.wmMu.Unlock()
	if w.wmChecked && w.now().Sub(w.wmAt) < 5*time.Second {
		return w.wmCached
	}
	wm, err := w.readWatermarks(ctx)
	if err != nil {
		return tiers.NoWatermarks(w.pyramid) // not cached: try again next time
	}
	w.wmCached, w.wmAt, w.wmChecked = wm, w.now(), true
	if w.metrics != nil && wm[len(wm)-1] != tiers.MinTime {
		for _, l := range w.pyramid.Rollups() {
			w.metrics.lag.WithLabelValues(w.pyramid[l].Name).Set(float64(w.now().UnixMilli()-wm[l]) / 1000)
		}
	}
	return wm
}
