package tiers

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// bruteCounter is the counter of samples in time order, the way
// Prometheus' increase walks them.
func bruteCounter(ts []int64, vs []float64) Counter {
	c := PointCounter(ts[0], vs[0])
	for i := 1; i < len(vs); i++ {
		c.Inc += step(vs[i-1], vs[i])
	}
	c.LastT, c.Last = ts[len(ts)-1], vs[len(vs)-1]
	return c
}

// TestCounterFoldIsExact folds integer counters with resets window by
// window, in both orders and through the encoding: exactly the brute
// force.
func TestCounterFoldIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := 1 + r.IntN(200)
		ts, vs := make([]int64, n), make([]float64, n)
		v := float64(r.IntN(1000))
		for i := range n {
			ts[i] = int64(i)*10_000 + int64(r.IntN(9000))
			if r.IntN(20) == 0 {
				v = float64(r.IntN(10)) // a reset
			} else {
				v += float64(r.IntN(100))
			}
			vs[i] = v
		}
		want := bruteCounter(ts, vs)
		// Windows of a minute, each encoded and decoded, then folded.
		var rows []Row
		for i := 0; i < n; {
			w := AlignDown(ts[i], Minute)
			acc := Row{T: w}
			for ; i < n && AlignDown(ts[i], Minute) == w; i++ {
				acc.AddExtras(PointRow(ts[i], vs[i]))
			}
			dec, err := DecodeExtras(acc, AppendExtras(nil, acc))
			if err != nil {
				t.Fatal(err)
			}
			acc.X = dec
			rows = append(rows, acc)
		}
		for _, desc := range []bool{false, true} {
			var acc Row
			for k := range rows {
				if desc {
					k = len(rows) - 1 - k
				}
				acc.AddExtras(rows[k])
			}
			if !acc.X.HasCounter || acc.X.Counter != want {
				t.Fatalf("round %d desc=%v: %+v, want %+v", round, desc, acc.X.Counter, want)
			}
		}
	}
}

func TestExtrasRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		n := 1 + r.IntN(20)
		t0 := int64(1_700_000_000_000)
		var acc Row
		acc.T = t0
		for i := range n {
			v := math.Round(r.NormFloat64()*100) / 8
			if r.IntN(3) == 0 {
				v = 21.3 + float64(i)*1e-6
			}
			acc.AddExtras(PointRow(t0+int64(i)*1000, v))
		}
		enc := AppendExtras(nil, acc)
		if len(enc) > MaxExtrasLen {
			t.Fatalf("%d bytes", len(enc))
		}
		x, err := DecodeExtras(acc, enc)
		if err != nil {
			t.Fatal(err)
		}
		if x.Counter != acc.X.Counter || !x.HasCounter {
			t.Fatalf("counter %+v, want %+v", x.Counter, acc.X.Counter)
		}
		got := acc
		got.X = x
		for _, q := range []float64{0, 0.5, 0.99, 1} {
			a, _ := acc.Quantile(q)
			b, ok := got.Quantile(q)
			if !ok || a != b {
				t.Fatalf("q%g: %g after the round trip, %g before", q, b, a)
			}
		}
	}
	// Unknown extras: one byte, and back.
	row := Row{T: 1, Min: 1, Max: 2, Sum: 3, Count: 2, X: &Extras{}}
	enc := AppendExtras(nil, row)
	if len(enc) != 1 {
		t.Fatalf("unknown extras take %d bytes", len(enc))
	}
	if x, err := DecodeExtras(row, enc); err != nil || x.HasSketch() || x.HasCounter {
		t.Fatalf("%+v %v", x, err)
	}
	if x, err := DecodeExtras(row, nil); err != nil || x.HasSketch() || x.HasCounter {
		t.Fatalf("no bytes: %+v %v", x, err)
	}
	if _, err := DecodeExtras(row, []byte{xCounter, 0x80}); err == nil {
		t.Fatal("decoded a truncated counter")
	}
}

// TestUnknownExtrasSpread: a window folded with a row that knows nothing
// knows nothing either; a group (AddSeries) keeps sketches, not counters.
func TestUnknownExtrasSpread(t *testing.T) {
	var acc Row
	acc.AddExtras(PointRow(1, 5))
	acc.AddExtras(Row{T: 60_000, Min: 1, Max: 1, Sum: 1, Count: 1, X: &Extras{}})
	if acc.X.HasSketch() || acc.X.HasCounter {
		t.Fatalf("%+v", acc.X)
	}
	if _, ok := acc.Quantile(0.5); ok {
		t.Fatal("a quantile of an unknown sketch")
	}
	var g Row
	g.AddSeries(PointRow(1, 5))
	g.AddSeries(PointRow(1, 7))
	if g.X.HasCounter || !g.X.HasSketch() || g.Count != 2 {
		t.Fatalf("%+v", g)
	}
}

// TestFoldLeavesItsInputsAlone: rows read from a store or a cache are
// shared; folding them never changes their extras.
func TestFoldLeavesItsInputsAlone(t *testing.T) {
	var a Row
	a.AddExtras(PointRow(1, 5))
	a.AddExtras(PointRow(2, 9))
	before, _ := a.Quantile(1)
	var acc Row
	acc.AddExtras(a)
	acc.AddExtras(PointRow(3, 100))
	if after, _ := a.Quantile(1); after != before || a.X.Counter.Last != 9 {
		t.Fatalf("the input changed: %g, %+v", after, a.X.Counter)
	}
}

// TestSameRow: a window folded from points equals its stored form (its
// extras encoded and decoded) whatever pointers they hold, and differs
// from it once a value changes, even when the aggregates stay, or when
// the stored row knows no extras.
func TestSameRow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	fold := func(vs []float64) Row {
		var w Row
		for i, v := range vs {
			w.AddExtras(PointRow(int64(i)*1000, v))
		}
		return w
	}
	for range 50 {
		vs := make([]float64, 1+r.IntN(300))
		for i := range vs {
			vs[i] = math.Exp(r.NormFloat64() * 3)
		}
		live := fold(vs)
		stored := live
		x, err := DecodeExtras(stored, AppendExtras(nil, fold(vs)))
		if err != nil {
			t.Fatal(err)
		}
		stored.X = x
		if !SameRow(live, stored) || !SameRow(stored, stored) {
			t.Fatalf("%d values: a row and its stored form differ", len(vs))
		}
		vs[r.IntN(len(vs))] *= 3
		if changed := fold(vs); SameRow(changed, stored) {
			t.Fatalf("%d values: a changed value went unnoticed", len(vs))
		}
		// The same min, max, sum and count, other values between.
		a, b := fold([]float64{1, 5, 5, 9}), fold([]float64{1, 4, 6, 9})
		if SameRow(a, b) {
			t.Fatal("rows whose sketches differ are the same")
		}
		unknown := stored
		unknown.X = &Extras{}
		if SameRow(live, unknown) || SameRow(live, Row{T: live.T, Min: live.Min, Max: live.Max, Sum: live.Sum, Count: live.Count}) {
			t.Fatal("a row without its extras equals one with them")
		}
	}
}

// randomCounterValue is a float as counters and gauges hold them: a
// decimal of 0 to 7 digits after the point (7 is past the decimal form),
// negative, zero of either sign, huge, or any float.
func randomCounterValue(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return math.Copysign(0, -1)
	case 1:
		return (r.Float64() - 0.5) * 1e300
	case 2:
		return math.Float64frombits(r.Uint64() &^ (0x7ff << 52)) // subnormal or zero
	case 3:
		return float64(r.Int64N(1<<60)) / 1000 // past 53 bits of m
	default:
		d := r.IntN(8)
		return float64(r.Int64N(2_000_000)-1_000_000) / math.Pow(10, float64(d))
	}
}

// TestCounterDecimalForm: every counter round-trips bit for bit through
// AppendExtras, in whichever form it chose; the decimal form is chosen
// only when a float it stores is a decimal of at most six digits, and
// only when it is shorter than the plain form.
func TestCounterDecimalForm(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	decimals := 0
	for trial := range 20000 {
		v := [5]float64{}
		for i := range v {
			v[i] = randomCounterValue(r)
		}
		lo, hi := min(v[0], v[1], v[2], v[3], v[4]), max(v[0], v[1], v[2], v[3], v[4])
		c := Counter{FirstT: 10 + r.Int64N(100), First: v[r.IntN(5)], Last: v[r.IntN(5)], Inc: v[r.IntN(5)]}
		c.LastT = c.FirstT + r.Int64N(1000)
		if r.IntN(4) == 0 {
			c.Inc = c.Last - c.First
		}
		row := Row{T: 0, Min: lo, Max: hi, Sum: 1, Count: 5, X: &Extras{Counter: c, HasCounter: true}}
		enc := AppendExtras(nil, row)
		x, err := DecodeExtras(row, enc)
		if err != nil {
			t.Fatalf("trial %d: %v (%+v)", trial, err, c)
		}
		got := x.Counter
		if !x.HasCounter || got.FirstT != c.FirstT || got.LastT != c.LastT || !sameBits(got.First, c.First) || !sameBits(got.Last, c.Last) || !sameBits(got.Inc, c.Inc) {
			t.Fatalf("trial %d: %+v came back as %+v", trial, c, got)
		}
		// Which floats the plain form would store, and whether one is a
		// decimal the decimal form takes.
		anyDecimal := false
		for i, f := range []float64{c.First, c.Last, c.Inc} {
			left := sameBits(f, lo) || sameBits(f, hi)
			if i == 2 {
				left = sameBits(c.Inc, c.Last-c.First)
			}
			if !left && decimalDigits(f) >= 0 {
				anyDecimal = true
			}
		}
		decimal := enc[0]&xDecimalCounter == xDecimalCounter
		if decimal && !anyDecimal {
			t.Fatalf("trial %d: decimal form for %+v (min %g, max %g), with no decimal to store", trial, c, lo, hi)
		}
		if plain := plainCounterLen(row); len(enc) > plain || (decimal && len(enc) == plain) {
			t.Fatalf("trial %d: %d bytes (decimal form: %v), the plain form takes %d", trial, len(enc), decimal, plain)
		}
		if decimal {
			decimals++
		}
	}
	if decimals < 5000 {
		t.Fatalf("only %d of 20,000 counters took the decimal form", decimals)
	}
}

// plainCounterLen is the length of row's extras in the plain form: the
// flags byte, the times, and 8 bytes a float stored.
func plainCounterLen(row Row) int {
	c := row.X.Counter
	n := 1 + len(binary.AppendVarint(nil, c.FirstT-row.T)) + len(binary.AppendUvarint(nil, uint64(c.LastT-c.FirstT)))
	for _, f := range []float64{c.First, c.Last} {
		if !sameBits(f, row.Min) && !sameBits(f, row.Max) {
			n += 8
		}
	}
	if !sameBits(c.Inc, c.Last-c.First) {
		n += 8
	}
	return n
}

func TestDecimalDigits(t *testing.T) {
	point1, point2 := 0.1, 0.2
	for _, c := range []struct {
		v    float64
		want int
	}{{0, 0}, {-3, 0}, {20.123, 3}, {0.1, 1}, {point1 + point2, -1}, {1e-6, 6}, {1e-7, -1}, {math.Inf(1), -1}, {math.NaN(), -1}, {1 << 60, -1}, {math.Copysign(0, -1), -1}} {
		if got := decimalDigits(c.v); got != c.want {
			t.Errorf("decimalDigits(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}

// FuzzDecodeExtras: any bytes decode to extras or an error, never a panic.
func FuzzDecodeExtras(f *testing.F) {
	row := Row{T: 1000, Min: -2.5, Max: 7.125, Sum: 9, Count: 4}
	r := rand.New(rand.NewPCG(1, 3))
	for range 10 {
		var acc Row
		for i := range 4 {
			acc.AddExtras(PointRow(1000+int64(i), math.Round(r.NormFloat64()*1000)/1000))
		}
		f.Add(AppendExtras(nil, acc))
	}
	f.Add([]byte{xDecimalCounter, 0x70, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := DecodeExtras(row, b)
		if err == nil && x == nil {
			t.Fatal("no extras and no error")
		}
	})
}
