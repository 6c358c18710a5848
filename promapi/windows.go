package promapi

// Rollup windows under PromQL, as Thanos serves downsampled blocks: a
// selector whose nearest function folds its range with min, max or sum
// (or averages it, over exactly one window) is answered with one sample per
// whole window of the pyramid — the window's aggregate, at the window's
// last instant — instead of every raw point. Where rollups are not yet
// complete the engine folds raw points into the same windows, so the
// answer does not depend on how far the rollups have come.
//
// Windows are [start, start+width) and a range is (T-range, T]: the two
// sets of points differ only by a point exactly at T-range or at T. On
// data scraped at offsets off the whole second (as Prometheus' are) they
// agree; in general they agree within one point per range end.

import (
	"github.com/prometheus/prometheus/storage"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// overWindows are the functions whose value over a range is a fold of the
// values of the windows that tile it, and the window aggregate each folds.
var overWindows = map[string]func(r tiers.Row) float64{
	"max_over_time":     func(r tiers.Row) float64 { return r.Max },
	"min_over_time":     func(r tiers.Row) float64 { return r.Min },
	"sum_over_time":     func(r tiers.Row) float64 { return r.Sum },
	"present_over_time": func(tiers.Row) float64 { return 1 },
	// Over one window only: an average of averages would weigh windows
	// alike whatever their counts.
	"avg_over_time": func(r tiers.Row) float64 { return r.Sum / float64(r.Count) },
}

// windowed is how a selector is read: windows of width (0: raw points),
// each a sample of value.
type windowed struct {
	fn    string
	width int64
	value func(tiers.Row) float64
}

// sample is the window item's sample, at the window's last instant.
func (w windowed) sample(it query.Item) sample {
	return sample{t: it.T + w.width - 1, f: w.value(it.Row)}
}

// windowsFor picks the windows a selector can be read as, from the hints
// of its select: the function over it, its range, the step between
// evaluations and the last one. The windows must tile every evaluation's
// range exactly — their width divides the range, the step and the last
// evaluation time — and a rollup tier's step must divide their width
// (the engine re-aggregates that tier's rows to it). The widest such
// width is taken: the fewest samples.
func windowsFor(p tiers.Pyramid, h *storage.SelectHints) windowed {
	if h == nil || h.Range <= 0 {
		return windowed{}
	}
	value, ok := overWindows[h.Func]
	if !ok {
		return windowed{}
	}
	width := gcd(h.Range, gcd(h.Step, h.End))
	if width <= 0 || h.Func == "avg_over_time" && width != h.Range {
		return windowed{}
	}
	for _, t := range p {
		if t.Step > 0 && width%t.Step == 0 {
			return windowed{fn: h.Func, width: width, value: value}
		}
	}
	return windowed{}
}

// gcd is the greatest common divisor of a and b, by absolute value; 0 and
// x give x.
func gcd(a, b int64) int64 {
	a, b = max(a, -a), max(b, -b)
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// alignDown is the start of the window of width w that holds t.
func alignDown(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return t - r
}
