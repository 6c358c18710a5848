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

// BenchmarkSealedRollupRowsOnCassandra writes the minute rows, with their
// extras, of 20 series of -bench.seal-days days of the same 10 s gauges
// (folded from the points as the rollup worker folds them), measures
// rollup_1m on disk once flushed, seals every day partition (rows deleted
// in the seal) and measures rollup_1m_chunks once flushed, as
// BenchmarkSealedBytesPerPointOnCassandra does for raw points. Run it
// once:
//
//	scripts/cassandra.sh run go test -tags integration ./integration/ -run '^$' -bench SealedRollupRowsOnCassandra -benchtime 1x
func BenchmarkSealedRollupRowsOnCassandra(b *testing.B) {
	const step, retention, series = 10 * tiers.Second, 100 * tiers.Day, 20
	p := tiers.DefaultPyramid()
	p[0].Retention, p[1].Retention = retention, retention
	minute := p.Tier(1)
	for b.Loop() {
		store, _, cfg := freshStore(b, p, func(c *cassandra.Config) { c.SealedRowsGrace = 0 })
		ctx := context.Background()
		end := tiers.AlignDown(time.Now().UnixMilli(), tiers.Day)
		start := end - int64(*sealBenchDays)*tiers.Day
		var rows int64
		for i := range series {
			r := rand.New(rand.NewPCG(uint64(i), 29))
			level, cycle, phase := 10+r.Float64()*90, 1+r.Float64()*20, r.Float64()*2*math.Pi
			walkStep, noise, walk := 0.01+r.Float64()*0.05, 0.05+r.Float64()*0.5, 0.0
			id := fmt.Sprintf("node_gauge.%02d", i)
			for day := start; day < end; day += tiers.Day {
				w := tiers.PartitionWrite{Key: tiers.PartitionKey{Table: minute.Table, Series: id, Bucket: day}, Retention: retention}
				for m := day; m < day+tiers.Day; m += tiers.Minute {
					row := tiers.Row{T: m}
					for t := m; t < m+tiers.Minute; t += step {
						walk += r.NormFloat64() * walkStep
						phaseOfDay := 2 * math.Pi * float64(t%tiers.Day) / float64(tiers.Day)
						row.AddExtras(tiers.PointRow(t, math.Round((level+cycle*math.Sin(phaseOfDay+phase)+walk+r.NormFloat64()*noise)*1000)/1000))
					}
					row.X = row.X.Compact(row)
					w.Rows = append(w.Rows, row)
				}
				if err := store.Write(ctx, []tiers.PartitionWrite{w}); err != nil {
					b.Fatal(err)
				}
				rows += int64(len(w.Rows))
			}
		}
		tables := []string{string(minute.Table), string(minute.Table) + "_chunks"}
		before, ok := tableSizes(b, ctx, cfg.Keyspace, tables)
		sealStart := time.Now()
		for i := range series {
			id := fmt.Sprintf("node_gauge.%02d", i)
			for day := start; day < end; day += tiers.Day {
				if _, err := store.SealRollup(ctx, tiers.PartitionKey{Table: minute.Table, Series: id, Bucket: day}, retention); err != nil {
					b.Fatal(err)
				}
			}
		}
		sealTime := time.Since(sealStart)
		after, _ := tableSizes(b, ctx, cfg.Keyspace, tables)
		b.ReportMetric(float64(rows), "rows")
		b.ReportMetric(float64(rows)/sealTime.Seconds(), "sealed-rows/s")
		if ok {
			b.ReportMetric(float64(before[tables[0]])/float64(rows), "row-bytes/row")
			b.ReportMetric(float64(after[tables[1]])/float64(rows), "chunk-bytes/row")
		}
	}
}
