package embedded

import (
	"context"
	"flag"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

var (
	sealSeries = flag.Int("bench.seal-series", 20, "series of BenchmarkSealedBytesPerPoint")
	sealDays   = flag.Int("bench.seal-days", 90, "days of 10 s points per series of BenchmarkSealedBytesPerPoint")
	sealEBs    = flag.Int("bench.seal-event-buckets", 4, "event buckets per hourly raw bucket of BenchmarkSealedBytesPerPoint")
)

// gauge is a realistic gauge: a daily cycle, a slow random walk and noise
// around a level of its own, rounded to 3 decimals as exporters print
// them.
type gauge struct {
	rnd                   *rand.Rand
	level, cycle, phase   float64
	walk, walkStep, noise float64
}

func newGauge(i int) *gauge {
	r := rand.New(rand.NewPCG(uint64(i), 29))
	return &gauge{rnd: r, level: 10 + r.Float64()*90, cycle: 1 + r.Float64()*20, phase: r.Float64() * 2 * math.Pi,
		walkStep: 0.01 + r.Float64()*0.05, noise: 0.05 + r.Float64()*0.5}
}

func (g *gauge) at(t int64) float64 {
	g.walk += g.rnd.NormFloat64() * g.walkStep
	day := 2 * math.Pi * float64(t%tiers.Day) / float64(tiers.Day)
	v := g.level + g.cycle*math.Sin(day+g.phase) + g.walk + g.rnd.NormFloat64()*g.noise
	return math.Round(v*1000) / 1000
}

// liveBytes is the size of the store's live tables and blob files, the
// data at rest; Pebble deletes the files a compaction made obsolete in
// the background, so the directory may still hold them for a while.
func liveBytes(s *Store) int64 {
	m := s.db.Metrics()
	return int64(m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize)
}

// compactAll flushes the memtables and compacts every key into the last
// level, so that the directory holds what the data costs at rest.
func compactAll(b *testing.B, s *Store) {
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSealedBytesPerPoint writes -bench.seal-series series of
// -bench.seal-days days of 10 s gauges (raw retention 100 days, hourly
// buckets of -bench.seal-event-buckets event buckets, 4 by default as in
// the default raw layout), measures the store's live tables after a
// flush and a full compaction, seals every bucket, and measures them
// again. It reports bytes on disk per point in
// both forms and the sealing rate of one goroutine. Run it once:
//
//	go test ./tiers/embedded/ -run '^$' -bench SealedBytesPerPoint -benchtime 1x
func BenchmarkSealedBytesPerPoint(b *testing.B) {
	const step, retention = 10 * tiers.Second, 100 * tiers.Day
	for b.Loop() {
		end := tiers.AlignDown(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), tiers.Day)
		start := end - int64(*sealDays)*tiers.Day
		dir := b.TempDir()
		s, err := Open(dir, Options{Now: func() time.Time { return time.UnixMilli(end + tiers.Hour) }, SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		layout := tiers.Layout{{Width: tiers.Hour, EventBuckets: *sealEBs}}
		var points int64
		for i := range *sealSeries {
			g := newGauge(i)
			id := "node_gauge{instance=\"host-" + string(rune('a'+i%26)) + "\",n=\"" + string(rune('0'+i/26)) + "\"}"
			for bucket := start; bucket < end; bucket += tiers.Hour {
				writes := make([]tiers.PartitionWrite, *sealEBs)
				for eb := range writes {
					writes[eb] = tiers.PartitionWrite{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: id, Bucket: bucket, EventBucket: eb}, Retention: retention}
				}
				for t := bucket; t < bucket+tiers.Hour; t += step {
					_, eb := layout.Locate(t)
					writes[eb].Rows = append(writes[eb].Rows, tiers.PointRow(t, g.at(t)))
					points++
				}
				if err := s.Write(ctx, writes); err != nil {
					b.Fatal(err)
				}
			}
		}
		compactAll(b, s)
		rowBytes := liveBytes(s)

		sealStart := time.Now()
		for i := range *sealSeries {
			id := "node_gauge{instance=\"host-" + string(rune('a'+i%26)) + "\",n=\"" + string(rune('0'+i/26)) + "\"}"
			for bucket := start; bucket < end; bucket += tiers.Hour {
				if _, err := s.SealBucket(ctx, id, bucket, *sealEBs, retention); err != nil {
					b.Fatal(err)
				}
			}
		}
		sealTime := time.Since(sealStart)
		compactAll(b, s)
		sealedBytes := liveBytes(s)
		if testing.Verbose() {
			b.Logf("after sealing:\n%s", s.db.Metrics())
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(points), "points")
		b.ReportMetric(float64(rowBytes)/float64(points), "row-bytes/point")
		b.ReportMetric(float64(sealedBytes)/float64(points), "sealed-bytes/point")
		b.ReportMetric(float64(points)/sealTime.Seconds(), "sealed-points/s")
	}
}
