package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/httpapi/apitest"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// newMemStore opens an in-memory embedded store that decides expiry by
// now and closes with the test.
func newMemStore(t *testing.T, now func() time.Time) *embedded.Store {
	t.Helper()
	store, err := embedded.OpenInMemory(embedded.Options{Now: now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// testServer is the API over an in-memory embedded store, every answer
// checked against the contract (see apitest.Server).
type testServer struct {
	*apitest.Server
	t *testing.T
}

// newTestServer serves the API over a fresh in-memory embedded store that
// keeps time by the server's clock, so that a test may set it to a fixed
// time, in the past or not.
func newTestServer(t *testing.T) *testServer {
	t.Helper()
	var env *querytest.Env
	store := newMemStore(t, func() time.Time {
		if env == nil {
			return time.Now()
		}
		return env.Clock.Now()
	})
	s := apitest.NewServer(t, store)
	env = s.Env
	return &testServer{Server: s, t: t}
}

// q encodes a query string of key, value pairs.
func q(kv ...string) string { return apitest.Query(kv...) }

// A user writes points and reads them back raw, across bucket boundaries,
// in both orders, with relative, RFC 3339 and Unix-ms times.
func TestWriteThenReadRaw(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	var pts []string
	var want []int64
	for i := range 300 {
		ts := now - 3*tiers.Hour + int64(i)*30*tiers.Second // crosses several 1h buckets
		pts = append(pts, fmt.Sprintf(`{"series":"sensor-1","t":%d,"v":%d.5}`, ts, i))
		want = append(want, ts)
	}
	s.WritePoints(pts...)

	var a apitest.Answer
	if st := s.Get("/v1/series/sensor-1/points?"+q("from", "now-4h", "resolution", "raw"), &a); st != 200 {
		t.Fatalf("status %d", st)
	}
	if a.Tier != "raw" || a.ResolutionMs != 0 || len(a.Columns) != 2 || a.Columns[1] != "v" || a.Partial {
		t.Fatalf("apitest.Answer header %+v", a)
	}
	if len(a.Points) != len(want) {
		t.Fatalf("%d points, want %d", len(a.Points), len(want))
	}
	for i, p := range a.Points {
		if int64(p[0]) != want[i] || p[1] != float64(i)+0.5 {
			t.Fatalf("point %d = %v", i, p)
		}
	}
	// Descending, by RFC 3339 and Unix ms.
	from := time.UnixMilli(want[10]).UTC().Format(time.RFC3339Nano)
	var d apitest.Answer
	s.Get("/v1/series/sensor-1/points?"+q("from", from, "to", fmt.Sprint(want[20]), "resolution", "raw", "order", "desc"), &d)
	if len(d.Points) != 10 || int64(d.Points[0][0]) != want[19] || int64(d.Points[9][0]) != want[10] || d.Order != "desc" {
		t.Fatalf("desc apitest.Answer %+v", d.Points)
	}
	if d.Stats["partitions"] < 1 || d.Stats["rows_read"] < 10 {
		t.Fatalf("stats %+v", d.Stats)
	}
}

func TestBadInputIsAProblemNamingTheParameter(t *testing.T) {
	s := newTestServer(t)
	s.WritePoints(fmt.Sprintf(`{"series":"s","t":%d,"v":1}`, s.Now()-tiers.Minute))
	cases := []struct {
		path  string
		param string
	}{
		{"/v1/series/s/points", "from"},
		{"/v1/series/s/points?from=yesterday", "from"},
		{"/v1/series/s/points?from=now&to=now-1h", "from"},
		{"/v1/series/s/points?from=now-1h&resolution=3x", "resolution"},
		{"/v1/series/s/points?from=now-1h&resolution=500ms", "resolution"},
		{"/v1/series/s/points?from=now-1h&limit=0", "limit"},
		{"/v1/series/s/points?from=now-1h&limit=100001", "limit"},
		{"/v1/series/s/points?from=now-1h&agg=median", "agg"},
		{"/v1/series/s/points?from=now-1h&order=up", "order"},
		{"/v1/series/s/points?from=now-1h&partial=maybe", "partial"},
		{"/v1/series/s/points?from=now-1h&slo=fast", "slo"},
		{"/v1/series/s/points?from=now-1h&cursor=abc", "cursor"},
		{"/v1/series/s/points?from=now-1h&max_points=10&resolution=raw", "max_points"},
		{"/v1/series/bad%20id/points?from=now-1h", "id"},
		{"/v1/series?limit=-1", "limit"},
	}
	for _, c := range cases {
		status, ct, body := s.Do("GET", c.path, "", "")
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); err != nil || status != 400 || ct != "application/problem+json" {
			t.Errorf("GET %s: %d %s %s", c.path, status, ct, body)
			continue
		}
		if len(p.Errors) == 0 || p.Errors[0].Param != c.param || p.Status != 400 || p.Detail == "" {
			t.Errorf("GET %s: problem %+v, want it to name %s", c.path, p, c.param)
		}
	}
	if status, _, _ := s.Do("GET", "/v1/series/nope/points?from=now-1h", "", ""); status != 404 {
		t.Errorf("unknown series: %d", status)
	}
}

func TestWriteValidation(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	cases := []struct {
		name, ct, body string
		status         int
		params         []string
	}{
		{"empty batch", "application/json", `{"points":[]}`, 400, []string{"points"}},
		{"not json", "application/json", `{"points":[`, 400, []string{"body"}},
		{"wrong content type", "text/plain", `{}`, 415, nil},
		{"no content type", "", `{}`, 415, nil},
		{"one bad point of three", "application/json", fmt.Sprintf(`{"points":[{"series":"a","t":%d,"v":1},{"series":"a b","t":%d,"v":1},{"series":"a","t":%d,"v":2}]}`, now, now, now), 400, []string{"points[1].series"}},
		{"every field wrong", "application/json", `{"points":[{"series":"","t":"soon","v":"x"}]}`, 400, []string{"points[0].series", "points[0].t", "points[0].v"}},
		{"too old", "application/json", fmt.Sprintf(`{"points":[{"series":"a","t":%d,"v":1}]}`, now-8*tiers.Day), 400, []string{"points[0].t"}},
		{"too far ahead", "application/json", fmt.Sprintf(`{"points":[{"series":"a","t":%d,"v":1}]}`, now+tiers.Hour), 400, []string{"points[0].t"}},
		{"huge value", "application/json", fmt.Sprintf(`{"points":[{"series":"a","t":%d,"v":1e999}]}`, now), 400, []string{"points[0].v"}},
		{"unknown member", "application/json", fmt.Sprintf(`{"points":[{"series":"a","t":%d,"v":1,"tags":{}}]}`, now), 400, []string{"points[0]"}},
		{"ndjson with a bad line", "application/x-ndjson", fmt.Sprintf("{\"series\":\"a\",\"t\":%d,\"v\":1}\nnot json\n", now), 400, []string{"points[1]"}},
	}
	for _, c := range cases {
		status, _, body := s.Do("POST", "/v1/points", c.ct, c.body)
		if status != c.status {
			t.Errorf("%s: status %d %s, want %d", c.name, status, body, c.status)
			continue
		}
		var p apitest.Problem
		_ = json.Unmarshal(body, &p)
		for i, param := range c.params {
			if i >= len(p.Errors) || p.Errors[i].Param != param {
				t.Errorf("%s: errors %+v, want %v", c.name, p.Errors, c.params)
				break
			}
		}
	}
	// Nothing of a rejected batch was written.
	if status, _, _ := s.Do("GET", "/v1/series/a", "", ""); status != 404 {
		t.Fatalf("a rejected batch created its series (status %d)", status)
	}
	// An oversized body is 413.
	big := `{"points":[` + strings.Repeat(fmt.Sprintf(`{"series":"a","t":%d,"v":1},`, now), 500000) + `{"series":"a","t":1,"v":1}]}`
	if status, _, _ := s.Do("POST", "/v1/points", "application/json", big); status != 413 {
		t.Fatalf("oversized body: %d", status)
	}
	// NDJSON that is valid is accepted.
	status, _, body := s.Do("POST", "/v1/points", "application/x-ndjson", fmt.Sprintf("{\"series\":\"a\",\"t\":%d,\"v\":1}\n\n{\"series\":\"a\",\"t\":\"now\",\"v\":2}\n", now-1000))
	if status != 200 || !strings.Contains(string(body), `"accepted":2`) {
		t.Fatalf("ndjson: %d %s", status, body)
	}
}

func TestPagingOverHTTP(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	var pts []string
	for i := range 250 {
		pts = append(pts, fmt.Sprintf(`{"series":"p","t":%d,"v":%d}`, now-tiers.Hour+int64(i)*1000, i))
	}
	s.WritePoints(pts...)
	base := "/v1/series/p/points?" + q("from", "now-2h", "resolution", "raw", "limit", "40", "order", "desc")
	var got []float64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		var a apitest.Answer
		path := base
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if st := s.Get(path, &a); st != 200 {
			t.Fatalf("page %d: %d", pages, st)
		}
		for _, p := range a.Points {
			got = append(got, p[1])
		}
		if a.NextCursor == "" {
			break
		}
		cursor = a.NextCursor
	}
	if len(got) != 250 || got[0] != 249 || got[249] != 0 {
		t.Fatalf("paged %d values: %v...", len(got), got[:5])
	}
	// A cursor replayed on another request is refused.
	var a apitest.Answer
	s.Get(base, &a)
	status, _, body := s.Do("GET", "/v1/series/p/points?"+q("from", "now-3h", "resolution", "raw", "limit", "40", "order", "desc", "cursor", a.NextCursor), "", "")
	if status != 400 || !strings.Contains(string(body), "cursor") {
		t.Fatalf("mismatched cursor: %d %s", status, body)
	}
}

func TestAggregatedReadAndPlan(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	start := tiers.AlignDown(now-2*tiers.Day, tiers.Hour)
	var pts []string
	for ts := start; ts < now-tiers.Hour; ts += 10 * tiers.Minute {
		pts = append(pts, fmt.Sprintf(`{"series":"agg","t":%d,"v":2}`, ts))
	}
	s.WritePoints(pts...)
	if status, _, body := s.Do("POST", "/v1/admin/rollups/run", "", ""); status != 200 {
		t.Fatalf("rollups: %d %s", status, body)
	}
	var a apitest.Answer
	s.Get("/v1/series/agg/points?"+q("from", fmt.Sprint(start), "to", fmt.Sprint(start+tiers.Day), "resolution", "1h", "agg", "sum,count,avg,min,max"), &a)
	if a.Tier != "hour" || a.ResolutionMs != tiers.Hour || len(a.Points) != 24 {
		t.Fatalf("tier %s step %d, %d windows", a.Tier, a.ResolutionMs, len(a.Points))
	}
	for _, p := range a.Points {
		if p[1] != 12 || p[2] != 6 || p[3] != 2 || p[4] != 2 || p[5] != 2 {
			t.Fatalf("window %v, want sum 12 count 6 avg 2 min 2 max 2", p)
		}
	}
	var plan struct {
		Tier       string `json:"tier"`
		Reason     string `json:"reason"`
		Partitions int    `json:"partitions"`
		Buckets    []struct {
			Start, End int64
			Partitions int
		} `json:"buckets"`
	}
	s.Get("/v1/series/agg/plan?"+q("from", "now-30d"), &plan)
	if plan.Tier != "hour" || !strings.Contains(plan.Reason, "hour tier") || plan.Partitions < 1 {
		t.Fatalf("plan %+v", plan)
	}
}

func TestBatchQuery(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	s.WritePoints(fmt.Sprintf(`{"series":"b1","t":%d,"v":1}`, now-tiers.Minute), fmt.Sprintf(`{"series":"b2","t":%d,"v":5}`, now-2*tiers.Minute))
	status, _, body := s.Do("POST", "/v1/query", "application/json",
		`{"from":"now-1h","resolution":"raw","queries":[{"series":"b1"},{"series":"nope"},{"series":"b2","order":"desc"}]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var out struct {
		Results []struct {
			apitest.Answer
			Error *apitest.Problem `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 3 || out.Results[0].Series != "b1" || len(out.Results[0].Points) != 1 ||
		out.Results[1].Error == nil || out.Results[1].Error.Status != 404 || out.Results[2].Order != "desc" {
		t.Fatalf("results %s", body)
	}
	status, _, body = s.Do("POST", "/v1/query", "application/json", `{"from":"now-1h","queries":[{"series":"b1","agg":"median"}]}`)
	if status != 400 || !strings.Contains(string(body), "queries[0].agg") {
		t.Fatalf("bad per-query parameter: %d %s", status, body)
	}
}

func TestOperationalEndpoints(t *testing.T) {
	s := newTestServer(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, _, body := s.Do("GET", path, "", ""); status != 200 {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	_, _, body := s.Do("GET", "/metrics", "", "")
	if !strings.Contains(string(body), `tsgate_http_requests_total{method="GET",route="/healthz",status="200"} 1`) {
		t.Errorf("metrics do not count requests by route:\n%s", body)
	}
	if status, ct, _ := s.Do("GET", "/nope", "", ""); status != 404 || ct != "application/problem+json" {
		t.Errorf("unknown route: %d %s", status, ct)
	}
	if status, _, _ := s.Do("DELETE", "/v1/points", "", ""); status != 405 {
		t.Errorf("wrong method: %d", status)
	}
}

// The latency budget is real time, whatever the clock that decides which
// data is current says: a gateway whose clock is set back still has its
// whole budget.
func TestBudgetRunsOnTheWallClock(t *testing.T) {
	s := newTestServer(t)
	s.SetClock(time.Now().Add(-30 * 24 * time.Hour))
	s.WritePoints(fmt.Sprintf(`{"series":"old","t":%d,"v":1}`, s.Now()-tiers.Minute))
	var a apitest.Answer
	if st := s.Get("/v1/series/old/points?"+q("from", "now-1h", "resolution", "raw", "slo", "5s", "partial", "deny"), &a); st != 200 || a.Partial || len(a.Points) != 1 {
		t.Fatalf("read: %d %+v", st, a)
	}
	status, _, body := s.Do("POST", "/v1/query", "application/json", `{"from":"now-1h","resolution":"raw","slo":"5s","partial":"deny","queries":[{"series":"old"}]}`)
	if status != 200 || strings.Contains(string(body), `"error"`) {
		t.Fatalf("batch: %d %s", status, body)
	}
}
