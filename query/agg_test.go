package query

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/quantile"
	"github.com/tsgate/tsgate/tiers"
)

func TestParseAggs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Agg
	}{
		{"avg", []Agg{Avg}},
		{"min,max,sum,count,avg", []Agg{Min, Max, Sum, Count, Avg}},
		{"count, min", []Agg{Count, Min}},
	} {
		got, err := ParseAggs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseAggs(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", ",", "avg,", "median", "min,min", "AVG", "avg;min", "avg\x00",
		"p0", "p100", "p", "p.5", "p5.", "p05", "p99.9999", "p-1", "p1e1", "P99", "p99,p99", "p999,p99.9", "p50,p50.0", "p9999", "p 99", "p+5"} {
		if got, err := ParseAggs(bad); err == nil {
			t.Errorf("ParseAggs(%q) = %v, want an error", bad, got)
		}
	}
}

// Percentiles parse in every accepted form, keep the name they were
// written with, and carry their quantile.
func TestParsePercentiles(t *testing.T) {
	for _, c := range []struct {
		in string
		q  float64
	}{
		{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}, {"p999", 0.999}, {"p99.9", 0.999},
		{"p12.5", 0.125}, {"p0.1", 0.001}, {"p99.999", 0.99999}, {"p1", 0.01}, {"p50.0", 0.5}, {"p0.001", 0.00001},
	} {
		aggs, err := ParseAggs("min," + c.in)
		if err != nil || len(aggs) != 2 || !aggs[1].IsPercentile() || aggs[0].IsPercentile() {
			t.Fatalf("ParseAggs(%q) = %v, %v", c.in, aggs, err)
		}
		if got := aggs[1].String(); got != c.in {
			t.Errorf("%q is named %q", c.in, got)
		}
		if got := aggs[1].Quantile(); got != c.q {
			t.Errorf("%q has quantile %v, want %v", c.in, got, c.q)
		}
		if !NeedsExtras(aggs) || NeedsExtras(aggs[:1]) {
			t.Errorf("NeedsExtras(%v)", aggs)
		}
		if err := checkAggs(aggs); err != nil {
			t.Errorf("checkAggs(%v): %v", aggs, err)
		}
	}
	if err := checkAggs([]Agg{pctFlag}); err == nil {
		t.Error("checkAggs accepted a percentile of 0")
	}
}

// Whatever ParseAggs accepts is a list of distinct aggregates that
// FormatAggs prints as the same list with the spaces around names
// removed, and that list parses back to itself.
func FuzzParseAggs(f *testing.F) {
	for _, s := range []string{"avg", "min,max", "min,max,sum,count,avg", " sum , count", "min,min", "", ",", "median", "avg,", "p99,p999", "p12.5, p0.1", "p05"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		aggs, err := ParseAggs(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseAggs(%q): an empty message", s)
			}
			return
		}
		if len(aggs) == 0 {
			t.Fatalf("ParseAggs(%q) = %v", s, aggs)
		}
		if err := checkAggs(aggs); err != nil {
			t.Fatalf("ParseAggs(%q) = %v: %v", s, aggs, err)
		}
		names := strings.Split(s, ",")
		for i := range names {
			names[i] = strings.TrimSpace(names[i])
		}
		if FormatAggs(aggs) != strings.Join(names, ",") {
			t.Fatalf("ParseAggs(%q) = %v, printed %q", s, aggs, FormatAggs(aggs))
		}
		back, err := ParseAggs(FormatAggs(aggs))
		if err != nil || !slices.Equal(back, aggs) {
			t.Fatalf("ParseAggs(FormatAggs(%v)) = %v, %v", aggs, back, err)
		}
	})
}

// rowsWithSketches are windows whose sketch is stored, derived, live or
// unknown.
func rowsWithSketches(t testing.TB) []tiers.Row {
	r := rand.New(rand.NewPCG(4, 2))
	var rows []tiers.Row
	for kind := range 4 {
		s := quantile.New()
		row := tiers.Row{T: int64(kind), Min: math.Inf(1), Max: math.Inf(-1)}
		for range 1 + r.IntN(500) {
			v := math.Exp(r.NormFloat64() * 2)
			s.Add(v)
			row.Min, row.Max, row.Sum, row.Count = min(row.Min, v), max(row.Max, v), row.Sum+v, row.Count+1
		}
		switch kind {
		case 0:
			row.X = &tiers.Extras{Sketch: s.AppendBinary(nil)}
		case 1:
			row.X = &tiers.Extras{Derived: true}
		case 2:
			row.X = &tiers.Extras{Live: s}
		}
		rows = append(rows, row)
	}
	return rows
}

// RowAggs answers every aggregate as Agg.Of does, and a percentile as the
// row's own quantile, bit for bit.
func TestRowAggsAsAggOf(t *testing.T) {
	aggs := []Agg{Min, Max, Sum, Count, Avg}
	for _, name := range []string{"p50", "p90", "p99", "p999", "p12.345"} {
		a, ok := parseAgg(name)
		if !ok {
			t.Fatal(name)
		}
		aggs = append(aggs, a)
	}
	for _, row := range rowsWithSketches(t) {
		ra := AggsOf(row)
		for _, a := range aggs {
			want := a.Of(row)
			if a.IsPercentile() {
				// Agg.Of answers percentiles through RowAggs: compare with
				// the row's own quantile instead.
				want, _ = row.Quantile(a.Quantile())
			}
			if got := ra.Of(a); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("row %d, %v: %v, Agg.Of says %v", row.T, a, got, want)
			}
		}
	}
}

// BenchmarkPercentileColumns computes the columns of agg=p50,p90,p99 of
// a window with a stored sketch: once per column, and once per window.
func BenchmarkPercentileColumns(b *testing.B) {
	row := rowsWithSketches(b)[0]
	var aggs []Agg
	for _, name := range []string{"p50", "p90", "p99"} {
		a, _ := parseAgg(name)
		aggs = append(aggs, a)
	}
	b.Run("decode-per-column", func(b *testing.B) {
		for b.Loop() {
			for _, a := range aggs {
				_ = a.Of(row)
			}
		}
	})
	b.Run("decode-per-window", func(b *testing.B) {
		for b.Loop() {
			ra := AggsOf(row)
			for _, a := range aggs {
				_ = ra.Of(a)
			}
		}
	})
}
