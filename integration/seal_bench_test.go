//go:build integration

package integration

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

var sealBenchDays = flag.Int("bench.seal-days", 7, "days of 10 s points per series of BenchmarkSealedBytesPerPointOnCassandra")

// BenchmarkSealedBytesPerPointOnCassandra writes 20 series of
// -bench.seal-days days of 10 s gauges rounded to 3 decimals (the
// embedded store's BenchmarkSealedBytesPerPoint's data: a level, a daily
// cycle, a random walk and noise) into hourly buckets of 4 event buckets,
// raw retention 100 days; measures points_raw on disk once flushed;
// seals every bucket (rows deleted in the seal); and measures
// points_raw_chunks once flushed. points_raw then holds the deleted rows
// and their partition tombstones until compaction and gc_grace remove
// them, which is not waited for here: the chunk table is what the sealed
// form costs at rest. Run it once:
//
//	scripts/cassandra.sh run go test -tags integration ./integration/ -run '^$' -bench SealedBytesPerPointOnCassandra -benchtime 1x
func BenchmarkSealedBytesPerPointOnCassandra(b *testing.B) {
	const step, retention, series = 10 * tiers.Second, 100 * tiers.Day, 20
	p := tiers.DefaultPyramid()
	p[0].Retention, p[1].Retention = retention, retention
	for b.Loop() {
		store, _, cfg := freshStore(b, p, func(c *cassandra.Config) { c.SealedRowsGrace = 0 })
		ctx := context.Background()
		end := tiers.AlignDown(time.Now().UnixMilli(), tiers.Hour) - tiers.Hour
		start := end - int64(*sealBenchDays)*tiers.Day
		layout := p.Raw().DefaultLayout()
		var points int64
		for i := range series {
			r := rand.New(rand.NewPCG(uint64(i), 29))
			level, cycle, phase := 10+r.Float64()*90, 1+r.Float64()*20, r.Float64()*2*math.Pi
			walkStep, noise, walk := 0.01+r.Float64()*0.05, 0.05+r.Float64()*0.5, 0.0
			id := fmt.Sprintf("node_gauge.%02d", i)
			for bucket := start; bucket < end; bucket += tiers.Hour {
				writes := make([]tiers.PartitionWrite, 4)
				for eb := range writes {
					writes[eb] = tiers.PartitionWrite{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: id, Bucket: bucket, EventBucket: eb}, Retention: retention}
				}
				for t := bucket; t < bucket+tiers.Hour; t += step {
					walk += r.NormFloat64() * walkStep
					day := 2 * math.Pi * float64(t%tiers.Day) / float64(tiers.Day)
					v := math.Round((level+cycle*math.Sin(day+phase)+walk+r.NormFloat64()*noise)*1000) / 1000
					_, eb := layout.Locate(t)
					writes[eb].Rows = append(writes[eb].Rows, tiers.PointRow(t, v))
					points++
				}
				if err := store.Write(ctx, writes); err != nil {
					b.Fatal(err)
				}
			}
		}
		rows, ok := tableSizes(b, ctx, cfg.Keyspace, []string{string(tiers.TableRaw), "points_raw_chunks"})
		sealStart := time.Now()
		for i := range series {
			id := fmt.Sprintf("node_gauge.%02d", i)
			for bucket := start; bucket < end; bucket += tiers.Hour {
				if _, err := store.SealBucket(ctx, id, bucket, 4, retention); err != nil {
					b.Fatal(err)
				}
			}
		}
		sealTime := time.Since(sealStart)
		sealed, _ := tableSizes(b, ctx, cfg.Keyspace, []string{string(tiers.TableRaw), "points_raw_chunks"})
		b.ReportMetric(float64(points), "points")
		b.ReportMetric(float64(points)/sealTime.Seconds(), "sealed-points/s")
		if ok {
			b.ReportMetric(float64(rows[string(tiers.TableRaw)])/float64(points), "row-bytes/point")
			b.ReportMetric(float64(sealed["points_raw_chunks"])/float64(points), "chunk-bytes/point")
		}
	}
}
