package storetest

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// ExtrasData are the kinds of values the extras tests build windows of:
// each returns n values of one window.
var ExtrasData = map[string]func(r *rand.Rand, n int) []float64{
	"uniform": func(r *rand.Rand, n int) []float64 { return gen(n, func() float64 { return r.Float64() * 100 }) },
	"latencies": func(r *rand.Rand, n int) []float64 {
		return gen(n, func() float64 { return math.Exp(r.NormFloat64()*1.5 + 3) })
	},
	"constant": func(r *rand.Rand, n int) []float64 { return gen(n, func() float64 { return 21.5 }) },
	"negative": func(r *rand.Rand, n int) []float64 {
		return gen(n, func() float64 { return -math.Exp(r.NormFloat64() * 2) })
	},
	"zeros": func(r *rand.Rand, n int) []float64 { return gen(n, func() float64 { return 0 }) },
	"mixed": func(r *rand.Rand, n int) []float64 { return gen(n, func() float64 { return r.NormFloat64() * 10 }) },
	"huge": func(r *rand.Rand, n int) []float64 {
		return gen(n, func() float64 { return (r.Float64() - 0.3) * 1e300 })
	},
	"tiny": func(r *rand.Rand, n int) []float64 { return gen(n, func() float64 { return r.Float64() * 1e-300 }) },
	"counter": func(r *rand.Rand, n int) []float64 {
		v := float64(r.IntN(1000))
		return gen(n, func() float64 {
			if r.IntN(15) == 0 {
				v = float64(r.IntN(5)) // a reset
			} else {
				v += float64(r.IntN(50))
			}
			return v
		})
	},
}

func gen(n int, f func() float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

// rowsWithExtras returns a rollup row with extras per window of step
// from base, n windows, each built from points of the data kind (one
// point in some), folded as the rollup worker folds them.
func rowsWithExtras(r *rand.Rand, kind string, base, step int64, n int) []tiers.Row {
	rows := make([]tiers.Row, n)
	for i := range rows {
		t := base + int64(i)*step
		count := 1 + r.IntN(40)
		if i%5 == 0 {
			count = 1
		}
		rows[i].T = t
		for k, v := range ExtrasData[kind](r, count) {
			rows[i].AddExtras(tiers.PointRow(t+int64(k)*(step/int64(count+1))+int64(r.IntN(int(step/int64(count+1)))), v))
		}
	}
	return rows
}

// sameExtras reports whether two rows hold the same aggregates and
// extras: the counters exactly, and every quantile of the sketches
// bit for bit (the encoding loses nothing).
func sameExtras(a, b tiers.Row) bool {
	if a.T != b.T || a.Min != b.Min || a.Max != b.Max || a.Sum != b.Sum || a.Count != b.Count {
		return false
	}
	if (a.X == nil) != (b.X == nil) {
		return false
	}
	if a.X == nil {
		return true
	}
	if a.X.HasCounter != b.X.HasCounter || a.X.Counter != b.X.Counter || a.X.HasSketch() != b.X.HasSketch() {
		return false
	}
	for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
		qa, oka := a.Quantile(q)
		qb, okb := b.Quantile(q)
		if oka != okb || math.Float64bits(qa) != math.Float64bits(qb) {
			return false
		}
	}
	return true
}

// extrasRoundTrip writes rollup rows with extras of every kind of data to
// every rollup table and reads them back: without asking, the rows as
// before (no extras); asking, the same extras, in both orders and under
// any page size. A row written without extras reads back with extras
// that know nothing.
func (s suite) extrasRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, l := range s.pyramid.Rollups() {
		tier := s.pyramid.Tier(l)
		for _, kind := range slices.Sorted(maps.Keys(ExtrasData)) {
			t.Run(tier.Name+"/"+kind, func(t *testing.T) {
				series := s.series("extras." + tier.Name + "." + kind)
				bucket := tiers.AlignDown(now()-tiers.Hour, tier.BucketWidth)
				n := int(min(30, tier.BucketWidth/tier.Step))
				rows := rowsWithExtras(r, kind, bucket, tier.Step, n)
				bare := tiers.Row{T: bucket + int64(n)*tier.Step, Min: 1, Max: 2, Sum: 3, Count: 2}
				if bare.T >= bucket+tier.BucketWidth {
					bare.T = rows[n-1].T
					rows = rows[:n-1]
				}
				for _, row := range rows {
					if enc := tiers.AppendExtras(nil, row); len(enc) > tiers.MaxExtrasLen {
						t.Fatalf("extras of %d bytes", len(enc))
					}
				}
				key := tiers.PartitionKey{Table: tier.Table, Series: series, Bucket: bucket}
				s.write(t, tiers.PartitionWrite{Key: key, Retention: tier.Retention, Rows: append(slices.Clone(rows), bare)})
				span := tiers.Span{From: bucket, To: bucket + tier.BucketWidth}
				want := append(slices.Clone(rows), bare)
				for _, desc := range []bool{false, true} {
					for _, page := range []int{1, 7, 1000} {
						plain := s.read(t, tiers.ReadRequest{Key: key, Span: span, Desc: desc, PageSize: page})
						got := s.read(t, tiers.ReadRequest{Key: key, Span: span, Desc: desc, PageSize: page, Extras: true})
						if len(plain) != len(want) || len(got) != len(want) {
							t.Fatalf("desc=%v page=%d: %d and %d rows, want %d", desc, page, len(plain), len(got), len(want))
						}
						for i := range want {
							k := i
							if desc {
								k = len(want) - 1 - i
							}
							w := want[k]
							if plain[i].X != nil || plain[i].T != w.T || plain[i].Sum != w.Sum || plain[i].Count != w.Count {
								t.Fatalf("desc=%v page=%d row %d read without extras: %+v, want %+v", desc, page, i, plain[i], w)
							}
							if k == len(want)-1 {
								if x := got[i].X; x == nil || x.HasSketch() || x.HasCounter {
									t.Fatalf("a row written without extras reads with %+v", x)
								}
								continue
							}
							if !sameExtras(got[i], w) {
								t.Fatalf("desc=%v page=%d row %d: %+v %+v, want %+v %+v", desc, page, i, got[i], got[i].X, w, w.X)
							}
						}
					}
				}
			})
		}
	}
	// Raw tables ignore the request.
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("extras.raw"), Bucket: tiers.AlignDown(now(), tiers.Hour)}
	s.write(t, tiers.PartitionWrite{Key: key, Retention: tiers.Week, Rows: []tiers.Row{tiers.PointRow(key.Bucket, 1)}})
	if rows := s.read(t, tiers.ReadRequest{Key: key, Span: tiers.Span{From: key.Bucket, To: key.Bucket + tiers.Hour}, Extras: true}); len(rows) != 1 || rows[0] != tiers.PointRow(key.Bucket, 1) {
		t.Fatalf("raw rows read with extras: %+v", rows)
	}
}
