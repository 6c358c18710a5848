package jsonenc

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestEncoderMatchesEncodingJSON: the fast encoder writes the numbers
// encoding/json would, so clients parse the same values.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.3, 1e-7, 1.5e-6, 0.0001, 0.00015, 123456789.123, 99999999999.9999,
		1e11, 1e20, 1e21, 1.7976931348623157e308, -5e-324, 21.5, -21.37, 2.675, 1.005, 0.1 + 0.2}
	for _, v := range values {
		got := string(AppendFloat(nil, v))
		want, _ := json.Marshal(v)
		if got != string(want) {
			t.Errorf("AppendFloat(%v) = %s, encoding/json says %s", v, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		// Random values at every scale, and short decimals like sensors send.
		var v float64
		switch r.IntN(3) {
		case 0:
			v = math.Float64frombits(r.Uint64())
		case 1:
			v = float64(r.Int64N(2e9)-1e9) / []float64{1, 10, 100, 1000, 10000}[r.IntN(5)]
		default:
			v = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(30)-10))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		got := string(AppendFloat(nil, v))
		want, _ := json.Marshal(v)
		if got != string(want) {
			t.Fatalf("AppendFloat(%v) = %s, encoding/json says %s", v, got, want)
		}
	}
	for _, s := range []string{"plain", `q"uote`, "back\\slash", "<tag>&", "line\nbreak", "\x01", "ünï", "\u2028", string([]byte{0xff})} {
		got := string(AppendString(nil, s))
		want, _ := json.Marshal(s)
		if got != string(want) {
			t.Errorf("AppendString(%q) = %s, encoding/json says %s", s, got, want)
		}
	}
}

func TestAppendFloatFMatchesStrconv(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-7, 0.0001, 0.00015, 99999999999.9999, 1e11, 1e21, 1e300, -5e-324, 64.078, 2.675, 0.1 + 0.2}
	r := rand.New(rand.NewPCG(9, 10))
	for range 200000 {
		switch r.IntN(3) {
		case 0:
			values = append(values, math.Float64frombits(r.Uint64()))
		case 1:
			values = append(values, float64(r.Int64N(2e9)-1e9)/[]float64{1, 10, 100, 1000, 10000}[r.IntN(5)])
		default:
			values = append(values, (r.Float64()-0.5)*math.Pow(10, float64(r.IntN(30)-10)))
		}
	}
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if got, want := string(AppendFloatF(nil, v)), strconv.FormatFloat(v, 'f', -1, 64); got != want {
			t.Fatalf("AppendFloatF(%v) = %s, strconv says %s", v, got, want)
		}
	}
}

func TestScalarText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{{``, ``, true}, {`null`, ``, true}, {`"a\u0062"`, `ab`, true}, {` 12.5 `, `12.5`, true}, {`[1]`, ``, false}, {`{}`, ``, false}, {`"x`, ``, false}, {`true`, ``, false}} {
		got, ok := ScalarText([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("ScalarText(%s) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestAppendIntMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(n int64) {
		if got, want := string(AppendInt([]byte("x"), n)), "x"+strconv.FormatInt(n, 10); got != want {
			t.Fatalf("AppendInt(%d) = %s, want %s", n, got, want)
		}
	}
	for _, n := range []int64{0, -1, 1, 999999999999, 1e12, 1e12 + 1, 1763900000000, 9999999999999, 1e13, -1e12, math.MaxInt64, math.MinInt64} {
		check(n)
	}
	for range 100000 {
		check(1e12 + r.Int64N(9e12))
		check(r.Int64() >> r.IntN(64))
	}
}

// BenchmarkAppendInt formats millisecond timestamps, the first number of
// every point.
func BenchmarkAppendInt(b *testing.B) {
	buf := make([]byte, 0, 64)
	t := int64(1763900000000)
	for b.Loop() {
		for i := range int64(1000) {
			buf = AppendInt(buf[:0], t+i*1000)
		}
	}
}

// BenchmarkAppendIntStrconv is the same with strconv, for comparison.
func BenchmarkAppendIntStrconv(b *testing.B) {
	buf := make([]byte, 0, 64)
	t := int64(1763900000000)
	for b.Loop() {
		for i := range int64(1000) {
			buf = strconv.AppendInt(buf[:0], t+i*1000, 10)
		}
	}
}
