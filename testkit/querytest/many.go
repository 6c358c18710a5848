package querytest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// labelledSeries is one series of the many-series suite: its id, labels
// and points.
type labelledSeries struct {
	id     string
	labels tiers.Labels
	truth  Truth
}

// loadLabelled writes n series with random labels (some with none) and
// random integer points over the last two days, labels given with the
// first batch of each series, and rolls everything up.
func (e *Env) loadLabelled(t *testing.T, prefix string, n int, r *rand.Rand) []labelledSeries {
	t.Helper()
	ctx := context.Background()
	now := e.Clock.Now().UnixMilli()
	start := now - 2*tiers.Day
	out := make([]labelledSeries, n)
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	for i := range out {
		s := &out[i]
		s.id = fmt.Sprintf("%s%02d", prefix, i)
		s.truth = Truth{}
		if i%7 != 6 {
			s.labels = tiers.Labels{"__name__": pick("cpu", "mem"), "host": pick("a", "b", "c"), "dc": pick("eu", "us")}
			if job := pick("api", "batch", ""); job != "" {
				s.labels["job"] = job
			}
		}
		b := ingest.Batch{Labels: map[string]tiers.Labels{}}
		if s.labels != nil {
			b.Labels[s.id] = s.labels
		}
		for ts := start + r.Int64N(5*tiers.Minute); ts < now-tiers.Hour; ts += 1 + r.Int64N(10*tiers.Minute) {
			v := float64(r.IntN(2001) - 1000)
			s.truth[ts] = v
			b.Points = append(b.Points, ingest.Point{Series: s.id, T: ts, V: v})
		}
		if _, err := e.Writer.WriteBatch(ctx, b); err != nil {
			t.Fatalf("write %s: %v", s.id, err)
		}
	}
	if _, err := e.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatalf("rollups: %v", err)
	}
	return out
}

// randomSelector is a selector over the suite's labels that has a
// matcher not matching the empty string.
func randomSelector(r *rand.Rand, prefix string) string {
	restrictive := []string{
		`__name__="cpu"`, `__name__=~"c.*"`, `host="a"`, `host=~"a|b"`, `dc="eu"`, `job=~".+"`, `job="api"`,
		`series=~"` + prefix + `0.*"`, `series="` + prefix + `03"`, `dc!=""`,
	}
	loose := []string{`host!="c"`, `job!="batch"`, `dc!~"u.*"`, `job=""`, `series!="` + prefix + `01"`}
	ms := []string{restrictive[r.IntN(len(restrictive))]}
	for range r.IntN(3) {
		if r.IntN(2) == 0 {
			ms = append(ms, restrictive[r.IntN(len(restrictive))])
		} else {
			ms = append(ms, loose[r.IntN(len(loose))])
		}
	}
	return "{" + strings.Join(ms, ",") + "}"
}

// selected is the brute force of a selector: the series whose id and
// labels satisfy every matcher, an absent label being empty.
func selected(all []labelledSeries, sel index.Selector) []labelledSeries {
	var out []labelledSeries
	for _, s := range all {
		ok := true
		for _, m := range sel.Matchers {
			v := s.labels[m.Name]
			if m.Name == tiers.SeriesLabel {
				v = s.id
			}
			ok = ok && m.Matches(v)
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// manyReadsByMatch: reads by selector, grouped or not, paged with small
// limits in both orders, are exactly the brute force over what was
// written, for random selectors, groupings and resolutions; selecting and
// listing through the label index is exact too.
func (e *Env) manyReadsByMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	ctx := context.Background()
	prefix := fmt.Sprintf("mm%06x.", r.Uint32()&0xffffff)
	all := e.loadLabelled(t, prefix, 21, r)
	ix := e.Gateway.Index
	many := e.Gateway.Many
	windows := []router.Resolution{
		{Kind: router.Window, Window: tiers.Minute}, {Kind: router.Window, Window: 5 * tiers.Minute},
		{Kind: router.Window, Window: 90 * tiers.Second}, {Kind: router.Window, Window: tiers.Hour},
		{Kind: router.Window, Window: 6 * tiers.Hour},
	}
	groupings := [][]string{nil, {}, {"dc"}, {"host", "job"}, {"series"}, {"__name__", "dc"}}
	for round := range 25 {
		text := randomSelector(r, prefix)
		sels, err := index.Parse("match", []string{text})
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		chosen := selected(all, sels[0])
		got, err := ix.Select(ctx, "match", sels, 0)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs, wantIDs []string
		for _, g := range got {
			gotIDs = append(gotIDs, g.ID)
		}
		for _, w := range chosen {
			wantIDs = append(wantIDs, w.id)
		}
		if !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("round %d: %s selects %v, want %v", round, text, gotIDs, wantIDs)
		}

		g := groupings[r.IntN(len(groupings))]
		grouped := g != nil
		res := windows[r.IntN(len(windows))]
		if !grouped && r.IntN(4) == 0 {
			res = router.Resolution{Kind: router.RawPoints}
		}
		now := e.Clock.Now().UnixMilli()
		from := now - 2*tiers.Day + r.Int64N(tiers.Day)
		span := tiers.Span{From: from, To: from + 1 + r.Int64N(tiers.Day)}
		req := query.ManyRequest{
			Request: query.Request{From: params.At(span.From), To: params.At(span.To), Resolution: res,
				Aggs: []query.Agg{query.Min, query.Max, query.Sum, query.Count}, Desc: r.IntN(2) == 0, Limit: 5 + r.IntN(300)},
			Match: sels, Grouped: grouped, GroupBy: g, Param: "match",
		}
		pages, results, plan := 0, map[string][]query.Item{}, router.Plan{}
		counts := map[string]int{}
		for {
			pages++
			if pages > 2000 {
				t.Fatalf("round %d: cursors do not end", round)
			}
			ans, err := many.Read(ctx, req)
			if err != nil {
				t.Fatalf("round %d, %s page %d: %v", round, text, pages, err)
			}
			for _, res := range ans.Results {
				key := res.Series
				if grouped {
					key = groupKey(res.Group, g)
					counts[key] = res.SeriesCount
				}
				results[key] = append(results[key], res.Items...)
				plan = res.Head.Plan
			}
			if ans.Trailer.NextCursor == "" {
				if ans.Trailer.Covered != span {
					t.Fatalf("round %d: the last page covers %+v, want %+v", round, ans.Trailer.Covered, span)
				}
				break
			}
			req.Cursor = ans.Trailer.NextCursor
		}
		if len(chosen) == 0 {
			continue
		}
		wantResults := map[string][]query.Item{}
		wantCounts := map[string]int{}
		for _, s := range chosen {
			items := want(s.truth, span, plan, req.Desc)
			if !grouped {
				wantResults[s.id] = items
				continue
			}
			gl := tiers.Labels{}
			for _, name := range g {
				if name == tiers.SeriesLabel {
					gl[name] = s.id
				} else {
					gl[name] = s.labels[name]
				}
			}
			key := groupKey(gl, g)
			wantCounts[key]++
			wantResults[key] = foldWindows(wantResults[key], items, req.Desc)
		}
		for key := range wantResults {
			if len(wantResults[key]) == 0 && len(results[key]) == 0 {
				delete(wantResults, key)
				delete(results, key)
			}
		}
		for _, key := range slices.Sorted(maps.Keys(wantResults)) {
			if d := diff(results[key], wantResults[key]); d != "" {
				t.Fatalf("round %d: %s grouped by %v, %s, limit %d, desc %v: result %q: %s", round, text, g, plan.TierName, req.Limit, req.Desc, key, d)
			}
			if grouped && counts[key] != wantCounts[key] {
				t.Fatalf("round %d: group %q folds %d series, want %d", round, key, counts[key], wantCounts[key])
			}
		}
		for key := range results {
			if _, ok := wantResults[key]; !ok && len(results[key]) > 0 {
				t.Fatalf("round %d: %s gave a result %q it should not have", round, text, key)
			}
		}
	}
}

// foldWindows adds the windows of b into a, both in the answer's order.
func foldWindows(a, b []query.Item, desc bool) []query.Item {
	m := map[int64]tiers.Row{}
	for _, it := range a {
		m[it.T] = it.Row
	}
	for _, it := range b {
		acc := m[it.T]
		acc.Add(it.Row)
		m[it.T] = acc
	}
	ts := slices.Sorted(maps.Keys(m))
	if desc {
		slices.Reverse(ts)
	}
	out := make([]query.Item, len(ts))
	for i, t := range ts {
		out[i] = query.Item{T: t, Row: m[t]}
	}
	return out
}

// groupKey names a group by its values of the grouping labels.
func groupKey(l tiers.Labels, by []string) string {
	var b strings.Builder
	for _, name := range by {
		b.WriteString(name + "=" + strconv.Quote(l[name]) + ",")
	}
	return b.String()
}
