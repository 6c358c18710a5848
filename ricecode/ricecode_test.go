package ricecode

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomCodes returns n unsigned integers of mixed magnitudes: mostly
// small, some outliers past the escape, some full 64-bit.
func randomCodes(r *rand.Rand, n int) []uint64 {
	us := make([]uint64, n)
	for i := range us {
		switch r.IntN(10) {
		case 0:
			us[i] = r.Uint64()
		case 1:
			us[i] = r.Uint64N(1 << 40)
		default:
			us[i] = r.Uint64N(1 << r.UintN(12))
		}
	}
	return us
}

func TestRiceRoundTripAndLength(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := range 300 {
		us := randomCodes(r, 1+r.IntN(200))
		k := uint(r.UintN(MaxParameter + 1))
		prefix := []byte{0xAB}
		w := NewWriter(prefix)
		bits := 0
		for _, u := range us {
			w.Rice(u, k)
			bits += Bits(u, k)
		}
		w.Write(5, 3)
		bits += 3
		out := w.Flush()
		if out[0] != 0xAB {
			t.Fatalf("trial %d: the writer overwrote what it appends to", trial)
		}
		if want := 1 + (bits+7)/8; len(out) != want {
			t.Fatalf("trial %d: %d bytes written, Bits says %d", trial, len(out), want)
		}
		rd := NewReader(out[1:])
		for i, u := range us {
			if got := rd.Rice(k); got != u {
				t.Fatalf("trial %d, k=%d: code %d read %d, wrote %d", trial, k, i, got, u)
			}
		}
		if got := rd.Read(3); got != 5 {
			t.Fatalf("trial %d: trailing bits read %d", trial, got)
		}
		if rd.Overrun() {
			t.Fatalf("trial %d: a reader of exactly what was written overran", trial)
		}
		if rd.Read(16); !rd.Overrun() {
			t.Fatalf("trial %d: reading past the end is not an overrun", trial)
		}
	}
}

func TestBestIsTheCheapestParameter(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for trial := range 300 {
		// What the codes are in use: zigzagged misses of a prediction,
		// of one scale, now and then an outlier.
		scale := math.Exp2(float64(r.IntN(40)))
		us := make([]uint64, r.IntN(300))
		for i := range us {
			us[i] = Zigzag(int64(r.NormFloat64() * scale))
			if r.IntN(50) == 0 {
				us[i] = r.Uint64N(1 << 50)
			}
		}
		k, cost := Best(us)
		brute := -1
		for kk := uint(0); kk <= MaxParameter; kk++ {
			c := 0
			for _, u := range us {
				c += Bits(u, kk)
			}
			if brute < 0 || c < brute {
				brute = c
			}
		}
		if cost != brute {
			t.Fatalf("trial %d: Best gives k=%d costing %d bits, the cheapest costs %d", trial, k, cost, brute)
		}
		c := 0
		for _, u := range us {
			c += Bits(u, k)
		}
		if c != cost {
			t.Fatalf("trial %d: Best's k=%d costs %d, not the %d it says", trial, k, c, cost)
		}
	}
}

func TestZigzag(t *testing.T) {
	for _, x := range []int64{0, -1, 1, -2, 2, 1 << 62, -1 << 63, 1<<63 - 1} {
		if got := Unzigzag(Zigzag(x)); got != x {
			t.Errorf("Unzigzag(Zigzag(%d)) = %d", x, got)
		}
	}
	if Zigzag(-1) != 1 || Zigzag(1) != 2 {
		t.Errorf("small magnitudes map to small codes: Zigzag(-1)=%d, Zigzag(1)=%d", Zigzag(-1), Zigzag(1))
	}
}

// BenchmarkBest chooses the parameter of 1024 misses of a gauge's
// prediction (the chunk of a sealed bucket), some of them outliers.
func BenchmarkBest(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	us := make([]uint64, 1024)
	for i := range us {
		us[i] = Zigzag(int64(r.NormFloat64() * 300))
		if i%100 == 0 {
			us[i] = r.Uint64N(1 << 40)
		}
	}
	for b.Loop() {
		Best(us)
	}
}
