package query

import (
	"slices"
	"strings"
	"testing"
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
	for _, bad := range []string{"", ",", "avg,", "median", "min,min", "AVG", "avg;min", "avg\x00"} {
		if got, err := ParseAggs(bad); err == nil {
			t.Errorf("ParseAggs(%q) = %v, want an error", bad, got)
		}
	}
}

// Whatever ParseAggs accepts is a list of distinct aggregates that
// FormatAggs prints as the same list with the spaces around names
// removed, and that list parses back to itself.
func FuzzParseAggs(f *testing.F) {
	for _, s := range []string{"avg", "min,max", "min,max,sum,count,avg", " sum , count", "min,min", "", ",", "median", "avg,"} {
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
		if len(aggs) == 0 || len(aggs) > len(aggNames) {
			t.Fatalf("ParseAggs(%q) = %v", s, aggs)
		}
		seen := map[Agg]bool{}
		for _, a := range aggs {
			if int(a) >= len(aggNames) || seen[a] {
				t.Fatalf("ParseAggs(%q) = %v: out of range or repeated", s, aggs)
			}
			seen[a] = true
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
