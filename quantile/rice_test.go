package quantile

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch/store"
)

// bins lists a sketch's zero count and every non-empty bin of each store.
func bins(s *Sketch) (zeros float64, pos, neg map[int]float64) {
	pos, neg = map[int]float64{}, map[int]float64{}
	for st, m := range map[store.Store]map[int]float64{s.dd.GetPositiveValueStore(): pos, s.dd.GetNegativeValueStore(): neg} {
		st.ForEach(func(i int, c float64) bool { m[i] = c; return false })
	}
	return s.dd.GetZeroCount(), pos, neg
}

func sameBins(t *testing.T, what string, a, b *Sketch) {
	t.Helper()
	za, pa, na := bins(a)
	zb, pb, nb := bins(b)
	if za != zb || !mapsEqual(pa, pb) || !mapsEqual(na, nb) {
		t.Fatalf("%s: bins differ: zeros %v/%v, positive %v / %v, negative %v / %v", what, za, zb, pa, pb, na, nb)
	}
}

func mapsEqual(a, b map[int]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// randomSketch is a sketch of random data: the package's data sets, and
// windows as the rollups make them (a few values, a day of latencies,
// counts added many at a time, sketches merged).
func randomSketch(r *rand.Rand) *Sketch {
	s := New()
	switch r.IntN(5) {
	case 0:
		sets := dataSets(r)
		for _, v := range sets[[]string{"uniform", "latencies", "constant", "negative", "mixed", "zeros", "single", "huge", "tiny", "zeros+some"}[r.IntN(10)]] {
			s.Add(v)
		}
	case 1:
		for range 1 + r.IntN(8) {
			s.Add(math.Round(r.NormFloat64()*1000) / 100)
		}
	case 2:
		for range r.IntN(9000) {
			s.Add(math.Exp(r.NormFloat64()*1.2 + 3))
		}
	case 3:
		for range r.IntN(50) {
			s.AddN(r.NormFloat64()*r.Float64()*1e6, 1+r.Int64N(1<<uint(r.IntN(50))))
		}
	default:
		for range r.IntN(10) {
			o := New()
			for range r.IntN(400) {
				o.Add(math.Exp(r.NormFloat64()*3) * float64(1-2*r.IntN(2)))
			}
			s.Merge(o)
		}
	}
	return s
}

// TestEncodingKeepsEveryBin encodes random sketches and decodes them:
// every bin and the zero count come back exactly, in whichever encoding
// AppendBinary chose, and the chosen one is never longer than the
// library's.
func TestEncodingKeepsEveryBin(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	riceChosen := 0
	for trial := range 2000 {
		s := randomSketch(r)
		var lib []byte
		s.dd.Encode(&lib, true)
		enc := s.AppendBinary(nil)
		if s.Bins() != MaxBins {
			continue // collapsed to fit: TestEncodedSizeBound's case
		}
		if len(enc) > len(lib) {
			t.Fatalf("trial %d: %d bytes, the library's encoding takes %d", trial, len(enc), len(lib))
		}
		if len(enc) > 0 && enc[0] == riceFormat {
			riceChosen++
		}
		d, err := Decode(enc)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		sameBins(t, "decoded", s, d)
		// The library's own encoding, as stores written before the Rice
		// format hold it, still decodes.
		old, err := Decode(lib)
		if err != nil {
			t.Fatalf("trial %d: the library's encoding: %v", trial, err)
		}
		sameBins(t, "decoded from the library's encoding", s, old)
		// Merging an encoding adds to what is there.
		m := Derive(3, 3, 2)
		if err := m.MergeEncoded(enc); err != nil {
			t.Fatal(err)
		}
		want := Derive(3, 3, 2)
		want.Merge(s)
		sameBins(t, "merged", want, m)
	}
	if riceChosen < 1000 {
		t.Fatalf("the Rice format was chosen for %d of 2000 sketches", riceChosen)
	}
}

// TestRiceFormatShorter: a day of heavy-tailed latencies, the rows the
// library's encoding made longest, takes well under half its bytes.
func TestRiceFormatShorter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	s := New()
	for range 8640 {
		s.Add(math.Round(math.Exp(r.NormFloat64()+math.Log(20))*1000) / 1000)
	}
	var lib []byte
	s.dd.Encode(&lib, true)
	enc := s.AppendBinary(nil)
	if enc[0] != riceFormat || 2*len(enc) > len(lib) {
		t.Fatalf("a day of latencies: %d bytes (format %#x), the library's %d", len(enc), enc[0], len(lib))
	}
	t.Logf("a day of latencies: %d bytes, the library's encoding %d", len(enc), len(lib))
}

// FuzzDecode: any bytes decode to a sketch or an error, never a panic or
// an allocation past the format's bounds.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(2, 3))
	for range 20 {
		f.Add(randomSketch(r).AppendBinary(nil))
	}
	f.Add([]byte{riceFormat})
	f.Add([]byte{riceFormat, 0, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		if n := s.Count(); n < 0 {
			t.Fatalf("count %d", n)
		}
		// What decodes encodes and decodes to the same bins.
		again, err := Decode(s.AppendBinary(nil))
		if err != nil {
			t.Fatal(err)
		}
		if s.Bins() == MaxBins {
			sameBins(t, "re-encoded", s, again)
		}
	})
}

// BenchmarkAppendBinary encodes the sketches of a minute, an hour and a
// day of 10 s latencies, in the library's encoding alone and as
// AppendBinary does (both encodings, the shorter kept): the rollup
// worker's cost of the Rice format, a row at a time.
func BenchmarkAppendBinary(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, w := range []struct {
		name   string
		points int
	}{{"minute", 6}, {"hour", 360}, {"day", 8640}} {
		s := New()
		for range w.points {
			s.Add(math.Round(math.Exp(r.NormFloat64()+math.Log(20))*1000) / 1000)
		}
		b.Run(w.name+"/library", func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = buf[:0]
				s.dd.Encode(&buf, true)
			}
			b.ReportMetric(float64(len(buf)), "bytes")
		})
		b.Run(w.name+"/chosen", func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = s.AppendBinary(buf[:0])
			}
			b.ReportMetric(float64(len(buf)), "bytes")
		})
	}
}

// TestRiceRefusesImpossibleParameters: a sparse store's count parameter
// past what a Rice code can take is corrupt, not read.
func TestRiceRefusesImpossibleParameters(t *testing.T) {
	// Zeros 0; positive store of 2 bins from index 0, sparse, gap
	// parameter 0, count parameter 200; no negative store; the codes: a
	// gap of 0 and two counts of 1, all zero bits at parameter 1.
	b := []byte{riceFormat, 0, 2, 0, sparse, 200, 0, 0x00}
	if _, err := Decode(b); err == nil {
		t.Fatal("decoded a count parameter of 200")
	}
	b[5] = 1
	if s, err := Decode(b); err != nil || s.Count() != 2 {
		t.Fatalf("a count parameter of 1: %v, %v", s, err)
	}
}
