package grafana_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// The Grafana tests replay the request envelopes of the simpod-json-datasource
// plugin (v0.6), of the legacy simple-json plugin and of Infinity, kept in
// testdata/grafana, and check the answers against the protocol's
// conformance checklist (numbered §6.N in the comments).

const grafanaCT = "application/json; charset=utf-8"

// grafanaSeries are the series the Grafana tests write; s.44 has a dot so
// that Grafana's regex escaping (s\.44) matters.
var grafanaSeries = []string{"s-42", "s-43", "s.44", "t-1"}

// truth is what was written, per series.
type truth map[string]map[int64]float64

// seedGrafana writes three days of points every 30s (with jitter, so that
// points do not sit on window boundaries) into each series and runs the
// rollups, so that answers come from every tier.
func seedGrafana(t *testing.T, s *testServer) truth {
	t.Helper()
	now := s.Now()
	start := now - 3*tiers.Day + tiers.Minute
	tr := truth{}
	for k, id := range grafanaSeries {
		tr[id] = map[int64]float64{}
		var batch []string
		flush := func() {
			if len(batch) > 0 {
				s.WritePoints(batch...)
				batch = batch[:0]
			}
		}
		for i := int64(0); ; i++ {
			ts := start + i*30*tiers.Second + (i*7919)%29000
			if ts >= now {
				break
			}
			v := float64((i*37+int64(k)*11)%101)*0.25 - 7.5
			tr[id][ts] = v
			batch = append(batch, fmt.Sprintf(`{"series":%q,"t":%d,"v":%v}`, id, ts, v))
			if len(batch) == 5000 {
				flush()
			}
		}
		flush()
	}
	if status, _, body := s.Do("POST", "/v1/admin/rollups/run", "", ""); status != 200 {
		t.Fatalf("rollups: %d %s", status, body)
	}
	return tr
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grafana posts body to /grafana/<path> as the plugin does (always with
// Content-Type: application/json) and checks what every answer must be:
// JSON (§6.7: no NaN or Infinity either) of the protocol's content type
// (§6.13), and never a 401 (§6.12).
func (s *testServer) grafana(path, body string) (int, []byte) {
	s.t.Helper()
	status, ct, b := s.Do("POST", "/grafana/"+path, "application/json", body)
	if ct != grafanaCT {
		s.t.Errorf("POST /grafana/%s: content type %q, want %q", path, ct, grafanaCT)
	}
	if !json.Valid(b) {
		s.t.Errorf("POST /grafana/%s: answer is not JSON: %s", path, b)
	}
	if status == http.StatusUnauthorized {
		s.t.Errorf("POST /grafana/%s: 401, which Grafana's proxy replaces", path)
	}
	return status, b
}

// grafanaOK posts and decodes a 200 answer into into.
func (s *testServer) grafanaOK(path, body string, into any) {
	s.t.Helper()
	status, b := s.grafana(path, body)
	if status != 200 {
		s.t.Fatalf("POST /grafana/%s: %d %s", path, status, b)
	}
	if err := json.Unmarshal(b, into); err != nil {
		s.t.Fatalf("POST /grafana/%s: %v in %s", path, err, b)
	}
}

type grafanaError struct {
	Message string `json:"message"`
	Error   string `json:"error"`
}

// grafanaFails posts and checks a failure answer: a 4xx whose message and
// error members say what is wrong (§6.12); it returns the message.
func (s *testServer) grafanaFails(path, body string, status int) string {
	s.t.Helper()
	got, b := s.grafana(path, body)
	var e grafanaError
	if err := json.Unmarshal(b, &e); err != nil || got != status || e.Message == "" || e.Error == "" {
		s.t.Fatalf("POST /grafana/%s %s: %d %s, want %d with message and error", path, body, got, b, status)
	}
	return e.Message
}

// §6.1: "Save & test" needs exactly 200, at the URL with and without its
// trailing slash, with the plugin's JSON content type and no body.
func TestGrafanaHealth(t *testing.T) {
	s := newTestServer(t)
	for _, path := range []string{"/grafana", "/grafana/"} {
		for _, ct := range []string{"", "application/json"} {
			status, gotCT, body := s.Do("GET", path, ct, "")
			if status != 200 || gotCT != grafanaCT || !json.Valid(body) {
				t.Errorf("GET %s (Content-Type %q): %d %s %s", path, ct, status, gotCT, body)
			}
		}
	}
}

// §6.2: every POST takes an empty body, {}, null, unknown members and
// missing optional ones, with or without a content type.
func TestGrafanaPostsTakeAnyEnvelope(t *testing.T) {
	s := newTestServer(t)
	seedGrafana(t, s)
	paths := []string{"metrics", "metric-payload-options", "query", "variable", "tag-keys", "tag-values", "search", "annotations"}
	bodies := []string{"", "{}", "null", `{"unknown":{"deep":[1,"x",null]},"panelId":"Q-1","scopedVars":{"v":{"text":"a","value":["a","b"]}}}`}
	for _, path := range paths {
		for _, body := range bodies {
			for _, ct := range []string{"application/json", "application/json; charset=utf-8", "", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
				status, gotCT, b := s.Do("POST", "/grafana/"+path, ct, body)
				// A body must be declared JSON: the types a browser sends
				// cross-origin without a preflight are refused.
				wantOK := strings.HasPrefix(ct, "application/json;") || ct == "application/json" || (ct == "" && body == "")
				var arr []json.RawMessage
				switch {
				case wantOK && (status != 200 || gotCT != grafanaCT || json.Unmarshal(b, &arr) != nil):
					t.Errorf("POST /grafana/%s %q (Content-Type %q): %d %s %s, want 200 and a JSON array", path, body, ct, status, gotCT, b)
				case !wantOK && (status != 415 || gotCT != grafanaCT):
					t.Errorf("POST /grafana/%s %q (Content-Type %q): %d %s %s, want 415", path, body, ct, status, gotCT, b)
				}
			}
		}
	}
}

type grafanaMetric struct {
	Value    string `json:"value"`
	Label    string `json:"label"`
	Payloads []struct {
		Name, Label, Type string
		Options           []json.RawMessage
	} `json:"payloads"`
}

// §6.3: /metrics lists the series with the payload options they take, for
// the code editor's {} and the builder's {metric, payload}; the builder's
// current metric does not narrow the list, payload.prefix does.
func TestGrafanaMetrics(t *testing.T) {
	s := newTestServer(t)
	seedGrafana(t, s)
	all := slices.Sorted(slices.Values(grafanaSeries))
	for _, name := range []string{"metrics-code.json", "metrics-builder.json", "metrics-builder-selected.json"} {
		var got []grafanaMetric
		s.grafanaOK("metrics", fixture(t, name), &got)
		var ids []string
		for _, m := range got {
			ids = append(ids, m.Value)
			var names []string
			for _, p := range m.Payloads {
				names = append(names, p.Name)
				if p.Type != "select" || p.Label == "" {
					t.Errorf("%s: payload %+v", name, p)
				}
			}
			if !slices.Equal(names, []string{"agg", "resolution"}) {
				t.Errorf("%s: %s offers payloads %v", name, m.Value, names)
			}
		}
		if !slices.Equal(ids, all) {
			t.Errorf("%s: listed %v, want %v", name, ids, all)
		}
	}
	var got []grafanaMetric
	s.grafanaOK("metrics", fixture(t, "metrics-prefix.json"), &got)
	if len(got) != 1 || got[0].Value != "s.44" {
		t.Errorf("payload prefix s\\.4: %+v", got)
	}
}

// §6.4: the builder's selects get [{value, label}] for agg and resolution,
// and [] for a payload this gateway does not know.
func TestGrafanaPayloadOptions(t *testing.T) {
	s := newTestServer(t)
	cases := map[string][]string{
		"metric-payload-options-agg.json":        {"avg", "min", "max", "sum", "count", "p50", "p90", "p95", "p99", "p999"},
		"metric-payload-options-resolution.json": {"auto", "raw", "1s", "10s", "1m", "5m", "15m", "1h", "6h", "1d", "7d"},
		"metric-payload-options-unknown.json":    {},
	}
	for name, want := range cases {
		var got []struct{ Value, Label string }
		s.grafanaOK("metric-payload-options", fixture(t, name), &got)
		var values []string
		for _, o := range got {
			values = append(values, o.Value)
			if o.Label == "" {
				t.Errorf("%s: option %q has no label", name, o.Value)
			}
		}
		if !slices.Equal(values, want) && (len(values) != 0 || len(want) != 0) {
			t.Errorf("%s: options %v, want %v", name, values, want)
		}
	}
}

// §6.10: a Query variable gets [{__text, __value}] in string mode (a
// regex-escaped prefix, possibly ending in .* or *) and in raw JSON mode.
func TestGrafanaVariable(t *testing.T) {
	s := newTestServer(t)
	seedGrafana(t, s)
	cases := map[string][]string{
		"variable-string.json":       {"s-42", "s-43"},
		"variable-string-regex.json": {"s.44"},
		"variable-raw.json":          {"t-1"},
		"":                           {"s-42", "s-43", "s.44", "t-1"},
		`{"payload":{"target":"*"}}`: {"s-42", "s-43", "s.44", "t-1"},
		`{"payload":{"target":"no such series!"}}`: {},
	}
	for name, want := range cases {
		body := name
		if strings.HasSuffix(name, ".json") {
			body = fixture(t, name)
		}
		var got []map[string]string
		s.grafanaOK("variable", body, &got)
		var values []string
		for _, o := range got {
			if len(o) != 2 || o["__text"] != o["__value"] {
				t.Errorf("%s: option %v", name, o)
			}
			values = append(values, o["__value"])
		}
		if !slices.Equal(values, want) && (len(values) != 0 || len(want) != 0) {
			t.Errorf("%s: options %v, want %v", name, values, want)
		}
	}
}

// §6.11: no tags: ad hoc filter keys and values are empty lists, also for
// a /tag-keys without any body; §6.14: the legacy /search lists ids as
// strings and the legacy /annotations takes its envelope and finds none.
func TestGrafanaTagsAndLegacyEndpoints(t *testing.T) {
	s := newTestServer(t)
	seedGrafana(t, s)
	for _, c := range []struct{ path, body string }{
		{"tag-keys", ""}, {"tag-keys", fixture(t, "tag-keys-scenes.json")},
		{"tag-values", fixture(t, "tag-values.json")},
		{"annotations", fixture(t, "annotations-legacy.json")},
	} {
		var got []json.RawMessage
		s.grafanaOK(c.path, c.body, &got)
		if got == nil || len(got) != 0 {
			t.Errorf("%s: %v, want []", c.path, got)
		}
	}
	cases := map[string][]string{
		fixture(t, "search-legacy.json"): {"s-42", "s-43"},
		`{"target":"s\\.4"}`:             {"s.44"},
		`{"target":""}`:                  {"s-42", "s-43", "s.44", "t-1"},
		`{"target":"select metric"}`:     {},
	}
	for body, want := range cases {
		var got []string
		s.grafanaOK("search", body, &got)
		if !slices.Equal(got, want) {
			t.Errorf("search %s: %v, want %v", body, got, want)
		}
	}
}

// §6.13: the browser access mode's preflight succeeds on every Grafana
// path for the origins of --cors-origins, and only for them and there.
func TestGrafanaCORS(t *testing.T) {
	const grafanaOrigin = "http://grafana.example:3000"
	s := &testServer{Server: apitest.NewMemServerWith(t, querytest.Options{Configure: func(c *gateway.Config) {
		c.HTTP.Limits.CORSOrigins = []string{grafanaOrigin}
	}}), t: t}
	closed := newTestServer(t) // the default: no origin allowed
	preflight := func(url, origin string) http.Header {
		req, _ := http.NewRequest("OPTIONS", url, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Errorf("OPTIONS %s: %d", url, resp.StatusCode)
		}
		return resp.Header
	}
	for _, path := range []string{"/grafana", "/grafana/", "/grafana/query", "/grafana/metrics", "/grafana/tag-keys"} {
		h := preflight(s.URL+path, grafanaOrigin)
		if h.Get("Access-Control-Allow-Origin") != grafanaOrigin ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") {
			t.Errorf("OPTIONS %s from %s: %v", path, grafanaOrigin, h)
		}
		for _, h := range []http.Header{preflight(s.URL+path, "http://evil.example"), preflight(closed.URL+path, grafanaOrigin)} {
			if h.Get("Access-Control-Allow-Origin") != "" || h.Get("Access-Control-Allow-Methods") != "" {
				t.Errorf("OPTIONS %s allows an origin not listed: %v", path, h)
			}
		}
	}
	for _, c := range []struct {
		url, origin, want string
	}{{s.URL, grafanaOrigin, grafanaOrigin}, {s.URL, "http://evil.example", ""}, {closed.URL, grafanaOrigin, ""}} {
		req, _ := http.NewRequest("GET", c.url+"/grafana", nil)
		req.Header.Set("Origin", c.origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != c.want {
			t.Errorf("GET /grafana from %s: Access-Control-Allow-Origin %q, want %q", c.origin, got, c.want)
		}
	}
	req, _ := http.NewRequest("OPTIONS", s.URL+"/v1/query", nil)
	req.Header.Set("Origin", grafanaOrigin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS leaks out of /grafana: %v", resp.Header)
	}
}

// §6.12: failures are {message, error} with a 4xx, under /grafana too for
// paths and methods it does not have.
func TestGrafanaErrorShape(t *testing.T) {
	s := newTestServer(t)
	s.grafanaFails("nope", "{}", 404)
	s.grafanaFails("metrics", "[1,2]", 400)
	s.grafanaFails("metrics", `{"payload":`, 400)
	s.grafanaFails("search", `{"target":{"a":1}}`, 400) // an object is no target text
	status, ct, body := s.Do("DELETE", "/grafana/metrics", "application/json", "")
	var e grafanaError
	if status != 405 || ct != grafanaCT || json.Unmarshal(body, &e) != nil || e.Message == "" {
		t.Errorf("DELETE /grafana/metrics: %d %s %s", status, ct, body)
	}
}

// One Grafana answer holds at most --max-response-points points across
// its series: each series' page is cut to an equal share.
func TestGrafanaAnswerPointsAreBounded(t *testing.T) {
	s := &testServer{Server: apitest.NewMemServerWith(t, querytest.Options{Configure: func(c *gateway.Config) {
		c.HTTP.Limits.MaxResponsePoints = 30
	}}), t: t}
	now := s.Now()
	var pts []string
	for _, id := range []string{"b0", "b1", "b2"} {
		for i := range 50 {
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%d}`, id, now-100_000+int64(i)*1000, i))
		}
	}
	if st, _, b := s.Do("POST", "/v1/points", "application/json", `{"points":[`+strings.Join(pts, ",")+`]}`); st != 200 {
		t.Fatalf("write: %d %s", st, b)
	}
	var targets []string
	for _, id := range []string{"b0", "b1", "b2"} {
		targets = append(targets, fmt.Sprintf(`{"refId":%q,"target":%q,"payload":{"resolution":"raw"}}`, id, id))
	}
	out := s.grafanaQuery(fmt.Sprintf(`{"range":{"from":%q,"to":%q},"maxDataPoints":1000,"targets":[%s]}`,
		time.UnixMilli(now-200_000).UTC().Format(time.RFC3339Nano), time.UnixMilli(now).UTC().Format(time.RFC3339Nano), strings.Join(targets, ",")))
	total := 0
	for _, e := range out {
		if len(e.Datapoints) != 10 {
			t.Errorf("%s: %d points, want its share of 10", e.Target, len(e.Datapoints))
		}
		total += len(e.Datapoints)
	}
	if len(out) != 3 || total > 30 {
		t.Errorf("%d series, %d points", len(out), total)
	}
}
