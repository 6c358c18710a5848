package embedded

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// BenchmarkRollupRowBytesOnDisk writes the rollup rows of 20 series of 30
// days of 10 s points — minute rows folded from the points, hour rows from
// the minute rows, day rows from the hour rows, as the rollup worker
// folds them — into three stores: with the extras as rollups keep them
// (quantile sketch and counter summary), with the counter summary alone,
// and with no extras. After a flush and a full compaction it reports each
// tier's bytes on disk per row (Pebble's estimate of the tier's key
// range, after its block compression), for realistic gauges and for
// heavy-tailed latencies. Run it once:
//
//	go test ./tiers/embedded/ -run '^$' -bench RollupRowBytesOnDisk -benchtime 1x
func BenchmarkRollupRowBytesOnDisk(b *testing.B) {
	const series, days, step = 20, 30, 10 * tiers.Second
	for _, data := range []struct {
		name  string
		value func(g *gauge, r *rand.Rand, t int64) float64
	}{
		{"gauge", func(g *gauge, _ *rand.Rand, t int64) float64 { return g.at(t) }},
		// Latencies in milliseconds: log-normal, median 20 ms, a heavy
		// tail, three decimals.
		{"latency", func(_ *gauge, r *rand.Rand, _ int64) float64 {
			return math.Round(math.Exp(r.NormFloat64()*1.2+3)*1000) / 1000
		}},
	} {
		b.Run(data.name, func(b *testing.B) {
			for b.Loop() {
				end := tiers.AlignDown(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), tiers.Day)
				start := end - days*tiers.Day
				variants := []struct {
					name string
					keep func(x tiers.Extras) *tiers.Extras
				}{
					{"extras", func(x tiers.Extras) *tiers.Extras { return &x }},
					{"counter", func(x tiers.Extras) *tiers.Extras {
						x.Sketch, x.Derived, x.Live = nil, false, nil
						return &x
					}},
					{"none", func(tiers.Extras) *tiers.Extras { return nil }},
				}
				stores := make([]*Store, len(variants))
				for i := range variants {
					s, err := Open(b.TempDir(), Options{Now: func() time.Time { return time.UnixMilli(end + tiers.Hour) }, SweepInterval: -1})
					if err != nil {
						b.Fatal(err)
					}
					stores[i] = s
				}
				ctx := context.Background()
				rows := map[byte]int{}
				// Rows wait in pending, per variant, until a day of them is
				// written at once.
				pending := make([][]tiers.PartitionWrite, len(variants))
				write := func(table tiers.Table, id string, bucket int64, r tiers.Row) {
					for i, v := range variants {
						row := r
						if r.X != nil {
							row.X = v.keep(*r.X.Compact(r))
						}
						ws := pending[i]
						if n := len(ws); n > 0 && ws[n-1].Key.Table == table && ws[n-1].Key.Series == id && ws[n-1].Key.Bucket == bucket {
							ws[n-1].Rows = append(ws[n-1].Rows, row)
						} else {
							ws = append(ws, tiers.PartitionWrite{Key: tiers.PartitionKey{Table: table, Series: id, Bucket: bucket}, Retention: 400 * tiers.Day, Rows: []tiers.Row{row}})
						}
						pending[i] = ws
					}
				}
				flush := func() {
					for i, ws := range pending {
						if err := stores[i].Write(ctx, ws); err != nil {
							b.Fatal(err)
						}
						pending[i] = nil
					}
				}
				for i := range series {
					g := newGauge(i)
					r := rand.New(rand.NewPCG(uint64(i), 31))
					id := "latency_ms{instance=\"host-" + string(rune('a'+i)) + "\"}"
					for d := start; d < end; d += tiers.Day {
						var day tiers.Row
						for h := d; h < d+tiers.Day; h += tiers.Hour {
							var hour tiers.Row
							for m := h; m < h+tiers.Hour; m += tiers.Minute {
								var minute tiers.Row
								for t := m; t < m+tiers.Minute; t += step {
									minute.AddExtras(tiers.PointRow(t, data.value(g, r, t)))
								}
								minute.T = m
								write(tiers.RollupTable(tiers.Minute), id, d, minute)
								rows[kindMinute]++
								hour.AddExtras(minute)
							}
							hour.T = h
							write(tiers.RollupTable(tiers.Hour), id, tiers.AlignDown(h, 30*tiers.Day), hour)
							rows[kindHour]++
							day.AddExtras(hour)
						}
						day.T = d
						write(tiers.RollupTable(tiers.Day), id, tiers.AlignDown(d, 365*tiers.Day), day)
						rows[kindDay]++
						flush()
					}
				}
				for i, v := range variants {
					s := stores[i]
					compactAll(b, s)
					for _, tier := range []struct {
						name string
						kind byte
					}{{"minute", kindMinute}, {"hour", kindHour}, {"day", kindDay}} {
						n, err := s.db.EstimateDiskUsage([]byte{tier.kind}, []byte{tier.kind + 1})
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(n)/float64(rows[tier.kind]), tier.name+"-"+v.name+"-B/row")
					}
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
