package apitest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// Run runs every scenario of the suite as a subtest, each on a server over
// a fresh store from newStore: scenarios write fixed series and check,
// say, that a rejected batch created no series, so they never share one.
// The stores must keep time by the wall clock; the suite does not move
// the environment's clock.
func Run(t *testing.T, newStore func(t *testing.T) tiers.Store) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, s *Server)
	}{
		{"WriteThenReadRaw", writeThenReadRaw},
		{"BadInputIsAProblemNamingTheParameter", badInputIsAProblemNamingTheParameter},
		{"WriteValidation", writeValidation},
		{"PagingOverHTTP", pagingOverHTTP},
		{"AggregatedReadAndPlan", aggregatedReadAndPlan},
		{"BatchQuery", batchQuery},
		{"OperationalEndpoints", operationalEndpoints},
		{"GeneratedClient", generatedClient},
		{"ImportHistory", importHistory},
		{"LabelsAndSelectors", labelsAndSelectors},
		{"Percentiles", percentiles},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sc.run(t, NewServer(t, newStore(t)))
		})
	}
}

// A user writes points and reads them back raw, across bucket boundaries,
// in both orders, with relative, RFC 3339 and Unix-ms times.
func writeThenReadRaw(t *testing.T, s *Server) {
	now := s.Now()
	var pts []string
	var want []int64
	for i := range 300 {
		ts := now - 3*tiers.Hour + int64(i)*30*tiers.Second // crosses several 1h buckets
		pts = append(pts, fmt.Sprintf(`{"series":"sensor-1","t":%d,"v":%d.5}`, ts, i))
		want = append(want, ts)
	}
	s.WritePoints(pts...)

	var a Answer
	if st := s.Get("/v1/series/sensor-1/points?"+Query("from", "now-4h", "resolution", "raw"), &a); st != 200 {
		t.Fatalf("status %d", st)
	}
	if a.Tier != "raw" || a.ResolutionMs != 0 || len(a.Columns) != 2 || a.Columns[1] != "v" || a.Partial {
		t.Fatalf("answer header %+v", a)
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
	var d Answer
	s.Get("/v1/series/sensor-1/points?"+Query("from", from, "to", fmt.Sprint(want[20]), "resolution", "raw", "order", "desc"), &d)
	if len(d.Points) != 10 || int64(d.Points[0][0]) != want[19] || int64(d.Points[9][0]) != want[10] || d.Order != "desc" {
		t.Fatalf("desc answer %+v", d.Points)
	}
	if d.Stats["partitions"] < 1 || d.Stats["rows_read"] < 10 {
		t.Fatalf("stats %+v", d.Stats)
	}
}

// Every bad parameter is a 400 problem naming it; an unknown series is a
// 404.
func badInputIsAProblemNamingTheParameter(t *testing.T, s *Server) {
	s.WritePoints(fmt.Sprintf(`{"series":"s","t":%d,"v":1}`, s.Now()-tiers.Minute),
		fmt.Sprintf(`{"series":"s2","t":%d,"v":1}`, s.Now()-tiers.Minute))
	var list struct {
		NextCursor string `json:"next_cursor"`
	}
	if st := s.Get("/v1/series?limit=1", &list); st != 200 || list.NextCursor == "" {
		t.Fatalf("listing: %d, next_cursor %q", st, list.NextCursor)
	}
	listCursor := list.NextCursor
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
		{"/v1/series?cursor=garbage", "cursor"},
		{"/v1/series?cursor=s", "cursor"}, // an id is not a listing cursor
		{"/v1/series?cursor=" + url.QueryEscape(listCursor[:6]+"\r\n"+listCursor[6:]), "cursor"},
	}
	for _, c := range cases {
		status, ct, body := s.Do("GET", c.path, "", "")
		var p Problem
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

// A write is all or nothing: one bad point refuses the batch, naming every
// bad field; bodies too large are 413, of another type 415; NDJSON is
// accepted.
func writeValidation(t *testing.T, s *Server) {
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
		var p Problem
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

// Pages of a limit, followed by their cursors, compose into the whole
// answer; a cursor replayed on another request is refused.
func pagingOverHTTP(t *testing.T, s *Server) {
	now := s.Now()
	var pts []string
	for i := range 250 {
		pts = append(pts, fmt.Sprintf(`{"series":"p","t":%d,"v":%d}`, now-tiers.Hour+int64(i)*1000, i))
	}
	s.WritePoints(pts...)
	base := "/v1/series/p/points?" + Query("from", "now-2h", "resolution", "raw", "limit", "40", "order", "desc")
	var got []float64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		var a Answer
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
		t.Fatalf("paged %d values: %v...", len(got), got[:min(len(got), 5)])
	}
	// A cursor replayed on another request is refused.
	var a Answer
	s.Get(base, &a)
	status, _, body := s.Do("GET", "/v1/series/p/points?"+Query("from", "now-3h", "resolution", "raw", "limit", "40", "order", "desc", "cursor", a.NextCursor), "", "")
	if status != 400 || !strings.Contains(string(body), "cursor") {
		t.Fatalf("mismatched cursor: %d %s", status, body)
	}
	// Only the cursor exactly as issued is accepted: the same token with
	// line breaks inside decodes to the same bytes but is not a cursor.
	crlf := a.NextCursor[:20] + "\r\n\n\r" + a.NextCursor[20:]
	status, _, body = s.Do("GET", base+"&cursor="+url.QueryEscape(crlf), "", "")
	if status != 400 || !strings.Contains(string(body), `"cursor"`) {
		t.Fatalf("cursor with line breaks: %d %s", status, body)
	}
}

// After a rollup run, an aggregated read comes from the hour tier and its
// windows are exact; the plan of a month names the hour tier.
func aggregatedReadAndPlan(t *testing.T, s *Server) {
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
	var a Answer
	s.Get("/v1/series/agg/points?"+Query("from", fmt.Sprint(start), "to", fmt.Sprint(start+tiers.Day), "resolution", "1h", "agg", "sum,count,avg,min,max"), &a)
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
	s.Get("/v1/series/agg/plan?"+Query("from", "now-30d"), &plan)
	if plan.Tier != "hour" || !strings.Contains(plan.Reason, "hour tier") || plan.Partitions < 1 {
		t.Fatalf("plan %+v", plan)
	}
}

// A batch answers each query in order, an unknown series as that query's
// problem; a bad per-query parameter refuses the batch, naming it.
func batchQuery(t *testing.T, s *Server) {
	now := s.Now()
	s.WritePoints(fmt.Sprintf(`{"series":"b1","t":%d,"v":1}`, now-tiers.Minute), fmt.Sprintf(`{"series":"b2","t":%d,"v":5}`, now-2*tiers.Minute))
	status, _, body := s.Do("POST", "/v1/query", "application/json",
		`{"from":"now-1h","resolution":"raw","queries":[{"series":"b1"},{"series":"nope"},{"series":"b2","order":"desc"}]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var out struct {
		Results []struct {
			Answer
			Error *Problem `json:"error"`
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

// Health, readiness and metrics answer; metrics count requests by route;
// unknown routes and methods are problems.
func operationalEndpoints(t *testing.T, s *Server) {
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
