package querytest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/quantile"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// pctAggs are the percentiles the property asks for, from p0.1 to
// p99.999, in each form the API takes.
var pctAggs = func() []query.Agg {
	var out []query.Agg
	for _, p := range []struct {
		p   float64
		dec int
	}{{0.1, 1}, {1, 0}, {12.5, 1}, {25, 0}, {50, 0}, {75, 0}, {90, 0}, {95, 0}, {99, 0}, {99.9, 1}, {99.99, 2}, {99.999, 3}} {
		a, ok := query.Percentile(p.p, p.dec)
		if !ok {
			panic(fmt.Sprint("percentile ", p.p))
		}
		out = append(out, a)
	}
	return out
}()

// pctKind is one kind of data the property runs on.
type pctKind struct {
	name string
	// every is the mean distance between points; value draws a value.
	every int64
	value func(r *rand.Rand) float64
	// single: one point only. collapses: values span more magnitudes than
	// a sketch keeps bins for, so that the lowest ones are collapsed.
	single, collapses bool
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

var pctKinds = []pctKind{
	{name: "uniform", every: 2 * tiers.Minute, value: func(r *rand.Rand) float64 { return round3(r.Float64() * 1000) }},
	{name: "heavy-tailed", every: 2 * tiers.Minute, value: func(r *rand.Rand) float64 {
		return round3(1 / math.Pow(1-r.Float64(), 1/1.1)) // Pareto, α = 1.1
	}},
	{name: "lognormal", every: 2 * tiers.Minute, value: func(r *rand.Rand) float64 { return math.Exp(r.NormFloat64()*2 + 3) }},
	{name: "constant", every: 3 * tiers.Minute, value: func(*rand.Rand) float64 { return 42.5 }},
	{name: "negative", every: 2 * tiers.Minute, value: func(r *rand.Rand) float64 { return -math.Exp(r.NormFloat64()*1.5 + 1) }},
	{name: "mixed-sign", every: 2 * tiers.Minute, value: func(r *rand.Rand) float64 { return round3(r.NormFloat64() * 10) }},
	{name: "zeros", every: 5 * tiers.Minute, value: func(*rand.Rand) float64 { return 0 }},
	{name: "zeros-and-some", every: 3 * tiers.Minute, value: func(r *rand.Rand) float64 {
		if r.IntN(4) != 0 {
			return 0
		}
		return float64(r.IntN(201) - 100)
	}},
	{name: "single-point", single: true, value: func(*rand.Rand) float64 { return -7.25 }},
	// e^-18 .. e^18: 1,800 bins of 1 %, more than the 1,024 a side keeps.
	{name: "wide", every: 10 * tiers.Minute, collapses: true, value: func(r *rand.Rand) float64 { return math.Exp(r.Float64()*36 - 18) }},
}

// percentilesWithinAccuracy is the property of percentiles: for random
// data of every kind, every percentile column of every window, read from
// every tier at its own step and coarser (rows re-aggregated), from raw
// points, from history imported into the rollup tiers, and of a group of
// series, is within 1 % relative error of the exact percentile computed
// by brute force from the raw points (the value at rank ⌊q·(n−1)⌋ of the
// window's n values). Where a window's values span more magnitudes than
// a sketch keeps bins for, the lowest bins are collapsed: the quantiles
// quantile.Kept names keep the bound, and the test logs how many did not.
// Reads go through the results cache and are read again from it: the same
// answers.
func percentilesWithinAccuracy(t *testing.T, store tiers.Store, base *Env) {
	ctx := context.Background()
	e := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock, Configure: func(c *gateway.Config) {
		c.ResultsCacheBytes = 64 << 20
	}})
	r := rand.New(rand.NewPCG(71, 72))
	prefix := fmt.Sprintf("pq%06x", r.Uint32()&0xffffff)
	now := e.Clock.Now().UnixMilli()
	// Six days: windows of three days fit whole.
	span := tiers.Span{From: tiers.AlignDown(now-6*tiers.Day, tiers.Day), To: tiers.AlignDown(now-2*tiers.Hour, tiers.Hour)}

	// Every kind as a series of its own, labelled so that the kinds
	// whose sketches keep every bin can be read as one group.
	truths := map[string]Truth{}
	b := ingest.Batch{Labels: map[string]tiers.Labels{}}
	for _, k := range pctKinds {
		id := prefix + "." + k.name
		truth := Truth{}
		if k.single {
			ts := span.From + (span.To-span.From)/2 + 1234
			truth[ts] = k.value(r)
		} else {
			for ts := span.From + r.Int64N(k.every); ts < span.To; ts += 1 + r.Int64N(2*k.every) {
				truth[ts] = k.value(r)
			}
		}
		for ts, v := range truth {
			b.Points = append(b.Points, ingest.Point{Series: id, T: ts, V: v})
		}
		group := "kept"
		if k.collapses {
			group = "collapsed"
		}
		b.Labels[id] = tiers.Labels{"__name__": prefix, "kind": k.name, "bins": group}
		truths[id] = truth
	}
	if _, err := e.Writer.WriteBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	// History older than the finer tiers keep, imported into the rollup
	// tiers: its windows get sketches from the imported points.
	hist := prefix + ".imported"
	histTruth := Truth{}
	h0 := tiers.AlignDown(now-100*tiers.Day, tiers.Day)
	histSpan := tiers.Span{From: h0, To: h0 + 2*tiers.Day}
	var pts []ingest.Point
	for ts := histSpan.From + r.Int64N(tiers.Minute); ts < histSpan.To; ts += 1 + r.Int64N(6*tiers.Minute) {
		v := round3(math.Exp(r.NormFloat64()*1.5 + 2))
		histTruth[ts] = v
		pts = append(pts, ingest.Point{Series: hist, T: ts, V: v})
	}
	if _, err := e.Gateway.Importer.Import(ctx, pts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatalf("rollups: %v", err)
	}

	// Steps: each rollup tier's own and three times it, and steps that
	// are a multiple of no rollup tier's step, read from raw points.
	var steps []int64
	for _, tier := range e.Pyramid[1:] {
		steps = append(steps, tier.Step, 3*tier.Step)
	}
	steps = append(steps, 45*tiers.Second, 90*tiers.Second)
	aggs := append([]query.Agg{query.Count}, pctAggs...)
	seen := map[string]bool{}
	checked := 0
	// Per data set and percentile: windows checked, those whose exact
	// value lay among collapsed bins (quantile.Kept false), and those of
	// them that missed the bound.
	type tally struct{ windows, outside, missed int }
	collapsed := map[string]map[query.Agg]*tally{}
	check := func(set, what string, truth *bruteValues, span tiers.Span, step int64, items []query.Item) {
		t.Helper()
		starts := truth.windows(span, step)
		if len(items) != len(starts) {
			t.Fatalf("%s: %d windows, want %d", what, len(items), len(starts))
		}
		for i, it := range items {
			vs := truth.values(tiers.Span{From: starts[i], To: starts[i] + step})
			if it.T != starts[i] || it.Row.Count != int64(len(vs)) {
				t.Fatalf("%s: window %d at %d of %d points, want %d of %d", what, i, it.T, it.Row.Count, starts[i], len(vs))
			}
			maxPos, maxNeg := max(vs[len(vs)-1], 0), max(-vs[0], 0)
			for _, a := range pctAggs {
				want := vs[quantile.Rank(a.Quantile(), int64(len(vs)))]
				got := a.Of(it.Row)
				checked++
				side := maxPos
				if want < 0 {
					side = maxNeg
				}
				kept, ok := quantile.Kept(want, side), withinAccuracy(got, want)
				if kept && !ok {
					t.Fatalf("%s: window %d at %d (%d points): %s = %g, exact %g", what, i, it.T, len(vs), a, got, want)
				}
				if collapsed[set] == nil {
					collapsed[set] = map[query.Agg]*tally{}
				}
				c := collapsed[set][a]
				if c == nil {
					c = &tally{}
					collapsed[set][a] = c
				}
				c.windows++
				if !kept {
					c.outside++
					if !ok {
						c.missed++
					}
				}
			}
		}
	}
	readTwice := func(what string, req query.Request) ([]query.Item, router.Plan) {
		t.Helper()
		first, plan := e.readAllPlan(t, req)
		again, _ := e.readAllPlan(t, req)
		if d := diffAggs(again, first, aggs); d != "" {
			t.Fatalf("%s read again (results cache): %s", what, d)
		}
		return first, plan
	}

	for _, k := range pctKinds {
		id := prefix + "." + k.name
		for _, step := range steps {
			req := e.Req(id, span, router.Resolution{Kind: router.Window, Window: step})
			req.Aggs = aggs
			what := fmt.Sprintf("%s step %s", k.name, tiers.FormatDuration(step))
			items, plan := readTwice(what, req)
			seen[plan.TierName] = true
			check(k.name, what+" ("+plan.TierName+")", newBrute(truths[id]), span, step, items)
		}
	}
	if len(seen) != len(e.Pyramid) {
		t.Fatalf("reads were served by the tiers %v; want every tier of %d", seen, len(e.Pyramid))
	}
	if _, _, served := e.Gateway.Results.Stats(); served == 0 {
		t.Fatal("no window was read from the results cache: the second reads did not test it")
	}

	// Imported history, from the tiers that keep it.
	histSteps := 0
	for _, tier := range e.Pyramid[1:] {
		for _, step := range []int64{tier.Step, 3 * tier.Step} {
			req := e.Req(hist, histSpan, router.Resolution{Kind: router.Window, Window: step})
			req.Aggs = aggs
			what := fmt.Sprintf("imported step %s", tiers.FormatDuration(step))
			items, plan := readTwice(what, req)
			if plan.Tier == tiers.LevelRaw || len(items) == 0 {
				continue // older than this tier keeps
			}
			histSteps++
			check("imported", what+" ("+plan.TierName+")", newBrute(histTruth), histSpan, step, items)
		}
	}
	if histSteps == 0 {
		t.Fatal("no rollup tier answered the imported history")
	}

	// A group of every kind whose sketches keep every bin: the
	// percentiles of all their points.
	sels, err := index.Parse("match", []string{fmt.Sprintf(`{__name__=%q,bins="kept"}`, prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var members []Truth
	for _, k := range pctKinds {
		if !k.collapses {
			members = append(members, truths[prefix+"."+k.name])
		}
	}
	group := newBrute(members...)
	for _, step := range []int64{tiers.Hour, 6 * tiers.Hour, 90 * tiers.Second} {
		req := query.ManyRequest{
			Request: query.Request{From: params.At(span.From), To: params.At(span.To), Resolution: router.Resolution{Kind: router.Window, Window: step},
				Aggs: aggs, Limit: e.Config.MaxLimit},
			Match: sels, Grouped: true, GroupBy: []string{}, Param: "match",
		}
		var items []query.Item
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatal("the group's cursors do not end")
			}
			ans, err := e.Gateway.Many.Read(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range ans.Results {
				if res.SeriesCount != len(members) {
					t.Fatalf("a group of %d series, want %d", res.SeriesCount, len(members))
				}
				items = append(items, res.Items...)
			}
			if ans.Trailer.NextCursor == "" {
				break
			}
			req.Cursor = ans.Trailer.NextCursor
		}
		check("group", fmt.Sprintf("group of %d series step %s", len(members), tiers.FormatDuration(step)), group, span, step, items)
	}

	// Which quantiles kept the bound where bins were collapsed: only the
	// data spanning more magnitudes than a sketch keeps bins for has any
	// outside the kept bins, and it must, or collapsing went untested.
	t.Logf("%d percentiles checked", checked)
	for _, set := range slices.Sorted(maps.Keys(collapsed)) {
		outside := 0
		var lines []string
		for _, a := range pctAggs {
			c := collapsed[set][a]
			if c == nil || c.outside == 0 {
				continue
			}
			outside += c.outside
			lines = append(lines, fmt.Sprintf("%s: %d of %d windows outside the kept bins, %d of them beyond 1 %%", a, c.outside, c.windows, c.missed))
		}
		wantCollapse := slices.ContainsFunc(pctKinds, func(k pctKind) bool { return k.name == set && k.collapses })
		switch {
		case outside > 0 && !wantCollapse:
			t.Errorf("%s: values among collapsed bins in data that should keep every bin: %s", set, strings.Join(lines, "; "))
		case outside == 0 && wantCollapse:
			t.Errorf("%s: no window collapsed its sketch's lowest bins", set)
		case outside > 0:
			t.Logf("%s: every percentile within the kept bins was within 1 %%; outside them: %s", set, strings.Join(lines, "; "))
		}
	}
}

// withinAccuracy reports whether got is within the sketches' relative
// accuracy of want (and a hair of float rounding); an exact zero is zero.
func withinAccuracy(got, want float64) bool {
	if math.Abs(want) < quantile.MinMagnitude {
		return got == 0
	}
	return math.Abs(got-want) <= quantile.RelativeAccuracy*(1+1e-9)*math.Abs(want)
}

// readAllPlan follows req's cursors and returns every window and the
// first page's plan.
func (e *Env) readAllPlan(t *testing.T, req query.Request) ([]query.Item, router.Plan) {
	t.Helper()
	var all []query.Item
	var plan router.Plan
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("cursors do not end")
		}
		p, err := e.Read(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if p.Trailer.Err != nil {
			t.Fatal(p.Trailer.Err)
		}
		if pages == 0 {
			plan = p.Plan
		}
		all = append(all, p.Items...)
		if p.Trailer.NextCursor == "" {
			return all, plan
		}
		req.Cursor = p.Trailer.NextCursor
	}
}

// diffAggs compares two answers by their windows' times and aggregates
// (bit for bit), not by the pointers their rows hold.
func diffAggs(got, want []query.Item, aggs []query.Agg) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d windows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].T != want[i].T {
			return fmt.Sprintf("window %d at %d, want %d", i, got[i].T, want[i].T)
		}
		for _, a := range aggs {
			if g, w := a.Of(got[i].Row), a.Of(want[i].Row); math.Float64bits(g) != math.Float64bits(w) {
				return fmt.Sprintf("window %d at %d: %s = %g, want %g", i, got[i].T, a, g, w)
			}
		}
	}
	return ""
}

// bruteValues are the points of one or more series, sorted by time, for
// brute force by window.
type bruteValues struct {
	ts []int64
	vs []float64
}

func newBrute(truths ...Truth) *bruteValues {
	type pt struct {
		t int64
		v float64
	}
	var pts []pt
	for _, tr := range truths {
		for t, v := range tr {
			pts = append(pts, pt{t, v})
		}
	}
	slices.SortFunc(pts, func(a, b pt) int { return cmp.Compare(a.t, b.t) })
	b := &bruteValues{}
	for _, p := range pts {
		b.ts = append(b.ts, p.t)
		b.vs = append(b.vs, p.v)
	}
	return b
}

// values are the values of span's points, ascending.
func (b *bruteValues) values(span tiers.Span) []float64 {
	lo, _ := slices.BinarySearch(b.ts, span.From)
	hi, _ := slices.BinarySearch(b.ts, span.To)
	return slices.Sorted(slices.Values(b.vs[lo:hi]))
}

// windows are the starts of the windows of width step that start in span
// (as Truth.Windows counts them) and hold points, ascending.
func (b *bruteValues) windows(span tiers.Span, step int64) []int64 {
	read := tiers.Span{From: tiers.AlignUp(span.From, step), To: tiers.AlignUp(span.To, step)}
	var out []int64
	for _, t := range b.ts {
		if !read.Contains(t) {
			continue
		}
		if w := tiers.AlignDown(t, step); len(out) == 0 || out[len(out)-1] != w {
			out = append(out, w)
		}
	}
	return out
}
