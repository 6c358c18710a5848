package httpapi_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkCompressedPage reads one page of 100,000 raw points over HTTP
// with each Accept-Encoding and reports the bytes on the wire, and the
// time of the whole request with the client's decompression included. The
// values are sensor-like 1 Hz points with two decimals.
func BenchmarkCompressedPage(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 40 * tiers.Day
	env := querytest.NewEnv(b, store, querytest.Options{Pyramid: p, Configure: func(c *gateway.Config) {
		// The read path as a gateway runs it, not as the tests tune it.
		d := gateway.DefaultConfig()
		c.Query.Scan.PageSize, c.CacheBytes = d.Query.Scan.PageSize, d.CacheBytes
	}})
	now := env.Clock.Now().UnixMilli()
	const n = 100_000
	from := now - n*1000
	batch := make([]ingest.Point, 0, n)
	for i := range n {
		v := math.Round((20+float64(i%977)/7)*100) / 100
		batch = append(batch, ingest.Point{Series: "page", T: from + int64(i)*1000, V: v})
	}
	if _, err := env.Writer.Backfill(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(env.Gateway.Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	u := fmt.Sprintf("%s/v1/series/page/points?from=%d&to=%d&resolution=raw&limit=%d", ts.URL, from, now, n)
	for _, coding := range []string{"identity", "gzip", "zstd"} {
		b.Run("encoding="+coding, func(b *testing.B) {
			var wire, plain int
			for b.Loop() {
				wire, plain = readCompressed(b, client, u, coding)
			}
			b.ReportMetric(float64(wire), "wire-bytes")
			b.ReportMetric(float64(plain), "json-bytes")
			// What the bytes cost on a 100 Mbit/s link, where the loopback
			// of the benchmark costs nothing.
			b.ReportMetric(float64(wire)*8/100e6*1000, "ms-at-100Mbit/s")
		})
	}
}

// readCompressed reads u asking for coding, and returns the bytes on the
// wire and the bytes they inflate to.
func readCompressed(b *testing.B, client *http.Client, u, coding string) (wire, plain int) {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Accept-Encoding", coding)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
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
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%d %v", resp.StatusCode, err)
	}
	return cr.n, int(m)
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
