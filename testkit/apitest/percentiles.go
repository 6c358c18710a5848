package apitest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/quantile"
	"github.com/tsgate/tsgate/tiers"
)

// A user asks for percentiles of latencies: per series from the hour and
// day tiers and from raw points, in a batch, by selector grouped across
// series, each column named as written and within 1 % of the exact
// percentile; a percentile the API does not take is a 400 naming agg.
func percentiles(t *testing.T, s *Server) {
	now := s.Now()
	t0 := tiers.AlignDown(now-2*tiers.Day, tiers.Day)
	end := tiers.AlignDown(now-2*tiers.Hour, tiers.Hour)
	r := rand.New(rand.NewPCG(61, 62))
	values := map[string]map[int64]float64{"lat.a": {}, "lat.b": {}}
	var pts []string
	for ts := t0; ts < end; ts += 2 * tiers.Minute {
		for _, id := range []string{"lat.a", "lat.b"} {
			// Heavy-tailed latencies in milliseconds, 3 decimals.
			v := math.Round(math.Exp(r.NormFloat64()*1.2+3)*1000) / 1000
			if id == "lat.b" {
				v *= 4
			}
			values[id][ts] = v
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%g}`, id, ts, v))
		}
	}
	body := `{"points":[` + strings.Join(pts, ",") + `],"series_labels":{"lat.a":{"__name__":"lat","host":"a"},"lat.b":{"__name__":"lat","host":"b"}}}`
	if st, _, b := s.Do("POST", "/v1/points", "application/json", body); st != 200 {
		t.Fatalf("write: %d %s", st, b)
	}
	if st, _, b := s.Do("POST", "/v1/admin/rollups/run", "", ""); st != 200 {
		t.Fatalf("rollups: %d %s", st, b)
	}

	// exact is the percentile of the window [from, from+step) of the
	// series, by the rank the API documents.
	exact := func(ids []string, from, step int64, q float64) float64 {
		var vs []float64
		for _, id := range ids {
			for ts, v := range values[id] {
				if ts >= from && ts < from+step {
					vs = append(vs, v)
				}
			}
		}
		slices.Sort(vs)
		return vs[quantile.Rank(q, int64(len(vs)))]
	}
	quantiles := map[string]float64{"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999, "p99.9": 0.999, "p12.5": 0.125, "p0.1": 0.001}
	check := func(what string, ids []string, step int64, columns []string, points [][]*float64, aggs []string) {
		t.Helper()
		if want := append([]string{"t"}, aggs...); !slices.Equal(columns, want) {
			t.Fatalf("%s: columns %v, want %v", what, columns, want)
		}
		if len(points) == 0 {
			t.Fatalf("%s: no windows", what)
		}
		for _, p := range points {
			for i, a := range aggs {
				q, ok := quantiles[a]
				if !ok {
					continue
				}
				want := exact(ids, int64(*p[0]), step, q)
				if p[i+1] == nil || math.Abs(*p[i+1]-want) > quantile.RelativeAccuracy*(1+1e-9)*math.Abs(want) {
					t.Fatalf("%s: window %d %s = %v, exact %g", what, int64(*p[0]), a, p[i+1], want)
				}
			}
		}
	}
	type page struct {
		SeriesCount int          `json:"series_count"`
		Tier        string       `json:"tier"`
		Columns     []string     `json:"columns"`
		Points      [][]*float64 `json:"points"`
	}

	// One series, from each tier: the hour and day tiers' sketches, the
	// minute tier's, and windows of raw points (90s is no tier's step).
	for _, c := range []struct {
		resolution string
		step       int64
		from, to   int64
		tier       string
		aggs       []string
	}{
		{"1h", tiers.Hour, t0, t0 + tiers.Day, "hour", []string{"p50", "p99.9", "count", "p0.1"}},
		{"1d", tiers.Day, t0, t0 + tiers.Day, "day", []string{"p90", "p12.5", "p999"}},
		{"1m", tiers.Minute, t0 + 3*tiers.Hour, t0 + 4*tiers.Hour, "minute", []string{"p95"}},
		{"90s", 90 * tiers.Second, t0 + 3*tiers.Hour, t0 + 4*tiers.Hour, "raw", []string{"p99", "max"}},
		{"6h", 6 * tiers.Hour, t0, end - end%(6*tiers.Hour), "hour", []string{"p50", "p99"}},
	} {
		var a page
		q := Query("from", fmt.Sprint(c.from), "to", fmt.Sprint(c.to), "resolution", c.resolution, "agg", strings.Join(c.aggs, ","))
		st, _, b := s.Do("GET", "/v1/series/lat.a/points?"+q, "", "")
		if st != 200 || json.Unmarshal(b, &a) != nil || a.Tier != c.tier {
			t.Fatalf("resolution %s: %d %.300s, tier %q, want %s", c.resolution, st, b, a.Tier, c.tier)
		}
		check("lat.a at "+c.resolution, []string{"lat.a"}, c.step, a.Columns, a.Points, c.aggs)
	}

	// A batch: the shared agg and a query's own.
	st, _, b := s.Do("POST", "/v1/query", "application/json", fmt.Sprintf(
		`{"from":%d,"to":%d,"resolution":"1h","agg":"p90","queries":[{"series":"lat.a"},{"series":"lat.b","agg":["p999","max"]}]}`, t0, t0+6*tiers.Hour))
	var batch struct {
		Results []page `json:"results"`
	}
	if st != 200 || json.Unmarshal(b, &batch) != nil || len(batch.Results) != 2 {
		t.Fatalf("batch: %d %s", st, b)
	}
	check("batch lat.a", []string{"lat.a"}, tiers.Hour, batch.Results[0].Columns, batch.Results[0].Points, []string{"p90"})
	check("batch lat.b", []string{"lat.b"}, tiers.Hour, batch.Results[1].Columns, batch.Results[1].Points, []string{"p999", "max"})

	// By selector, grouped: the percentile of both series' points.
	q := url.Values{"match": {`lat`}, "group_by": {"__name__"}, "from": {fmt.Sprint(t0)}, "to": {fmt.Sprint(t0 + tiers.Day)}, "resolution": {"1h"}, "agg": {"p50,p99"}}
	var grouped struct {
		Results []page `json:"results"`
	}
	if st := s.Get("/v1/points?"+q.Encode(), &grouped); st != 200 || len(grouped.Results) != 1 || grouped.Results[0].SeriesCount != 2 {
		t.Fatalf("grouped: %d %+v", st, grouped)
	}
	check("grouped", []string{"lat.a", "lat.b"}, tiers.Hour, grouped.Results[0].Columns, grouped.Results[0].Points, []string{"p50", "p99"})
	// Not grouped: one answer per series.
	q.Del("group_by")
	var each struct {
		Results []page `json:"results"`
	}
	if st := s.Get("/v1/points?"+q.Encode(), &each); st != 200 || len(each.Results) != 2 {
		t.Fatalf("by selector: %d %+v", st, each)
	}
	check("by selector lat.a", []string{"lat.a"}, tiers.Hour, each.Results[0].Columns, each.Results[0].Points, []string{"p50", "p99"})
	check("by selector lat.b", []string{"lat.b"}, tiers.Hour, each.Results[1].Columns, each.Results[1].Points, []string{"p50", "p99"})

	// Percentiles the API does not take.
	for _, agg := range []string{"p0", "p100", "p05", "p99.9999", "p-1", "p", "p1e1", "p99.9,p999", "p50,p50", "median"} {
		st, ct, b := s.Do("GET", "/v1/series/lat.a/points?"+Query("from", "now-1h", "agg", agg), "", "")
		var p Problem
		if err := json.Unmarshal(b, &p); err != nil || st != 400 || ct != "application/problem+json" || len(p.Errors) == 0 || p.Errors[0].Param != "agg" {
			t.Errorf("agg=%s: %d %s %s, want a 400 naming agg", agg, st, ct, b)
		}
	}
	st, _, b = s.Do("POST", "/v1/query", "application/json", `{"from":"now-1h","queries":[{"series":"lat.a","agg":"p100"}]}`)
	if st != 400 || !strings.Contains(string(b), `"queries[0].agg"`) {
		t.Errorf("batch agg p100: %d %s, want a 400 naming queries[0].agg", st, b)
	}
}
