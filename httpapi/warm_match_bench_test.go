package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkWarmMatchRead is the 90-day panel of 20 series a dashboard
// refreshes: GET /v1/points?match=&max_points=1000&agg=avg (3-hour
// windows from the hour tier, 720 a series), every bucket final and
// cached, as the answer is built and encoded for a client without and
// with gzip.
func BenchmarkWarmMatchRead(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(b, store, querytest.Options{Configure: func(c *gateway.Config) {
		// The caches as a gateway starts with them.
		c.CacheBytes, c.ResultsCacheBytes = 256<<20, 128<<20
		c.Pyramid[0].Retention, c.Pyramid[1].Retention = 100*tiers.Day, 100*tiers.Day
	}})
	end := tiers.AlignDown(env.Clock.Now().UnixMilli(), tiers.Day)
	span := tiers.Span{From: end - 90*tiers.Day, To: end}
	ctx := context.Background()
	var batch ingest.Batch
	batch.Labels = map[string]tiers.Labels{}
	for i := range 20 {
		id := fmt.Sprintf("wm.cpu.%02d", i)
		batch.Labels[id] = tiers.Labels{"__name__": "wm_cpu", "host": fmt.Sprint("h", i)}
		for t := span.From + int64(i); t < span.To; t += 10 * tiers.Minute {
			batch.Points = append(batch.Points, ingest.Point{Series: id, T: t, V: float64((t/tiers.Minute)%97)/7 + float64(i)})
		}
	}
	if _, err := env.Writer.BackfillBatch(ctx, batch); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		b.Fatal(err)
	}
	// Past the raw retention the rollups' buckets are final, as a 90-day
	// panel's are but for its last days.
	env.Clock.Advance(101 * 24 * time.Hour)
	h := env.Gateway.Handler()
	u := fmt.Sprintf("/v1/points?match=wm_cpu&from=%d&to=%d&max_points=1000&agg=avg", span.From, span.To)
	for _, enc := range []string{"identity", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			get := func() *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, u, nil)
				r.Header.Set("Accept-Encoding", enc)
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
				return w
			}
			get()
			last := get()
			size := last.Body.Len()
			if enc == "identity" {
				// Warm: every window from the results cache, none read.
				var a struct {
					Results []struct {
						Points [][]float64 `json:"points"`
					} `json:"results"`
					Stats struct {
						RowsRead int64 `json:"rows_read"`
					} `json:"stats"`
				}
				if err := jsonUnmarshal(last.Body.Bytes(), &a); err != nil {
					b.Fatal(err)
				}
				if len(a.Results) != 20 || len(a.Results[0].Points) != 720 || a.Stats.RowsRead != 0 {
					b.Fatalf("%d results, %d windows in the first, %d rows read: want 20, 720 and none", len(a.Results), len(a.Results[0].Points), a.Stats.RowsRead)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				get()
			}
			b.ReportMetric(float64(size), "body-bytes")
		})
	}
}
