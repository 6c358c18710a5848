package sealed

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// randomRollupRows folds random points into rows of one-minute windows as
// the rollup worker does (with extras when extras is set): gauges and
// counters, decimals and full-precision floats, gaps, and rows whose
// extras know nothing, as rows written before rollups kept them.
func randomRollupRows(r *rand.Rand, n int, extras bool) []tiers.Row {
	var rows []tiers.Row
	t := int64(r.IntN(1000)) * tiers.Minute
	level := r.NormFloat64() * 100
	total := 0.0
	for range n {
		t += tiers.Minute
		if r.IntN(10) == 0 {
			t += int64(1+r.IntN(30)) * tiers.Minute
		}
		row := tiers.Row{T: t}
		points := 1 + r.IntN(8)
		counter := r.IntN(3) == 0
		for p := range points {
			var v float64
			switch {
			case counter:
				total += math.Round(r.Float64()*1000) / 10
				if r.IntN(50) == 0 {
					total = 0 // a reset
				}
				v = total
			case r.IntN(30) == 0:
				v = r.NormFloat64() * 1e6 // full precision
			default:
				level += r.NormFloat64()
				v = math.Round(level*1000) / 1000
			}
			pt := tiers.PointRow(t+int64(p)*7*tiers.Second, v)
			if extras {
				row.AddExtras(pt)
			} else {
				row.Add(pt)
			}
		}
		row.T = t
		if extras {
			if r.IntN(20) == 0 {
				row.X = &tiers.Extras{} // written before rollups kept extras
			} else {
				row.X = row.X.Compact(row)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func decodeAllRollup(t *testing.T, chunks []Chunk, span tiers.Span, oldest int64, extras bool) []tiers.Row {
	t.Helper()
	var got []tiers.Row
	for _, c := range chunks {
		var err error
		if got, err = DecodeRollup(got, c.Data, span, oldest, extras); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func TestRollupChunksKeepRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 60 {
		extras := round%3 != 0
		rows := randomRollupRows(r, 1+r.IntN(2500), extras)
		chunks, err := EncodeRollup(rows)
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(rows) + MaxSamples - 1) / MaxSamples; len(chunks) != want {
			t.Fatalf("%d chunks for %d rows", len(chunks), len(rows))
		}
		all := tiers.Span{From: math.MinInt64, To: math.MaxInt64}
		for _, withExtras := range []bool{true, false} {
			span, oldest := all, int64(math.MinInt64)
			if r.IntN(2) == 0 {
				a, b := rows[r.IntN(len(rows))].T+int64(r.IntN(3)-1), rows[r.IntN(len(rows))].T+int64(r.IntN(3)-1)
				span = tiers.Span{From: min(a, b), To: max(a, b) + 1}
				oldest = rows[r.IntN(len(rows))].T
			}
			var want []tiers.Row
			for _, row := range rows {
				if row.T >= max(span.From, oldest) && row.T < span.To {
					if !withExtras {
						row.X = nil
					} else if row.X == nil {
						row.X = &tiers.Extras{}
					}
					want = append(want, row)
				}
			}
			got := decodeAllRollup(t, chunks, span, oldest, withExtras)
			if len(got) != len(want) {
				t.Fatalf("round %d: %d rows back, want %d", round, len(got), len(want))
			}
			for i := range want {
				if !tiers.SameRow(got[i], want[i]) || math.Float64bits(got[i].Sum) != math.Float64bits(want[i].Sum) {
					t.Fatalf("round %d row %d: got %+v %+v, want %+v %+v", round, i, got[i], got[i].X, want[i], want[i].X)
				}
				if withExtras && want[i].X.HasCounter && got[i].X.Counter != want[i].X.Counter {
					t.Fatalf("round %d row %d: counter %+v, want %+v", round, i, got[i].X.Counter, want[i].X.Counter)
				}
			}
		}
	}
}

func TestRollupChunkRefusesWhatItCannotKeep(t *testing.T) {
	row := tiers.Row{T: 0, Min: 1, Max: 1, Sum: 1, Count: 1}
	if _, err := EncodeRollup([]tiers.Row{row, row}); err == nil {
		t.Fatal("repeated times were encoded")
	}
	with := row
	with.T, with.X = 60_000, &tiers.Extras{}
	if _, err := EncodeRollup([]tiers.Row{row, with}); err == nil {
		t.Fatal("rows with and without extras were encoded together")
	}
	if _, err := DecodeRollup(nil, []byte{rollupFormat, 1, 0}, tiers.Span{From: 0, To: 1}, 0, true); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt chunk: %v", err)
	}
	if _, err := DecodeRollup(nil, []byte{decimalFormat, 1}, tiers.Span{From: 0, To: 1}, 0, true); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a point chunk as a rollup chunk: %v", err)
	}
}

// TestRollupChunkSmallerThanRows: a day of minute rows of a three-decimal
// gauge, with extras, as chunks takes a fraction of what the rows'
// values take (40 bytes and their extras each, before any key).
func TestRollupChunkSmallerThanRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// A gauge as exporters print it: a slow walk and noise, 3 decimals,
	// every 10 s.
	var rows []tiers.Row
	level := 50.0
	for m := range 1440 {
		row := tiers.Row{T: int64(m) * tiers.Minute}
		for p := range 6 {
			level += r.NormFloat64() * 0.01
			v := math.Round((level+r.NormFloat64()*0.3)*1000) / 1000
			row.AddExtras(tiers.PointRow(row.T+int64(p)*10*tiers.Second+5*tiers.Second, v))
		}
		row.X = row.X.Compact(row)
		rows = append(rows, row)
	}
	chunks, err := EncodeRollup(rows)
	if err != nil {
		t.Fatal(err)
	}
	sealedBytes, rowBytes := 0, 0
	for _, c := range chunks {
		sealedBytes += len(c.Data)
	}
	for _, row := range rows {
		rowBytes += 40 + len(tiers.AppendExtras(nil, row))
	}
	t.Logf("%.1f bytes a row sealed, %.1f as rows", float64(sealedBytes)/1440, float64(rowBytes)/1440)
	if 2*sealedBytes > rowBytes {
		t.Fatalf("sealed %d bytes, rows %d", sealedBytes, rowBytes)
	}
}

func FuzzDecodeRollup(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, extras := range []bool{true, false} {
		chunks, err := EncodeRollup(randomRollupRows(r, 40, extras))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(chunks[0].Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		all := tiers.Span{From: math.MinInt64, To: math.MaxInt64}
		for _, extras := range []bool{true, false} {
			rows, err := DecodeRollup(nil, data, all, math.MinInt64, extras)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				continue
			}
			for i := 1; i < len(rows); i++ {
				if rows[i].T <= rows[i-1].T {
					t.Fatalf("rows out of order: %d after %d", rows[i].T, rows[i-1].T)
				}
			}
			for _, row := range rows {
				if row.Count < 0 {
					t.Fatalf("negative count %d", row.Count)
				}
				tiers.AppendExtras(nil, row) // must not panic
			}
		}
	})
}

// TestNearDecimalColumnKeepsBits: sums of decimals computed in floating
// point, which are decimals but for their last bits, come back bit for
// bit, and take far less than XOR takes of them.
func TestNearDecimalColumnKeepsBits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	col := make([]tiers.Row, 1000)
	for i := range col {
		sum := 0.0
		for range 1 + r.IntN(60) {
			sum += math.Round(r.NormFloat64()*1e4) / 1e3
		}
		if i%100 == 7 {
			sum = 0.1 + 0.2 - 0.3 // nowhere near its decimal in units of the last place
		}
		col[i] = tiers.PointRow(int64(i), sum)
	}
	data, err := encodeColumn(col)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] < nearDecimalFormat || data[0] > nearDecimalFormat+maxDigits {
		// 5.55e-17 is a decimal of no digits count: the column falls back.
		t.Logf("format %#x", data[0])
	}
	got, err := decodeColumnRows(data, len(col))
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got, col) {
		t.Fatal("the column came back changed")
	}
	// Without the stray value the near-decimal format is chosen, and it
	// is a fraction of the XOR chunk.
	for i := range col {
		if i%100 == 7 {
			col[i] = tiers.PointRow(int64(i), 1.5)
		}
	}
	data, err = encodeColumn(col)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != nearDecimalFormat+3 {
		t.Fatalf("format %#x, want the near-decimal format of 3 digits", data[0])
	}
	if got, err = decodeColumnRows(data, len(col)); err != nil || !sameBits(got, col) {
		t.Fatalf("the column came back changed (%v)", err)
	}
	xor, err := Encode(col, 1)
	if err != nil {
		t.Fatal(err)
	}
	if 2*len(data) > len(xor[0].Data) {
		t.Fatalf("near-decimal %d bytes, XOR %d", len(data), len(xor[0].Data))
	}
}

// decodeColumnRows decodes a column of n values indexed by position.
func decodeColumnRows(data []byte, n int) ([]tiers.Row, error) {
	vals := make([]float64, n)
	if err := decodeColumnInto(vals, nil, data); err != nil {
		return nil, err
	}
	rows := make([]tiers.Row, n)
	for i, v := range vals {
		rows[i] = tiers.PointRow(int64(i), v)
	}
	return rows, nil
}

func sameBits(a, b []tiers.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].T != b[i].T || math.Float64bits(a[i].Sum) != math.Float64bits(b[i].Sum) {
			return false
		}
	}
	return true
}

// BenchmarkDecodeRollup decodes a chunk of 1024 minute rows of a
// three-decimal gauge, with and without their extras.
func BenchmarkDecodeRollup(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var rows []tiers.Row
	level := 50.0
	for m := range MaxSamples {
		row := tiers.Row{T: int64(m) * tiers.Minute}
		for p := range 6 {
			level += r.NormFloat64() * 0.01
			row.AddExtras(tiers.PointRow(row.T+int64(p)*10*tiers.Second, math.Round((level+r.NormFloat64()*0.3)*1000)/1000))
		}
		row.X = row.X.Compact(row)
		rows = append(rows, row)
	}
	chunks, err := EncodeRollup(rows)
	if err != nil {
		b.Fatal(err)
	}
	all := tiers.Span{From: math.MinInt64, To: math.MaxInt64}
	for _, extras := range []bool{false, true} {
		name := "bare"
		if extras {
			name = "extras"
		}
		b.Run(name, func(b *testing.B) {
			dst := make([]tiers.Row, 0, MaxSamples)
			for b.Loop() {
				if _, err := DecodeRollup(dst[:0], chunks[0].Data, all, math.MinInt64, extras); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxSamples), "ns/row")
		})
	}
}
