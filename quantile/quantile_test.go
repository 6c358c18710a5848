package quantile

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exact is the quantile q of values by the package's rank convention.
func exact(values []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(values))
	return s[Rank(q, int64(len(s)))]
}

// within reports whether got is within the relative accuracy of want
// (and a hair of float rounding).
func within(got, want float64) bool {
	if math.Abs(want) < MinMagnitude {
		return got == 0
	}
	return math.Abs(got-want) <= RelativeAccuracy*(1+1e-9)*math.Abs(want)
}

var quantiles = []float64{0, 0.001, 0.01, 0.1, 0.125, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1}

func dataSets(r *rand.Rand) map[string][]float64 {
	gen := func(n int, f func() float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f()
		}
		return out
	}
	return map[string][]float64{
		"uniform":    gen(5000, func() float64 { return r.Float64() * 100 }),
		"latencies":  gen(5000, func() float64 { return math.Exp(r.NormFloat64()*1.5 + 3) }),
		"constant":   gen(100, func() float64 { return 42.5 }),
		"negative":   gen(3000, func() float64 { return -math.Exp(r.NormFloat64()) }),
		"mixed":      gen(3000, func() float64 { return r.NormFloat64() * 10 }),
		"zeros":      gen(50, func() float64 { return 0 }),
		"single":     {-7.25},
		"huge":       gen(200, func() float64 { return (r.Float64() - 0.5) * 1e300 }),
		"tiny":       gen(200, func() float64 { return r.Float64() * 1e-300 }),
		"zeros+some": append(gen(40, func() float64 { return 0 }), 1, 2, -3),
	}
}

// TestQuantileWithinAccuracy checks every quantile of every data set, from
// the sketch built point by point, from its encoding, and from halves
// merged, against the exact quantile by the same rank.
func TestQuantileWithinAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, values := range dataSets(r) {
		t.Run(name, func(t *testing.T) {
			whole, a, b := New(), New(), New()
			for i, v := range values {
				whole.Add(v)
				if i%2 == 0 {
					a.Add(v)
				} else {
					b.Add(v)
				}
			}
			merged := New()
			merged.Merge(a)
			if err := merged.MergeEncoded(b.AppendBinary(nil)); err != nil {
				t.Fatal(err)
			}
			decoded, err := Decode(whole.AppendBinary(nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Sketch{whole, merged, decoded} {
				if s.Count() != int64(len(values)) {
					t.Fatalf("count %d, want %d", s.Count(), len(values))
				}
				for _, q := range quantiles {
					got, ok := s.Quantile(q)
					want := exact(values, q)
					if !ok || !within(got, want) {
						t.Errorf("q%g = %g, exact %g", q, got, want)
					}
				}
			}
		})
	}
}

// TestCollapsedKeepsTheTopBins adds values spanning far more than MaxBins
// bins: the quantiles Kept says keep the bound do, and the encoding stays
// within its bound.
func TestCollapsedKeepsTheTopBins(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var values []float64
	s := New()
	for range 20000 {
		v := math.Exp(r.Float64()*200 - 100) // e^-100 .. e^100: 10,000 bins
		if r.IntN(3) == 0 {
			v = -v
		}
		values = append(values, v)
		s.Add(v)
	}
	maxPos, maxNeg := 0.0, 0.0
	for _, v := range values {
		if v > 0 {
			maxPos = max(maxPos, v)
		} else {
			maxNeg = max(maxNeg, -v)
		}
	}
	kept := 0
	sorted := slices.Sorted(slices.Values(values))
	for q := 0.0; q <= 1; q += 0.001 {
		want := sorted[Rank(q, int64(len(sorted)))]
		side := maxPos
		if want < 0 {
			side = maxNeg
		}
		got, _ := s.Quantile(q)
		if Kept(want, side) {
			kept++
			if !within(got, want) {
				t.Errorf("q%g = %g, exact %g (kept)", q, got, want)
			}
		}
	}
	if kept < 100 || kept > 900 {
		t.Fatalf("%d of 1001 quantiles kept: the data should collapse some and keep some", kept)
	}
	enc := s.AppendBinary(nil)
	if len(enc) > MaxEncodedLen {
		t.Fatalf("encoded %d bytes, more than %d", len(enc), MaxEncodedLen)
	}
	if s.Bins() != MaxBins {
		t.Fatalf("bins %d: 2 x 1024 bins of a few values each fit in %d bytes without collapsing further", s.Bins(), MaxEncodedLen)
	}
	if d, err := Decode(enc); err != nil || d.Count() != int64(len(values)) {
		t.Fatalf("decode: %v, count %v", err, d)
	}
}

// TestEncodedSizeBound fills both sides' bins with counts of the most
// entropy the codes meet — random, up to 2^40, so that no prediction
// helps — and with counts the library's encoding writes longest: the
// encoding never passes MaxEncodedLen, the sketch is collapsed further to
// fit, and nothing added is lost.
func TestEncodedSizeBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for k, count := range []func(i int) int64{
		func(int) int64 { return 1 + r.Int64N(1<<40) },
		func(i int) int64 { return 1<<40 + int64(i) },
	} {
		s := New()
		var total int64
		for i := range 2 * MaxBins {
			v := math.Pow(1.0202, float64(i))
			a, b := count(i), count(i)
			s.AddN(v, a)
			s.AddN(-v, b)
			total += a + b
		}
		enc := s.AppendBinary(nil)
		if len(enc) > MaxEncodedLen {
			t.Fatalf("encoded %d bytes", len(enc))
		}
		if k == 0 && s.Bins() >= MaxBins {
			t.Fatalf("2 x %d bins of 41-bit random counts fit in %d bytes without collapsing", MaxBins, len(enc))
		}
		d, err := Decode(enc)
		if err != nil || d.Count() != total {
			t.Fatalf("decode: %v, count %v of %d", err, d.Count(), total)
		}
	}
}

func TestDerive(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		n      int64
		ok     bool
	}{
		{5, 5, 1, true}, {-3, 8, 2, true}, {21.30, 21.31, 6, true}, {21, 25, 6, false},
		{0, 0, 9, true}, {-1e-320, 1e-320, 3, true}, {-1, 1, 3, false}, {1, 1, 0, false},
	} {
		if got := Derivable(c.lo, c.hi, c.n); got != c.ok {
			t.Errorf("Derivable(%g, %g, %d) = %v", c.lo, c.hi, c.n, got)
			continue
		}
		if !c.ok {
			continue
		}
		values := []float64{c.lo}
		if c.n == 2 {
			values = append(values, c.hi)
		}
		for int64(len(values)) < c.n {
			values = append(values, (c.lo+c.hi)/2)
		}
		d := Derive(c.lo, c.hi, c.n)
		for _, q := range quantiles {
			got, _ := d.Quantile(q)
			if want := exact(values, q); !within(got, want) {
				t.Errorf("derived %v: q%g = %g, exact %g", c, q, got, want)
			}
		}
	}
}

func TestRank(t *testing.T) {
	for _, c := range []struct {
		q    float64
		n    int64
		want int64
	}{{0.5, 1, 0}, {0.5, 2, 0}, {0.5, 3, 1}, {0.99, 100, 98}, {0.999, 1000, 998}, {1, 10, 9}, {0, 10, 0}} {
		if got := Rank(c.q, c.n); got != c.want {
			t.Errorf("Rank(%g, %d) = %d, want %d", c.q, c.n, got, c.want)
		}
	}
}

func TestCorruptEncoding(t *testing.T) {
	if _, err := Decode([]byte{0xfc}); err == nil {
		t.Fatal("decoded garbage")
	}
}
