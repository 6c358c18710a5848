package promapi

// Rollup windows under PromQL, as Thanos serves downsampled blocks: a
// selector whose nearest function folds its range with min, max or sum
// (or averages it, over exactly one window) is answered with one sample per
// whole window of the pyramid — the window's aggregate, at the window's
// last instant — instead of every raw point. Where rollups are not yet
// complete the engine folds raw points into the same windows, so the
// answer does not depend on how far the rollups have come.
//
// rate and increase of a counter, and quantile_over_time, whose answers
// from windows are within 1 % rather than exact, read them only when the
// select reaches further back than Config.ExactWithin (by default the raw
// tier's retention): a query over no more than the raw tier holds answers
// as Prometheus does. (A select that does reach further reads all of its
// range from windows, its recent days included.)
//
// rate and increase of a counter read the counter summary rollups keep
// (tiers.Counter: first and last sample, reset-aware increase): each window
// becomes two samples, at its first and last point's own times, of a
// counter that never resets and rises by exactly the increase Prometheus
// would count between them, with as many samples between them as the
// window has points (evenly spaced, rising evenly). Over a range the
// windows tile, the engine then sees the range's first and last samples
// where the raw points have them, as many samples, and the same increase:
// its extrapolation to the range's ends, which it bases on the mean
// interval between samples, is the same. Only the limit it puts on the
// extrapolation before the first sample — not below zero, judged from that
// sample's value — may differ after a reset.
//
// quantile_over_time(φ, x[r]) with φ a number reads the windows' quantile
// sketches (tiers.Extras) when one window of width r is each evaluation's
// range: each window becomes one sample, its sketch's φ-quantile, and the
// engine's quantile of that one sample is the sample. The hints do not
// carry φ: the query's own expression gives it (factsOf), per selector
// and range. Sketches answer within 1 % of the exact quantile,
// so, as for counters, only windows of an hour or more are read so.
//
// Windows are [start, start+width) and a range is (T-range, T]: the two
// sets of points differ only by a point exactly at T-range or at T. On
// data scraped at offsets off the whole second (as Prometheus' are) they
// agree; in general they agree within one point per range end.

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"

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

// overCounters are the functions of a counter's increase.
var overCounters = map[string]bool{"rate": true, "increase": true}

// minCounterWindow is the narrowest window a counter's increase is read
// from. The samples a window gives (see counterRun) are as many as its
// points, so the gain is in reading rows instead of points; below an hour
// it is too small to trade exactness for (the answer may differ slightly,
// see above), and dashboards of hours and days are where it counts.
const minCounterWindow = tiers.Hour

// windowed is how a selector is read: windows of width (0: raw points),
// each a sample of value, or two of a counter's when counter is set.
// sketch says value reads the windows' quantile sketches.
type windowed struct {
	fn      string
	width   int64
	value   func(tiers.Row) float64
	counter bool
	sketch  bool
	// thin: each evaluation's range is one window (see counterRun.add).
	thin bool
}

// selectFacts are what a query's expression says of its selectors that
// the select hints do not, by selector and range (selectorKey).
type selectFacts struct {
	// quantiles are the φ of the quantile_over_time calls over each
	// selector: NaN where there are several, or one that is not a number.
	quantiles map[string]float64
	// unaligned are the selectors with an offset under a subquery: the
	// subquery evaluates at multiples of its step, and the offset moves
	// the ranges off them, which the hints (the query's start and end,
	// offset included) do not show.
	unaligned map[string]bool
}

// factsOf reads the facts of expr (none when it does not parse: the
// engine says why).
func factsOf(expr string) selectFacts {
	var f selectFacts
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return f
	}
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		switch n := n.(type) {
		case *parser.MatrixSelector:
			vs, ok := n.VectorSelector.(*parser.VectorSelector)
			if !ok || vs.OriginalOffset == 0 || !slices.ContainsFunc(path, isSubquery) {
				return nil
			}
			if f.unaligned == nil {
				f.unaligned = map[string]bool{}
			}
			f.unaligned[selectorKey(vs.LabelMatchers, n.Range.Milliseconds())] = true
		case *parser.Call:
			if n.Func.Name != "quantile_over_time" || len(n.Args) != 2 {
				return nil
			}
			m, ok := unwrapParens(n.Args[1]).(*parser.MatrixSelector)
			if !ok {
				return nil
			}
			vs, ok := m.VectorSelector.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			phi := math.NaN()
			if lit, ok := unwrapParens(n.Args[0]).(*parser.NumberLiteral); ok {
				phi = lit.Val
			}
			if f.quantiles == nil {
				f.quantiles = map[string]float64{}
			}
			k := selectorKey(vs.LabelMatchers, m.Range.Milliseconds())
			if old, seen := f.quantiles[k]; seen && old != phi {
				phi = math.NaN()
			}
			f.quantiles[k] = phi
		}
		return nil
	})
	return f
}

func isSubquery(n parser.Node) bool {
	_, ok := n.(*parser.SubqueryExpr)
	return ok
}

func unwrapParens(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// selectorKey names a selector's matchers, in any order, and its range.
func selectorKey(ms []*labels.Matcher, rangeMs int64) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.String()
	}
	slices.Sort(names)
	return strings.Join(names, "\x00") + "\x00" + strconv.FormatInt(rangeMs, 10)
}

// counterRun joins the counter summaries of a series' windows, in time
// order, into the samples of a counter without resets.
type counterRun struct {
	started bool
	first   float64       // the series' first value read
	acc     tiers.Counter // the windows so far, joined
}

// add appends the samples of window k's counter: false when its window
// has none (a row rolled up before rollups kept counters). With thin set
// (each evaluation's range is one window) a window whose first and last
// points lie within 1.1 mean intervals of its edges gives its first and
// last samples alone: the engine's rate over them is the same, since its
// extrapolation compares the gaps at the range's ends with 1.1 times the
// mean interval between samples, and over two samples that mean is only
// larger. Other windows give as many samples as they had points.
func (c *counterRun) add(pts []chunks.Sample, it query.Item, width int64, thin bool) ([]chunks.Sample, bool) {
	x := it.Row.X
	if x == nil || !x.HasCounter {
		return pts, false
	}
	k := x.Counter
	if !c.started {
		c.started, c.first, c.acc = true, k.First, tiers.Counter{FirstT: k.FirstT, LastT: k.FirstT, First: k.First, Last: k.First}
	}
	joined := c.acc.Then(k)
	from := c.first + joined.Inc - k.Inc
	pts = append(pts, sample{t: k.FirstT, f: from})
	if k.LastT > k.FirstT {
		// The points between, evenly: at most one a millisecond.
		n := min(it.Row.Count-1, k.LastT-k.FirstT)
		if thin && n > 1 {
			mean := float64(k.LastT-k.FirstT) / float64(n)
			if float64(k.FirstT-it.T) < 1.1*mean && float64(it.T+width-k.LastT) < 1.1*mean {
				n = 1
			}
		}
		for j := int64(1); j < n; j++ {
			pts = append(pts, sample{t: k.FirstT + (k.LastT-k.FirstT)*j/n, f: from + k.Inc*float64(j)/float64(n)})
		}
		pts = append(pts, sample{t: k.LastT, f: c.first + joined.Inc})
	}
	c.acc = joined
	return pts, true
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
//
// phi is the φ of a quantile_over_time over the selector (NaN: unknown).
// Counters and quantiles, whose answers from windows are within 1 % and
// not exact, are read so only when approximate is set.
func windowsFor(p tiers.Pyramid, h *storage.SelectHints, phi float64, approximate bool) windowed {
	if h == nil || h.Range <= 0 {
		return windowed{}
	}
	value, ok := overWindows[h.Func]
	counter := overCounters[h.Func] && approximate
	sketch := h.Func == "quantile_over_time" && phi > 0 && phi < 1 && approximate
	if sketch {
		value = func(r tiers.Row) float64 { return interpolatedQuantile(r, phi) }
	}
	if !ok && !counter && !sketch {
		return windowed{}
	}
	// The first evaluation, offset included, is Start+Range-1 (a range
	// is (T-range, T]); the step moves on from it and the last is End.
	width := gcd(h.Range, gcd(h.Step, gcd(h.End, h.Start+h.Range-1)))
	if width <= 0 || (h.Func == "avg_over_time" || sketch) && width != h.Range {
		return windowed{}
	}
	if (counter || sketch) && width < minCounterWindow {
		return windowed{}
	}
	for _, t := range p {
		if t.Step > 0 && width%t.Step == 0 {
			return windowed{fn: h.Func, width: width, value: value, counter: counter, sketch: sketch, thin: counter && width == h.Range}
		}
	}
	return windowed{}
}

// interpolatedQuantile is the φ-quantile of a window's points as
// Prometheus computes one (promql's quantile: rank φ·(n-1) between the
// order statistics below and above it, linearly), with each of the two
// read from the window's sketch — within its 1 % — or, at either end,
// the window's exact min or max. A sketch's own quantile is the order
// statistic below the rank; on sparse windows the one above may be far.
func interpolatedQuantile(r tiers.Row, phi float64) float64 {
	n := r.Count
	if n <= 1 {
		return r.Min
	}
	sk, ok := r.QuantileSketch()
	if !ok {
		return math.NaN()
	}
	rank := phi * float64(n-1)
	lo := int64(math.Floor(rank))
	hi := min(lo+1, n-1)
	at := func(k int64) float64 {
		switch k {
		case 0:
			return r.Min
		case n - 1:
			return r.Max
		}
		// The middle of the k-th point's rank: a sketch counts a rank in
		// the bin whose points reach past it.
		v, _ := sk.Quantile((float64(k) + 0.5) / float64(n-1))
		return min(max(v, r.Min), r.Max)
	}
	vlo := at(lo)
	if w := rank - float64(lo); w > 0 {
		return vlo + (at(hi)-vlo)*w
	}
	return vlo
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
