package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// Requests that break the contract are refused before any handler runs,
// each offending parameter named with what is expected of it.
func TestRequestValidation(t *testing.T) {
	s := newTestServer(t)
	s.WritePoints(fmt.Sprintf(`{"series":"v","t":%d,"v":1}`, s.Now()-tiers.Minute))
	type want struct{ param, message string }
	cases := []struct {
		name, method, path, ct, body string
		status                       int
		errors                       []want
	}{
		{"missing from", "GET", "/v1/series/v/points", "", "", 400, []want{{"from", "required"}}},
		{"empty from", "GET", "/v1/series/v/points?from=", "", "", 400, []want{{"from", "must not be empty"}}},
		{"several at once", "GET", "/v1/series/v/points?from=now-1h&limit=abc&order=up&agg=min,median&max_points=0", "", "", 400, []want{
			{"max_points", "must be an integer from 1 to 10000000"},
			{"agg", `"median": must be one of min, max, sum, count, avg`},
			{"order", `"up": must be one of asc, desc`},
			{"limit", "must be an integer from 1 to 100000"},
		}},
		{"repeated aggregate", "GET", "/v1/series/v/points?from=now-1h&agg=min,min", "", "", 400, []want{{"agg", "must not name a value twice"}}},
		{"bad id", "GET", "/v1/series/a%20b/plan?from=now-1h", "", "", 400, []want{{"id", `must match ^([A-Za-z0-9_:-]|\.[A-Za-z0-9_:-]|\.\.[A-Za-z0-9_.:-])[A-Za-z0-9_.:-]*$`}}},
		{"long id", "GET", "/v1/series/" + strings.Repeat("x", 201), "", "", 400, []want{{"id", "must be at most 200 characters"}}},
		{"series page", "GET", "/v1/series?limit=10001", "", "", 400, []want{{"limit", "must be an integer from 1 to 10000"}}},
		{"empty optional parameters", "GET", "/v1/series/v/points?from=now-1h&to=&agg=&order=&limit=&partial=&slo=&cursor=&resolution=&max_points=", "", "", 200, nil},
		{"batch members", "POST", "/v1/query", "application/json",
			`{"from":"now-1h","limit":5.5,"queries":[{"series":"v","agg":"median"},{"sieries":"v"}]}`, 400, []want{
				{"limit", "must be an integer or a string"},
				{"queries[0].agg", "must be a list of min, max, sum, count, avg, or a percentile p50, p90, p95, p99, p999 or pNN.N (above 0, below 100, at most three decimals) or a comma list of those"},
				{"queries[1].sieries", "unknown member"},
			}},
		{"batch query without series or match", "POST", "/v1/query", "application/json",
			`{"from":"now-1h","queries":[{"series":"v"},{"agg":"max"}]}`, 400, []want{
				{"queries[1].series", "required: a series id, or match with a selector"},
			}},
		{"batch without queries", "POST", "/v1/query", "application/json", `{"from":"now-1h","queries":[]}`, 400, []want{{"queries", "must hold at least 1"}}},
		{"batch not JSON", "POST", "/v1/query", "application/json", `{"from":`, 400, []want{{"body", "not valid JSON"}}},
		{"batch without body", "POST", "/v1/query", "application/json", ``, 400, []want{{"body", "required"}}},
		{"batch numbers as strings", "POST", "/v1/query", "application/json", `{"from":"now-1h","limit":"5","max_points":"10","queries":[{"series":"v"}]}`, 200, nil},
		{"batch times as numbers", "POST", "/v1/query", "application/json", fmt.Sprintf(`{"from":%d,"to":%d,"queries":[{"series":"v"}]}`, s.Now()-tiers.Hour, s.Now()), 200, nil},
		{"batch of another type", "POST", "/v1/query", "text/plain", `{}`, 415, nil},
		{"batch with text after it", "POST", "/v1/query", "application/json", `{"from":"now-1h","queries":[{"series":"v"}]}xyz`, 400, []want{{"body", "unexpected data after the JSON object"}}},
		{"batch followed by another", "POST", "/v1/query", "application/json", `{"from":"now-1h","queries":[{"series":"v"}]} {}`, 400, []want{{"body", "unexpected data after the JSON object"}}},
		{"batch followed by a bracket", "POST", "/v1/query", "application/json", `{"from":"now-1h","queries":[{"series":"v"}]}]`, 400, []want{{"body", "unexpected data after the JSON object"}}},
		{"batch of a type that starts like JSON", "POST", "/v1/query", "application/jsonxyz", `{"from":"now-1h","queries":[{"series":"v"}]}`, 415, nil},
		{"batch of a JSON-based type", "POST", "/v1/query", "application/json-seq", `{"from":"now-1h","queries":[{"series":"v"}]}`, 415, nil},
		{"batch without a type", "POST", "/v1/query", "", `{"from":"now-1h","queries":[{"series":"v"}]}`, 415, nil},
		{"batch with a charset", "POST", "/v1/query", "application/json; charset=utf-8", `{"from":"now-1h","queries":[{"series":"v"}]}`, 200, nil},
		{"batch with the type in capitals", "POST", "/v1/query", "Application/JSON", `{"from":"now-1h","queries":[{"series":"v"}]}`, 200, nil},
		{"rollup run with a text body", "POST", "/v1/admin/rollups/run", "text/plain", `run`, 415, nil},
		{"rollup run with an empty text body", "POST", "/v1/admin/rollups/run", "text/plain", ``, 415, nil},
		{"rollup run with a JSON body", "POST", "/v1/admin/rollups/run", "application/json", `{"all":true}`, 415, nil},
		{"rollup run with an empty JSON body", "POST", "/v1/admin/rollups/run", "application/json", ``, 200, nil},
		{"rollup run without a body", "POST", "/v1/admin/rollups/run", "", ``, 200, nil},
		{"batch too large", "POST", "/v1/query", "application/json", `{"queries":[` + strings.Repeat(`{"series":"v"},`, 80000) + `{"series":"v"}]}`, 413, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := s.Do(c.method, c.path, c.ct, c.body)
			if status != c.status {
				t.Fatalf("%d %s, want %d", status, body, c.status)
			}
			if c.errors == nil {
				return
			}
			var p apitest.Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, e := range p.Errors {
				got = append(got, want{e.Param, e.Message})
			}
			for _, w := range c.errors {
				found := false
				for _, g := range got {
					found = found || g.param == w.param && strings.HasPrefix(g.message, w.message)
				}
				if !found {
					t.Errorf("no error %s: %s… in %+v", w.param, w.message, got)
				}
			}
			if p.Detail != p.Errors[0].Param+": "+p.Errors[0].Message {
				t.Errorf("detail %q does not state the first error", p.Detail)
			}
		})
	}
}

// Bodies that break the contract are explained in the API's words, never
// the validator's ("Value is not nullable").
func TestContractErrorsInTheAPIsWords(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct{ body, param, want string }{
		{`{"queries":null}`, "queries", "must not be null"},
		{`{"queries":[{"series":null}],"from":"now-1h"}`, "queries[0].series", "must not be null"},
		{`{"queries":[{"series":"a","agg":5}],"from":"now-1h"}`, "queries[0].agg", "must be"},
	} {
		status, _, body := s.Do("POST", "/v1/query", "application/json", c.body)
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); err != nil || status != 400 || len(p.Errors) == 0 {
			t.Fatalf("%s: %d %s", c.body, status, body)
		}
		e := p.Errors[0]
		if e.Param != c.param || !strings.HasPrefix(e.Message, c.want) || strings.Contains(e.Message, "Value is") {
			t.Errorf("%s: %s: %q, want it to start with %q", c.body, e.Param, e.Message, c.want)
		}
	}
}
