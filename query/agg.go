package query

import (
	"fmt"
	"strings"

	"github.com/tsgate/tsgate/tiers"
)

// Agg is one aggregate column of a windowed answer.
type Agg uint8

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

func (a Agg) String() string { return aggNames[a] }

// Of computes the aggregate of a window's folded row.
func (a Agg) Of(r tiers.Row) float64 {
	switch a {
	case Min:
		return r.Min
	case Max:
		return r.Max
	case Sum:
		return r.Sum
	case Count:
		return float64(r.Count)
	default:
		return r.Sum / float64(r.Count)
	}
}

// ParseAggs parses a comma list of aggregate names; the order is the
// order of the answer's columns. Names may not repeat.
func ParseAggs(s string) ([]Agg, error) {
	if s == "" {
		return nil, fmt.Errorf("must name at least one of %s", strings.Join(aggNames[:], ", "))
	}
	var out []Agg
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for i, n := range aggNames {
			if n == name {
				for _, prev := range out {
					if prev == Agg(i) {
						return nil, fmt.Errorf("names %s twice", name)
					}
				}
				out = append(out, Agg(i))
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%q is not an aggregate; use a comma list of %s", name, strings.Join(aggNames[:], ", "))
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

// checkAggs reports an aggregate list that names an unknown aggregate or
// one twice.
func checkAggs(aggs []Agg) error {
	seen := map[Agg]bool{}
	for _, a := range aggs {
		if int(a) >= len(aggNames) {
			return fmt.Errorf("unknown aggregate %d; use %s", a, strings.Join(aggNames[:], ", "))
		}
		if seen[a] {
			return fmt.Errorf("names %s twice", a)
		}
		seen[a] = true
	}
	return nil
}

// AggNames are the names of the aggregates, in the order of their values.
func AggNames() []string { return aggNames[:] }
