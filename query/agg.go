package query

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tsgate/tsgate/quantile"
	"github.com/tsgate/tsgate/tiers"
)

// Agg is one aggregate column of a windowed answer: min, max, sum, count,
// avg, or a percentile of the window's values (Percentile).
type Agg uint32

// The aggregates a client can ask for. Avg is always Sum/Count of the
// underlying rows, never an average of averages.
const (
	Min Agg = iota
	Max
	Sum
	Count
	Avg
)

var aggNames = [...]string{"min", "max", "sum", "count", "avg"}

// A percentile is pctFlag with its quantile in thousandths of a percent
// (1 to 99,999) and how it was written: the number of decimals (0 to 3),
// or the short form p999 (99.9). Column names in answers are the
// aggregate as written, so the form is part of the value.
const (
	pctFlag      Agg = 1 << 24
	pctValueMask Agg = 1<<17 - 1
	pctDecShift      = 17
	pctDecMask   Agg = 3 << pctDecShift
	pctShort     Agg = 1 << 19
	// pctMaxDecimals is how many decimals a percentile may be written with.
	pctMaxDecimals = 3
)

// percentileUsage says which aggregates there are, for errors.
const percentileUsage = "min, max, sum, count, avg, or percentiles p50, p90, p95, p99, p999 and pNN.N (any percentile above 0 and below 100, at most three decimals: p99.9, p12.5, p0.1)"

// Percentile returns the aggregate of the p-th percentile of a window's
// values (0 < p < 100, at most three decimals), written with the given
// number of decimals; false when p is out of range or finer.
func Percentile(p float64, decimals int) (Agg, bool) {
	milli := math.Round(p * 1000)
	if decimals < 0 || decimals > pctMaxDecimals || milli < 1 || milli > 99_999 || math.Abs(milli-p*1000) > 1e-6 {
		return 0, false
	}
	return pctFlag | Agg(milli) | Agg(decimals)<<pctDecShift, true
}

// IsPercentile reports whether a is a percentile.
func (a Agg) IsPercentile() bool { return a&pctFlag != 0 }

// Quantile is a percentile's quantile, in (0, 1).
func (a Agg) Quantile() float64 { return float64(a&pctValueMask) / 100_000 }

func (a Agg) String() string {
	if !a.IsPercentile() {
		if int(a) < len(aggNames) {
			return aggNames[a]
		}
		return "agg(" + strconv.Itoa(int(a)) + ")"
	}
	if a&pctShort != 0 {
		return "p999"
	}
	milli := int(a & pctValueMask)
	dec := int(a&pctDecMask) >> pctDecShift
	s := "p" + strconv.Itoa(milli/1000)
	if dec > 0 {
		frac := fmt.Sprintf("%03d", milli%1000)
		s += "." + frac[:dec]
	}
	return s
}

// Of computes the aggregate of a window's folded row: a percentile from the
// row's sketch (tiers.Row.Quantile), NaN — null in answers — when the
// window's sketch is unknown (rows written before rollups kept sketches).
func (a Agg) Of(r tiers.Row) float64 {
	if a.IsPercentile() {
		aggs := AggsOf(r)
		return aggs.Of(a)
	}
	switch {
	case a == Min:
		return r.Min
	case a == Max:
		return r.Max
	case a == Sum:
		return r.Sum
	case a == Count:
		return float64(r.Count)
	default:
		return r.Sum / float64(r.Count)
	}
}

// RowAggs computes several aggregates of one window's folded row, decoding
// its sketch once for all of its percentile columns rather than once for
// each (a decode costs more than the quantile it answers).
type RowAggs struct {
	row     tiers.Row
	sketch  *quantile.Sketch
	known   bool // the sketch was looked up
	present bool // and the row has one
}

// AggsOf starts the aggregates of row.
func AggsOf(row tiers.Row) RowAggs { return RowAggs{row: row} }

// Of is a.Of(row).
func (r *RowAggs) Of(a Agg) float64 {
	if !a.IsPercentile() {
		return a.Of(r.row)
	}
	if !r.known {
		r.sketch, r.present = r.row.QuantileSketch()
		r.known = true
	}
	if !r.present {
		return math.NaN()
	}
	v, _ := r.sketch.Quantile(a.Quantile())
	return v
}

// parseAgg parses one aggregate name.
func parseAgg(name string) (Agg, bool) {
	for i, n := range aggNames {
		if n == name {
			return Agg(i), true
		}
	}
	if name == "p999" {
		a, _ := Percentile(99.9, 1)
		return a | pctShort, true
	}
	digits, ok := strings.CutPrefix(name, "p")
	if !ok || digits == "" {
		return 0, false
	}
	whole, frac, dotted := strings.Cut(digits, ".")
	// Written as people write percentiles: no sign, no exponent, no
	// leading zero (p05), no empty part (p.5, p5.).
	if whole == "" || len(whole) > 2 || (len(whole) == 2 && whole[0] == '0') || !allDigits(whole) ||
		(dotted && (frac == "" || len(frac) > pctMaxDecimals || !allDigits(frac))) {
		return 0, false
	}
	p, err := strconv.ParseFloat(digits, 64)
	if err != nil {
		return 0, false
	}
	return Percentile(p, len(frac))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ParseAggs parses a comma list of aggregates; the order is the order of
// the answer's columns. Names may not repeat, nor name one percentile
// twice (p999 and p99.9).
func ParseAggs(s string) ([]Agg, error) {
	if s == "" {
		return nil, fmt.Errorf("must name at least one of %s", percentileUsage)
	}
	var out []Agg
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		a, ok := parseAgg(name)
		if !ok {
			return nil, fmt.Errorf("%q is not an aggregate; use a comma list of %s", name, percentileUsage)
		}
		out = append(out, a)
		if err := checkAggs(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FormatAggs is the canonical comma list of aggs.
func FormatAggs(aggs []Agg) string {
	names := make([]string, len(aggs))
	for i, a := range aggs {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

// valid reports whether a is one of the aggregates.
func (a Agg) valid() bool {
	if !a.IsPercentile() {
		return int(a) < len(aggNames)
	}
	milli := a & pctValueMask
	rest := a &^ (pctFlag | pctValueMask | pctDecMask | pctShort)
	return rest == 0 && milli >= 1 && milli <= 99_999 && (a&pctShort == 0 || a&^pctShort == pctFlag|99_900|1<<pctDecShift)
}

// checkAggs reports an aggregate list that names an unknown aggregate or
// one twice.
func checkAggs(aggs []Agg) error {
	for i, a := range aggs {
		if !a.valid() {
			return fmt.Errorf("unknown aggregate %d; use %s", a, percentileUsage)
		}
		for _, b := range aggs[:i] {
			if b == a || (a.IsPercentile() && b.IsPercentile() && a&pctValueMask == b&pctValueMask) {
				if b == a {
					return fmt.Errorf("names %s twice", a)
				}
				return fmt.Errorf("names one percentile twice (%s and %s)", b, a)
			}
		}
	}
	return nil
}

// NeedsExtras reports whether aggs read the rollup rows' extras: every
// percentile does (from the sketches).
func NeedsExtras(aggs []Agg) bool {
	for _, a := range aggs {
		if a.IsPercentile() {
			return true
		}
	}
	return false
}

// AggNames are the names of the aggregates besides percentiles, in the
// order of their values.
func AggNames() []string { return aggNames[:] }
