package layouts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Config tunes layout administration.
type Config struct {
	// Lateness, ClockSkew and LayoutTTL are the write path's and the
	// series cache's: together they say how far ahead of now a layout
	// change must start so that no instance can still write a point of the
	// new layout's span with the old one.
	Lateness, ClockSkew, LayoutTTL time.Duration
	// WideRows is the row count above which a raw partition is wide.
	WideRows int64
	// AutoSplit appends a layout with more event buckets to a series whose
	// partitions of its current layout grow wide.
	AutoSplit bool
	// MaxEventBuckets bounds the event buckets of any layout.
	MaxEventBuckets int
	// Tracked bounds the partitions the wide-partition tracker remembers.
	Tracked int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Lateness: 15 * time.Minute, ClockSkew: 5 * time.Minute, LayoutTTL: time.Minute,
		WideRows: 1_000_000, MaxEventBuckets: tiers.MaxEventBuckets, Tracked: 100_000,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.WideRows < 1 {
		errs = append(errs, errors.New("wide partition rows must be at least 1"))
	}
	if c.MaxEventBuckets < 1 || c.MaxEventBuckets > tiers.MaxEventBuckets {
		errs = append(errs, fmt.Errorf("max event buckets must be between 1 and %d", tiers.MaxEventBuckets))
	}
	if c.Tracked < 1 {
		errs = append(errs, errors.New("tracked partitions must be at least 1"))
	}
	return errors.Join(errs...)
}

// Margin is how far after now a layout change may start at the earliest:
// late points up to Lateness old still arrive for the old span, and another
// instance may write up to ClockSkew ahead with a layout cached for
// LayoutTTL.
func (c Config) Margin() int64 {
	return max(c.Lateness, c.LayoutTTL+c.ClockSkew).Milliseconds()
}

// Store is what administration reads and writes.
type Store interface {
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	AppendLayout(ctx context.Context, id string, entry tiers.LayoutEntry) error
}

// Invalidator drops a series' cached entry.
type Invalidator interface {
	Invalidate(id string)
}

// Admin changes series' raw layouts, by request or by auto-split.
type Admin struct {
	store Store
	cache Invalidator
	raw   tiers.Tier
	cfg   Config
	now   func() time.Time
	log   *slog.Logger

	changes *prometheus.CounterVec

	mu        sync.Mutex // serialises changes within the process
	noSplit   map[string]bool
	splitting map[string]bool
}

// NewAdmin returns the administration of raw tier raw's layouts. cache
// (may be nil) is told about every change; reg (may be nil) gets the
// metrics.
func NewAdmin(store Store, cache Invalidator, raw tiers.Tier, cfg Config, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) *Admin {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Admin{
		store: store, cache: cache, raw: raw, cfg: cfg, now: now, log: log,
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_layout_changes_total", Help: "Raw layouts appended to series, by source (admin, auto_split).",
		}, []string{"source"}),
		noSplit: map[string]bool{}, splitting: map[string]bool{},
	}
	a.changes.WithLabelValues("admin")
	a.changes.WithLabelValues("auto_split")
	if reg != nil {
		reg.MustRegister(a.changes)
	}
	return a
}

// Config returns the configuration.
func (a *Admin) Config() Config { return a.cfg }

// History returns the series' raw layout history, oldest first. A series
// that never had a layout of its own shows the raw tier's default as one
// entry with Since 0, which is how it is stored once a change is made.
func (a *Admin) History(ctx context.Context, id string) (tiers.Layout, error) {
	info, err := a.store.LookupSeries(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.layoutOf(info), nil
}

func (a *Admin) layoutOf(info tiers.SeriesInfo) tiers.Layout {
	if len(info.Layout) == 0 {
		return a.raw.DefaultLayout()
	}
	return info.Layout
}

// Change appends entry to the series' layout. It refuses (with a
// *params.Error) a change that would move a point already written or that
// another instance could still write with the old layout: Since must be a
// bucket boundary of the layout in force, a multiple of the new width
// since the epoch (so buckets stay on clock boundaries), later than now
// plus the margin, later than the series' last point and than every
// earlier entry. An unknown series is tiers.ErrNotFound: its first point
// decides nothing yet, and a layout stored before it would be ignored by
// caches that saw it missing.
func (a *Admin) Change(ctx context.Context, id string, entry tiers.LayoutEntry) (tiers.Layout, error) {
	var errs params.Errors
	if entry.Width < tiers.Second || entry.Width > 3650*tiers.Day {
		errs.Add("bucket_ms", "must be from 1000 (1s) to 315360000000 (3650d)")
	}
	if entry.EventBuckets < 1 || entry.EventBuckets > a.cfg.MaxEventBuckets {
		errs.Add("event_buckets", "must be from 1 to %d", a.cfg.MaxEventBuckets)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	info, err := a.store.LookupSeries(ctx, id)
	if err != nil {
		return nil, err
	}
	layout := a.layoutOf(info)
	if msg := a.checkSince(layout, info, entry); msg != "" {
		if next, ok := a.nextBoundary(layout, info, entry.Width); ok {
			msg += fmt.Sprintf("; the earliest valid since for bucket_ms %d is %d", entry.Width, next)
		}
		return nil, params.Bad("since", "%s", msg)
	}
	if err := a.append(ctx, id, info, entry); err != nil {
		return nil, err
	}
	a.changes.WithLabelValues("admin").Inc()
	a.log.Info("layout changed", "series", id, "since", entry.Since, "bucket", tiers.FormatDuration(entry.Width), "event_buckets", entry.EventBuckets)
	return append(layout[:len(layout):len(layout)], entry), nil
}

// checkSince says what is wrong with entry.Since, or "".
func (a *Admin) checkSince(layout tiers.Layout, info tiers.SeriesInfo, entry tiers.LayoutEntry) string {
	now := a.now().UnixMilli()
	last := layout[len(layout)-1]
	switch earliest := now + a.cfg.Margin(); {
	case entry.Since <= earliest:
		return fmt.Sprintf("must be later than now + %s (%d), so that no point written or still arriving with the current layout moves",
			tiers.FormatDuration(a.cfg.Margin()), earliest)
	case entry.Since >= tiers.MaxTime:
		return "is after the year 9999"
	case entry.Since <= info.Last:
		return fmt.Sprintf("must be later than the series' last point (%d)", info.Last)
	case entry.Since <= last.Since:
		return fmt.Sprintf("must be later than the pending layout change at %d", last.Since)
	case tiers.FloorDiv(entry.Since, entry.Width)*entry.Width != entry.Since:
		return fmt.Sprintf("must be a multiple of bucket_ms (%d) since the epoch", entry.Width)
	case layout.BucketOf(entry.Since).Start != entry.Since:
		b := layout.BucketOf(entry.Since)
		return fmt.Sprintf("must be a bucket boundary of the current layout (buckets of %s; %d falls inside [%d, %d))",
			tiers.FormatDuration(b.End-b.Start), entry.Since, b.Start, b.End)
	}
	return ""
}

// nextBoundary is the earliest Since a change to buckets of width could
// take.
func (a *Admin) nextBoundary(layout tiers.Layout, info tiers.SeriesInfo, width int64) (int64, bool) {
	after := max(a.now().UnixMilli()+a.cfg.Margin(), info.Last, layout[len(layout)-1].Since)
	return NextBoundary(layout, after, width)
}

// NextBoundary returns the first bucket boundary of layout after `after`
// that is also a multiple of width since the epoch, or false when none
// comes within a bounded search.
func NextBoundary(layout tiers.Layout, after, width int64) (int64, bool) {
	t := after + 1
	if t >= tiers.MaxTime {
		return 0, false
	}
	b := layout.BucketOf(t)
	cand := b.Start
	if cand != t {
		cand = b.End
	}
	for range 100_000 {
		if cand >= tiers.MaxTime {
			return 0, false
		}
		if tiers.FloorDiv(cand, width)*width == cand {
			return cand, true
		}
		cand = layout.BucketOf(cand).End
	}
	return 0, false
}

// append stores entry, preceded by the default entry for a series that
// had no layout of its own (so the history keeps saying how its earlier
// points lie), and drops the series' cached entry.
func (a *Admin) append(ctx context.Context, id string, info tiers.SeriesInfo, entry tiers.LayoutEntry) error {
	if len(info.Layout) == 0 {
		if err := a.store.AppendLayout(ctx, id, a.raw.DefaultLayout()[0]); err != nil {
			return err
		}
	}
	if err := a.store.AppendLayout(ctx, id, entry); err != nil {
		return err
	}
	if a.cache != nil {
		a.cache.Invalidate(id)
	}
	return nil
}

// Split appends a layout with twice the event buckets (at most
// MaxEventBuckets) from the next possible boundary, when key is a
// partition of the layout in force and no change is pending already. It
// reports whether it appended one.
func (a *Admin) Split(ctx context.Context, key tiers.PartitionKey, rows int64) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	info, err := a.store.LookupSeries(ctx, key.Series)
	if err != nil {
		return false, err
	}
	layout := a.layoutOf(info)
	cur := layout[len(layout)-1]
	now := a.now().UnixMilli()
	if cur.Since > now || (len(layout) > 1 && key.Bucket < cur.Since) {
		// A split is pending, or the wide partition belongs to a layout
		// already replaced.
		return false, nil
	}
	if cur.EventBuckets >= a.cfg.MaxEventBuckets {
		if !a.noSplit[key.Series] {
			a.noSplit[key.Series] = true
			a.log.Warn("wide partitions, but the series already has the most event buckets; narrow its buckets with PUT /v1/admin/series/{id}/layout",
				"series", key.Series, "event_buckets", cur.EventBuckets, "rows", rows)
		}
		return false, nil
	}
	since, ok := a.nextBoundary(layout, info, cur.Width)
	if !ok {
		return false, fmt.Errorf("no layout boundary for series %s", key.Series)
	}
	entry := tiers.LayoutEntry{Since: since, Width: cur.Width, EventBuckets: min(2*cur.EventBuckets, a.cfg.MaxEventBuckets)}
	if err := a.append(ctx, key.Series, info, entry); err != nil {
		return false, err
	}
	a.changes.WithLabelValues("auto_split").Inc()
	a.log.Warn("auto-split: partitions of the series grow wide; more event buckets from the next boundary",
		"series", key.Series, "bucket", key.Bucket, "event_bucket", key.EventBucket, "rows", rows,
		"since", since, "event_buckets_from", cur.EventBuckets, "event_buckets_to", entry.EventBuckets)
	return true, nil
}

// splitAsync runs Split in the background, once per series at a time: the
// tracker calls it from the read and write paths, which must not wait.
func (a *Admin) splitAsync(key tiers.PartitionKey, rows int64) {
	a.mu.Lock()
	if a.splitting[key.Series] {
		a.mu.Unlock()
		return
	}
	a.splitting[key.Series] = true
	a.mu.Unlock()
	go func() {
		defer func() {
			a.mu.Lock()
			delete(a.splitting, key.Series)
			a.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.Split(ctx, key, rows); err != nil {
			a.log.Error("auto-split failed", "series", key.Series, "err", err)
		}
	}()
}

// OnWide is the tracker's callback: with AutoSplit on, it splits the
// partition's series. On the write path the split is made before the
// write returns (a write that crosses the limit is rare, and a split that
// is in place before the next batch keeps the test of "later partitions
// stay under the limit" deterministic); on the read path it runs in the
// background, as a read must not wait for an administrative write.
func (a *Admin) OnWide(ctx context.Context, key tiers.PartitionKey, rows int64, onWritePath bool) {
	if !a.cfg.AutoSplit {
		return
	}
	if !onWritePath {
		a.splitAsync(key, rows)
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := a.Split(sctx, key, rows); err != nil {
		a.log.Error("auto-split failed", "series", key.Series, "err", err)
	}
}
