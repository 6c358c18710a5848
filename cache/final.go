package cache

import (
	"context"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// Rollups reports how far each rollup tier is complete.
type Rollups interface {
	Watermarks(ctx context.Context) tiers.Watermarks
}

// Finality decides which partition reads return rows that can no longer
// change, and so may be cached without ever being invalidated:
//
//   - raw rows once no on-time point can land in the span any more: the
//     span ended more than the lateness (plus the grace of lagging
//     writers) ago;
//   - never late rows: a late write may land in any bucket at any time;
//   - rollup rows once the worker has recomputed every window of the span
//     (its watermark is past the span) and no late point can still correct
//     them: late points are accepted for as long as the raw tier keeps
//     them, so a window is final once it is older than the raw retention.
type Finality struct {
	Pyramid  tiers.Pyramid
	Lateness time.Duration
	// Grace covers writers whose clocks or requests lag; the rollup
	// worker's grace.
	Grace   time.Duration
	Rollups Rollups
	Now     func() time.Time
}

// Final reports whether req's rows are final.
func (f Finality) Final(req tiers.ReadRequest) bool {
	n := f.Now().UnixMilli() - f.Grace.Milliseconds()
	switch req.Key.Table {
	case tiers.TableRaw:
		return req.Span.To+f.Lateness.Milliseconds() <= n
	case tiers.TableLate:
		return false
	}
	t, ok := f.Pyramid.ByTable(req.Key.Table)
	if !ok || t.Level == tiers.LevelRaw {
		return false
	}
	if req.Span.To+t.Step+f.Pyramid.Raw().Retention > n {
		return false
	}
	wm := f.Rollups.Watermarks(context.Background())
	return int(t.Level) < len(wm) && req.Span.To <= wm[t.Level]
}
