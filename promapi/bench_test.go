package promapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/testkit/promtest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkOverTime90Days evaluates a 90-day panel of max_over_time over
// hours at an hour step, on 4 gauges sampled every 30 s (1.04 M points,
// raw kept 100 days so that both ways are possible), answered from the
// hour tier ("rollups") and from raw points ("raw": the same query with
// an offset of 1 ms, which no window tiles). The ratio of the two is the
// pyramid's gain under PromQL.
func BenchmarkOverTime90Days(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	s := promtest.NewServerWith(b, store, querytest.Options{Configure: func(c *gateway.Config) {
		c.Pyramid[0].Retention = 100 * tiers.Day
		c.Query.MaxPartitions = 100_000
	}})
	now := s.Env.Clock.Now().UnixMilli()
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for i := range 4 {
		var batch ingest.Batch
		l := tiers.Labels{"__name__": "bench_temperature", "sensor": fmt.Sprint(i)}
		id := "bench_temperature.s" + fmt.Sprint(i)
		batch.Labels = map[string]tiers.Labels{id: l}
		v := 20.0
		for t := now - 91*tiers.Day + 7; t < now-tiers.Minute; t += 30 * tiers.Second {
			v += r.NormFloat64() / 10
			batch.Points = append(batch.Points, ingest.Point{Series: id, T: t, V: v})
		}
		if _, err := s.Env.Writer.BackfillBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Env.Rollups.RunOnce(ctx, true); err != nil {
		b.Fatal(err)
	}
	end := s.Env.Clock.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	rg := v1.Range{Start: end.Add(-90 * 24 * time.Hour), End: end, Step: time.Hour}
	for _, c := range []struct{ name, query string }{
		{"rollups", `max_over_time(bench_temperature[1h])`},
		{"raw", `max_over_time(bench_temperature[1h] offset 1ms)`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v, _, _, err := s.API.QueryRange(ctx, c.query, rg)
				if err != nil {
					b.Fatal(err)
				}
				if n := len(v.String()); n == 0 {
					b.Fatal("empty answer")
				}
			}
		})
	}
}
