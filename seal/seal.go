// Package seal keeps final raw buckets and complete rollup partitions
// sealed: it walks the registry and asks the store (tiers.Sealer) to
// rewrite every raw bucket that can no longer receive on-time points, and
// every rollup partition whose windows the rollup worker has all
// computed, as compressed chunks and to delete their rows. A raw bucket is
// final once its end plus the lateness (and the grace of lagging writers)
// is past, the rule the partition cache takes raw reads as final by; a
// rollup partition is complete once its tier's watermark is past its end
// (and its end is final). A correction written later (late points, an
// import) is a row the store merges over the chunks until a seal folds it
// in, so sealing never changes an answer, only what it costs: the rollup
// worker tells the worker of the partitions it rewrites (Rewritten), and
// the next run seals again those its checkpoints have passed.
//
// Progress is a checkpoint per tier in the store: the partition end up to
// which every partition of the tier has been sealed. A run seals the buckets that ended after
// it and are final now, then advances it; a store that never ran the
// worker starts from the raw tier's retention, so an existing store is
// sealed in place, online. Sealing is idempotent, so several gateways may
// run the worker at once, and a run cut short is redone by the next.
package seal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/tiers"
)

// CheckpointName is the checkpoint the worker advances: the end of the
// last raw bucket sealed in every series.
const CheckpointName = "seal"

// RollupCheckpointName is the checkpoint of a rollup table's partitions.
func RollupCheckpointName(t tiers.Table) string { return CheckpointName + "_" + string(t) }

// Store is what the worker reads and seals.
type Store interface {
	tiers.Sealer
	ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error)
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	Checkpoint(ctx context.Context, name string) (int64, bool, error)
	AdvanceCheckpoint(ctx context.Context, name string, to int64) error
}

// Config tunes the worker.
type Config struct {
	// Interval is how often the worker runs; 0 disables it.
	Interval time.Duration
	// Lateness must equal the write path's: on-time points stop arriving
	// for a bucket this long after it ends.
	Lateness time.Duration
	// Grace covers writers whose clocks or requests lag (the rollup
	// worker's).
	Grace time.Duration
	// Parallelism is how many series are sealed at once.
	Parallelism int
	// Revisit is how long a bucket keeps being sealed again after its
	// first seal, folding in rows that writers lagging past the grace
	// wrote. (A store that keeps a sealed partition's rows for a while,
	// Cassandra for --cassandra-sealed-rows-grace, deletes them in any
	// later run: tiers.SealedRowsDeleter.)
	Revisit time.Duration
}

// DefaultConfig returns the worker's defaults.
func DefaultConfig() Config {
	return Config{Interval: 5 * time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 4, Revisit: 30 * time.Minute}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Interval < 0 {
		errs = append(errs, errors.New("seal interval must not be negative"))
	}
	if c.Parallelism < 1 {
		errs = append(errs, errors.New("seal parallelism must be at least 1"))
	}
	if c.Revisit < 0 {
		errs = append(errs, errors.New("seal revisit must not be negative"))
	}
	return errors.Join(errs...)
}

// Report says what one run did.
type Report struct {
	// From and To bound the bucket ends the run sealed: (From, To].
	From, To int64
	// Buckets and Points count the raw buckets rewritten and the rows they
	// folded into chunks, Partitions and Rows the rollup partitions and
	// theirs; Chunks the chunks they all now hold.
	Buckets, Points, Chunks int64
	Partitions, Rows        int64
	// RowsDeleted counts the partitions whose rows the store had kept
	// after an earlier seal and deleted in this run.
	RowsDeleted int64
	Elapsed     time.Duration
}

// listPage is how many series one registry listing returns.
const listPage = 1000

// Worker seals final raw buckets.
type Worker struct {
	store   Store
	raw     tiers.Tier
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics
	// rollups are the rollup tiers sealed; watermarks says how far each
	// is complete (see SealRollups).
	rollups    []tiers.Tier
	watermarks func(context.Context) tiers.Watermarks

	mu sync.Mutex // one run at a time in this process

	// rewritten are the rollup partitions that rows were written to since
	// the last run (see Rewritten), with the tier of each.
	rmu       sync.Mutex
	rewritten map[tiers.PartitionKey]tiers.Tier
	// checkpoints are the rollup tiers' checkpoints as the last run read
	// them: a partition ending after its tier's is left to the runs that
	// get there, and not noted.
	checkpoints map[tiers.Table]int64
}

// maxRewritten bounds the rollup partitions noted between two runs; those
// noted past it keep their rows beside their chunks, which reads merge,
// until a seal of theirs or their expiry.
const maxRewritten = 1 << 16

// Rewritten notes that rows of rollup tier t were written to a series
// (rollup.Worker.OnRewrite): the next run seals again the partitions they
// fall in that its checkpoints have passed, which no run would otherwise
// come back to. A late point or an import recomputes windows of history;
// so does a gateway that rolls up the log an import left behind it.
func (w *Worker) Rewritten(series string, t tiers.Tier, rows []tiers.Row) {
	if len(rows) == 0 || !w.sealsTier(t.Table) {
		return
	}
	layout := t.DefaultLayout()
	w.rmu.Lock()
	defer w.rmu.Unlock()
	if w.rewritten == nil {
		w.rewritten = map[tiers.PartitionKey]tiers.Tier{}
	}
	cp, known := w.checkpoints[t.Table]
	last := int64(tiers.MinTime)
	for _, r := range rows {
		b := layout.BucketOf(r.T)
		if b.Start == last {
			continue
		}
		last = b.Start
		if known && b.End > cp {
			break // rows are ascending: the rest end later still
		}
		if len(w.rewritten) >= maxRewritten {
			w.metrics.rewrittenDropped()
			continue
		}
		w.rewritten[tiers.PartitionKey{Table: t.Table, Series: series, Bucket: b.Start}] = t
	}
}

func (w *Worker) sealsTier(t tiers.Table) bool {
	for _, r := range w.rollups {
		if r.Table == t {
			return true
		}
	}
	return false
}

// resealRewritten seals again the rewritten partitions that end by their
// tier's checkpoint; those after it are the checkpoint's runs' to seal.
// A partition that fails stays noted.
func (w *Worker) resealRewritten(ctx context.Context, rep *Report) error {
	checkpoints := map[tiers.Table]int64{}
	for _, t := range w.rollups {
		cp, ok, err := w.store.Checkpoint(ctx, RollupCheckpointName(t.Table))
		if err != nil {
			return fmt.Errorf("read the seal checkpoint of %s: %w", t.Table, err)
		}
		if ok {
			checkpoints[t.Table] = cp
		}
	}
	w.rmu.Lock()
	todo := w.rewritten
	w.rewritten = nil
	w.checkpoints = checkpoints
	w.rmu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	var failed error
	for key, t := range todo {
		cp, ok := checkpoints[t.Table]
		if !ok || t.DefaultLayout().BucketOf(key.Bucket).End > cp || ctx.Err() != nil {
			if ctx.Err() == nil {
				delete(todo, key)
			}
			continue
		}
		r, err := w.store.SealRollup(ctx, key, t.Retention)
		if err != nil {
			failed = fmt.Errorf("seal %s %s bucket %d again: %w", t.Name, key.Series, key.Bucket, err)
			continue
		}
		delete(todo, key)
		if r.Rows > 0 {
			rep.Partitions++
			rep.Rows += int64(r.Rows)
			rep.Chunks += int64(r.Chunks)
			w.metrics.sealed(t, r)
		}
	}
	w.renote(todo)
	if failed == nil {
		failed = ctx.Err()
	}
	return failed
}

// renote notes partitions again.
func (w *Worker) renote(keys map[tiers.PartitionKey]tiers.Tier) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	if w.rewritten == nil {
		w.rewritten = map[tiers.PartitionKey]tiers.Tier{}
	}
	for k, t := range keys {
		if len(w.rewritten) < maxRewritten {
			w.rewritten[k] = t
		}
	}
}

// SealRollups has the worker seal the complete partitions of the rollup
// tiers of p too, complete as far as watermarks says (rollup.Worker's
// Watermarks, indexed by level). It returns w.
func (w *Worker) SealRollups(p tiers.Pyramid, watermarks func(context.Context) tiers.Watermarks) *Worker {
	w.rollups = nil
	for _, l := range p.Rollups() {
		w.rollups = append(w.rollups, *p.Tier(l))
	}
	w.watermarks = watermarks
	return w
}

// cut is what a run seals of one tier: the partitions that end in
// (from, cutoff].
type cut struct {
	tier       tiers.Tier
	checkpoint string
	from       int64
	cutoff     int64
}

// rollupCuts returns the rollup tiers' cuts: each from its checkpoint (its
// retention when there is none) to the end its watermark and rawCutoff
// allow; none when nothing is complete.
func (w *Worker) rollupCuts(ctx context.Context, now time.Time, rawCutoff int64, checkpoints bool) ([]cut, error) {
	if len(w.rollups) == 0 || w.watermarks == nil {
		return nil, nil
	}
	wm := w.watermarks(ctx)
	var cuts []cut
	for _, t := range w.rollups {
		if int(t.Level) >= len(wm) || wm[t.Level] == tiers.MinTime {
			continue
		}
		c := cut{tier: t, checkpoint: RollupCheckpointName(t.Table), from: t.OldestAvailable(now.UnixMilli()), cutoff: min(rawCutoff, wm[t.Level])}
		if checkpoints {
			from, ok, err := w.store.Checkpoint(ctx, c.checkpoint)
			if err != nil {
				return nil, fmt.Errorf("read the seal checkpoint of %s: %w", t.Table, err)
			}
			if ok {
				c.from = from
			}
		}
		if c.cutoff > c.from {
			cuts = append(cuts, c)
		}
	}
	return cuts, nil
}

// New returns a worker sealing the partitions of the raw tier raw.
// metrics may be nil.
func New(store Store, raw tiers.Tier, cfg Config, now func() time.Time, log *slog.Logger, metrics *Metrics) *Worker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{store: store, raw: raw, cfg: cfg, now: now, log: log, metrics: metrics}
}

// Run runs the worker every Interval until ctx is done.
func (w *Worker) Run(ctx context.Context) {
	if w.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		rep, err := w.RunOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Warn("sealing raw buckets failed; retrying next interval", "err", err)
		case rep.Buckets > 0 || rep.Partitions > 0 || rep.RowsDeleted > 0:
			w.log.Info("buckets sealed", "raw_buckets", rep.Buckets, "points", rep.Points, "rollup_partitions", rep.Partitions, "rollup_rows", rep.Rows,
				"chunks", rep.Chunks, "sealed_rows_deleted_partitions", rep.RowsDeleted, "elapsed", rep.Elapsed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Cutoff is the end of the newest raw bucket that is final at now.
func (w *Worker) Cutoff(now time.Time) int64 {
	return now.UnixMilli() - w.cfg.Lateness.Milliseconds() - w.cfg.Grace.Milliseconds()
}

// RunOnce seals every raw bucket that ended after the checkpoint (less
// Revisit) and is final now, then advances the checkpoint. A failure
// leaves the checkpoint where it was, so the next run does the work again.
func (w *Worker) RunOnce(ctx context.Context) (Report, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start := w.now()
	cutoff := w.Cutoff(start)
	from, ok, err := w.store.Checkpoint(ctx, CheckpointName)
	if err != nil {
		return Report{}, fmt.Errorf("read the seal checkpoint: %w", err)
	}
	if !ok {
		// Never sealed: everything the raw tier still holds.
		from = w.raw.OldestAvailable(start.UnixMilli())
	}
	rep := Report{From: from, To: cutoff}
	if d, ok := w.store.(tiers.SealedRowsDeleter); ok {
		// Rows that earlier seals, this gateway's or an import's, kept
		// for reads in flight.
		n, err := d.DeleteSealedRows(ctx)
		rep.RowsDeleted = int64(n)
		w.metrics.rowsDeleted(n)
		if err != nil {
			w.metrics.failed()
			return rep, err
		}
	}
	rollups, err := w.rollupCuts(ctx, start, cutoff, true)
	if err != nil {
		return rep, err
	}
	if cutoff <= from && len(rollups) == 0 {
		w.metrics.setBacklog(0)
		if err := w.resealRewritten(ctx, &rep); err != nil {
			w.metrics.failed()
			return rep, err
		}
		w.metrics.ran()
		return rep, nil
	}
	w.metrics.setBacklog(time.Duration(max(cutoff-from, 0)) * time.Millisecond)
	cuts := rollups
	if cutoff > from {
		cuts = append([]cut{{tier: w.raw, checkpoint: CheckpointName, from: from, cutoff: cutoff}}, rollups...)
	}
	last := int64(tiers.MinTime)
	for _, c := range cuts {
		last = max(last, c.cutoff)
	}
	f := w.fanOut(ctx)
	after := ""
	for f.ctx.Err() == nil {
		page, err := w.store.ListSeries(f.ctx, "", after, listPage)
		if err != nil {
			f.g.Go(func() error { return fmt.Errorf("list series: %w", err) })
			break
		}
		for _, info := range page {
			if info.First >= last || (info.Last < w.raw.OldestAvailable(start.UnixMilli()) && len(rollups) == 0) {
				continue
			}
			f.seal(info.ID, cuts, w.cfg.Revisit.Milliseconds(), info.Last+1)
		}
		if len(page) < listPage {
			break
		}
		after = page[len(page)-1].ID
	}
	if err := f.wait(&rep, start); err != nil {
		return rep, err
	}
	for _, c := range cuts {
		if err := w.store.AdvanceCheckpoint(ctx, c.checkpoint, c.cutoff); err != nil {
			w.metrics.failed()
			return rep, fmt.Errorf("advance the seal checkpoint %s: %w", c.checkpoint, err)
		}
	}
	w.metrics.setBacklog(0)
	if err := w.resealRewritten(ctx, &rep); err != nil {
		w.metrics.failed()
		return rep, err
	}
	w.metrics.ran()
	return rep, nil
}

// SealSpans seals, now, the final raw buckets that hold a point of one of
// spans (a series' ID, First and Last), whether sealed before or not: an
// import that wrote into buckets the worker has passed hands it what it
// wrote, so that those buckets hold chunks again rather than rows merged
// over them until they expire. Buckets not final yet are left to the
// worker's runs.
func (w *Worker) SealSpans(ctx context.Context, spans []tiers.SeriesInfo) (Report, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start := w.now()
	cutoff := w.Cutoff(start)
	oldest := w.raw.OldestAvailable(start.UnixMilli())
	rep := Report{From: oldest, To: cutoff}
	rollups, err := w.rollupCuts(ctx, start, cutoff, false)
	if err != nil {
		return rep, err
	}
	f := w.fanOut(ctx)
	for _, sp := range spans {
		cuts := make([]cut, 0, 1+len(rollups))
		for _, c := range append([]cut{{tier: w.raw, from: oldest, cutoff: cutoff}}, rollups...) {
			// Every partition holding a point of the span, sealed before
			// or not.
			c.from = max(sp.First, c.from) - 1
			if c.cutoff > c.from && sp.Last > c.from {
				cuts = append(cuts, c)
			}
		}
		f.seal(sp.ID, cuts, 0, sp.Last+1)
	}
	err = f.wait(&rep, start)
	return rep, err
}

// fanOut seals series at once, Parallelism of them, and adds up what
// they did.
type fanOut struct {
	w                       *Worker
	g                       *errgroup.Group
	ctx                     context.Context
	buckets, points, chunks atomic.Int64
	partitions, rows        atomic.Int64
}

func (w *Worker) fanOut(ctx context.Context) *fanOut {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.cfg.Parallelism)
	return &fanOut{w: w, g: g, ctx: gctx}
}

// seal seals a series' partitions as sealSeries does.
func (f *fanOut) seal(id string, cuts []cut, revisit, to int64) {
	if len(cuts) == 0 {
		return
	}
	f.g.Go(func() error {
		r, err := f.w.sealSeries(f.ctx, id, cuts, revisit, to)
		f.buckets.Add(r.Buckets)
		f.points.Add(r.Points)
		f.partitions.Add(r.Partitions)
		f.rows.Add(r.Rows)
		f.chunks.Add(r.Chunks)
		return err
	})
}

// wait waits for every seal, puts their sums and the time since start
// into rep, and counts a failure.
func (f *fanOut) wait(rep *Report, start time.Time) error {
	err := f.g.Wait()
	rep.Buckets, rep.Points, rep.Chunks = f.buckets.Load(), f.points.Load(), f.chunks.Load()
	rep.Partitions, rep.Rows = f.partitions.Load(), f.rows.Load()
	rep.Elapsed = f.w.now().Sub(start)
	if err != nil {
		f.w.metrics.failed()
	}
	return err
}

// sealSeries seals the series' partitions of each cut that end in
// (from − revisit, cutoff] and begin before to.
func (w *Worker) sealSeries(ctx context.Context, id string, cuts []cut, revisit, to int64) (Report, error) {
	var rep Report
	info, err := w.store.LookupSeries(ctx, id)
	if errors.Is(err, tiers.ErrNotFound) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("look up %s: %w", id, err)
	}
	for _, c := range cuts {
		layout := c.tier.DefaultLayout()
		if c.tier.Level == tiers.LevelRaw && info.Layout != nil {
			layout = info.Layout
		}
		from := c.from - revisit
		// The partition holding from ends after it: it is the first to
		// seal, and its points may all lie before from.
		span := tiers.Span{From: max(layout.BucketOf(from).Start, info.First), To: min(c.cutoff, info.Last+1, to)}
		for b := range layout.Buckets(span, false) {
			if b.End > c.cutoff || b.End <= from {
				continue
			}
			var r tiers.SealReport
			if c.tier.Level == tiers.LevelRaw {
				r, err = w.store.SealBucket(ctx, id, b.Start, b.EventBuckets, c.tier.Retention)
			} else {
				r, err = w.store.SealRollup(ctx, tiers.PartitionKey{Table: c.tier.Table, Series: id, Bucket: b.Start}, c.tier.Retention)
			}
			if err != nil {
				return rep, fmt.Errorf("seal %s %s bucket %d: %w", c.tier.Name, id, b.Start, err)
			}
			if r.Rows == 0 {
				continue
			}
			if c.tier.Level == tiers.LevelRaw {
				rep.Buckets++
				rep.Points += int64(r.Rows)
			} else {
				rep.Partitions++
				rep.Rows += int64(r.Rows)
			}
			rep.Chunks += int64(r.Chunks)
			w.metrics.sealed(c.tier, r)
		}
	}
	return rep, nil
}
