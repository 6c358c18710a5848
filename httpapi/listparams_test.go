package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// The aggregates take the same values whichever way they are written:
// repeated, as a comma list or both in a query string, as a comma list or
// an array in a batch body. Every form gives the columns in the order
// written and the same windows as brute force over the points.
func TestAggForms(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	base := tiers.AlignDown(now-2*tiers.Hour, tiers.Hour)
	rng := rand.New(rand.NewPCG(7, 11))
	var pts []string
	type acc struct{ min, max, sum, n float64 }
	windows := map[int64]*acc{}
	for i := range 200 {
		ts := base + int64(i)*17_000 + rng.Int64N(1000)
		v := float64(rng.IntN(2000)-1000) / 8
		pts = append(pts, fmt.Sprintf(`{"series":"agg","t":%d,"v":%g}`, ts, v))
		w := tiers.AlignDown(ts, 10*tiers.Minute)
		a := windows[w]
		if a == nil {
			a = &acc{min: v, max: v}
			windows[w] = a
		}
		a.min, a.max, a.sum, a.n = min(a.min, v), max(a.max, v), a.sum+v, a.n+1
	}
	s.WritePoints(pts...)
	from, to := base, base+2*tiers.Hour
	var want [][]float64
	for w := from; w < to; w += 10 * tiers.Minute {
		if a := windows[w]; a != nil {
			want = append(want, []float64{float64(w), a.max, a.min, a.sum / a.n})
		}
	}
	type answer struct {
		Columns []string    `json:"columns"`
		Points  [][]float64 `json:"points"`
	}
	check := func(form string, got answer) {
		t.Helper()
		if !reflect.DeepEqual(got.Columns, []string{"t", "max", "min", "avg"}) || !reflect.DeepEqual(got.Points, want) {
			t.Errorf("%s: columns %v points %v, want %v", form, got.Columns, got.Points, want)
		}
	}
	common := fmt.Sprintf("/v1/series/agg/points?from=%d&to=%d&resolution=10m&", from, to)
	for _, form := range []string{"agg=max,min,avg", "agg=max&agg=min&agg=avg", "agg=max,min&agg=avg", "agg=max&agg=&agg=min,avg"} {
		var a answer
		if status := s.Get(common+form, &a); status != 200 {
			t.Fatalf("%s: %d", form, status)
		}
		check(form, a)
	}
	for _, agg := range []string{`"max,min,avg"`, `["max","min","avg"]`} {
		for _, shared := range []bool{true, false} {
			body := fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"10m","agg":%s,"queries":[{"series":"agg"}]}`, from, to, agg)
			if !shared {
				body = fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"10m","queries":[{"series":"agg","agg":%s}]}`, from, to, agg)
			}
			status, _, b := s.Do("POST", "/v1/query", "application/json", body)
			var res struct{ Results []answer }
			if err := json.Unmarshal(b, &res); status != 200 || err != nil || len(res.Results) != 1 {
				t.Fatalf("%s: %d %s", body, status, b)
			}
			check(body, res.Results[0])
		}
	}
}

// A parameter that takes one value and is given twice is refused, named,
// whatever the values; each item of the aggregates is checked however the
// list is written.
func TestRepeatedParameters(t *testing.T) {
	s := newTestServer(t)
	s.WritePoints(fmt.Sprintf(`{"series":"r","t":%d,"v":1}`, s.Now()-tiers.Minute))
	type want struct{ param, message string }
	cases := []struct {
		path   string
		errors []want
	}{
		{"/v1/series/r/points?from=now-1h&from=now-2h", []want{{"from", "is given 2 times; it takes one value"}}},
		{"/v1/series/r/points?from=now-1h&from=now-1h", []want{{"from", "is given 2 times; it takes one value"}}},
		{"/v1/series/r/plan?from=now-1h&limit=5&order=asc&limit=6&order=desc&order=asc", []want{
			{"order", "is given 3 times; it takes one value"}, {"limit", "is given 2 times; it takes one value"}}},
		{"/v1/series?limit=1&limit=2", []want{{"limit", "is given 2 times; it takes one value"}}},
		{"/v1/series/r/points?from=now-1h&agg=min&agg=min", []want{{"agg", "must not name a value twice"}}},
		{"/v1/series/r/points?from=now-1h&agg=min,max&agg=min", []want{{"agg", "must not name a value twice"}}},
		{"/v1/series/r/points?from=now-1h&agg=min&agg=median", []want{{"agg", `"median": must be one of`}}},
		{"/v1/series/r/points?from=now-1h&agg=min,,max", []want{{"agg", `"": must be one of`}}},
	}
	for _, c := range cases {
		status, ct, body := s.Do("GET", c.path, "", "")
		if status != 400 || ct != "application/problem+json" {
			t.Errorf("%s: %d %s %s", c.path, status, ct, body)
			continue
		}
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Errors) != len(c.errors) {
			t.Errorf("%s: errors %+v, want %+v", c.path, p.Errors, c.errors)
			continue
		}
		for _, w := range c.errors {
			found := false
			for _, e := range p.Errors {
				found = found || e.Param == w.param && strings.HasPrefix(e.Message, w.message)
			}
			if !found {
				t.Errorf("%s: no error %s: %s… in %+v", c.path, w.param, w.message, p.Errors)
			}
		}
	}
}
