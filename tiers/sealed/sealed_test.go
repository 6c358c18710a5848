package sealed

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

func TestEncodeDecodeKeepsBits(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1.5, math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(tiers.StaleNaN), 1e-300, 42.125}
	var points []tiers.Row
	for i := range 1000 {
		points = append(points, tiers.PointRow(int64(i)*10_000-5_000_000, values[i%len(values)]))
	}
	chunks, err := Encode(points, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(points) + MaxSamples - 1) / MaxSamples; len(chunks) != want {
		t.Fatalf("%d chunks, want %d", len(chunks), want)
	}
	var got []tiers.Row
	for _, c := range chunks {
		if got, err = Decode(got, c.Data, tiers.Span{From: math.MinInt64, To: math.MaxInt64}, math.MinInt64, AllEventBuckets); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(points) {
		t.Fatalf("%d points back, want %d", len(got), len(points))
	}
	for i := range points {
		if got[i].T != points[i].T || math.Float64bits(got[i].Sum) != math.Float64bits(points[i].Sum) || got[i].Count != 1 {
			t.Fatalf("point %d: got %+v, want %+v", i, got[i], points[i])
		}
	}
	if !tiers.IsStale(got[6]) {
		t.Fatalf("the stale marker came back as %x", math.Float64bits(got[6].Sum))
	}
	// A span and an expiry bound cut the points.
	got, err = Decode(nil, chunks[0].Data, tiers.Span{From: -4_000_000, To: -3_000_000}, -3_500_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 || got[0].T != -3_500_000 || got[49].T != -3_010_000 {
		t.Fatalf("cut decode: %d points %v…", len(got), got[:min(2, len(got))])
	}
	if _, err := Encode([]tiers.Row{tiers.PointRow(2, 0), tiers.PointRow(2, 1)}, 1); err == nil {
		t.Fatal("repeated times were encoded")
	}
	if _, err := Decode(nil, []byte{0xff}, tiers.Span{From: 0, To: 1}, 0, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt chunk: %v", err)
	}
}

// slicePages serves rows in pages of random sizes.
type slicePages struct {
	rows []tiers.Row
	rnd  *rand.Rand
}

func (p *slicePages) Next() ([]tiers.Row, error) {
	if len(p.rows) == 0 {
		return nil, tiers.ErrDone
	}
	n := min(len(p.rows), 1+p.rnd.IntN(7))
	page := p.rows[:n]
	p.rows = p.rows[n:]
	return slices.Clone(page), nil
}

func (p *slicePages) Close() error { return nil }

func TestMergeRowsWinInBothOrders(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var points, rows []tiers.Row
		want := map[int64]float64{}
		for ts := range int64(60) {
			if rnd.IntN(2) == 0 {
				points = append(points, tiers.PointRow(ts, float64(ts)))
				want[ts] = float64(ts)
			}
			if rnd.IntN(3) == 0 {
				rows = append(rows, tiers.PointRow(ts, -float64(ts)))
				want[ts] = -float64(ts)
			}
		}
		for _, desc := range []bool{false, true} {
			in := slices.Clone(rows)
			if desc {
				slices.Reverse(in)
			}
			size := 1 + rnd.IntN(10)
			m := Merge(points, &slicePages{rows: in, rnd: rnd}, desc, size)
			var got []tiers.Row
			for {
				page, err := m.Next()
				if errors.Is(err, tiers.ErrDone) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 || len(page) > size {
					t.Fatalf("page of %d, size %d", len(page), size)
				}
				got = append(got, page...)
			}
			if len(got) != len(want) {
				t.Fatalf("desc=%v: %d points, want %d", desc, len(got), len(want))
			}
			for i, r := range got {
				if i > 0 && (r.T > got[i-1].T) == desc {
					t.Fatalf("desc=%v: out of order at %d", desc, r.T)
				}
				if want[r.T] != r.Sum {
					t.Fatalf("desc=%v: %d = %v, want %v", desc, r.T, r.Sum, want[r.T])
				}
			}
		}
	}
	merged := MergePoints([]tiers.Row{tiers.PointRow(1, 1), tiers.PointRow(3, 3)}, []tiers.Row{tiers.PointRow(2, 20), tiers.PointRow(3, 30)})
	if len(merged) != 3 || merged[2].Sum != 30 {
		t.Fatalf("MergePoints: %v", merged)
	}
}

// Decimal values are stored scaled to integers, which XOR encodes in far
// fewer bits, and come back bit for bit.
func TestDecimalValuesScaled(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, decimals := range []float64{1, 1e3, 1e6} {
		var points []tiers.Row
		v := 50.0
		for i := range MaxSamples {
			v += rnd.NormFloat64()
			points = append(points, tiers.PointRow(int64(i)*10_000, math.Round(v*decimals)/decimals))
		}
		scaled, err := Encode(points, 1)
		if err != nil {
			t.Fatal(err)
		}
		if scaled[0].Data[0] == 0 {
			t.Fatalf("%g: values with few decimals were not scaled", decimals)
		}
		got, err := Decode(nil, scaled[0].Data, tiers.Span{From: 0, To: math.MaxInt64}, math.MinInt64, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range points {
			if math.Float64bits(got[i].Sum) != math.Float64bits(points[i].Sum) {
				t.Fatalf("%g: point %d came back as %v, not %v", decimals, i, got[i].Sum, points[i].Sum)
			}
		}
		// A stale marker among them keeps the chunk unscaled.
		points[7] = tiers.PointRow(points[7].T, math.Float64frombits(tiers.StaleNaN))
		plain, err := Encode(points, 1)
		if err != nil {
			t.Fatal(err)
		}
		if plain[0].Data[0] != 0 {
			t.Fatalf("%g: a chunk with a NaN was scaled", decimals)
		}
		if decimals == 1e3 && len(scaled[0].Data) >= len(plain[0].Data) {
			t.Fatalf("scaled chunk of %d bytes, unscaled %d", len(scaled[0].Data), len(plain[0].Data))
		}
		t.Logf("%g: %d points, %d bytes scaled, %d unscaled", decimals, len(points), len(scaled[0].Data), len(plain[0].Data))
	}
}

// A bucket's chunks hold every event bucket's points; a read of one
// partition gets those whose time maps to it.
func TestDecodeOneEventBucket(t *testing.T) {
	var points []tiers.Row
	for i := range 500 {
		points = append(points, tiers.PointRow(int64(i)*10_000, float64(i)))
	}
	chunks, err := Encode(points, 4)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for eb := range 4 {
		var got []tiers.Row
		for _, c := range chunks {
			if got, err = Decode(got, c.Data, tiers.Span{From: 0, To: math.MaxInt64}, math.MinInt64, eb); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range got {
			if tiers.EventBucket(r.T, 4) != eb {
				t.Fatalf("event bucket %d got the point at %d", eb, r.T)
			}
		}
		total += len(got)
	}
	if total != len(points) {
		t.Fatalf("%d points over the event buckets, %d encoded", total, len(points))
	}
}

// Count reads from a chunk's header what decoding it would count, in
// every format.
func TestCountFromHeaders(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var points []tiers.Row
	for i := range 3000 {
		v := math.Round(r.NormFloat64()*1e5) / 1e3
		if i >= 2048 {
			v = r.NormFloat64() // full precision: XOR
		}
		points = append(points, tiers.PointRow(int64(i)*10_000, v))
	}
	chunks, err := Encode(points, 1)
	if err != nil {
		t.Fatal(err)
	}
	rollups, err := EncodeRollup(randomRollupRows(r, 1500, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(chunks, rollups...) {
		n, err := Count(c.Data)
		if err != nil || n != c.Count {
			t.Fatalf("format %#x: Count %d, %v; the chunk holds %d", c.Data[0], n, err, c.Count)
		}
	}
	if _, err := Count([]byte{0xee}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a corrupt header: %v", err)
	}
}
