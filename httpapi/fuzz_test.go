package httpapi

// Fuzz targets of everything a request's bytes reach in this package: the
// batch body, the Grafana bodies and target grammar, the series listing
// and the read parameters. Whatever the input, the answer is never a 5xx,
// and every 4xx says what it is about: a problem+json naming the
// parameter in the v1 API, a {"message"} in the Grafana protocol.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// fuzzServer is the API over an in-memory store holding a few series with
// an hour of points each, for the fuzz targets to read.
type fuzzServer struct {
	*Server
	handler http.Handler
	env     *querytest.Env
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	store, err := embedded.OpenInMemory(embedded.Options{SweepInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	env := querytest.NewEnv(f, store, store)
	now := env.Clock.Now().UnixMilli()
	var pts []ingest.Point
	for _, id := range []string{"s-1", "s-2", "s.3", "room.a.temp", "room.b.temp"} {
		for i := range 60 {
			pts = append(pts, ingest.Point{Series: id, T: now - tiers.Hour + int64(i)*tiers.Minute, V: float64(i)})
		}
	}
	if _, err := env.Writer.Write(context.Background(), pts); err != nil {
		f.Fatal(err)
	}
	s := New(Deps{
		Engine: env.Engine, Writer: env.Writer, Registry: env.Store, Rollups: env.Rollups,
		Ready: env.Store.Ping, Now: env.Clock.Now,
	}, DefaultConfig())
	return &fuzzServer{Server: s, handler: s.Handler(), env: env}
}

func (s *fuzzServer) do(method, target, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/", bytes.NewReader(body))
	// NewRequest panics on targets that do not parse; the fuzz targets
	// build URLs of any bytes, which a client could send raw.
	req.URL = &url.URL{Path: target}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		req.URL.Path, req.URL.RawQuery = target[:i], target[i+1:]
	}
	req.RequestURI = target
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return rec
}

// checkV1 asserts the answer of a v1 route: no 5xx; a 4xx is a
// problem+json of that status with a detail, and a 400 names each
// parameter it is about; a 200 is JSON.
func checkV1(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	if rec.Code < 400 {
		if rec.Code != http.StatusOK || !json.Valid(body) {
			t.Fatalf("%s: %d with a body that is not JSON: %q", what, rec.Code, body)
		}
		return
	}
	var p Problem
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: %d of type %q: %s", what, rec.Code, ct, body)
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Status != rec.Code || p.Detail == "" || p.Type == "" || p.Title == "" {
		t.Fatalf("%s: %d with problem %s (%v)", what, rec.Code, body, err)
	}
	if rec.Code == http.StatusBadRequest {
		if len(p.Errors) == 0 {
			t.Fatalf("%s: a 400 that names no parameter: %s", what, body)
		}
		for _, e := range p.Errors {
			if e.Param == "" || e.Message == "" {
				t.Fatalf("%s: a 400 with an unnamed error: %s", what, body)
			}
		}
	}
}

// checkGrafana asserts the answer of a Grafana route: no 5xx; a 4xx is
// JSON with the message the plugin shows; a 200 is JSON.
func checkGrafana(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	if !json.Valid(body) {
		t.Fatalf("%s: %d with a body that is not JSON: %q", what, rec.Code, body)
	}
	if rec.Code >= 400 {
		var e struct{ Message, Error string }
		if err := json.Unmarshal(body, &e); err != nil || e.Message == "" || e.Error == "" {
			t.Fatalf("%s: %d without a message: %s", what, rec.Code, body)
		}
	}
}

// FuzzBatchQuery posts any body under any Content-Type to /v1/query.
// Besides the answer's shape: only the media type application/json is
// ever answered.
func FuzzBatchQuery(f *testing.F) {
	s := newFuzzServer(f)
	for _, c := range []struct{ ct, body string }{
		{"application/json", `{"from":"now-1h","queries":[{"series":"s-1"},{"series":"s-2","agg":"min,max","resolution":"5m"}]}`},
		{"application/json; charset=utf-8", `{"from":"now-2h","to":"now","order":"desc","limit":7,"queries":[{"series":"s.3","resolution":"raw"}]}`},
		{"application/json", `{"from":1,"max_points":"10","slo":"50ms","partial":"deny","queries":[{"series":"s-1","cursor":"AQ"}]}`},
		{"application/json", `{"queries":[]}`},
		{"application/json", `{"from":"now-1h","queries":[{"series":"s-1"}]}]`},
		{"application/json", `{"from":"now-1h","queries":[{"series":"s-1"}]} {}`},
		{"application/json", `{"from":`},
		{"application/json", `{"queries":[{"series":"nope","from":"now-1h"}]}`},
		{"application/jsonxyz", `{"from":"now-1h","queries":[{"series":"s-1"}]}`},
		{"text/plain", `{}`},
		{"", ``},
	} {
		f.Add(c.ct, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		rec := s.do(http.MethodPost, "/v1/query", ct, body)
		checkV1(t, fmt.Sprintf("POST /v1/query (%q) %q", ct, body), rec)
		mediaType, _, _ := strings.Cut(ct, ";")
		if rec.Code != http.StatusUnsupportedMediaType && !strings.EqualFold(strings.TrimSpace(mediaType), "application/json") {
			t.Fatalf("Content-Type %q answered %d, not 415", ct, rec.Code)
		}
		if rec.Code == http.StatusOK {
			if !json.Valid(body) {
				t.Fatalf("a body that is not one JSON value answered 200: %q", body)
			}
			var out struct {
				Results []json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Results) == 0 {
				t.Fatalf("a 200 without results: %s", rec.Body.Bytes())
			}
		}
	})
}

// FuzzReadPoints sends any series id and query string to the read and
// plan routes.
func FuzzReadPoints(f *testing.F) {
	s := newFuzzServer(f)
	for _, c := range []struct{ id, query string }{
		{"s-1", "from=now-1h"},
		{"s-1", "from=now-2h&to=now-1h&resolution=raw&order=desc&limit=5"},
		{"s.3", "from=2026-01-15T14:37:22Z&agg=min,max,avg&max_points=10"},
		{"s-2", "from=now-1h&resolution=5m&partial=deny&slo=100ms"},
		{"s-1", "from=now-1h&cursor=AQ&limit=1"},
		{"nope", "from=now-1h"},
		{"a b", "from=yesterday&agg=median&order=up"},
		{"s-1", "from=now-1h&from=now-2h&%zz"},
	} {
		f.Add(c.id, c.query)
	}
	f.Fuzz(func(t *testing.T, id, rawQuery string) {
		for _, route := range []string{"points", "plan"} {
			target := "/v1/series/" + url.PathEscape(id) + "/" + route + "?" + rawQuery
			checkV1(t, "GET "+target, s.do(http.MethodGet, target, "", nil))
		}
	})
}

// FuzzListSeries sends any query string to the series listing. Besides
// the answer's shape: a page is only ever resumed from a cursor the
// listing issued, and the cursor it issues resumes it.
func FuzzListSeries(f *testing.F) {
	s := newFuzzServer(f)
	for _, q := range []string{
		"", "limit=2", "prefix=room.&limit=1", "cursor=" + partial.EncodeListCursor("s-1"),
		"cursor=garbage", "cursor=s-1", "limit=0", "prefix=a%20b", "cursor=" + partial.EncodeListCursor("a b"),
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		rec := s.do(http.MethodGet, "/v1/series?"+rawQuery, "", nil)
		checkV1(t, "GET /v1/series?"+rawQuery, rec)
		if rec.Code != http.StatusOK {
			return
		}
		q, _ := url.ParseQuery(rawQuery)
		if c := q.Get("cursor"); c != "" {
			id, err := partial.DecodeListCursor(c)
			if err != nil || params.SeriesID(id) != nil {
				t.Fatalf("cursor %q accepted: %q, %v", c, id, err)
			}
		}
		var page struct {
			Series []struct {
				ID string `json:"id"`
			} `json:"series"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if page.NextCursor != "" {
			last := page.Series[len(page.Series)-1].ID
			if id, err := partial.DecodeListCursor(page.NextCursor); err != nil || id != last {
				t.Fatalf("next_cursor %q decodes to %q, %v; the page ended at %q", page.NextCursor, id, err, last)
			}
		}
	})
}

// grafanaPaths are the Grafana routes that read a body.
var grafanaPaths = []string{"/grafana/query", "/grafana/metrics", "/grafana/search", "/grafana/variable", "/grafana/metric-payload-options", "/grafana/annotations"}

// FuzzGrafanaBody posts any body to each Grafana route that reads one.
func FuzzGrafanaBody(f *testing.F) {
	s := newFuzzServer(f)
	// The recorded envelopes, each to its route (named by the file's
	// first word).
	for i, path := range grafanaPaths {
		route := strings.TrimPrefix(path, "/grafana/")
		entries, err := filepathGlob("testdata/grafana/" + route + "*.json")
		if err != nil {
			f.Fatal(err)
		}
		for _, body := range entries {
			f.Add(uint8(i), body)
		}
	}
	for i := range grafanaPaths {
		f.Add(uint8(i), []byte(`{}`))
	}
	for _, b := range []string{
		`{"targets":[{"refId":"A","target":"(s-1|s-2)","payload":{"agg":"max","resolution":"1m"}}],"range":{"from":"now-1h","to":"now"}}`,
		`{"targets":[{"refId":"A","target":"room\\.(a|b)\\.temp","payload":"{\"resolution\":\"raw\"}"}],"maxDataPoints":3,"intervalMs":1e300}`,
		`{"targets":[{"target":"s-1","type":"table","hide":false}],"range":{"from":"2026-01-15T00:00:00Z","to":1}}`,
		`{"targets":[{"target":"s.*"}]}`, `null`, `[]`, `{"range":{"from":[]}}`,
	} {
		f.Add(uint8(0), []byte(b))
	}
	f.Add(uint8(1), []byte(`{"payload":{"prefix":["room\\."]}}`))
	f.Add(uint8(2), []byte(`{"target":"s*"}`))
	f.Add(uint8(3), []byte(`{"payload":"s\\.3"}`))
	f.Add(uint8(4), []byte(`{"name":"agg"}`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := grafanaPaths[int(route)%len(grafanaPaths)]
		checkGrafana(t, fmt.Sprintf("POST %s %q", path, body), s.do(http.MethodPost, path, "application/json", body))
	})
}

// FuzzGrafanaTargetIDs: a target either fails with a message or expands
// to 1 to MaxBatchQueries distinct series ids; text without the grammar's
// characters is the one id it is.
func FuzzGrafanaTargetIDs(f *testing.F) {
	for _, s := range []string{"s-42", `s\.42`, "(a|b)-(x|y)", `room\.(a|b)\.temp`, "((a|b)|c)", `s\`, "(a|)", "s.*", "(" + strings.Repeat("a|", 120) + "a)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		ids, err := grafanaTargetIDs(target)
		if err != nil {
			if ids != nil || err.Error() == "" {
				t.Fatalf("%q: %v, %v", target, ids, err)
			}
			return
		}
		if len(ids) == 0 || len(ids) > MaxBatchQueries {
			t.Fatalf("%q expands to %d ids", target, len(ids))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if params.SeriesID(id) != nil || seen[id] {
				t.Fatalf("%q expands to %q: invalid or repeated id %q", target, ids, id)
			}
			seen[id] = true
		}
		if !strings.ContainsAny(target, `\(|)`) && !slices.Equal(ids, []string{target}) {
			t.Fatalf("%q expands to %q", target, ids)
		}
	})
}

// FuzzGrafanaPrefix: a listing query gives an empty prefix (everything),
// a series id prefix, or nothing; the literal id asks for itself.
func FuzzGrafanaPrefix(f *testing.F) {
	for _, s := range []string{"", "*", ".*", "s-1", `s\.1`, `s\.*`, "room.*", `a\`, " s-1 ", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		prefix, ok := grafanaPrefix(q)
		if !ok {
			if prefix != "" {
				t.Fatalf("%q: prefix %q with ok false", q, prefix)
			}
			return
		}
		if prefix != "" && params.SeriesID(prefix) != nil {
			t.Fatalf("%q gives the prefix %q, which no series id starts with", q, prefix)
		}
		if params.SeriesID(q) == nil && prefix != q {
			t.Fatalf("the series id %q gives the prefix %q", q, prefix)
		}
	})
}

// FuzzGrafanaPayload: any payload decodes without a panic; the options
// read from it are either an error or one aggregate and a resolution
// text.
func FuzzGrafanaPayload(f *testing.F) {
	for _, s := range []string{`{"agg":"max","resolution":"1m"}`, `"{\"agg\":\"min\"}"`, `{"agg":["sum"]}`, `{"agg":["a","b"]}`, `{"resolution":"1\\.5h"}`, `"not json"`, `7`, `null`, ``, `{"agg":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		payload := grafanaPayload(raw)
		for key := range payload {
			_, _ = payloadString(payload, key)
		}
		agg, resolution, err := grafanaOptions(raw)
		if err != nil {
			if agg != "" || resolution != "" || err.Error() == "" {
				t.Fatalf("%q: %q, %q, %v", raw, agg, resolution, err)
			}
			return
		}
		if aggs, err := query.ParseAggs(agg); err != nil || len(aggs) != 1 {
			t.Fatalf("%q: aggregate %q (%v)", raw, agg, err)
		}
	})
}

// FuzzGrafanaSpan: a range is either a 400 or a non-empty span of
// representable times.
func FuzzGrafanaSpan(f *testing.F) {
	for _, c := range [][2]string{
		{`"2026-01-15T00:00:00Z"`, `"2026-01-15T06:00:00Z"`}, {`1768435200000`, `"now"`}, {`"now-6h"`, ``},
		{``, ``}, {`"now"`, `"now-1h"`}, {`[]`, `1`}, {`1e300`, `-1e300`}, {`"\u006eow"`, `null`},
	} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	now := time.Date(2026, 1, 15, 14, 37, 22, 0, time.UTC).UnixMilli()
	f.Fuzz(func(t *testing.T, from, to []byte) {
		span, err := grafanaSpan(&grafanaRange{From: from, To: to}, now)
		if err != nil {
			if p, ok := err.(*Problem); !ok || p.Status != http.StatusBadRequest || p.Detail == "" {
				t.Fatalf("range %q %q: %#v", from, to, err)
			}
			return
		}
		if span.Empty() || span.From < tiers.MinTime || span.To > tiers.MaxTime {
			t.Fatalf("range %q %q: %+v", from, to, span)
		}
	})
}

// readParams are the names parseRead may report.
var readParams = []string{"id", "from", "to", "resolution", "max_points", "agg", "order", "limit", "slo", "partial"}

// FuzzParseRead: the read parameters, each of any text. Every error names
// a parameter; an accepted read holds what was asked: the order and
// partial enumerations, the resolution kind, and aggregates that print
// back as asked.
func FuzzParseRead(f *testing.F) {
	s := newFuzzServer(f)
	f.Add("s-1", "now-1h", "", "", "", "", "", "", "", "")
	f.Add("s-1", "2026-01-15T14:37:22Z", "1768487842123", "raw", "", "min, max", "desc", "10", "250ms", "deny")
	f.Add("s-1", "now-7d", "now", "auto", "500", "count", "asc", "", "", "allow")
	f.Add("s-1", "now-7d", "now", "1.5h", "", "avg,avg", "up", "0", "-1s", "maybe")
	f.Add("a b", "", "now-1h", "500ms", "10", "median", "ASC", "x", "1", "")
	now := time.Date(2026, 1, 15, 14, 37, 22, 0, time.UTC)
	f.Fuzz(func(t *testing.T, id, from, to, resolution, maxPoints, agg, order, limit, slo, partialText string) {
		in := readInput{Series: id, From: from, To: to, Resolution: resolution, MaxPoints: maxPoints, Agg: agg, Order: order, Limit: limit, SLO: slo, Partial: partialText}
		req, errs := s.parseRead(in, now)
		for _, e := range errs {
			if !slices.Contains(readParams, e.Param) || e.Message == "" {
				t.Fatalf("%+v: error %+v", in, e)
			}
		}
		named := func(p string) bool {
			return slices.ContainsFunc(errs, func(e ParamError) bool { return e.Param == p })
		}
		if !named("order") && req.Desc != (order == "desc") {
			t.Fatalf("order %q accepted as desc=%v", order, req.Desc)
		}
		if !named("order") && order != "" && order != "asc" && order != "desc" {
			t.Fatalf("order %q accepted", order)
		}
		if !named("partial") && (partialText != "" && partialText != "allow" && partialText != "deny" || req.Deny != (partialText == "deny")) {
			t.Fatalf("partial %q accepted as deny=%v", partialText, req.Deny)
		}
		if !named("resolution") {
			switch kind := req.Resolution.Kind; {
			case resolution == "" || resolution == "auto":
				if kind != router.Auto {
					t.Fatalf("resolution %q is %+v", resolution, req.Resolution)
				}
			case resolution == "raw":
				if kind != router.RawPoints {
					t.Fatalf("resolution %q is %+v", resolution, req.Resolution)
				}
			default:
				d, err := params.Duration(resolution)
				if kind != router.Window || err != nil || req.Resolution.Window != d || d < router.MinWindow {
					t.Fatalf("resolution %q is %+v", resolution, req.Resolution)
				}
			}
		}
		if !named("agg") {
			want := agg
			if want == "" {
				want = "avg"
			}
			names := strings.Split(want, ",")
			for i := range names {
				names[i] = strings.TrimSpace(names[i])
			}
			if query.FormatAggs(req.Aggs) != strings.Join(names, ",") {
				t.Fatalf("agg %q accepted as %v", agg, req.Aggs)
			}
		}
		if !named("from") && !named("to") && (req.Span.Empty() || req.Span.From < tiers.MinTime || req.Span.To > tiers.MaxTime) {
			t.Fatalf("from %q to %q accepted as %+v", from, to, req.Span)
		}
		if !named("limit") && limit != "" && (req.Limit < 1 || req.Limit > s.deps.Engine.Config().MaxLimit) {
			t.Fatalf("limit %q accepted as %d", limit, req.Limit)
		}
		if !named("slo") && slo != "" && req.SLO <= 0 {
			t.Fatalf("slo %q accepted as %v", slo, req.SLO)
		}
		if !named("max_points") && maxPoints != "" && (req.MaxPoints < 1 || req.MaxPoints > MaxMaxPoints) {
			t.Fatalf("max_points %q accepted as %d", maxPoints, req.MaxPoints)
		}
	})
}

// filepathGlob reads the files matching pattern.
func filepathGlob(pattern string) ([][]byte, error) {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
