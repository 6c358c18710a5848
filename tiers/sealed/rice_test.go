package sealed

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tsgate/tsgate/tiers"
)

// randomSeries returns n points of a random shape: regular or jittered or
// gapped times; gauges, counters with resets, constants, huge jumps, or
// values with a negative zero or a NaN among them; decimals of 0–8 digits.
func randomSeries(r *rand.Rand, n int) []tiers.Row {
	t := r.Int64N(1<<41) - 1<<40
	step := 1 + r.Int64N(60_000)
	digits := r.IntN(9)
	scale := math.Pow(10, float64(digits))
	v := (r.Float64() - 0.5) * 1e6
	shape := r.IntN(6)
	points := make([]tiers.Row, 0, n)
	for i := range n {
		switch r.IntN(4) {
		case 0: // jitter
			t += step + r.Int64N(step/10+1)
		case 1: // a gap now and then
			if r.IntN(20) == 0 {
				t += step * r.Int64N(1000)
			}
			t += step
		default:
			t += step
		}
		switch shape {
		case 0: // gauge
			v += r.NormFloat64() * math.Pow(10, float64(r.IntN(5)-2))
		case 1: // counter with resets
			v += float64(r.IntN(100))
			if r.IntN(50) == 0 {
				v = 0
			}
		case 2: // constant
		case 3: // huge jumps
			v = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(15)))
		case 4: // a negative zero or a NaN somewhere
			if i == n/2 {
				v = [...]float64{math.Copysign(0, -1), math.NaN(), math.Float64frombits(tiers.StaleNaN)}[r.IntN(3)]
				points = append(points, tiers.PointRow(t, v))
				v = 1
				continue
			}
			v += r.NormFloat64()
		case 5: // tiny magnitudes
			v = r.NormFloat64() * 1e-3
		}
		points = append(points, tiers.PointRow(t, math.Round(v*scale)/scale))
	}
	return points
}

// Every chunk decodes to the points encoded, bit for bit, whatever their
// shape, and a span cut keeps exactly the points inside it.
func TestEncodeDecodeRandomSeries(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 29))
	formats := map[byte]int{}
	for range 2000 {
		points := randomSeries(r, 1+r.IntN(3*MaxSamples))
		chunks, err := Encode(points, 1)
		if err != nil {
			t.Fatal(err)
		}
		from := points[r.IntN(len(points))].T + r.Int64N(3) - 1
		to := from + r.Int64N(points[len(points)-1].T-points[0].T+2)
		var all, cut []tiers.Row
		for _, c := range chunks {
			formats[c.Data[0]]++
			if all, err = Decode(all, c.Data, tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, math.MinInt64, AllEventBuckets); err != nil {
				t.Fatal(err)
			}
			if cut, err = Decode(cut, c.Data, tiers.Span{From: from, To: to}, math.MinInt64, AllEventBuckets); err != nil {
				t.Fatal(err)
			}
		}
		if len(all) != len(points) {
			t.Fatalf("%d points back, %d encoded", len(all), len(points))
		}
		var want []tiers.Row
		for i, p := range points {
			if all[i].T != p.T || math.Float64bits(all[i].Sum) != math.Float64bits(p.Sum) {
				t.Fatalf("point %d: %v back as %v (format %d)", i, p, all[i], chunks[0].Data[0])
			}
			if p.T >= from && p.T < to {
				want = append(want, p)
			}
		}
		if len(cut) != len(want) || (len(want) > 0 && (cut[0].T != want[0].T || cut[len(cut)-1].T != want[len(want)-1].T)) {
			t.Fatalf("[%d, %d): %d points, want %d", from, to, len(cut), len(want))
		}
	}
	for f := byte(0); f <= decimalFormat+maxDigits; f++ {
		if f == xorFormat || f >= decimalFormat {
			if formats[f] == 0 {
				t.Errorf("no chunk of format %#x among %v: the generator misses a case", f, formats)
			}
		}
	}
}

// The decimal format codes a gauge printed with three decimals in at most
// four fifths of what an XOR chunk of the same integers takes (measured:
// 1.35 against 1.81 bytes a point, the Rice code within 0.1 bytes of the
// entropy of the noise's differences).
func TestDecimalFormatSmallerThanXOR(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var points []tiers.Row
	level, walk := 50.0, 0.0
	for i := range MaxSamples {
		walk += r.NormFloat64() * 0.03
		points = append(points, tiers.PointRow(int64(i)*10_000, math.Round((level+walk+r.NormFloat64()*0.2)*1000)/1000))
	}
	chunks, err := Encode(points, 1)
	if err != nil {
		t.Fatal(err)
	}
	xor := xorBytes(t, points, 1000)
	got := len(chunks[0].Data)
	t.Logf("%d points: decimal %d bytes (%.2f B/point), XOR of the scaled values %d bytes (%.2f B/point)",
		len(points), got, float64(got)/float64(len(points)), xor, float64(xor)/float64(len(points)))
	if 5*got > 4*xor {
		t.Fatalf("decimal chunk %d bytes, XOR %d", got, xor)
	}
}

func FuzzDecodeDecimal(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		chunks, err := Encode(randomSeries(r, 1+r.IntN(MaxSamples)), 2)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(chunks[0].Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A corrupt chunk is an error, never a panic or a hang, and what
		// decodes is in time order.
		got, err := Decode(nil, data, tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, math.MinInt64, AllEventBuckets)
		if err != nil {
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i].T <= got[i-1].T {
				t.Fatalf("decoded out of order: %v then %v", got[i-1], got[i])
			}
		}
	})
}

// xorBytes is the size of an XOR chunk of points' values scaled by scale.
func xorBytes(t *testing.T, points []tiers.Row, scale float64) int {
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		app.Append(0, p.T, math.Round(p.Value()*scale))
	}
	return len(c.Bytes())
}

// gaugeChunk is a chunk's worth of 10 s gauge points printed with three
// decimals: a slow walk with noise.
func gaugeChunk() []tiers.Row {
	r := rand.New(rand.NewPCG(1, 2))
	var points []tiers.Row
	walk := 0.0
	for i := range MaxSamples {
		walk += r.NormFloat64() * 0.03
		points = append(points, tiers.PointRow(int64(i)*10_000, math.Round((50+walk+r.NormFloat64()*0.2)*1000)/1000))
	}
	return points
}

// BenchmarkDecodeChunk decodes a chunk of 10 s gauge points printed with
// three decimals, in the decimal format and as the XOR chunk of scaled
// values that stores sealed before it hold.
func BenchmarkDecodeChunk(b *testing.B) {
	points := gaugeChunk()
	chunks, err := Encode(points, 4)
	if err != nil {
		b.Fatal(err)
	}
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range points {
		app.Append(0, p.T, math.Round(p.Value()*1000))
	}
	formats := []struct {
		name string
		data []byte
	}{
		{"decimal", chunks[0].Data},
		{"xor-scaled", append([]byte{1 + 3, 4}, c.Bytes()...)},
	}
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}
	for _, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			dst := make([]tiers.Row, 0, MaxSamples)
			for b.Loop() {
				var err error
				if dst, err = Decode(dst[:0], f.data, all, math.MinInt64, AllEventBuckets); err != nil || len(dst) != len(points) {
					b.Fatal(len(dst), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(points)), "ns/point")
			b.ReportMetric(float64(len(f.data))/float64(len(points)), "bytes/point")
		})
	}
}

// valueModeOf reads the value mode of a decimal chunk of more than one
// point.
func valueModeOf(t *testing.T, data []byte) int {
	b := data[2:]
	for range 4 { // count, first time, first value, first interval
		_, k := binary.Uvarint(b)
		if k <= 0 {
			t.Fatalf("chunk header %x", data)
		}
		b = b[k:]
	}
	return int(b[1] >> 6)
}

// Each prediction is chosen where it codes the fewest bits: the previous
// value for a random walk, the previous difference for a steady counter,
// the mean of the last four for noise about a level.
func TestValueModeChosen(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	shapes := map[int]func(i int, prev float64) float64{
		valueDelta:  func(_ int, prev float64) float64 { return prev + r.NormFloat64()*5 },
		valueDelta2: func(i int, _ float64) float64 { return float64(i*i) + float64(r.IntN(3)) },
		valueMean4:  func(int, float64) float64 { return 100 + r.NormFloat64()*5 },
	}
	for want, next := range shapes {
		points, v := []tiers.Row{}, 0.0
		for i := range 500 {
			v = math.Round(next(i, v)*100) / 100
			points = append(points, tiers.PointRow(int64(i)*1000, v))
		}
		chunks, err := Encode(points, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := valueModeOf(t, chunks[0].Data); got != want {
			t.Errorf("value mode %d, want %d", got, want)
		}
		back, err := Decode(nil, chunks[0].Data, tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, math.MinInt64, AllEventBuckets)
		if err != nil || len(back) != len(points) {
			t.Fatal(len(back), err)
		}
		for i := range points {
			if back[i].Sum != points[i].Sum {
				t.Fatalf("mode %d: point %d back as %v, not %v", want, i, back[i].Sum, points[i].Sum)
			}
		}
	}
}

// BenchmarkEncodeChunk encodes a chunk of 10 s gauge points printed with
// three decimals: the sealer's work per chunk, most of it choosing each
// stream's prediction and Rice parameter.
func BenchmarkEncodeChunk(b *testing.B) {
	points := gaugeChunk()
	var size int
	for b.Loop() {
		chunks, err := Encode(points, 4)
		if err != nil || len(chunks) != 1 {
			b.Fatal(len(chunks), err)
		}
		size = len(chunks[0].Data)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(points)), "ns/point")
	b.ReportMetric(float64(size)/float64(len(points)), "bytes/point")
}
