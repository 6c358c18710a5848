package promtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tsgate/tsgate/tiers"
)

// BenchRemoteWrite times the same points (50 labelled series × 200
// samples) written by Prometheus remote write and by POST /v1/points, one
// sub-benchmark each, through a gateway over store; each reports
// points/s. Every request rewrites the same points: upserts, as a retried
// batch is.
func BenchRemoteWrite(b *testing.B, store tiers.Store) {
	s := NewServer(b, store)
	now := s.Env.Clock.Now().UnixMilli()
	const series, samples = 50, 200
	var wr prompb.WriteRequest
	var js bytes.Buffer
	js.WriteString(`{"points":[`)
	for i := range series {
		l := tiers.Labels{"__name__": "bench_rw", "instance": fmt.Sprintf("host-%d", i), "job": "bench"}
		ts := prompb.TimeSeries{}
		for _, n := range []string{"__name__", "instance", "job"} {
			ts.Labels = append(ts.Labels, prompb.Label{Name: n, Value: l[n]})
		}
		for k := range samples {
			t, v := now-10*tiers.Minute+int64(k)*2_000+int64(i), float64(k)*1.5
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
			if i+k > 0 {
				js.WriteByte(',')
			}
			fmt.Fprintf(&js, `{"series":"bench.json.%d","t":%d,"v":%g}`, i, t, v)
		}
		wr.Timeseries = append(wr.Timeseries, ts)
	}
	js.WriteString(`]}`)
	raw, err := wr.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	bodies := []struct {
		name, path string
		body       []byte
		headers    map[string]string
	}{
		{"remote_write", "/prometheus/api/v1/write", snappy.Encode(nil, raw), map[string]string{
			"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy", "X-Prometheus-Remote-Write-Version": "0.1.0"}},
		{"v1_points", "/v1/points", js.Bytes(), map[string]string{"Content-Type": "application/json"}},
	}
	for _, c := range bodies {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("POST", s.URL+c.path, bytes.NewReader(c.body))
				for k, v := range c.headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					b.Fatalf("%s: %d %s", c.path, resp.StatusCode, msg)
				}
			}
			b.ReportMetric(float64(series*samples*b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}
