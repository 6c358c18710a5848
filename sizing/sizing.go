// Package sizing owns the sizing rule of the partition layout: given how
// fast one series is written and how large a stored row is, it says which
// bucket width and how many event buckets each tier should use, and how
// large the resulting partitions are. It is pure arithmetic; `gateway size`
// prints it.
//
// The rule: partition bytes = row rate × bucket duration × row bytes,
// where a rollup row's bytes count its extras (the window's quantile
// sketch and counter summary) at their mean size. A
// partition should hold about Target bytes (the design aims at 10–100 MB)
// but never more than MaxRows rows: Cassandra's data-modeling guidance
// counts a partition's size in cells and advises staying under about
// 100,000 rows and 100 MB per partition (2 billion cells is the hard
// limit), so for small rows the row count, not the byte count, binds.
package sizing

import (
	"errors"
	"fmt"
	"math"

	"github.com/tsgate/tsgate/tiers"
)

// Rule is what the sizing depends on.
type Rule struct {
	// Rate is the points per second of one series.
	Rate float64
	// RowBytes is the stored size of one raw row (key, value and
	// overhead). A rollup row holds three more values and its extras:
	// RowBytes + 24 + ExtrasBytes.
	RowBytes int64
	// ExtrasBytes is the mean size of a rollup row's extras, the quantile
	// sketch and counter summary of its window (tiers.AppendExtras), which
	// depends on the data: tens of bytes for a minute of a 10 s gauge,
	// hundreds for an hour of heavy-tailed latencies, at most
	// tiers.MaxExtrasLen (docs/benchmarks.md measures them).
	ExtrasBytes int64
	// Target is the partition size to aim at, in bytes.
	Target int64
	// MaxRows bounds the rows of one partition whatever their size.
	MaxRows int64
	// MaxEventBuckets bounds the partitions one raw bucket is split into.
	MaxEventBuckets int
	// RawFloor is the narrowest raw bucket before event buckets are used
	// instead: below it, a read of a range would open ever more buckets,
	// whereas event buckets also spread a busy series' writes over more
	// replicas.
	RawFloor int64
}

// DefaultRule returns the guidance's bounds; Rate, RowBytes and Target are
// the caller's.
func DefaultRule() Rule {
	return Rule{MaxRows: 100_000, MaxEventBuckets: tiers.MaxEventBuckets, RawFloor: tiers.Hour, Target: 50_000_000}
}

// RollupExtraBytes is what a rollup row stores beyond a raw row: min, max
// and sum besides the value slot (count), 8 bytes each.
const RollupExtraBytes = 24

// Tier names a tier to size: its name and the width of its windows (0 for
// raw points).
type Tier struct {
	Name string
	Step int64
}

// Size is the sizing of one tier.
type Size struct {
	Tier         string
	BucketWidth  int64
	EventBuckets int
	// Rows and Bytes are those of one partition of a full bucket;
	// MaxBytes is Bytes with every rollup row's extras at their bound
	// (tiers.MaxExtrasLen), Bytes for the raw tier.
	Rows     float64
	Bytes    float64
	MaxBytes float64
	// RowRate is the rows per second the tier stores for the series.
	RowRate float64
}

// Widths are the bucket widths the rule chooses from: clock-friendly
// durations, so that buckets start where a person expects.
var Widths = []int64{
	tiers.Second, 5 * tiers.Second, 10 * tiers.Second, 30 * tiers.Second,
	tiers.Minute, 5 * tiers.Minute, 10 * tiers.Minute, 15 * tiers.Minute, 30 * tiers.Minute,
	tiers.Hour, 2 * tiers.Hour, 3 * tiers.Hour, 6 * tiers.Hour, 12 * tiers.Hour,
	tiers.Day, 2 * tiers.Day, 7 * tiers.Day, 14 * tiers.Day, 30 * tiers.Day, 90 * tiers.Day, 365 * tiers.Day,
}

// Validate checks the rule.
func (r Rule) Validate() error {
	var errs []error
	if !(r.Rate > 0) || math.IsInf(r.Rate, 0) {
		errs = append(errs, errors.New("rate must be a positive number of points per second"))
	}
	if r.RowBytes < 1 {
		errs = append(errs, errors.New("row bytes must be at least 1"))
	}
	if r.ExtrasBytes < 0 || r.ExtrasBytes > tiers.MaxExtrasLen {
		errs = append(errs, fmt.Errorf("extras bytes must be between 0 and %d", tiers.MaxExtrasLen))
	}
	if r.Target < r.RowBytes {
		errs = append(errs, errors.New("the target partition size must be at least one row"))
	}
	if r.MaxRows < 1 {
		errs = append(errs, errors.New("max rows must be at least 1"))
	}
	if r.MaxEventBuckets < 1 || r.MaxEventBuckets > tiers.MaxEventBuckets {
		errs = append(errs, fmt.Errorf("max event buckets must be between 1 and %d", tiers.MaxEventBuckets))
	}
	if r.RawFloor < tiers.Second {
		errs = append(errs, errors.New("the raw bucket floor must be at least 1s"))
	}
	return errors.Join(errs...)
}

// Plan sizes each tier. Raw points arrive at Rate; a rollup tier stores one
// row per window that has points, so at most one per Step.
//
// Raw tier: the widest width whose single partition stays within the
// target is used when it is at least RawFloor; a busier series keeps
// RawFloor and splits it into as many event buckets as the target needs;
// one too busy for MaxEventBuckets at RawFloor gets the widest width that
// fits with MaxEventBuckets. Rollup tiers are never split: the widest
// width that is a whole number of windows and fits, at least one window.
func Plan(r Rule, ts []Tier) ([]Size, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	out := make([]Size, 0, len(ts))
	for _, t := range ts {
		rowBytes, rowRate := r.RowBytes, r.Rate
		maxRowBytes := rowBytes
		if t.Step > 0 {
			rowBytes += RollupExtraBytes + r.ExtrasBytes
			maxRowBytes = r.RowBytes + RollupExtraBytes + tiers.MaxExtrasLen
			rowRate = min(r.Rate, float64(tiers.Second)/float64(t.Step))
		}
		targetRows := min(float64(r.Target/rowBytes), float64(r.MaxRows))
		rowsIn := func(width int64, eb int) float64 {
			return rowRate * float64(width) / float64(tiers.Second) / float64(eb)
		}
		fits := func(width int64, eb int) bool { return rowsIn(width, eb) <= targetRows }
		var width int64
		eb := 1
		if t.Step > 0 {
			width = widest(func(w int64) bool { return w >= t.Step && w%t.Step == 0 }, func(w int64) bool { return fits(w, 1) })
			if width == 0 {
				width = t.Step // one window per bucket is the least there is
			}
		} else {
			width = widest(func(w int64) bool { return w >= r.RawFloor }, func(w int64) bool { return fits(w, 1) })
			if width == 0 {
				width = smallest(func(w int64) bool { return w >= r.RawFloor })
				if width == 0 {
					width = r.RawFloor
				}
				eb = int(math.Ceil(rowsIn(width, 1) / targetRows))
				if eb > r.MaxEventBuckets {
					eb = r.MaxEventBuckets
					width = widest(func(w int64) bool { return true }, func(w int64) bool { return fits(w, eb) })
					if width == 0 {
						width = Widths[0]
					}
				}
			}
		}
		rows := rowsIn(width, eb)
		out = append(out, Size{Tier: t.Name, BucketWidth: width, EventBuckets: eb, Rows: rows, Bytes: rows * float64(rowBytes),
			MaxBytes: rows * float64(maxRowBytes), RowRate: rowRate})
	}
	return out, nil
}

// widest is the widest of Widths that is allowed and fits, or 0.
func widest(allowed, fits func(int64) bool) int64 {
	for i := len(Widths) - 1; i >= 0; i-- {
		if w := Widths[i]; allowed(w) && fits(w) {
			return w
		}
	}
	return 0
}

// smallest is the narrowest of Widths that is allowed, or 0.
func smallest(allowed func(int64) bool) int64 {
	for _, w := range Widths {
		if allowed(w) {
			return w
		}
	}
	return 0
}
