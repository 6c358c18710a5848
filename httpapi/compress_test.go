package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/tsgate/tsgate/tiers"
)

// send makes a request with the given headers and returns the answer with
// its body as sent.
func send(t *testing.T, s *testServer, method, path string, header http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	// Without a Transport of its own the client would ask for gzip and
	// undo it itself; this one leaves the body as the gateway sent it.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func inflate(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var out []byte
	var err error
	switch coding {
	case "":
		return b
	case "gzip":
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
			out, err = io.ReadAll(zr)
		}
	case "zstd":
		var zr *zstd.Decoder
		if zr, err = zstd.NewReader(bytes.NewReader(b)); err == nil {
			out, err = io.ReadAll(zr)
			zr.Close()
		}
	default:
		t.Fatalf("Content-Encoding %q", coding)
	}
	if err != nil {
		t.Fatalf("%s: %v", coding, err)
	}
	return out
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// writeSeconds writes n points of series, one a second from five hours
// ago, with values of one decimal.
func writeSeconds(s *testServer, series string, n int) {
	now := s.Now()
	pts := make([]string, n)
	for i := range pts {
		pts[i] = fmt.Sprintf(`{"series":%q,"t":%d,"v":%d.25}`, series, now-5*tiers.Hour+int64(i)*1000, i%97)
	}
	s.WritePoints(pts...)
}

// Answers are compressed as Accept-Encoding asks, and only when large
// enough; each decodes to the answer sent uncompressed.
func TestCompressedAnswers(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	// More than the spool holds, so that the answer streams in pieces.
	writeSeconds(s, "z", 15000)
	path := fmt.Sprintf("/v1/series/z/points?from=%d&to=%d&resolution=raw&limit=15000", now-5*tiers.Hour, now)
	type answer struct {
		Points [][]float64 `json:"points"`
	}
	var plain answer
	if status := s.Get(path, &plain); status != 200 || len(plain.Points) != 15000 {
		t.Fatalf("plain read: %d, %d points", status, len(plain.Points))
	}
	plainBytes := 0
	for _, c := range []struct{ accept, want string }{
		{"", ""}, {"identity", ""}, {"gzip", "gzip"}, {"zstd", "zstd"}, {"gzip, deflate, br, zstd", "zstd"},
		{"zstd;q=0.1, gzip", "gzip"}, {"br", ""},
	} {
		h := http.Header{}
		if c.accept != "" {
			h.Set("Accept-Encoding", c.accept)
		}
		resp, b := send(t, s, "GET", path, h, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != c.want || !slices.Contains(resp.Header.Values("Vary"), "Accept-Encoding") {
			t.Fatalf("Accept-Encoding %q: %d, Content-Encoding %q, Vary %q", c.accept, resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header.Values("Vary"))
		}
		var got answer
		if err := json.Unmarshal(inflate(t, c.want, b), &got); err != nil || !reflect.DeepEqual(got, plain) {
			t.Fatalf("Accept-Encoding %q: the answer differs from the plain one (%v)", c.accept, err)
		}
		switch {
		case c.want == "":
			plainBytes = len(b)
		case len(b)*3 > plainBytes:
			t.Errorf("%s: %d bytes of %d plain", c.want, len(b), plainBytes)
		}
	}
	// Small answers and problems below the threshold go as they are.
	for _, p := range []string{"/healthz", "/v1/series/z/points?from=nonsense", "/v1/nothing"} {
		resp, b := send(t, s, "GET", p, http.Header{"Accept-Encoding": {"gzip, zstd"}}, nil)
		if resp.Header.Get("Content-Encoding") != "" || !json.Valid(b) {
			t.Errorf("%s: Content-Encoding %q for %d bytes", p, resp.Header.Get("Content-Encoding"), len(b))
		}
	}
	// HEAD answers carry no body to encode.
	resp, _ := send(t, s, "HEAD", "/", http.Header{"Accept-Encoding": {"gzip"}}, nil)
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("HEAD /: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
}

// Request bodies may come gzipped; the body limits bound what they
// inflate to, and other codings are refused.
func TestCompressedRequestBodies(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	gz := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	write := fmt.Sprintf(`{"points":[{"series":"g","t":%d,"v":1.5},{"series":"g","t":%d,"v":2.5}]}`, now-2*tiers.Minute, now-tiers.Minute)
	resp, b := send(t, s, "POST", "/v1/points", gz, gzipped([]byte(write)))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"accepted":2`) {
		t.Fatalf("gzipped write: %d %s", resp.StatusCode, b)
	}
	ndjson := fmt.Sprintf("{\"series\":\"g\",\"t\":%d,\"v\":3.5}\n", now-3*tiers.Minute)
	resp, b = send(t, s, "POST", "/v1/points", http.Header{"Content-Type": {"application/x-ndjson"}, "Content-Encoding": {"gzip"}}, gzipped([]byte(ndjson)))
	if resp.StatusCode != 200 {
		t.Fatalf("gzipped ndjson write: %d %s", resp.StatusCode, b)
	}
	batch := `{"from":"now-1h","resolution":"raw","queries":[{"series":"g"}]}`
	resp, b = send(t, s, "POST", "/v1/query", gz, gzipped([]byte(batch)))
	var res struct {
		Results []struct{ Points [][]float64 }
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &res) != nil || len(res.Results) != 1 || len(res.Results[0].Points) != 3 {
		t.Fatalf("gzipped batch: %d %s", resp.StatusCode, b)
	}
	graf := fmt.Sprintf(`{"range":{"from":"%s","to":"%s"},"maxDataPoints":1000,"targets":[{"refId":"A","target":"g"}]}`,
		time.UnixMilli(now-tiers.Hour).UTC().Format(time.RFC3339), time.UnixMilli(now).UTC().Format(time.RFC3339))
	resp, b = send(t, s, "POST", "/grafana/query", gz, gzipped([]byte(graf)))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"datapoints":[[`) {
		t.Fatalf("gzipped Grafana query: %d %s", resp.StatusCode, b)
	}

	// Bombs: a few KiB that inflate past each limit.
	bombs := []struct {
		path, ct string
		inflated int
	}{
		{"/v1/points", "application/json", 17 << 20},
		{"/v1/points", "application/x-ndjson", 17 << 20},
		{"/v1/query", "application/json", 2 << 20},
		{"/grafana/query", "application/json", 5 << 20},
	}
	for _, bomb := range bombs {
		// Blank lines are skipped in NDJSON, and JSON takes any whitespace.
		body := gzipped(append([]byte(`{"points":[`), bytes.Repeat([]byte("\n"), bomb.inflated)...))
		if len(body) > 64<<10 {
			t.Fatalf("bomb of %d bytes", len(body))
		}
		resp, b := send(t, s, "POST", bomb.path, http.Header{"Content-Type": {bomb.ct}, "Content-Encoding": {"gzip"}}, body)
		if resp.StatusCode != 413 {
			t.Errorf("%s %s: %d bytes inflating to %d: %d %s", bomb.path, bomb.ct, len(body), bomb.inflated, resp.StatusCode, b)
		}
	}

	for _, c := range []struct {
		path, coding string
		body         []byte
		status       int
	}{
		{"/v1/points", "br", []byte(write), 415},
		{"/v1/query", "deflate", []byte(batch), 415},
		{"/grafana/query", "zstd", []byte(graf), 415},
		{"/v1/points", "gzip, gzip", []byte(write), 415},
		{"/v1/points", "identity", []byte(write), 200},
		{"/v1/points", "gzip", []byte(write), 400}, // not gzip at all
		{"/v1/query", "gzip", []byte(batch), 400},
	} {
		resp, b := send(t, s, "POST", c.path, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {c.coding}}, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s with Content-Encoding %q: %d %s, want %d", c.path, c.coding, resp.StatusCode, b, c.status)
		}
		if c.status == 415 && !strings.Contains(string(b), c.coding) {
			t.Errorf("%s with Content-Encoding %q: the problem does not name it: %s", c.path, c.coding, b)
		}
	}
}

// An answer the spool holds whole goes with its length, in one piece; a
// longer one streams in chunks. Compressed, neither carries the length of
// the uncompressed bytes.
func TestAnswerLength(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	writeSeconds(s, "len", 15000)
	for _, c := range []struct {
		limit  int
		accept string
		whole  bool // sent with its own length
	}{{10, "", true}, {5000, "", true}, {15000, "", false}, {5000, "gzip", false}, {15000, "zstd", false}} {
		path := fmt.Sprintf("/v1/series/len/points?from=%d&to=%d&resolution=raw&limit=%d", now-5*tiers.Hour, now, c.limit)
		h := http.Header{}
		if c.accept != "" {
			h.Set("Accept-Encoding", c.accept)
		}
		resp, b := send(t, s, "GET", path, h, nil)
		var got struct {
			Points [][]float64 `json:"points"`
		}
		if err := json.Unmarshal(inflate(t, c.accept, b), &got); resp.StatusCode != 200 || err != nil || len(got.Points) != c.limit {
			t.Fatalf("limit %d %q: %d, %d points, %v", c.limit, c.accept, resp.StatusCode, len(got.Points), err)
		}
		chunked := slices.Contains(resp.TransferEncoding, "chunked")
		if c.whole && (resp.ContentLength != int64(len(b)) || chunked) || !c.whole && c.accept == "" && (resp.ContentLength != -1 || !chunked) {
			t.Errorf("limit %d %q: %d bytes sent with Content-Length %d, transfer encoding %q", c.limit, c.accept, len(b), resp.ContentLength, resp.TransferEncoding)
		}
		if c.accept != "" && resp.ContentLength != -1 && resp.ContentLength != int64(len(b)) {
			t.Errorf("limit %d %q: %d compressed bytes sent with Content-Length %d", c.limit, c.accept, len(b), resp.ContentLength)
		}
	}
}
