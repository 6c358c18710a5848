package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// SeriesLookup finds a series in the registry; tiers.ErrNotFound when it
// does not exist. The series cache is one (it caches misses too).
type SeriesLookup interface {
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
}

// NewSeriesLimit bounds how many series writes may create: per batch, and
// per minute across all batches of every way in (HTTP, Kafka), so that a
// client writing ids with a counter or a timestamp in them cannot fill the
// registry and the caches. A series is new when the registry does not know
// it. A nil *NewSeriesLimit, or one whose bounds are both 0, admits
// everything.
type NewSeriesLimit struct {
	perBatch, perMinute int
	mu                  sync.Mutex
	// counts of series created in each of the last 60 seconds
	secs  [60]int
	stamp [60]int64
}

// NewNewSeriesLimit returns the bound of perBatch series per batch and
// perMinute per minute (0: unbounded).
func NewNewSeriesLimit(perBatch, perMinute int) *NewSeriesLimit {
	return &NewSeriesLimit{perBatch: perBatch, perMinute: perMinute}
}

// NewSeriesError refuses a batch for the series it would create.
type NewSeriesError struct {
	// New is the number of series the batch would create.
	New int
	// Limit is the bound it breaks: PerBatch or PerMinute.
	Limit int
	// PerMinute says that the rate is exceeded: the same batch may be
	// admitted later. Otherwise the batch alone creates too many series
	// and never will be.
	PerMinute bool
	// Recent is the number of series created in the last minute.
	Recent int
}

func (e *NewSeriesError) Error() string {
	if e.PerMinute {
		return fmt.Sprintf("the batch creates %d new series and %d were created in the last minute; at most %d per minute (--max-new-series-per-minute)", e.New, e.Recent, e.Limit)
	}
	return fmt.Sprintf("the batch creates %d new series; at most %d per batch (--max-new-series-per-batch)", e.New, e.Limit)
}

// off reports whether l admits everything.
func (l *NewSeriesLimit) off() bool { return l == nil || (l.perBatch <= 0 && l.perMinute <= 0) }

// Count returns how many series of points reg does not know. It reads
// nothing when l bounds nothing.
func (l *NewSeriesLimit) Count(ctx context.Context, reg SeriesLookup, points []Point) (int, error) {
	if l.off() || reg == nil {
		return 0, nil
	}
	seen := map[string]bool{}
	fresh := 0
	for _, p := range points {
		if seen[p.Series] {
			continue
		}
		seen[p.Series] = true
		_, err := reg.LookupSeries(ctx, p.Series)
		switch {
		case errors.Is(err, tiers.ErrNotFound):
			fresh++
		case err != nil:
			return 0, err
		}
	}
	return fresh, nil
}

// CheckBatch refuses one batch that creates more than the per-batch bound
// of series; such a batch is never admitted.
func (l *NewSeriesLimit) CheckBatch(fresh int) error {
	if l.off() || l.perBatch <= 0 || fresh <= l.perBatch {
		return nil
	}
	return &NewSeriesError{New: fresh, Limit: l.perBatch}
}

// Admit counts fresh new series against the per-minute bound at now, or
// refuses them all (a *NewSeriesError with PerMinute set) when they would
// exceed it.
func (l *NewSeriesLimit) Admit(fresh int, now time.Time) error {
	if l.off() || l.perMinute <= 0 || fresh == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sec := now.Unix()
	total := 0
	for i := range l.secs {
		if sec-l.stamp[i] < 60 {
			total += l.secs[i]
		}
	}
	if total+fresh > l.perMinute {
		return &NewSeriesError{New: fresh, Limit: l.perMinute, PerMinute: true, Recent: total}
	}
	i := sec % 60
	if l.stamp[i] != sec {
		l.stamp[i], l.secs[i] = sec, 0
	}
	l.secs[i] += fresh
	return nil
}

// Check counts the batch's new series and admits them, or refuses the
// whole batch with a *NewSeriesError; other errors are the registry's.
func (l *NewSeriesLimit) Check(ctx context.Context, reg SeriesLookup, points []Point, now time.Time) error {
	fresh, err := l.Count(ctx, reg, points)
	if err != nil || fresh == 0 {
		return err
	}
	if err := l.CheckBatch(fresh); err != nil {
		return err
	}
	return l.Admit(fresh, now)
}
