package promapi_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/tsgate/tsgate/promapi/promtest"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkQueryRange measures query_range through the Prometheus Go
// client over HTTP, on an in-memory embedded store holding four series
// of three days (about 2,000 points each), rolled up.
//
//	go test -run XXX -bench QueryRange -benchtime 2s ./promapi/
func BenchmarkQueryRange(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	s := promtest.NewServer(b, store)
	r := rand.New(rand.NewPCG(1, 2))
	s.Load(b, "bench", 4, r)
	now := s.Env.Clock.Now().UnixMilli()
	sel := `tsgate{series=~"bench\\..*"}`
	for _, c := range []struct {
		name, expr string
		span, step int64
	}{
		{"max_over_time_1h_over_90d", "max_over_time(" + sel + "[1h])", 90 * tiers.Day, tiers.Hour},
		{"avg_by_series_5m_over_3d", "avg by (series) (avg_over_time(" + sel + "[5m]))", 3 * tiers.Day, 5 * tiers.Minute},
		{"sum_1d_range_1h_step_over_3d", "sum(sum_over_time(" + sel + "[1d]))", 3 * tiers.Day, tiers.Hour},
		{"bare_selector_5m_over_3d_raw", sel, 3 * tiers.Day, 5 * tiers.Minute},
	} {
		b.Run(c.name, func(b *testing.B) {
			end := tiers.AlignDown(now, c.step)
			rng := v1.Range{Start: time.UnixMilli(end - c.span), End: time.UnixMilli(end), Step: time.Duration(c.step) * time.Millisecond}
			points := 0
			for b.Loop() {
				v, _, _, err := s.API.QueryRange(context.Background(), c.expr, rng)
				if err != nil {
					b.Fatal(err)
				}
				points = 0
				for _, ss := range v.(model.Matrix) {
					points += len(ss.Values)
				}
			}
			b.ReportMetric(float64(points), "points/op")
			if points == 0 {
				b.Fatalf("%s: no points", c.name)
			}
		})
	}
}
