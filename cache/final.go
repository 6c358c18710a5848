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
//   - late rows read under a version of their bucket's late mark (the
//     version is part of the cache key, and every late write changes it),
//     never late rows read without one;
//   - rollup rows once the worker has recomputed every window of the span
//     (its watermark is past the span). Late points may still correct
//     them while the raw tier keeps their windows: the worker then gives
//     the series a new generation (rollup.Worker's corrections), and the
//     cache keys on the generation, as it does for imports. A gateway sees
//     another gateway's correction once its cached series entry expires
//     (--series-ttl); its own at once.
type Finality struct {
	Pyramid  tiers.Pyramid
	Lateness time.Duration
	// Grace covers writers whose clocks or requests lag; the rollup
	// worker's grace.
	Grace   time.Duration
	Rollups Rollups
	Now     func() time.Time
}

// RawSettledBefore is the time before which raw rows are final (see
// Buckets.SettleRaw): a raw read that ends by then is final.
func (f Finality) RawSettledBefore() int64 {
	return f.Now().UnixMilli() - f.Grace.Milliseconds() - f.Lateness.Milliseconds()
}

// Final reports whether req's rows are final.
func (f Finality) Final(req tiers.ReadRequest) bool {
	n := f.Now().UnixMilli() - f.Grace.Milliseconds()
	switch req.Key.Table {
	case tiers.TableRaw:
		return req.Span.To+f.Lateness.Milliseconds() <= n
	case tiers.TableLate:
		return req.Version != 0
	}
	t, ok := f.Pyramid.ByTable(req.Key.Table)
	if !ok || t.Level == tiers.LevelRaw {
		return false
	}
	wm := f.Rollups.Watermarks(context.Background())
	return int(t.Level) < len(wm) && req.Span.To <= wm[t.Level]
}
