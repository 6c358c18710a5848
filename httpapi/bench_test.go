package httpapi

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// benchPoints are sensor-like values at 1 Hz: two decimals when short,
// full float64 precision otherwise (as averages are).
func benchPoints(n int, short bool) []tiers.Row {
	rows := make([]tiers.Row, n)
	t := int64(1768400000000)
	for i := range rows {
		v := 20 + float64(i%977)/7
		if short {
			v = math.Round(v*100) / 100
		}
		rows[i] = tiers.PointRow(t+int64(i)*1000, v)
	}
	return rows
}

// BenchmarkEncodePoints compares the hand-written answer encoder with
// encoding/json on the same points, as the [t, v] arrays of an answer.
func BenchmarkEncodePoints(b *testing.B) {
	for _, short := range []bool{true, false} {
		name := "values=short"
		if !short {
			name = "values=full"
		}
		b.Run(name, func(b *testing.B) { benchEncode(b, benchPoints(100000, short)) })
	}
}

func benchEncode(b *testing.B, rows []tiers.Row) {
	res := &query.Result{}
	b.Run("encoder=gateway", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4<<20)
		for b.Loop() {
			buf = buf[:0]
			buf = append(buf, '[')
			for i, r := range rows {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendItem(buf, res, query.Item{T: r.T, Row: r})
			}
			buf = append(buf, ']')
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	})
	b.Run("encoder=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		pts := make([][2]any, len(rows))
		for i, r := range rows {
			pts[i] = [2]any{r.T, r.Value()}
		}
		for b.Loop() {
			if _, err := json.Marshal(pts); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	})
}

// TestEncoderMatchesEncodingJSON: the fast encoder writes the numbers
// encoding/json would, so clients parse the same values.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.3, 1e-7, 1.5e-6, 0.0001, 0.00015, 123456789.123, 99999999999.9999,
		1e11, 1e20, 1e21, 1.7976931348623157e308, -5e-324, 21.5, -21.37, 2.675, 1.005, 0.1 + 0.2}
	for _, v := range values {
		got := string(appendFloat(nil, v))
		want, _ := json.Marshal(v)
		if got != string(want) {
			t.Errorf("appendFloat(%v) = %s, encoding/json says %s", v, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		// Random values at every scale, and short decimals like sensors send.
		var v float64
		switch r.IntN(3) {
		case 0:
			v = math.Float64frombits(r.Uint64())
		case 1:
			v = float64(r.Int64N(2e9)-1e9) / []float64{1, 10, 100, 1000, 10000}[r.IntN(5)]
		default:
			v = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(30)-10))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		got := string(appendFloat(nil, v))
		want, _ := json.Marshal(v)
		if got != string(want) {
			t.Fatalf("appendFloat(%v) = %s, encoding/json says %s", v, got, want)
		}
	}
	for _, s := range []string{"plain", `q"uote`, "back\\slash", "<tag>&", "line\nbreak", "\x01", "ünï", "\u2028", string([]byte{0xff})} {
		got := string(appendString(nil, s))
		want, _ := json.Marshal(s)
		if got != string(want) {
			t.Errorf("appendString(%q) = %s, encoding/json says %s", s, got, want)
		}
	}
}

// BenchmarkReadMemory reads 1 day and 30 days of raw 1 Hz points through
// the HTTP API, following cursors, streaming to io.Discard, and reports the
// peak heap: it must not grow with the range.
func BenchmarkReadMemory(b *testing.B) {
	// On disk, so that the heap measured is the read path's, not the data's.
	store, err := embedded.Open(b.TempDir(), embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p[tiers.LevelRaw].Retention = 40 * tiers.Day
	env := querytest.NewEnvWith(b, store, store, p)
	now := env.Clock.Now().UnixMilli()
	const days = 30
	batch := make([]ingest.Point, 0, 50000)
	for t := now - days*tiers.Day; t < now; t += 1000 {
		batch = append(batch, ingest.Point{Series: "mem", T: t, V: float64(t % 1000)})
		if len(batch) == cap(batch) {
			if _, err := env.Writer.Backfill(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := env.Writer.Backfill(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	srv := New(Deps{Engine: env.Engine, Writer: env.Writer, Registry: store, Rollups: env.Rollups, Ready: store.Ping, Now: env.Clock.Now}, DefaultConfig())
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, d := range []int64{1, days} {
		b.Run(fmt.Sprintf("range=%dd", d), func(b *testing.B) {
			var peak atomic.Uint64
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "idle-heap-MiB")
			stop := sampleHeap(&peak)
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

// sampleHeap records the largest live heap seen until stop is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	runtime.GC()
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
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

// BenchmarkCompressedPage reads one page of 100,000 raw points over HTTP
// with each Accept-Encoding and reports the bytes on the wire, and the
// time of the whole request with the client's decompression included. The
// values are the benchmark's sensor-like 1 Hz points with two decimals.
func BenchmarkCompressedPage(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p[tiers.LevelRaw].Retention = 40 * tiers.Day
	env := querytest.NewEnvWith(b, store, store, p)
	now := env.Clock.Now().UnixMilli()
	const n = 100_000
	from := now - n*1000
	batch := make([]ingest.Point, 0, n)
	for i, row := range benchPoints(n, true) {
		batch = append(batch, ingest.Point{Series: "page", T: from + int64(i)*1000, V: row.Value()})
	}
	if _, err := env.Writer.Backfill(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	srv := New(Deps{Engine: env.Engine, Writer: env.Writer, Registry: store, Rollups: env.Rollups, Ready: store.Ping, Now: env.Clock.Now}, DefaultConfig())
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	u := fmt.Sprintf("%s/v1/series/page/points?from=%d&to=%d&resolution=raw&limit=%d", ts.URL, from, now, n)
	for _, coding := range []string{"identity", "gzip", "zstd"} {
		b.Run("encoding="+coding, func(b *testing.B) {
			var wire, plain int
			for b.Loop() {
				req, _ := http.NewRequest("GET", u, nil)
				req.Header.Set("Accept-Encoding", coding)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				cr := &countingReader{r: resp.Body}
				var body io.Reader = cr
				switch resp.Header.Get("Content-Encoding") {
				case "gzip":
					zr, err := gzip.NewReader(cr)
					if err != nil {
						b.Fatal(err)
					}
					body = zr
				case "zstd":
					zr, err := zstd.NewReader(cr, zstd.WithDecoderConcurrency(1))
					if err != nil {
						b.Fatal(err)
					}
					defer zr.Close()
					body = zr
				}
				m, err := io.Copy(io.Discard, body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%d %v", resp.StatusCode, err)
				}
				wire, plain = cr.n, int(m)
			}
			b.ReportMetric(float64(wire), "wire-bytes")
			b.ReportMetric(float64(plain), "json-bytes")
			// What the bytes cost on a 100 Mbit/s link, where the loopback
			// of the benchmark costs nothing.
			b.ReportMetric(float64(wire)*8/100e6*1000, "ms-at-100Mbit/s")
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
