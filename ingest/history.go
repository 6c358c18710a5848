package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// Rollups recomputes coarser tiers from rows written straight into a
// rollup tier; the rollup worker implements it.
type Rollups interface {
	// RollUpFrom recomputes the windows of the tiers coarser than level
	// that contain the given windows of level, and returns the rows it
	// rewrote per tier name.
	RollUpFrom(ctx context.Context, series string, level tiers.Level, windows []int64) (map[string]int64, error)
}

// ImportConfig tunes imports of history.
type ImportConfig struct {
	// Margin keeps imported points away from the edge of a tier's
	// retention: a point goes to a tier only if every window built from it
	// lies at least Margin inside the retention of the tier it is built
	// from, so that the rows stay until the coarser windows are rolled up
	// from them (the rollup worker takes raw windows only after the
	// lateness and its grace have passed).
	Margin time.Duration
}

// DefaultImportConfig returns the import defaults.
func DefaultImportConfig() ImportConfig { return ImportConfig{Margin: time.Hour} }

// Validate checks the configuration.
func (c ImportConfig) Validate() error {
	if c.Margin < 0 {
		return errors.New("import margin must not be negative")
	}
	return nil
}

// Importer writes history: points the raw tier still keeps go to the raw
// partitions themselves (as if they had arrived on time), marked for the
// rollup worker; older points are aggregated into the finest tier that
// still keeps their windows, and the coarser tiers are recomputed from
// there at once; points no tier keeps are dropped and counted.
//
// A point is idempotent by (series, t) in the raw tier. In a rollup tier
// the unit is the window: an import writes each window it touches from the
// points it was given for that window, replacing what the window held. So
// the points of one window of history older than the raw tier keeps must
// come in one import call; gateway import cuts its batches between
// windows for input grouped by series and ordered by time.
type Importer struct {
	writer  *Writer
	pyramid tiers.Pyramid
	rollups Rollups
	cfg     ImportConfig
	// invalidate, when set, is told the series whose rollup rows an import
	// rewrote, after the writes are durable (raw buckets carry rewrite
	// marks instead).
	invalidate func(series ...string)
}

// NewImporter returns an importer writing through w (its store, layouts,
// clock and clock-skew allowance) into the tiers of p. invalidate may be
// nil; gateway serve passes the partition cache's, because imports change
// buckets the cache takes as final.
func NewImporter(w *Writer, p tiers.Pyramid, rollups Rollups, cfg ImportConfig, invalidate func(series ...string)) *Importer {
	return &Importer{writer: w, pyramid: p, rollups: rollups, cfg: cfg, invalidate: invalidate}
}

// ImportResult says where an import's points went.
type ImportResult struct {
	// Points is the number of points given.
	Points int
	// Raw points were written to the raw partitions; the rollup worker
	// rolls them up.
	Raw int
	// Aggregated counts, per tier name, the points older than the finer
	// tiers keep that were aggregated straight into that tier.
	Aggregated map[string]int
	// Windows counts, per tier name, the rows written: built from points,
	// or recomputed from a finer tier's rows.
	Windows map[string]int64
	// Dropped points are older than every tier keeps.
	Dropped int
}

// Import validates points (syntax as for Write; no point may lie beyond
// the clock-skew allowance in the future; age is no error) and, when all
// are valid, writes them as the type describes. It returns a
// *ValidationError, and writes nothing, when any point is invalid. Like
// Write, it returns once everything is durable, and a retry of a failed
// call is safe.
func (im *Importer) Import(ctx context.Context, points []Point) (ImportResult, error) {
	return im.ImportBatch(ctx, Batch{Points: points})
}

// ImportBatch is Import for a batch that may give series labels, checked
// and written as Writer.WriteBatch does.
func (im *Importer) ImportBatch(ctx context.Context, b Batch) (ImportResult, error) {
	points := b.Points
	w := im.writer
	now := w.now().UnixMilli()
	verr := &ValidationError{}
	fresh, err := w.checkLabels(ctx, b.Labels, verr)
	if err != nil {
		return ImportResult{}, err
	}
	for i, p := range points {
		if msg, bad := im.timeError(p.T, now); bad {
			verr.Invalid++
			verr.add(fmt.Sprintf("points[%d].t", i), msg)
		}
	}
	if verr.Invalid > 0 {
		verr.Total = len(points)
		return ImportResult{}, verr
	}
	if err := w.setLabels(ctx, fresh); err != nil {
		return ImportResult{}, err
	}

	res := ImportResult{Points: len(points), Aggregated: map[string]int{}, Windows: map[string]int64{}}
	levels := im.pyramid.Levels()
	byLevel := make([][]Point, len(levels))
	for _, p := range points {
		l, ok := im.level(p.T, now)
		if !ok {
			res.Dropped++
			continue
		}
		byLevel[l] = append(byLevel[l], p)
	}
	if raw := byLevel[tiers.LevelRaw]; len(raw) > 0 {
		// Buckets readers may cache get rewrite marks, which every
		// instance reads with the late index.
		if _, err := w.Backfill(ctx, raw); err != nil {
			return ImportResult{}, err
		}
		res.Raw = len(raw)
	}
	var rewritten []string // series whose rollup rows changed
	for _, l := range levels[1:] {
		pts := byLevel[l]
		if len(pts) == 0 {
			continue
		}
		name := im.pyramid.Tier(l).Name
		res.Aggregated[name] = len(pts)
		windows, err := im.writeWindows(ctx, l, pts)
		if err != nil {
			return ImportResult{}, err
		}
		res.Windows[name] += int64(countWindows(windows))
		series := slices.Sorted(maps.Keys(windows))
		rewritten = append(rewritten, series...)
		for _, s := range series {
			n, err := im.rollups.RollUpFrom(ctx, s, l, windows[s])
			if err != nil {
				return ImportResult{}, err
			}
			for tier, c := range n {
				res.Windows[tier] += c
			}
		}
	}
	if len(rewritten) > 0 {
		// Rollup rows readers may cache as final changed: a new generation,
		// once they are durable, makes every instance's cache load them
		// again (within its series-cache TTL); this one's drops them now.
		slices.Sort(rewritten)
		rewritten = slices.Compact(rewritten)
		if err := w.store.MarkRewritten(ctx, rewritten); err != nil {
			return ImportResult{}, err
		}
		im.invalidated(rewritten...)
	}
	return res, nil
}

// timeError is the one bound on an imported point's time: no further in
// the future than the clock-skew allowance.
func (im *Importer) timeError(t, now int64) (string, bool) {
	skew := im.writer.cfg.ClockSkew.Milliseconds()
	if t > now+skew {
		return fmt.Sprintf("is more than %s in the future (newest accepted now: %d)", tiers.FormatDuration(skew), now+skew), true
	}
	return "", false
}

// Check completes a decoder's rejection of a batch with the check Import
// would make of the points that did decode, so that the answer names every
// bad point at once, in batch order.
func (im *Importer) Check(verr *ValidationError) { im.writer.check(verr, im.timeError) }

func (im *Importer) invalidated(series ...string) {
	if im.invalidate != nil && len(series) > 0 {
		im.invalidate(series...)
	}
}

// level is the tier a point at t is imported into: the raw tier when
// every window built from it can be rolled up from rows that are still
// kept, else the coarsest tier whose windows cannot be (their rows are
// built from the points), or none when even that tier does not keep them.
func (im *Importer) level(t, now int64) (tiers.Level, bool) {
	margin := im.cfg.Margin.Milliseconds()
	keeps := func(l tiers.Level, window int64) bool {
		tr := im.pyramid.Tier(l)
		return tr.Retention == 0 || window >= now-tr.Retention+margin
	}
	levels := im.pyramid.Levels()
	coarsest := levels[len(levels)-1]
	if coarsest == tiers.LevelRaw {
		// The raw tier alone: a point is kept as it is, or not at all.
		return tiers.LevelRaw, keeps(tiers.LevelRaw, t)
	}
	if !keeps(coarsest, tiers.AlignDown(t, im.pyramid.Tier(coarsest).Step)) {
		return 0, false
	}
	for i := len(levels) - 1; i >= 1; i-- {
		l := levels[i]
		if !keeps(levels[i-1], tiers.AlignDown(t, im.pyramid.Tier(l).Step)) {
			return l, true
		}
	}
	return tiers.LevelRaw, true
}

// writeWindows aggregates the points into windows of tier l, the last
// point of a (series, t) winning as in Write, extras included, and writes
// the rows and the series' spans. It returns the window starts per series, ascending.
func (im *Importer) writeWindows(ctx context.Context, l tiers.Level, points []Point) (map[string][]int64, error) {
	t := im.pyramid.Tier(l)
	// Sort by (series, t), keeping the input order among equal keys, so
	// that the last write of a (series, t) is the one kept.
	pts := slices.Clone(points)
	slices.SortStableFunc(pts, func(a, b Point) int {
		return cmp.Or(cmp.Compare(a.Series, b.Series), cmp.Compare(a.T, b.T))
	})
	layout := t.DefaultLayout()
	windows := map[string][]int64{}
	spans := map[string]*tiers.SeriesInfo{}
	var writes []tiers.PartitionWrite
	for i, p := range pts {
		if i+1 < len(pts) && pts[i+1].Series == p.Series && pts[i+1].T == p.T {
			continue // a later write of the same (series, t)
		}
		if sp := spans[p.Series]; sp == nil {
			spans[p.Series] = &tiers.SeriesInfo{ID: p.Series, First: p.T, Last: p.T}
		} else {
			sp.Last = p.T
		}
		start := tiers.AlignDown(p.T, t.Step)
		// The window's extras — sketch and counter — are built from its
		// points as the rollup worker builds them.
		point := tiers.PointRow(p.T, p.V)
		ws := windows[p.Series]
		if n := len(ws); n > 0 && ws[n-1] == start {
			w := &writes[len(writes)-1]
			w.Rows[len(w.Rows)-1].AddExtras(point)
			continue
		}
		row := tiers.Row{T: start}
		row.AddExtras(point)
		windows[p.Series] = append(ws, start)
		b := layout.BucketOf(start).Start
		if n := len(writes); n == 0 || writes[n-1].Key.Series != p.Series || writes[n-1].Key.Bucket != b {
			writes = append(writes, tiers.PartitionWrite{
				Key:       tiers.PartitionKey{Table: t.Table, Series: p.Series, Bucket: b},
				Retention: t.Retention,
			})
		}
		w := &writes[len(writes)-1]
		w.Rows = append(w.Rows, row)
	}
	infos := make([]tiers.SeriesInfo, 0, len(spans))
	for _, sp := range spans {
		infos = append(infos, *sp)
	}
	// The registry first, as in Write: rows of a series the registry does
	// not know would not be read, nor rolled up.
	if err := im.writer.store.NoteSeries(ctx, infos); err != nil {
		return nil, err
	}
	if err := im.writer.store.Write(ctx, writes); err != nil {
		return nil, err
	}
	return windows, nil
}

func countWindows(m map[string][]int64) int {
	n := 0
	for _, ws := range m {
		n += len(ws)
	}
	return n
}
