package promapi

// Evaluation. A range function at evaluation time T covers the window
// [T-range, T): the gateway's windows are half-open and epoch-aligned,
// and a range function is answered by folding the stored windows that make
// it up, so the window keeps the point at T-range and leaves out the point
// at T (Prometheus covers (T-range, T]). docs/prometheus.md states the
// rule for users.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// lookback is the window of a bare selector in an instant query, which
// has no step: Prometheus' default lookback.
const lookback = 5 * tiers.Minute

// seriesParallelism is how many series of one query are read at once; the
// engine bounds the partitions of each read.
const seriesParallelism = 4

// grid is the evaluation times of a query: start + i*step for i < n.
type grid struct {
	start, step int64
	n           int
}

func (g grid) at(i int) int64 { return g.start + int64(i)*g.step }
func (g grid) last() int64    { return g.at(g.n - 1) }

// evaluation is one query being answered.
type evaluation struct {
	a       *API
	p       *plan
	grid    grid
	rng     int64 // the window of the range function
	window  int64 // the width of the windows read; 0 reads raw points
	budget  budget
	instant bool

	mu       sync.Mutex
	warnings []string
	series   []seriesOut          // without aggregation
	groups   map[string]*groupOut // with aggregation
}

// seriesOut is the answer for one series: rows[i] holds the aggregates of
// its points in the window ending at grid.at(i) (for last_over_time, the
// last point, as a raw point row); Count 0 means no point.
type seriesOut struct {
	labels labelSet
	rows   []tiers.Row
}

// groupOut folds the series of one group of an aggregation.
type groupOut struct {
	labels labelSet
	cells  []aggCell
}

type aggCell struct {
	n             int // series with a value
	sum, min, max float64
	// wsum over weight is avg: what lies under the values over its count.
	wsum, weight float64
}

func (a *API) queryRange(r *http.Request) (any, []string, error) {
	arrival := time.Now()
	start, err := formRequiredTime(r, "start")
	if err != nil {
		return nil, nil, err
	}
	end, err := formRequiredTime(r, "end")
	if err != nil {
		return nil, nil, err
	}
	if end < start {
		return nil, nil, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	stepText := strings.TrimSpace(r.Form.Get("step"))
	if stepText == "" {
		return nil, nil, badData("invalid parameter \"step\": a step is required, in seconds or as a duration like 1m")
	}
	step, err := parseDuration("step", stepText)
	if err != nil {
		return nil, nil, err
	}
	if step <= 0 {
		return nil, nil, badData("invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer")
	}
	// Prometheus' own test, so the same requests pass and fail.
	if (end-start)/step > MaxPointsPerSeries {
		return nil, nil, overLimit("max_points", "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")
	}
	timeout, err := formTimeout(r)
	if err != nil {
		return nil, nil, err
	}
	p, err := compile(r.Form.Get("query"), step)
	if err != nil {
		return nil, nil, err
	}
	g := grid{start: start, step: step, n: int((end-start)/step) + 1}
	ev, err := a.prepare(p, g, budget{start: arrival, slo: timeout}, false)
	if err != nil {
		return nil, nil, err
	}
	if err := ev.run(r.Context()); err != nil {
		return nil, nil, err
	}
	return json.RawMessage(ev.matrix()), ev.warnings, nil
}

func (a *API) instantQuery(r *http.Request) (any, []string, error) {
	arrival := time.Now()
	t, err := formTime(r, "time", a.deps.Now().UnixMilli())
	if err != nil {
		return nil, nil, err
	}
	timeout, err := formTimeout(r)
	if err != nil {
		return nil, nil, err
	}
	p, err := compile(r.Form.Get("query"), 0)
	if err != nil {
		return nil, nil, err
	}
	ev, err := a.prepare(p, grid{start: t, n: 1}, budget{start: arrival, slo: timeout}, true)
	if err != nil {
		return nil, nil, err
	}
	if err := ev.run(r.Context()); err != nil {
		return nil, nil, err
	}
	return json.RawMessage(ev.vector()), ev.warnings, nil
}

func formRequiredTime(r *http.Request, name string) (int64, error) {
	s := strings.TrimSpace(r.Form.Get(name))
	if s == "" {
		return 0, badData("invalid parameter %q: missing; Unix seconds or RFC 3339", name)
	}
	return parseTime(name, s)
}

// prepare settles the windows a query reads.
func (a *API) prepare(p *plan, g grid, b budget, instant bool) (*evaluation, error) {
	ev := &evaluation{a: a, p: p, grid: g, budget: b, instant: instant, groups: map[string]*groupOut{}}
	if p.constant != nil {
		return ev, nil
	}
	ev.rng = p.rng
	if ev.rng == 0 {
		// A bare selector is last_over_time(sel[step]).
		ev.rng = g.step
		if instant {
			ev.rng = lookback
		}
	}
	if p.fn == fnLast {
		// The last point of a window needs raw points: rollups keep no
		// last value. Any window is exact then.
		oldest := a.deps.Pyramid.Raw().OldestAvailable(a.deps.Now().UnixMilli())
		if g.last() <= oldest {
			return nil, badData("last_over_time (and a bare selector, which is last_over_time(sel[step])) reads raw points, which are kept %s, and the range ends before that; "+
				"use max_over_time, min_over_time or avg_over_time, which read rollups", tiers.FormatDuration(a.deps.Pyramid.Raw().Retention))
		}
		return ev, nil
	}
	return ev, ev.chooseWindow()
}

// chooseWindow picks the width of the windows read for a range function.
// The evaluation times T and the range r must both be multiples of it, so
// that each [T-r, T) is a whole number of stored windows: the widest such
// width is gcd(r, step, start). When that is narrower than a second, or
// would read more than MaxWindows windows, or is served by a tier that no
// longer keeps the range, the evaluation times move back to a multiple of a
// coarser width that divides gcd(r, step) — a rollup tier's step, then
// gcd(r, step) itself — and a range query says so in a warning.
func (ev *evaluation) chooseWindow() error {
	g := ev.grid
	step := g.step
	if ev.instant {
		step = ev.rng
	}
	al := gcd(ev.rng, step)
	if al < tiers.Second {
		return badData("range %s with step %s: the narrowest window the gateway reads is 1s; use a range and a step that are whole seconds",
			tiers.FormatDuration(ev.rng), tiers.FormatDuration(step))
	}
	span := int64(g.n-1)*g.step + ev.rng
	fits := func(w int64) bool { return w >= tiers.Second && span/w <= int64(ev.a.cfg.MaxWindows) }
	now := ev.a.deps.Now().UnixMilli()
	covered := func(w int64) bool {
		return ev.a.tierFor(w).Covers(tiers.AlignDown(g.start, w)-ev.rng, now)
	}
	cands := []int64{gcd(al, mod(g.start, al))}
	for _, s := range ev.a.tierSteps() {
		if al%s == 0 {
			cands = append(cands, s)
		}
	}
	cands = append(cands, al)
	choice := int64(0)
	for _, w := range cands {
		if fits(w) && covered(w) {
			choice = w
			break
		}
	}
	if choice == 0 {
		for _, w := range cands {
			if fits(w) {
				choice = w
				break
			}
		}
	}
	if choice == 0 {
		return overLimit("max_windows", "range %s over %d steps of %s needs %d windows of %s per series, more than %d (--prometheus-max-windows); use a shorter range or a step that divides it",
			tiers.FormatDuration(ev.rng), g.n, tiers.FormatDuration(g.step), span/al, tiers.FormatDuration(al), ev.a.cfg.MaxWindows)
	}
	if moved := tiers.AlignDown(g.start, choice); moved != g.start {
		if !ev.instant {
			ev.warnings = append(ev.warnings, fmt.Sprintf("start %s is not a multiple of %s: evaluated at %s and every %s after it",
				fmtTime(g.start), tiers.FormatDuration(choice), fmtTime(moved), tiers.FormatDuration(g.step)))
		}
		ev.grid.start = moved
	}
	ev.window = choice
	return nil
}

// tierSteps are the widths the tiers store, finest first: a second (the
// narrowest window of raw points) and each rollup's step.
func (a *API) tierSteps() []int64 {
	steps := []int64{tiers.Second}
	for _, l := range a.deps.Pyramid.Rollups() {
		steps = append(steps, a.deps.Pyramid.Tier(l).Step)
	}
	return steps
}

// tierFor is the tier the router reads windows of width w from.
func (a *API) tierFor(w int64) tiers.Tier {
	return *a.deps.Pyramid.Tier(router.ServingTier(a.deps.Pyramid, w))
}

// run reads every series and folds the answer.
func (ev *evaluation) run(ctx context.Context) error {
	if ev.p.constant != nil {
		return nil
	}
	read := tiers.Span{From: ev.grid.start - ev.rng, To: ev.grid.last()}
	series, err := ev.a.resolve(ctx, &ev.p.sel, read.From, read.To-1, ev.a.cfg.MaxSeries)
	if err != nil {
		return err
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(seriesParallelism)
	for _, info := range series {
		eg.Go(func() error {
			rows, out, err := ev.evalSeries(ctx, info.ID, read)
			if err != nil {
				ae := engineError(err)
				if ae.typ == errBadData {
					// The engine's own refusal (--max-partitions): its
					// parameter names are the REST API's.
					ae = overLimit("max_partitions", "series %s: %s; here the window read is the function's range (the step for a bare selector, from raw points): a range that is a multiple of a coarser tier's step, or a shorter time range, reads fewer partitions", info.ID, ae.msg)
				}
				return ae
			}
			ev.add(info.ID, rows, out)
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	slices.SortFunc(ev.series, func(a, b seriesOut) int { return compareLabels(a.labels, b.labels) })
	return nil
}

// evalSeries answers one series at every evaluation time.
func (ev *evaluation) evalSeries(ctx context.Context, id string, read tiers.Span) ([]tiers.Row, readOutcome, error) {
	rows := make([]tiers.Row, ev.grid.n)
	if read.Empty() {
		return rows, readOutcome{}, nil
	}
	if ev.window == 0 {
		lt := lastTracker{grid: ev.grid, rng: ev.rng, out: rows}
		out, err := ev.a.read(ctx, id, read, 0, ev.budget, lt.add)
		lt.flush()
		return rows, out, err
	}
	var windows []tiers.Row
	out, err := ev.a.read(ctx, id, read, ev.window, ev.budget, func(r tiers.Row) { windows = append(windows, r) })
	fold(windows, ev.grid, ev.rng, rows)
	return rows, out, err
}

// lastTracker finds, for each evaluation time T, the last point in
// [T-rng, T) of an ascending stream of raw points.
type lastTracker struct {
	grid grid
	rng  int64
	out  []tiers.Row
	i    int
	have bool
	last tiers.Row
}

func (lt *lastTracker) add(p tiers.Row) {
	for lt.i < lt.grid.n && lt.grid.at(lt.i) <= p.T {
		lt.settle()
	}
	lt.last, lt.have = p, true
}

func (lt *lastTracker) settle() {
	if lt.have && lt.last.T >= lt.grid.at(lt.i)-lt.rng {
		lt.out[lt.i] = lt.last
	}
	lt.i++
}

func (lt *lastTracker) flush() {
	for lt.i < lt.grid.n {
		lt.settle()
	}
}

// fold aggregates, for each evaluation time T, the windows (ascending by
// start, each whole) that start in [T-rng, T).
func fold(windows []tiers.Row, g grid, rng int64, out []tiers.Row) {
	lo, hi := 0, 0
	for i := range g.n {
		t := g.at(i)
		for lo < len(windows) && windows[lo].T < t-rng {
			lo++
		}
		hi = max(hi, lo)
		for hi < len(windows) && windows[hi].T < t {
			hi++
		}
		var acc tiers.Row
		for _, w := range windows[lo:hi] {
			acc.Add(w)
		}
		acc.T = t
		out[i] = acc
	}
}

// value is a range function's value from the aggregates of a window.
func value(fn rangeFn, r tiers.Row) float64 {
	switch fn {
	case fnMin:
		return r.Min
	case fnMax:
		return r.Max
	case fnSum:
		return r.Sum
	case fnCount:
		return float64(r.Count)
	case fnAvg:
		return r.Sum / float64(r.Count)
	default: // fnLast: the last point's row
		return r.Value()
	}
}

// add records one series' answer: drops what a cut-short read did not
// cover, then keeps it or folds it into its group.
func (ev *evaluation) add(id string, rows []tiers.Row, out readOutcome) {
	if out.partial != "" {
		for i := range rows {
			if ev.grid.at(i) > out.covered {
				rows[i] = tiers.Row{}
			}
		}
	}
	ls := labelsOf(id)
	if !ev.p.keepsName() {
		ls = ls[1:]
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, w := range out.warnings {
		if !slices.Contains(ev.warnings, w) {
			ev.warnings = append(ev.warnings, w)
		}
	}
	if out.partial != "" {
		ev.warnings = append(ev.warnings, fmt.Sprintf("partial: %s — series %s answered up to %s only", out.partial, id, fmtTime(out.covered)))
	}
	if ev.p.agg == aggNone {
		ev.series = append(ev.series, seriesOut{labels: ls, rows: rows})
		return
	}
	gl := ev.p.group(ls)
	key := gl.key()
	grp := ev.groups[key]
	if grp == nil {
		grp = &groupOut{labels: gl, cells: make([]aggCell, ev.grid.n)}
		ev.groups[key] = grp
	}
	for i, r := range rows {
		if r.Count == 0 {
			continue
		}
		v := value(ev.p.fn, r)
		c := &grp.cells[i]
		// avg across series is the sum of what lies under the values over
		// their count: the points for avg_over_time, else one per series.
		wsum, weight := v, 1.0
		if ev.p.fn == fnAvg {
			wsum, weight = r.Sum, float64(r.Count)
		}
		if c.n == 0 {
			c.min, c.max = v, v
		} else {
			c.min, c.max = min(c.min, v), max(c.max, v)
		}
		c.n++
		c.sum += v
		c.wsum += wsum
		c.weight += weight
	}
}

func (c *aggCell) value(op aggOp) float64 {
	switch op {
	case aggMin:
		return c.min
	case aggMax:
		return c.max
	case aggCount:
		return float64(c.n)
	case aggAvg:
		return c.wsum / c.weight
	default:
		return c.sum
	}
}

// answer is the query's result as series of (time, value), sorted by
// labels; series without any value are left out.
func (ev *evaluation) answer(yield func(ls labelSet, t int64, v float64, first bool), end func()) {
	g := ev.grid
	if ev.p.constant != nil {
		for i := range g.n {
			yield(nil, g.at(i), *ev.p.constant, i == 0)
		}
		end()
		return
	}
	if ev.p.agg == aggNone {
		for _, s := range ev.series {
			first := true
			for i, r := range s.rows {
				if r.Count > 0 {
					yield(s.labels, g.at(i), value(ev.p.fn, r), first)
					first = false
				}
			}
			if !first {
				end()
			}
		}
		return
	}
	groups := make([]*groupOut, 0, len(ev.groups))
	for _, grp := range ev.groups {
		groups = append(groups, grp)
	}
	slices.SortFunc(groups, func(a, b *groupOut) int { return compareLabels(a.labels, b.labels) })
	for _, grp := range groups {
		first := true
		for i := range grp.cells {
			if c := &grp.cells[i]; c.n > 0 {
				yield(grp.labels, g.at(i), c.value(ev.p.agg), first)
				first = false
			}
		}
		if !first {
			end()
		}
	}
}

// matrix encodes the answer of a range query.
func (ev *evaluation) matrix() []byte {
	b := append(make([]byte, 0, 4096), `{"resultType":"matrix","result":[`...)
	n := 0
	ev.answer(func(ls labelSet, t int64, v float64, first bool) {
		if first {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, `{"metric":`...)
			b = appendLabels(b, ls)
			b = append(b, `,"values":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendTime(b, t)
		b = append(b, ',')
		b = appendValue(b, v)
		b = append(b, ']')
	}, func() { b = append(b, ']', '}') })
	return append(b, ']', '}')
}

// vector encodes the answer of an instant query: a scalar for a number.
func (ev *evaluation) vector() []byte {
	if ev.p.constant != nil {
		b := append(make([]byte, 0, 64), `{"resultType":"scalar","result":[`...)
		b = appendTime(b, ev.grid.start)
		b = append(b, ',')
		b = appendValue(b, *ev.p.constant)
		return append(b, ']', '}')
	}
	b := append(make([]byte, 0, 4096), `{"resultType":"vector","result":[`...)
	n := 0
	ev.answer(func(ls labelSet, t int64, v float64, first bool) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"metric":`...)
		b = appendLabels(b, ls)
		b = append(b, `,"value":[`...)
		b = appendTime(b, t)
		b = append(b, ',')
		b = appendValue(b, v)
		b = append(b, ']', '}')
	}, func() {})
	return append(b, ']', '}')
}

func compareLabels(a, b labelSet) int {
	for i := range min(len(a), len(b)) {
		if c := cmp.Compare(a[i].name, b[i].name); c != 0 {
			return c
		}
		if c := cmp.Compare(a[i].value, b[i].value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	if a < 0 {
		return -a
	}
	return a
}

// mod is t mod m in [0, m); gcd(m, 0) is m, so an aligned time keeps the
// full width.
func mod(t, m int64) int64 { return t - tiers.AlignDown(t, m) }

func fmtTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
