package promapi

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// The φ of quantile_over_time calls is found per selector and range,
// whatever the order of the matchers, through parentheses; a selector and
// range asked with two φ, or with one that is not a number, has none.
func TestQuantilesOf(t *testing.T) {
	q := factsOf(`sum by (job) (quantile_over_time((0.99), lat{job="a",le!="x"}[1h])) / quantile_over_time(0.5, lat{job="a",le!="x"}[2h])
		+ quantile_over_time(0.1, other[1h]) + quantile_over_time(0.2, other[1h]) + quantile_over_time(scalar(x), third[1h])
		+ quantile_over_time(0.9, fourth[1h]) - quantile_over_time(1-0.1, fourth[1h])`).quantiles
	ms := func(s ...*labels.Matcher) []*labels.Matcher { return s }
	lat := ms(labels.MustNewMatcher(labels.MatchNotEqual, "le", "x"), labels.MustNewMatcher(labels.MatchEqual, "__name__", "lat"), labels.MustNewMatcher(labels.MatchEqual, "job", "a"))
	other := ms(labels.MustNewMatcher(labels.MatchEqual, "__name__", "other"))
	third := ms(labels.MustNewMatcher(labels.MatchEqual, "__name__", "third"))
	fourth := ms(labels.MustNewMatcher(labels.MatchEqual, "__name__", "fourth"))
	if v := q[selectorKey(lat, 3600_000)]; v != 0.99 {
		t.Errorf("lat over 1h: %v, want 0.99", v)
	}
	if v := q[selectorKey(lat, 7200_000)]; v != 0.5 {
		t.Errorf("lat over 2h: %v, want 0.5", v)
	}
	for name, m := range map[string][]*labels.Matcher{"other, asked with two φ": other, "third, with a φ that is an expression": third, "fourth, with a number and an expression": fourth} {
		if v, ok := q[selectorKey(m, 3600_000)]; !ok || !math.IsNaN(v) {
			t.Errorf("%s: %v, %v; want NaN", name, v, ok)
		}
	}
	if len(q) != 5 || factsOf(`quantile_over_time(0.5, x[1h]`).quantiles != nil {
		t.Errorf("%d entries, or an expression that does not parse gave some", len(q))
	}
}

// A selector with an offset under a subquery is unaligned (its ranges end
// off the subquery's steps); with no offset, or outside a subquery, not.
func TestUnalignedSelectors(t *testing.T) {
	f := factsOf(`max_over_time(rate(a[1h] offset 30m)[1d:1h]) + max_over_time(rate(b[1h])[1d:1h]) + rate(c[1h] offset 30m)
		+ max_over_time((sum(rate(d[2h] offset 1h)))[1d:1h])`)
	key := func(name string, r time.Duration) string {
		return selectorKey([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", name)}, r.Milliseconds())
	}
	for name, want := range map[string]bool{"a": true, "b": false, "c": false} {
		if f.unaligned[key(name, time.Hour)] != want {
			t.Errorf("%s: unaligned %v, want %v", name, !want, want)
		}
	}
	if !f.unaligned[key("d", 2*time.Hour)] || len(f.unaligned) != 2 {
		t.Errorf("unaligned = %v", f.unaligned)
	}
}

// quantile_over_time reads sketches only over one window of an hour or
// more per range, a tier's step dividing it, and for φ in (0, 1).
func TestQuantileWindows(t *testing.T) {
	p := tiers.DefaultPyramid()
	// The first evaluation 5 days before the last, offset like it.
	h := func(rng, step, end int64) *storage.SelectHints {
		return &storage.SelectHints{Func: "quantile_over_time", Range: rng, Step: step, Start: end - 5*tiers.Day - rng + 1, End: end}
	}
	for _, c := range []struct {
		hints *storage.SelectHints
		phi   float64
		width int64
	}{
		{h(tiers.Hour, tiers.Hour, 100*tiers.Hour), 0.9, tiers.Hour},
		{h(tiers.Day, tiers.Day, 10*tiers.Day), 0.99, tiers.Day},
		{h(2*tiers.Hour, tiers.Hour, 100*tiers.Hour), 0.9, 0},         // two windows a range
		{h(30*tiers.Minute, 30*tiers.Minute, 100*tiers.Hour), 0.9, 0}, // under an hour
		{h(tiers.Hour, tiers.Hour, 100*tiers.Hour+1), 0.9, 0},         // not tiled
		{h(tiers.Hour, tiers.Hour, 100*tiers.Hour), 1, 0},
		{h(tiers.Hour, tiers.Hour, 100*tiers.Hour), math.NaN(), 0},
	} {
		if w := windowsFor(p, c.hints, c.phi, false); w.width != 0 {
			t.Errorf("%+v φ %v: read from sketches within the exact horizon", *c.hints, c.phi)
		}
		w := windowsFor(p, c.hints, c.phi, true)
		if w.width != c.width || (w.width > 0) != w.sketch {
			t.Errorf("%+v φ %v: width %d sketch %v, want width %d", *c.hints, c.phi, w.width, w.sketch, c.width)
		}
		if w.width > 0 {
			var row tiers.Row
			row.AddExtras(tiers.PointRow(5, 42))
			row.AddExtras(tiers.PointRow(6, 42))
			if v := w.value(row); !(math.Abs(v-42) <= 0.42) {
				t.Errorf("the φ-quantile of a window of 42s is %v", v)
			}
		}
	}
}

// A window of a counter gives its first and last samples alone when
// thinned and its points reach within 1.1 mean intervals of both edges;
// otherwise (a series starting or stopping inside it) as many samples as
// it had points. Thinned or not, the first and last samples are the same.
func TestCounterWindowsThin(t *testing.T) {
	const width = tiers.Hour
	window := func(first, last int64, count int64) query.Item {
		r := tiers.Row{T: 0, Min: 1, Max: 100, Sum: 500, Count: count}
		r.X = &tiers.Extras{HasCounter: true, Counter: tiers.Counter{FirstT: first, LastT: last, First: 1, Last: 100, Inc: 99}}
		return query.Item{T: 0, Row: r}
	}
	for _, c := range []struct {
		first, last, count int64
		thinned            bool
	}{
		{5_000, width - 25_000, 120, true},   // every 30 s from 5 s in
		{40_000, width - 25_000, 119, false}, // starts later than 1.1 intervals
		{5_000, width - 60_000, 118, false},  // stops early
		{5_000, width - 1, 2, false},         // two points: nothing to thin
		{100_000, width - 100_000, 2, true},  // two points far apart: regular
	} {
		var full, thin counterRun
		all, ok1 := full.add(nil, window(c.first, c.last, c.count), width, false)
		few, ok2 := thin.add(nil, window(c.first, c.last, c.count), width, true)
		if !ok1 || !ok2 || int64(len(all)) != c.count {
			t.Fatalf("%+v: %d samples unthinned, want %d", c, len(all), c.count)
		}
		if want := map[bool]int{true: 2, false: len(all)}[c.thinned]; len(few) != want {
			t.Errorf("%+v: %d samples thinned, want %d", c, len(few), want)
		}
		if few[0] != all[0] || few[len(few)-1] != all[len(all)-1] {
			t.Errorf("%+v: thinned ends %v..%v, unthinned %v..%v", c, few[0], few[len(few)-1], all[0], all[len(all)-1])
		}
	}
}
