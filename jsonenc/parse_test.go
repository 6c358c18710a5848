package jsonenc

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// sameFloat says whether ParseFloat and strconv agree on s: the same bits
// (so -0 and 0 differ) and an error in the same cases.
func sameFloat(t *testing.T, s string) {
	t.Helper()
	got, gotErr := ParseFloat([]byte(s))
	want, wantErr := strconv.ParseFloat(s, 64)
	if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("ParseFloat(%q) = %v (%016x), %v; strconv: %v (%016x), %v", s, got, math.Float64bits(got), gotErr,
			want, math.Float64bits(want), wantErr)
	}
}

func sameInt(t *testing.T, s string) {
	t.Helper()
	got, gotErr := ParseInt([]byte(s))
	want, wantErr := strconv.ParseInt(s, 10, 64)
	if got != want || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("ParseInt(%q) = %d, %v; strconv: %d, %v", s, got, gotErr, want, wantErr)
	}
}

var numberEdges = []string{"", "-", "+", "0", "-0", "00", "007", "+5", "1", "-1", "9007199254740992", "9007199254740993",
	"-9007199254740993", "1e22", "1e23", "1e-22", "1e-23", "123.456", "-0.0", "-0e5", ".5", "5.", "1.e3", "1e", "1e+",
	"1e-", "1E+2", "1e+400", "1e-400", "1e1000000000000", "0.1", "0.3", "2.675", "1.7976931348623157e308",
	"4.9e-324", "inf", "-Inf", "NaN", "0x1p3", "1_000", "12a", "1.5x", " 1", "1 ", "1e2.5", "9223372036854775807",
	"-9223372036854775808", "9223372036854775808", "999999999999999999", "-999999999999999999",
	"1000000000000000000", "99999999999999999999", "0.00000000000000000001", "1700000000000", "21.37",
	"12345678901234567890e-3", "4503599627370496.5", "1.0000000000000002"}

func TestParseMatchesStrconv(t *testing.T) {
	for _, s := range numberEdges {
		sameFloat(t, s)
		sameInt(t, s)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var buf []byte
	for range 300000 {
		// Numbers as the encoder writes them, at every scale, and decimals
		// with random digits, signs and exponents at the fast path's edges.
		switch r.IntN(3) {
		case 0:
			buf = AppendFloat(buf[:0], math.Float64frombits(r.Uint64()))
		case 1:
			buf = strconv.AppendFloat(buf[:0], float64(r.Int64N(1<<54))/math.Pow(10, float64(r.IntN(25))), 'f', -1, 64)
		default:
			buf = buf[:0]
			if r.IntN(2) == 0 {
				buf = append(buf, '-')
			}
			buf = strconv.AppendUint(buf, r.Uint64N(1<<r.IntN(64)), 10)
			if r.IntN(2) == 0 {
				buf = append(buf, '.')
				buf = strconv.AppendUint(buf, r.Uint64N(1<<r.IntN(60)), 10)
			}
			if r.IntN(2) == 0 {
				buf = append(buf, 'e')
				buf = strconv.AppendInt(buf, int64(r.IntN(60)-30), 10)
			}
		}
		sameFloat(t, string(buf))
		sameInt(t, string(buf))
	}
}

func FuzzParseFloat(f *testing.F) {
	for _, s := range numberEdges {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameFloat(t, s)
		sameInt(t, s)
	})
}

// BenchmarkParsePoint reads the numbers of raw points, as a client of the
// answers and the ingest of NDJSON do, against strconv.
func BenchmarkParsePoint(b *testing.B) {
	ts, vs := []byte("1763900000000"), []byte("217.5")
	b.Run("jsonenc", func(b *testing.B) {
		for b.Loop() {
			t, _ := ParseInt(ts)
			v, _ := ParseFloat(vs)
			sink += float64(t) + v
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			t, _ := strconv.ParseInt(string(ts), 10, 64)
			v, _ := strconv.ParseFloat(string(vs), 64)
			sink += float64(t) + v
		}
	})
}

var sink float64
