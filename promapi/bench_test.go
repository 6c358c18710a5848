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

// BenchmarkOverTime90Days evaluates 90-day panels at an hour step —
// max_over_time and the p99 (quantile_over_time) over hours of 4 gauges,
// rate over hours of 4 counters with resets, each sampled every 30 s (1.05 M points a metric, raw kept
// 100 days so that both ways are possible) — answered from the hour tier
// ("rollups") and from raw points ("raw": the same query with an offset
// of 1 ms, which no window tiles). The ratio of the two is the pyramid's
// gain under PromQL; the rates and the p99s are first checked to agree
// within 1 %.
func BenchmarkOverTime90Days(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	s := promtest.NewServerWith(b, store, querytest.Options{Configure: func(c *gateway.Config) {
		// Raw and minute rows kept 100 days: the hour tier is rolled up
		// from minute rows, so these must reach as far back.
		c.Pyramid[0].Retention, c.Pyramid[1].Retention = 100*tiers.Day, 100*tiers.Day
		c.Query.MaxPartitions = 100_000
		// Rates and quantiles read windows past an hour back, as past
		// the raw retention with the defaults.
		c.Prometheus.ExactWithin = time.Hour
	}})
	now := s.Env.Clock.Now().UnixMilli()
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for i := range 4 {
		var batch ingest.Batch
		l := tiers.Labels{"__name__": "bench_temperature", "sensor": fmt.Sprint(i)}
		id := "bench_temperature.s" + fmt.Sprint(i)
		batch.Labels = map[string]tiers.Labels{id: l}
		// A walk that stays far from zero (its spread over 91 days is
		// about 50): a quantile between two points of opposite signs is
		// within 1 % of neither's scale, from a sketch or otherwise.
		v := 1000.0
		for t := now - 91*tiers.Day + 7; t < now-tiers.Minute; t += 30 * tiers.Second {
			v += r.NormFloat64() / 10
			batch.Points = append(batch.Points, ingest.Point{Series: id, T: t, V: v})
		}
		// A counter beside each gauge, restarting now and then.
		cid := "bench_requests_total.s" + fmt.Sprint(i)
		batch.Labels[cid] = tiers.Labels{"__name__": "bench_requests_total", "sensor": fmt.Sprint(i)}
		c := 0.0
		for t := now - 91*tiers.Day + 11; t < now-tiers.Minute; t += 30 * tiers.Second {
			c += float64(r.IntN(50))
			if r.IntN(20000) == 0 {
				c = float64(r.IntN(10))
			}
			batch.Points = append(batch.Points, ingest.Point{Series: cid, T: t, V: c})
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
	// rate over hour windows agrees with rate over the raw points.
	fromRollups, warnings, _, err := s.API.QueryRange(ctx, `rate(bench_requests_total[1h])`, rg)
	if err != nil || len(warnings) > 0 {
		b.Fatal(err, warnings)
	}
	fromRaw, _, _, err := s.API.QueryRange(ctx, `rate(bench_requests_total[1h] offset 1ms)`, rg)
	if err != nil {
		b.Fatal(err)
	}
	if d := promtest.DiffWithin(fromRollups, fromRaw, 0.01); d != "" {
		b.Fatalf("rate from hour windows and from raw points: %s", d)
	}
	// So does the p99 from the hour windows' sketches.
	fromRollups, _, _, err = s.API.QueryRange(ctx, `quantile_over_time(0.99, bench_temperature[1h])`, rg)
	if err != nil {
		b.Fatal(err)
	}
	fromRaw, _, _, err = s.API.QueryRange(ctx, `quantile_over_time(0.99, bench_temperature[1h] offset 1ms)`, rg)
	if err != nil {
		b.Fatal(err)
	}
	if d := promtest.DiffWithin(fromRollups, fromRaw, 0.01); d != "" {
		b.Fatalf("p99 from hour windows' sketches and from raw points: %s", d)
	}
	for _, c := range []struct{ name, query string }{
		{"max_over_time/rollups", `max_over_time(bench_temperature[1h])`},
		{"max_over_time/raw", `max_over_time(bench_temperature[1h] offset 1ms)`},
		{"rate/rollups", `rate(bench_requests_total[1h])`},
		{"rate/raw", `rate(bench_requests_total[1h] offset 1ms)`},
		{"p99/rollups", `quantile_over_time(0.99, bench_temperature[1h])`},
		{"p99/raw", `quantile_over_time(0.99, bench_temperature[1h] offset 1ms)`},
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

// BenchmarkRemoteWrite writes the same points — 50 labelled series of 200
// samples each, 10,000 points a request — by Prometheus remote write
// (protobuf, snappy) and by POST /v1/points (JSON), to the same gateway
// on an in-memory embedded store, the sides interleaved by b.Run order.
// Bodies are encoded before timing; points/s is reported per side.
func BenchmarkRemoteWrite(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	promtest.BenchRemoteWrite(b, store)
}
