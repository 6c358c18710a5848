package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/api/client"
	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// newGuardedServer serves the API over a fresh in-memory store with the
// tokens (nil: none) and the configuration adjusted by configure.
func newGuardedServer(t *testing.T, tokens *auth.Tokens, configure func(*gateway.Config)) *testServer {
	t.Helper()
	return &testServer{Server: apitest.NewMemServerWith(t, querytest.Options{Tokens: tokens, Configure: configure}), t: t}
}

// roleTokens are one token per role, and the set that admits them.
type roleTokens struct {
	byRole map[auth.Role]string
	set    *auth.Tokens
}

func newRoleTokens(t *testing.T) roleTokens {
	t.Helper()
	rt := roleTokens{byRole: map[auth.Role]string{}}
	file := "tokens:\n"
	for _, r := range []auth.Role{auth.Read, auth.Write, auth.Admin} {
		rt.byRole[r] = auth.NewToken()
		file += auth.FileLine("t-"+r.String(), r, rt.byRole[r]) + "\n"
	}
	set, err := auth.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	rt.set = auth.Static(set)
	return rt
}

// do sends a request with an optional bearer token.
func do(t *testing.T, method, url, contentType, body, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// specRoles are the roles the contract says each operation needs
// ("METHOD /path" → role; auth.Open for operations without security).
func specRoles(t *testing.T) map[string]auth.Role {
	t.Helper()
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]auth.Role{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			role := auth.Open
			if v, ok := op.Extensions["x-role"]; ok {
				if role, err = auth.ParseRole(fmt.Sprint(v)); err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
			}
			out[method+" "+path] = role
		}
	}
	return out
}

// Every route answers 401 without a token or with an unknown one, 403 to
// a token whose role is too low and 200 to one whose role suffices, the
// role being the one the contract names for the operation; the open
// routes answer everyone. The routes are walked from the router, so a new
// route is tested as soon as it exists.
func TestEveryEndpointAnswersByRole(t *testing.T) {
	rt := newRoleTokens(t)
	s := newGuardedServer(t, rt.set, nil)
	now := s.Now()
	admin := rt.byRole[auth.Admin]
	// A series to read and a rollup run to look at.
	if st, _, b := do(t, "POST", s.URL+"/v1/points", "application/json", fmt.Sprintf(`{"points":[{"series":"s1","t":%d,"v":1}]}`, now-1000), admin); st != 200 {
		t.Fatalf("seed: %d %s", st, b)
	}
	if st, _, b := do(t, "POST", s.URL+"/v1/admin/rollups/run", "", "", admin); st != 200 {
		t.Fatalf("seed rollup run: %d %s", st, b)
	}
	bodies := map[string]string{
		"POST /v1/points":                   fmt.Sprintf(`{"points":[{"series":"s1","t":%d,"v":2}]}`, now-500),
		"POST /v1/query":                    `{"from":"now-1h","queries":[{"series":"s1"}]}`,
		"PUT /v1/admin/series/{id}/blocked": `{"reason":"role test"}`,
		"PUT /v1/admin/series/{id}/layout":  fmt.Sprintf(`{"since":%d,"bucket_ms":3600000,"event_buckets":8}`, (now/86_400_000+3)*86_400_000),
		"POST /v1/import":                   fmt.Sprintf("series,t,v\ns1,%d,3\n", now-600),
		"PUT /v1/admin/series/{id}/labels":  `{"labels":{"role":"test"}}`,
		"POST /prometheus/api/v1/write":     remoteWriteBody(now - 700),
		"POST /prometheus/api/v1/read":      remoteReadBody(now-3600_000, now),
	}
	contentTypes := map[string]string{"POST /v1/import": "text/csv",
		"POST /prometheus/api/v1/write": "application/x-protobuf", "POST /prometheus/api/v1/read": "application/x-protobuf"}
	roles := specRoles(t)
	h := s.Env.Gateway.Handler()
	tested := 0
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, "/assets/") || method == http.MethodHead {
			return nil // the dashboard's files: open, outside the contract
		}
		specPath := strings.TrimSuffix(route, "/*")
		if strings.HasPrefix(route, "/prometheus/api/v1/write") {
			specPath = "/prometheus/api/v1/write" // a mount of its own: its route is /
		}
		if route == "/grafana/*" || route == "/grafana/" {
			specPath = "/grafana" // the contract states the path without its slash
		}
		need, ok := roles[method+" "+specPath]
		if !ok {
			t.Errorf("%s %s is not an operation of the contract", method, route)
			return nil
		}
		tested++
		id := "s1"
		if strings.Contains(specPath, "/blocked") {
			id = "s2" // blocking s1 would refuse the reads of it that follow
		}
		path := strings.NewReplacer("{id}", id, "{run}", "1", "{name}", "series").Replace(specPath)
		if strings.HasSuffix(path, "/points") && method == http.MethodGet || strings.HasSuffix(path, "/plan") {
			path += "?from=now-1h"
		}
		if path == "/v1/points?from=now-1h" || path == "/v1/plan?from=now-1h" || path == "/v1/labels/series/values" {
			path = strings.TrimSuffix(path, "?from=now-1h") + "?from=now-1h&match=" + url.QueryEscape(`{series="s1"}`)
		}
		// The Prometheus API's reads need their query.
		sec := now / 1000
		switch strings.TrimPrefix(path, "/prometheus/api/v1/") {
		case "query":
			path += "?query=tsgate"
		case "query_range":
			path += fmt.Sprintf("?query=tsgate&start=%d&end=%d&step=60", sec-3600, sec)
		case "series":
			path += "?match[]=tsgate"
		}
		key := method + " " + specPath
		body, ct := bodies[key], "application/json"
		if method == http.MethodPost && body == "" && strings.HasPrefix(path, "/grafana") {
			body = "{}"
		}
		if body == "" {
			ct = ""
		}
		if c, ok := contentTypes[key]; ok {
			ct = c
		}
		for _, tok := range []struct {
			name  string
			role  auth.Role
			token string
		}{{"none", auth.Open, ""}, {"unknown", auth.Open, auth.NewToken()}, {"read", auth.Read, rt.byRole[auth.Read]},
			{"write", auth.Write, rt.byRole[auth.Write]}, {"admin", auth.Admin, rt.byRole[auth.Admin]}} {
			status, hdr, b := do(t, method, s.URL+path, ct, body, tok.token)
			switch {
			case need == auth.Open || tok.role >= need:
				if status != 200 && !(status == 204 && (method == http.MethodDelete || specPath == "/prometheus/api/v1/write")) {
					t.Errorf("%s %s with the %s token (needs %s): %d %s, want 200", method, path, tok.name, need, status, b)
				}
			case tok.role == auth.Open:
				if status != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s %s with the %s token: %d %v, want 401 with WWW-Authenticate: Bearer", method, path, tok.name, status, hdr)
				}
			default:
				if status != 403 {
					t.Errorf("%s %s with the %s token (needs %s): %d %s, want 403", method, path, tok.name, need, status, b)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tested < 20 {
		t.Fatalf("only %d routes walked", tested)
	}
	// The refusals are counted, and authenticated requests by token name.
	_, _, metrics := do(t, "GET", s.URL+"/metrics", "", "", "")
	for _, want := range []string{`tsgate_requests_refused_total{reason="unauthorized"}`, `tsgate_requests_refused_total{reason="forbidden"}`, `tsgate_requests_by_token_total{token="t-read"}`} {
		if !strings.Contains(string(metrics), want) || strings.Contains(string(metrics), want+" 0\n") {
			t.Errorf("/metrics lacks a nonzero %s", want)
		}
	}
	for _, tok := range rt.byRole {
		if strings.Contains(string(metrics), tok) {
			t.Error("/metrics shows a token")
		}
	}
}

// A refused write writes nothing: a read token's write is 403 and the
// series never appears.
func TestRefusedWriteWritesNothing(t *testing.T) {
	rt := newRoleTokens(t)
	s := newGuardedServer(t, rt.set, nil)
	body := fmt.Sprintf(`{"points":[{"series":"refused","t":%d,"v":1}]}`, s.Now()-1000)
	for _, tok := range []string{"", rt.byRole[auth.Read], "Bearer"} {
		if st, _, b := do(t, "POST", s.URL+"/v1/points", "application/json", body, tok); st != 401 && st != 403 {
			t.Fatalf("write with %q: %d %s", tok, st, b)
		}
	}
	_, _, b := do(t, "GET", s.URL+"/v1/series/refused", "", "", rt.byRole[auth.Read])
	if !strings.Contains(string(b), "series-not-found") {
		t.Fatalf("a refused write was written: %s", b)
	}
}

// With --auth-metrics, /metrics needs a read token.
func TestAuthMetrics(t *testing.T) {
	rt := newRoleTokens(t)
	s := newGuardedServer(t, rt.set, func(c *gateway.Config) { c.Auth.Metrics = true })
	if st, _, _ := do(t, "GET", s.URL+"/metrics", "", "", ""); st != 401 {
		t.Errorf("/metrics without a token: %d", st)
	}
	if st, _, _ := do(t, "GET", s.URL+"/metrics", "", "", rt.byRole[auth.Read]); st != 200 {
		t.Errorf("/metrics with a read token: %d", st)
	}
	if st, _, _ := do(t, "GET", s.URL+"/healthz", "", "", ""); st != 200 {
		t.Errorf("/healthz without a token: %d", st)
	}
}

// The generated client sends a token through a request editor.
func TestGeneratedClientWithToken(t *testing.T) {
	rt := newRoleTokens(t)
	s := newGuardedServer(t, rt.set, nil)
	ctx := context.Background()
	withToken := func(tok string) client.ClientOption {
		return client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+tok)
			return nil
		})
	}
	anon, err := client.NewClientWithResponses(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := anon.ListSeriesWithResponse(ctx, nil); err != nil || r.StatusCode() != 401 || r.ApplicationProblemJSON401 == nil {
		t.Fatalf("without a token: %v %d %s", err, r.StatusCode(), r.Body)
	}
	c, err := client.NewClientWithResponses(s.URL, withToken(rt.byRole[auth.Write]))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.WritePointsWithResponse(ctx, client.WriteRequest{Points: []client.Point{{Series: "c", T: "now-1s", V: 1}}})
	if err != nil || w.JSON200 == nil || w.JSON200.Accepted != 1 {
		t.Fatalf("write with a write token: %v %d %s", err, w.StatusCode(), w.Body)
	}
	r, err := c.RunRollupsWithResponse(ctx, nil)
	if err != nil || r.StatusCode() != 403 || r.ApplicationProblemJSON403 == nil {
		t.Fatalf("rollups with a write token: %v %d %s", err, r.StatusCode(), r.Body)
	}
	// The editor may also be given per call.
	r, err = anon.RunRollupsWithResponse(ctx, nil, func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+rt.byRole[auth.Admin])
		return nil
	})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("rollups with an admin token: %v %d %s", err, r.StatusCode(), r.Body)
	}
}

// Under /grafana a refusal keeps the datasource's error shape.
// /grafana needs a read token; its 401 is problem+json, as on every
// route, with the message member the plugin shows.
func TestGrafanaNeedsReadToken(t *testing.T) {
	rt := newRoleTokens(t)
	s := newGuardedServer(t, rt.set, nil)
	for _, path := range []string{"/grafana", "/grafana/query", "/prometheus/api/v1/labels"} {
		st, h, b := do(t, "POST", s.URL+path, "application/json", "{}", "")
		var e struct {
			Type, Message string
			Status        int
		}
		if st != 401 || h.Get("WWW-Authenticate") == "" || h.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(b, &e) != nil || e.Message == "" || e.Status != 401 || e.Type != "/docs#problem/unauthorized" {
			t.Fatalf("%s without a token: %d %v %s", path, st, h, b)
		}
	}
	if st, _, b := do(t, "POST", s.URL+"/grafana/query", "application/json", "{}", rt.byRole[auth.Read]); st != 200 {
		t.Fatalf("read token: %d %s", st, b)
	}
}

// Only a real CORS preflight of /grafana, from an origin --cors-origins
// names, passes without a token; any other OPTIONS needs the role.
func TestOnlyCORSPreflightsPassWithoutToken(t *testing.T) {
	rt := newRoleTokens(t)
	preflight := func(s *testServer, path string, real bool) int {
		req, _ := http.NewRequest("OPTIONS", s.URL+path, nil)
		if real {
			req.Header.Set("Origin", "https://grafana.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	open := newGuardedServer(t, rt.set, func(c *gateway.Config) { c.HTTP.Limits.CORSOrigins = []string{"https://grafana.example"} })
	closed := newGuardedServer(t, rt.set, nil)
	for _, c := range []struct {
		s    *testServer
		path string
		real bool
		want int
	}{
		{open, "/grafana/query", true, 204},
		{open, "/grafana/query", false, 401},
		{open, "/prometheus/api/v1/query", true, 401},
		{closed, "/grafana/query", true, 401},
		{closed, "/grafana/query", false, 401},
	} {
		if got := preflight(c.s, c.path, c.real); got != c.want {
			t.Errorf("OPTIONS %s (preflight %v, cors origins %v): %d, want %d", c.path, c.real, c.s == open, got, c.want)
		}
	}
}

// POST /v1/query takes at most --max-queries queries; the Grafana targets'
// series are bounded by the same limit.
func TestMaxQueries(t *testing.T) {
	s := newGuardedServer(t, nil, func(c *gateway.Config) { c.HTTP.MaxQueries = 3 })
	batch := func(n int) string {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = fmt.Sprintf(`{"series":"q%d"}`, i)
		}
		return `{"from":"now-1h","queries":[` + strings.Join(qs, ",") + `]}`
	}
	if st, _, b := do(t, "POST", s.URL+"/v1/query", "application/json", batch(3), ""); st != 200 {
		t.Errorf("3 queries: %d %s", st, b)
	}
	st, _, b := do(t, "POST", s.URL+"/v1/query", "application/json", batch(4), "")
	if st != 400 || !strings.Contains(string(b), `"param":"queries"`) || !strings.Contains(string(b), "--max-queries") {
		t.Errorf("4 queries: %d %s", st, b)
	}
	if st, _, b := do(t, "POST", s.URL+"/grafana/query", "application/json", `{"targets":[{"refId":"A","target":"(a|b|c|d)"}]}`, ""); st != 400 || !strings.Contains(string(b), "more than 3") {
		t.Errorf("grafana: %d %s", st, b)
	}
	_, _, m := do(t, "GET", s.URL+"/metrics", "", "", "")
	if !strings.Contains(string(m), `tsgate_requests_refused_total{reason="too_many_queries"} 1`) {
		t.Errorf("too_many_queries not counted")
	}
}

// An answer holds at most --max-response-points points: each result's
// page is cut to its share and carries next_cursor, and following the
// cursors returns every point exactly once.
func TestMaxResponsePoints(t *testing.T) {
	s := newGuardedServer(t, nil, func(c *gateway.Config) { c.HTTP.Limits.MaxResponsePoints = 30 })
	now := s.Now()
	want := map[string][]int64{}
	var pts []string
	for _, id := range []string{"p0", "p1", "p2"} {
		for i := range 50 {
			ts := now - 100_000 + int64(i)*1000
			want[id] = append(want[id], ts)
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%d}`, id, ts, i))
		}
	}
	if st, _, b := do(t, "POST", s.URL+"/v1/points", "application/json", `{"points":[`+strings.Join(pts, ",")+`]}`, ""); st != 200 {
		t.Fatalf("write: %d %s", st, b)
	}
	got := map[string][]int64{}
	cursors := map[string]string{"p0": "", "p1": "", "p2": ""}
	for round := 0; len(cursors) > 0; round++ {
		if round > 10 {
			t.Fatal("cursors do not end")
		}
		var qs []string
		var ids []string
		for id, c := range cursors {
			q := fmt.Sprintf(`{"series":%q`, id)
			if c != "" {
				q += fmt.Sprintf(`,"cursor":%q`, c)
			}
			qs = append(qs, q+"}")
			ids = append(ids, id)
		}
		body := fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"raw","limit":1000,"queries":[%s]}`, now-200_000, now, strings.Join(qs, ","))
		st, _, b := do(t, "POST", s.URL+"/v1/query", "application/json", body, "")
		if st != 200 {
			t.Fatalf("query: %d %s", st, b)
		}
		var ans struct {
			Results []struct {
				Points     [][2]float64 `json:"points"`
				NextCursor string       `json:"next_cursor"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatal(err)
		}
		total := 0
		for i, r := range ans.Results {
			total += len(r.Points)
			for _, p := range r.Points {
				got[ids[i]] = append(got[ids[i]], int64(p[0]))
			}
			if r.NextCursor == "" {
				delete(cursors, ids[i])
			} else {
				cursors[ids[i]] = r.NextCursor
			}
		}
		if total > 30 {
			t.Fatalf("an answer of %d points, over the bound of 30", total)
		}
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("%s: got %v, want %v", id, got[id], w)
		}
	}
}

// --allowed-hosts answers only the listed Host names; probes pass.
func TestAllowedHosts(t *testing.T) {
	s := newGuardedServer(t, nil, func(c *gateway.Config) { c.HTTP.Limits.AllowedHosts = []string{"gw.example", "127.0.0.1"} })
	for host, want := range map[string]int{"gw.example": 200, "gw.example:8080": 200, "GW.EXAMPLE": 200, "127.0.0.1:1": 200, "rebound.example": 421, "gw.example.evil": 421} {
		req, _ := http.NewRequest("GET", s.URL+"/v1/series", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	req, _ := http.NewRequest("GET", s.URL+"/healthz", nil)
	req.Host = "10.1.2.3:8080"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/healthz by address: %d", resp.StatusCode)
	}
}

// Admin POSTs take no body a browser could send cross-origin unasked.
func TestAdminTakesNoFormBodies(t *testing.T) {
	s := newTestServer(t)
	for ct, want := range map[string]int{"": 200, "application/json": 200, "text/plain": 415, "application/x-www-form-urlencoded": 415, "multipart/form-data; boundary=x": 415} {
		if st, _, b := do(t, "POST", s.URL+"/v1/admin/rollups/run", ct, "", ""); st != want {
			t.Errorf("Content-Type %q: %d %s, want %d", ct, st, b, want)
		}
	}
	if st, _, _ := do(t, "POST", s.URL+"/v1/admin/rollups/run", "", "x=1", ""); st != 415 {
		t.Errorf("a body without a type: %d, want 415", st)
	}
}

// Writes create at most --max-new-series-per-batch series per batch (400
// naming points) and --max-new-series-per-minute per minute (429); a
// refused batch writes nothing, and writes to known series pass.
func TestNewSeriesBounds(t *testing.T) {
	s := newGuardedServer(t, nil, func(c *gateway.Config) {
		c.HTTP.Limits.MaxNewSeriesPerBatch, c.HTTP.Limits.MaxNewSeriesPerMinute = 3, 5
	})
	ts := s.Now() - 1000
	batch := func(ids ...string) string {
		var pts []string
		for _, id := range ids {
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":1}`, id, ts), fmt.Sprintf(`{"series":%q,"t":%d,"v":2}`, id, ts+1))
		}
		return `{"points":[` + strings.Join(pts, ",") + `]}`
	}
	write := func(ids ...string) (int, http.Header, string) {
		st, h, b := do(t, "POST", s.URL+"/v1/points", "application/json", batch(ids...), "")
		return st, h, string(b)
	}
	if st, _, b := write("n1", "n2", "n3", "n4"); st != 400 || !strings.Contains(b, `"param":"points"`) || !strings.Contains(b, "--max-new-series-per-batch") {
		t.Fatalf("4 new series: %d %s", st, b)
	}
	if st, _, _ := do(t, "GET", s.URL+"/v1/series/n1", "", "", ""); st != 404 {
		t.Fatalf("a refused batch wrote n1: %d", st)
	}
	if st, _, b := write("n1", "n2", "n3"); st != 200 {
		t.Fatalf("3 new series: %d %s", st, b)
	}
	if st, _, b := write("n1", "n2", "n3", "n4", "n5"); st != 200 { // two new
		t.Fatalf("2 new series among known ones: %d %s", st, b)
	}
	st, h, b := write("n6")
	if st != 429 || h.Get("Retry-After") == "" || !strings.Contains(b, "--max-new-series-per-minute") {
		t.Fatalf("a 6th new series within the minute: %d %v %s", st, h, b)
	}
	if st, _, b := write("n1", "n5"); st != 200 {
		t.Fatalf("known series after the rate is reached: %d %s", st, b)
	}
	if st, _, _ := do(t, "GET", s.URL+"/v1/series/n6", "", "", ""); st != 404 {
		t.Errorf("n6 was written by a refused batch: %d", st)
	}
	_, _, m := do(t, "GET", s.URL+"/metrics", "", "", "")
	if !strings.Contains(string(m), `tsgate_requests_refused_total{reason="too_many_new_series"} 2`) {
		t.Error("refusals for new series not counted")
	}
}

// A read refused for the partition bound is a 400 naming the resolution and
// is counted among the refusals, by reason.
func TestMaxPartitionsRefusalIsCounted(t *testing.T) {
	s := newGuardedServer(t, nil, func(c *gateway.Config) { c.Query.MaxPartitions = 10 })
	now := s.Now()
	if st, _, b := do(t, "POST", s.URL+"/v1/points", "application/json", fmt.Sprintf(`{"points":[{"series":"wide","t":%d,"v":1},{"series":"wide","t":%d,"v":2}]}`, now-5*3_600_000, now-1000), ""); st != 200 {
		t.Fatalf("write: %d %s", st, b)
	}
	st, _, b := do(t, "GET", s.URL+"/v1/series/wide/points?from=now-6h&resolution=raw", "", "", "")
	if st != 400 || !strings.Contains(string(b), `"param":"resolution"`) || !strings.Contains(string(b), "--max-partitions") {
		t.Fatalf("6 hours raw (24 partitions) with a bound of 10: %d %s", st, b)
	}
	_, _, m := do(t, "GET", s.URL+"/metrics", "", "", "")
	if !strings.Contains(string(m), `tsgate_requests_refused_total{reason="too_many_partitions"} 1`) {
		t.Fatalf("the refusal is not counted:\n%s", grepLines(string(m), "tsgate_requests_refused_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Answers are built within --answer-memory-bytes: concurrent batches whose
// answers together need more than the budget are each either answered
// whole or refused as overloaded (503, Retry-After), never cut; a batch
// that alone needs more than the whole budget is refused at once.
func TestAnswerMemoryBudget(t *testing.T) {
	s := newGuardedServer(t, nil, func(c *gateway.Config) {
		c.HTTP.Limits.AnswerMemory = 4 << 20
		c.HTTP.Limits.MaxQueueWait = 100 * time.Millisecond
	})
	span := tiers.Span{From: s.Now() - 4*tiers.Hour, To: s.Now() - tiers.Hour}
	n := querytest.Backfill(t, s.Env.Writer, "big", span, 200, func(t int64) float64 { return float64(t%1000) / 8 })
	// 54,000 points: an answer of 1.3 MB, expected at most 2 MB.
	one := fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"raw","limit":60000,"queries":[{"series":"big"}]}`, span.From, span.To)
	var answered, refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			st, h, b := do(t, "POST", s.URL+"/v1/query", "application/json", one, "")
			switch st {
			case 200:
				var ans struct {
					Results []struct {
						Points [][2]float64 `json:"points"`
					} `json:"results"`
				}
				if err := json.Unmarshal(b, &ans); err != nil || len(ans.Results) != 1 || len(ans.Results[0].Points) != n {
					t.Errorf("an answered batch is not whole: %v, %d bytes", err, len(b))
				}
				answered.Add(1)
			case 503:
				if h.Get("Retry-After") == "" || !strings.Contains(string(b), "/docs#problem/overloaded") || !strings.Contains(string(b), "--answer-memory-bytes") {
					t.Errorf("a refusal: %v %s", h, b)
				}
				refused.Add(1)
			default:
				t.Errorf("status %d: %.300s", st, b)
			}
		})
	}
	wg.Wait()
	if answered.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("answered %d, refused %d: want both under a budget for one answer at a time", answered.Load(), refused.Load())
	}
	two := fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"raw","limit":100000,"queries":[{"series":"big"},{"series":"big"}]}`, span.From, span.To)
	if st, _, b := do(t, "POST", s.URL+"/v1/query", "application/json", two, ""); st != 503 {
		t.Fatalf("a batch larger than the budget: %d %.300s", st, b)
	}
	_, _, m := do(t, "GET", s.URL+"/metrics", "", "", "")
	if got := grepLines(string(m), `tsgate_requests_refused_total{reason="answer_memory"}`); got == "" || strings.HasSuffix(got, " 0") {
		t.Fatalf("refusals for the memory budget are not counted: %q", got)
	}
}

// remoteWriteBody is a snappy remote-write request of one sample at t.
func remoteWriteBody(t int64) string {
	req := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "role_test"}, {Name: "job", Value: "roles"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: t}},
	}}}
	b, _ := req.Marshal()
	return string(snappy.Encode(nil, b))
}

// remoteReadBody is a snappy remote-read request of series s1 over
// [start, end].
func remoteReadBody(start, end int64) string {
	req := prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: start, EndTimestampMs: end,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "series", Value: "s1"}}}}}
	b, _ := req.Marshal()
	return string(snappy.Encode(nil, b))
}
