package partial

import (
	"math/rand/v2"
	"testing"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/tiers"
)

// Windows copied from a run's kept encodings are the windows written piece
// by piece, for any rows, order and list of fields; a run keeps at most
// maxWindowEncodings lists, only what Keep allows, and the bytes it asks
// for are what it holds.
func TestKeptWindowsEqualPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 200 {
		n := 1 + r.IntN(300)
		rows := make([]tiers.Row, n)
		for i := range rows {
			c := int64(1 + r.IntN(60))
			rows[i] = tiers.Row{T: int64(i) * 3600000, Min: float64(r.IntN(1000)) / 8, Max: r.Float64() * 1e9, Sum: float64(r.IntN(100000)) - 5e4, Count: c}
		}
		plain := &Run{T: make([]int64, n), Rows: rows}
		kept := &Run{T: make([]int64, n), Rows: rows}
		for i := range rows {
			plain.T[i], kept.T[i] = rows[i].T, rows[i].T
		}
		plain.Encode()
		kept.Encode()
		var charged int64
		allow := iter%5 != 0
		kept.Keep = func(b int64) bool {
			if allow {
				charged += b
			}
			return allow
		}
		lists := [][]int{{FieldMin, FieldMax, FieldMean, FieldCount}, {FieldSum}, {FieldMean, FieldMin}}
		for range 20 {
			fields := lists[r.IntN(len(lists))]
			lo := r.IntN(n)
			hi := lo + 1 + r.IntN(n-lo)
			desc := r.IntN(2) == 0
			want := plain.AppendRows([]byte("x"), lo, hi, desc, fields)
			if got := kept.AppendRows([]byte("x"), lo, hi, desc, fields); string(got) != string(want) {
				t.Fatalf("iteration %d rows [%d,%d) desc %v fields %v:\n got %.120s\nwant %.120s", iter, lo, hi, desc, fields, got, want)
			}
		}
		var held int64
		if p := kept.windows.Load(); p != nil {
			if !allow {
				t.Fatalf("iteration %d: the run kept windows its cache refused", iter)
			}
			if len(*p) > maxWindowEncodings {
				t.Fatalf("iteration %d: %d lists kept, at most %d", iter, len(*p), maxWindowEncodings)
			}
			for _, w := range *p {
				held += int64(cap(w.json)) + 4*int64(len(w.ends)) + int64(8*len(w.fields))
				if len(w.json) != cap(w.json) {
					t.Fatalf("iteration %d: %d bytes of windows in a buffer of %d", iter, len(w.json), cap(w.json))
				}
			}
		}
		if held != charged {
			t.Fatalf("iteration %d: the run holds %d bytes of windows, charged %d", iter, held, charged)
		}
	}
}

// A raw run's encoding is each point as answers write it, followed by a
// comma, and Ends marks where each ends: for any length, and when later
// points are longer than the first ones the buffer was sized from.
func TestRawEncodingEqualsPoints(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for iter := range 300 {
		n := r.IntN(400)
		run := &Run{T: make([]int64, n), V: make([]float64, n)}
		for i := range n {
			if i < n/2 || iter%2 == 0 {
				run.T[i], run.V[i] = int64(i), float64(r.IntN(10))
			} else {
				run.T[i], run.V[i] = 1<<62+int64(i), r.NormFloat64()*1e300
			}
		}
		run.Encode()
		enc := run.enc.Load()
		if n == 0 {
			if enc != nil {
				t.Fatalf("iteration %d: an empty run encoded", iter)
			}
			continue
		}
		var want []byte
		for i := range n {
			want = jsonenc.AppendPoint(want, run.T[i], run.V[i])
			want = append(want, ',')
			if int(enc.ends[i]) != len(want) {
				t.Fatalf("iteration %d: point %d ends at %d, want %d", iter, i, enc.ends[i], len(want))
			}
		}
		if string(enc.json) != string(want) {
			t.Fatalf("iteration %d: %d points encoded as\n%.200s\nwant\n%.200s", iter, n, enc.json, want)
		}
	}
}
