package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

// BenchmarkSealedRollupRows writes the minute and hour rows of 20 series of
// 30 days of 10 s gauges (folded from the points with their extras, as the
// rollup worker folds them), measures each tier's bytes on disk per row
// after a flush and a full compaction, reads every minute partition (with
// extras, as percentiles and increases read, and without), seals every partition
// (SealRollup, one goroutine), compacts and measures again, and reads
// again. It reports bytes per row as rows and sealed, the sealing rate
// and the reading time per row of each form. Run it once:
//
//	go test ./tiers/embedded/ -run '^$' -bench SealedRollupRows -benchtime 1x
func BenchmarkSealedRollupRows(b *testing.B) {
	const series, days, step = 20, 30, 10 * tiers.Second
	p := tiers.DefaultPyramid()
	minute, hour := p.Tier(1), p.Tier(2)
	// Every row of the 30 days is kept, the oldest minute rows included.
	const retention = 400 * tiers.Day
	for b.Loop() {
		end := tiers.AlignDown(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), tiers.Day)
		start := end - days*tiers.Day
		dir := b.TempDir()
		opts := Options{Now: func() time.Time { return time.UnixMilli(end + tiers.Hour) }, SweepInterval: -1}
		s, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		var keys []tiers.PartitionKey
		rows := map[tiers.Table]int{}
		for i := range series {
			g := newGauge(i)
			id := "bench_gauge{host=\"host-" + string(rune('a'+i)) + "\"}"
			hourRows := map[int64][]tiers.Row{}
			for d := start; d < end; d += tiers.Day {
				var minutes []tiers.Row
				for h := d; h < d+tiers.Day; h += tiers.Hour {
					var hr tiers.Row
					for m := h; m < h+tiers.Hour; m += tiers.Minute {
						var mr tiers.Row
						for t := m; t < m+tiers.Minute; t += step {
							mr.AddExtras(tiers.PointRow(t+5*tiers.Second, g.at(t)))
						}
						mr.T = m
						hr.AddExtras(mr)
						mr.X = mr.X.Compact(mr)
						minutes = append(minutes, mr)
					}
					hr.T = h
					hr.X = hr.X.Compact(hr)
					bucket := tiers.AlignDown(h, hour.BucketWidth)
					hourRows[bucket] = append(hourRows[bucket], hr)
				}
				key := tiers.PartitionKey{Table: minute.Table, Series: id, Bucket: d}
				keys = append(keys, key)
				if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: retention, Rows: minutes}}); err != nil {
					b.Fatal(err)
				}
				rows[minute.Table] += len(minutes)
			}
			for bucket, rs := range hourRows {
				key := tiers.PartitionKey{Table: hour.Table, Series: id, Bucket: bucket}
				keys = append(keys, key)
				if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: retention, Rows: rs}}); err != nil {
					b.Fatal(err)
				}
				rows[hour.Table] += len(rs)
			}
		}
		tierBytes := func(kinds ...byte) map[tiers.Table]float64 {
			compactAll(b, s)
			out := map[tiers.Table]float64{}
			for i, t := range []*tiers.Tier{minute, hour} {
				lower := append(append([]byte{}, kinds...), kindMinute+byte(i))
				upper := append(append([]byte{}, kinds...), kindMinute+byte(i)+1)
				n, err := s.db.EstimateDiskUsage(lower, upper)
				if err != nil {
					b.Fatal(err)
				}
				out[t.Table] = float64(n) / float64(rows[t.Table])
			}
			return out
		}
		readMinutes := func(extras bool) float64 {
			start := time.Now()
			n := 0
			for _, k := range keys {
				if k.Table != minute.Table {
					continue
				}
				got, _, err := storetest.ReadAll(s.Read(ctx, tiers.ReadRequest{Key: k, Span: tiers.Span{From: k.Bucket, To: k.Bucket + tiers.Day}, Extras: extras}))
				if err != nil || len(got) != 1440 {
					b.Fatalf("%+v: %d rows, %v", k, len(got), err)
				}
				n += len(got)
			}
			return float64(time.Since(start).Nanoseconds()) / float64(n)
		}
		// coldWeek reopens the store (its caches empty, the operating
		// system's warm) and reads the last 7 days of minute partitions of
		// every series, as a cold 7-day panel does, in ms.
		coldWeek := func() float64 {
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			if s, err = Open(dir, opts); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for _, k := range keys {
				if k.Table != minute.Table || k.Bucket < end-7*tiers.Day {
					continue
				}
				if _, _, err := storetest.ReadAll(s.Read(ctx, tiers.ReadRequest{Key: k, Span: tiers.Span{From: k.Bucket, To: k.Bucket + tiers.Day}})); err != nil {
					b.Fatal(err)
				}
			}
			return float64(time.Since(start).Microseconds()) / 1000
		}
		asRows := tierBytes()
		coldRows := coldWeek()
		readRows, readRowsBare := readMinutes(true), readMinutes(false)
		sealStart := time.Now()
		sealed := 0
		for _, k := range keys {
			rep, err := s.SealRollup(ctx, k, retention)
			if err != nil {
				b.Fatal(err)
			}
			sealed += rep.Rows
		}
		sealTime := time.Since(sealStart)
		asChunks := tierBytes(kindRollupChunk)
		if left := tierBytes(); left[minute.Table] > 0.1 { // the estimate counts whole blocks at the range's ends
			b.Fatalf("%.2f B a minute row left as rows", left[minute.Table])
		}
		coldSealed := coldWeek()
		readSealed, readSealedBare := readMinutes(true), readMinutes(false)
		b.ReportMetric(asRows[minute.Table], "minute-rows-B/row")
		b.ReportMetric(asChunks[minute.Table], "minute-sealed-B/row")
		b.ReportMetric(asRows[hour.Table], "hour-rows-B/row")
		b.ReportMetric(asChunks[hour.Table], "hour-sealed-B/row")
		b.ReportMetric(float64(sealed)/sealTime.Seconds(), "sealed-rows/s")
		b.ReportMetric(readRows, "read-rows-ns/row")
		b.ReportMetric(readSealed, "read-sealed-ns/row")
		b.ReportMetric(readRowsBare, "read-rows-bare-ns/row")
		b.ReportMetric(readSealedBare, "read-sealed-bare-ns/row")
		b.ReportMetric(coldRows, "cold-week-rows-ms")
		b.ReportMetric(coldSealed, "cold-week-sealed-ms")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
