package tiers

import (
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkRollupRowBytes measures what the extras add to a rollup row as
// both stores keep them (AppendExtras: the embedded store after the row's
// 40 bytes of expiry and aggregates, Cassandra in the extras blob), per
// tier of the default pyramid, for one series written every 10 s for a
// day: minute rows folded from the points, hour rows from the minute
// rows' stored extras, the day row from the hour rows'. It reports, per
// tier, the mean bytes of the extras (sketch and counter), of the sketch
// alone and the largest extras of any row.
//
//	go test ./tiers -run XXX -bench RollupRowBytes -benchtime 3x
func BenchmarkRollupRowBytes(b *testing.B) {
	for _, data := range []struct {
		name  string
		value func(r *rand.Rand, prev float64) float64
	}{
		// A gauge: a random walk around 50 with two decimals.
		{"gauge", func(r *rand.Rand, prev float64) float64 {
			return math.Round((prev+r.NormFloat64()*0.3)*100) / 100
		}},
		// Latencies in milliseconds: log-normal, median 20 ms, a heavy
		// tail, three decimals.
		{"latency", func(r *rand.Rand, _ float64) float64 {
			return math.Round(math.Exp(r.NormFloat64()*1.2+3)*1000) / 1000
		}},
	} {
		b.Run(data.name, func(b *testing.B) {
			type tally struct {
				rows, extras, sketch, largest int
			}
			var tiers [3]tally // minute, hour, day
			add := func(l int, r Row) Row {
				enc := AppendExtras(nil, r)
				noSketch := r
				x := *r.X
				x.Sketch, x.Derived, x.Live = nil, false, nil
				noSketch.X = &x
				t := &tiers[l]
				t.rows++
				t.extras += len(enc)
				t.sketch += len(enc) - len(AppendExtras(nil, noSketch))
				t.largest = max(t.largest, len(enc))
				// Coarser tiers fold the rows as stored.
				stored := r
				var err error
				if stored.X, err = DecodeExtras(r, enc); err != nil {
					b.Fatal(err)
				}
				return stored
			}
			seed := uint64(0)
			for b.Loop() {
				seed++
				r := rand.New(rand.NewPCG(seed, 9))
				v := 50.0
				var day Row
				for h := range int64(24) {
					var hour Row
					for m := range int64(60) {
						var minute Row
						for s := range int64(6) {
							v = data.value(r, v)
							minute.AddExtras(PointRow(h*Hour+m*Minute+s*10*Second, v))
						}
						minute.T = h*Hour + m*Minute
						hour.AddExtras(add(0, minute))
					}
					hour.T = h * Hour
					day.AddExtras(add(1, hour))
				}
				add(2, day)
			}
			for l, name := range []string{"minute", "hour", "day"} {
				t := tiers[l]
				b.ReportMetric(float64(t.extras)/float64(t.rows), name+"-extras-B/row")
				b.ReportMetric(float64(t.sketch)/float64(t.rows), name+"-sketch-B/row")
				b.ReportMetric(float64(t.largest), name+"-max-extras-B")
			}
		})
	}
}
