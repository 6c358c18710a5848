package promapi

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tsgate/tsgate/tiers"
)

// The φ of quantile_over_time calls is found per selector and range,
// whatever the order of the matchers, through parentheses; a selector and
// range asked with two φ has none, and φ that is not a number is not
// found.
func TestQuantilesOf(t *testing.T) {
	q := quantilesOf(`sum by (job) (quantile_over_time((0.99), lat{job="a",le!="x"}[1h])) / quantile_over_time(0.5, lat{job="a",le!="x"}[2h])
		+ quantile_over_time(0.1, other[1h]) + quantile_over_time(0.2, other[1h]) + quantile_over_time(scalar(x), third[1h])`)
	ms := func(s ...*labels.Matcher) []*labels.Matcher { return s }
	lat := ms(labels.MustNewMatcher(labels.MatchNotEqual, "le", "x"), labels.MustNewMatcher(labels.MatchEqual, "__name__", "lat"), labels.MustNewMatcher(labels.MatchEqual, "job", "a"))
	other := ms(labels.MustNewMatcher(labels.MatchEqual, "__name__", "other"))
	third := ms(labels.MustNewMatcher(labels.MatchEqual, "__name__", "third"))
	if v := q[quantileKey(lat, 3600_000)]; v != 0.99 {
		t.Errorf("lat over 1h: %v, want 0.99", v)
	}
	if v := q[quantileKey(lat, 7200_000)]; v != 0.5 {
		t.Errorf("lat over 2h: %v, want 0.5", v)
	}
	if v, ok := q[quantileKey(other, 3600_000)]; !ok || !math.IsNaN(v) {
		t.Errorf("other, asked with two φ: %v, %v; want NaN", v, ok)
	}
	if _, ok := q[quantileKey(third, 3600_000)]; ok {
		t.Error("a φ that is an expression was found")
	}
	if len(q) != 3 || quantilesOf(`quantile_over_time(0.5, x[1h]`) != nil {
		t.Errorf("%d entries, or an expression that does not parse gave some", len(q))
	}
}

// quantile_over_time reads sketches only over one window of an hour or
// more per range, a tier's step dividing it, and for φ in (0, 1).
func TestQuantileWindows(t *testing.T) {
	p := tiers.DefaultPyramid()
	h := func(rng, step, end int64) *storage.SelectHints {
		return &storage.SelectHints{Func: "quantile_over_time", Range: rng, Step: step, End: end}
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
