//go:build cluster

package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/apitest"
)

// httpClient bounds every request: a request that hangs fails the test
// instead of the whole run.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// call sends a request to the gateway and returns the status and body. It
// is safe from any goroutine: it reports failures as errors.
func call(srv *apitest.Server, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// point is one point of a series.
type point struct {
	T int64
	V float64
}

// writeBody is the body of POST /v1/points for the points of one series.
func writeBody(series string, pts []point) []byte {
	type wp struct {
		Series string  `json:"series"`
		T      int64   `json:"t"`
		V      float64 `json:"v"`
	}
	out := make([]wp, len(pts))
	for i, p := range pts {
		out[i] = wp{series, p.T, p.V}
	}
	b, _ := json.Marshal(map[string]any{"points": out})
	return b
}

// mustWrite writes points and fails the test unless they are accepted.
func mustWrite(t *testing.T, srv *apitest.Server, series string, pts []point) {
	t.Helper()
	for chunk := range slices.Chunk(pts, 5000) {
		status, body, err := call(srv, "POST", "/v1/points", writeBody(series, chunk))
		if err != nil || status != 200 {
			t.Fatalf("write %s: %d %s %v", series, status, body, err)
		}
	}
}

// page is the part of a read's answer the tests check.
type page struct {
	Columns       []string    `json:"columns"`
	Points        [][]float64 `json:"points"`
	Partial       bool        `json:"partial"`
	PartialReason string      `json:"partial_reason"`
	NextCursor    string      `json:"next_cursor"`
	Tier          string      `json:"tier"`
}

// read reads one page of a series; params are the query parameters.
func read(srv *apitest.Server, series string, params url.Values) (int, page, []byte, error) {
	status, body, err := call(srv, "GET", "/v1/series/"+url.PathEscape(series)+"/points?"+params.Encode(), nil)
	var p page
	if err == nil && status == 200 {
		err = json.Unmarshal(body, &p)
	}
	return status, p, body, err
}

// readAll follows next_cursor from the first page, sending page i to
// servers[i % len(servers)], and returns every point; each page must be
// complete (partial false).
func readAll(t *testing.T, servers []*apitest.Server, series string, params url.Values) [][]float64 {
	t.Helper()
	var out [][]float64
	q := maps.Clone(params)
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatalf("%s: more than 10000 pages", series)
		}
		status, p, body, err := read(servers[i%len(servers)], series, q)
		if err != nil || status != 200 {
			t.Fatalf("read %s page %d: %d %s %v", series, i, status, body, err)
		}
		if p.Partial {
			t.Fatalf("read %s page %d is partial (%s)", series, i, p.PartialReason)
		}
		out = append(out, p.Points...)
		if p.NextCursor == "" {
			return out
		}
		q.Set("cursor", p.NextCursor)
	}
}

// rawRows are points as the raw answer's rows [t, v].
func rawRows(pts []point) [][]float64 {
	out := make([][]float64, len(pts))
	for i, p := range pts {
		out[i] = []float64{float64(p.T), p.V}
	}
	slices.SortFunc(out, func(a, b []float64) int { return int(a[0] - b[0]) })
	return out
}

// windowRows aggregates points into windows of width step as the answer's
// rows [t, min, max, sum, count], for windows starting in [from, to).
func windowRows(pts []point, from, to, step int64) [][]float64 {
	byStart := map[int64][]float64{}
	for _, p := range pts {
		s := p.T - ((p.T%step)+step)%step
		if s < from || s >= to {
			continue
		}
		r, ok := byStart[s]
		if !ok {
			byStart[s] = []float64{float64(s), p.V, p.V, p.V, 1}
			continue
		}
		r[1], r[2], r[3], r[4] = min(r[1], p.V), max(r[2], p.V), r[3]+p.V, r[4]+1
	}
	out := slices.Collect(maps.Values(byStart))
	slices.SortFunc(out, func(a, b []float64) int { return int(a[0] - b[0]) })
	return out
}

// sameRows fails the test at the first difference between got and want.
func sameRows(t *testing.T, what string, got, want [][]float64) {
	t.Helper()
	if len(got) != len(want) {
		for i := range min(len(got), len(want)) {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("%s: %d rows, want %d; row %d is %v, want %v", what, len(got), len(want), i, got[i], want[i])
			}
		}
		t.Fatalf("%s: %d rows, want %d; the shorter is a prefix of the longer", what, len(got), len(want))
	}
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("%s: row %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// uniq is a name unique to this run.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// series of n points of a sawtooth, one every step from start; integer
// values, so sums are exact.
func sawtooth(start, step int64, n int) []point {
	pts := make([]point, n)
	for i := range pts {
		pts[i] = point{start + int64(i)*step, float64(i%97 - 40)}
	}
	return pts
}

// expectProblem checks a problem answer's status and that its detail
// contains every fragment.
func expectProblem(t *testing.T, what string, status int, body []byte, err error, want int, fragments ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if status != want {
		t.Fatalf("%s: status %d, want %d: %s", what, status, want, body)
	}
	for _, f := range fragments {
		if !strings.Contains(string(body), f) {
			t.Fatalf("%s: %s does not say %q", what, body, f)
		}
	}
}

// params builds query parameters from key, value pairs.
func params(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// ms formats a Unix millisecond time as a parameter.
func ms(t int64) string { return fmt.Sprint(t) }

// gwList is the gateways to spread pages over.
func gwList(s ...*apitest.Server) []*apitest.Server { return s }
