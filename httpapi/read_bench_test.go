package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkReadPoints is a whole read of one series over the embedded
// store, validation included: the scale against which to judge the
// validation's cost.
func BenchmarkReadPoints(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(b, store, querytest.Options{})
	h := env.Gateway.Handler()
	now := env.Clock.Now().UnixMilli()
	var body strings.Builder
	body.WriteString(`{"points":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"series":"sensor-1","t":%d,"v":%d.5}`, now-tiers.Hour+int64(i)*3*tiers.Second, i)
	}
	body.WriteString(`]}`)
	req := httptest.NewRequest("POST", "/v1/points", strings.NewReader(body.String()))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("write: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct{ name, path string }{
		{"raw-1000", "/v1/series/sensor-1/points?from=now-2h&resolution=raw"},
		{"5m-12", "/v1/series/sensor-1/points?from=now-2h&resolution=5m&agg=min,max,avg"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", c.path, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkReadMemory reads 1 day and 30 days of raw 1 Hz points through
// the HTTP API, following cursors, streaming to io.Discard, and reports the
// peak heap: it must not grow with the range.
func BenchmarkReadMemory(b *testing.B) {
	// On disk, so that the heap measured is the read path's, not the data's.
	store, err := embedded.Open(b.TempDir(), embedded.Options{Now: querytest.Start})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 40 * tiers.Day
	env := querytest.NewEnv(b, store, querytest.Options{Pyramid: p})
	now := env.Clock.Now().UnixMilli()
	const days = 30
	backfill(b, env, "mem", tiers.Span{From: now - days*tiers.Day, To: now}, 1000, func(t int64) float64 { return float64(t % 1000) })
	ts := httptest.NewServer(env.Gateway.Handler())
	defer ts.Close()
	for _, d := range []int64{1, days} {
		b.Run(fmt.Sprintf("range=%dd", d), func(b *testing.B) {
			var peak atomic.Uint64
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "idle-heap-MiB")
			stop := querytest.SampleHeap(&peak)
			var points int64
			for b.Loop() {
				points = readAll(b, ts.URL, now-d*tiers.Day, now)
			}
			stop()
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(points), "points")
		})
	}
}

func readAll(b *testing.B, base string, from, to int64) int64 {
	var n int64
	cursor := ""
	for {
		u := fmt.Sprintf("%s/v1/series/mem/points?from=%d&to=%d&resolution=raw&limit=100000", base, from, to)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, err := http.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		// Stream the body away, keeping only the tail to find the cursor.
		tail := &tailWriter{}
		if _, err := io.Copy(io.MultiWriter(io.Discard, tail), resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		var trailer struct {
			NextCursor string `json:"next_cursor"`
			Stats      struct {
				RowsRead int64 `json:"rows_read"`
			} `json:"stats"`
		}
		if err := json.Unmarshal(tail.object(), &trailer); err != nil {
			b.Fatalf("trailer: %v", err)
		}
		n += trailer.Stats.RowsRead
		if trailer.NextCursor == "" {
			return n
		}
		cursor = trailer.NextCursor
	}
}

// tailWriter keeps the last KiB of a stream: the answer's trailer members.
type tailWriter struct{ buf []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-1024:]...)
	}
	return len(p), nil
}

// object returns the trailer as a JSON object: from "partial" to the end.
func (t *tailWriter) object() []byte {
	s := string(t.buf)
	i := strings.LastIndex(s, `],"partial"`)
	if i < 0 {
		return nil
	}
	return []byte("{" + s[i+2:])
}
