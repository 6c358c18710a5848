package promoracle

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
)

// Tolerance is how far two values may be apart and still be equal: a
// relative difference of 1e-9, or an absolute one of 1e-12 near zero
// (where two summation orders leave different last bits of a result
// that is zero in exact arithmetic).
var Tolerance = struct{ Relative, Absolute float64 }{Relative: 1e-9, Absolute: 1e-12}

// SameFloat tells whether a and b are equal as the oracle compares
// values: NaN equals NaN, infinities equal infinities of their sign, and
// finite values equal within Tolerance.
func SameFloat(a, b float64) bool {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.IsNaN(a) && math.IsNaN(b)
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return a == b
	case a == b:
		return true
	}
	d := math.Abs(a - b)
	return d <= Tolerance.Absolute || d <= Tolerance.Relative*max(math.Abs(a), math.Abs(b))
}

// Order says which orders of an answer must agree.
type Order int

const (
	// Unordered compares vectors as sets keyed by labels, matrices too;
	// the order of an instant query's answer is not specified.
	Unordered Order = iota
	// ByLabels also requires the series of a matrix in the reference's
	// order: a range query's answer is sorted by labels.
	ByLabels
	// ByValue also requires the vector's values in the reference's order
	// (sort, sort_desc); series of equal values may come in any order.
	ByValue
)

// maxDiffs bounds the differences listed for one answer.
const maxDiffs = 8

// CompareValues lists how got differs from want, the reference's answer;
// nothing when they agree.
func CompareValues(want, got model.Value, order Order) []string {
	if want == nil || got == nil {
		if want == nil && got == nil {
			return nil
		}
		return []string{fmt.Sprintf("answer %s, want %s", typeOf(got), typeOf(want))}
	}
	if want.Type() != got.Type() {
		return []string{fmt.Sprintf("result type %s, want %s", got.Type(), want.Type())}
	}
	switch w := want.(type) {
	case *model.Scalar:
		g := got.(*model.Scalar)
		if g.Timestamp != w.Timestamp || !SameFloat(float64(g.Value), float64(w.Value)) {
			return []string{fmt.Sprintf("scalar %s, want %s", g, w)}
		}
	case *model.String:
		g := got.(*model.String)
		if g.Timestamp != w.Timestamp || g.Value != w.Value {
			return []string{fmt.Sprintf("string %s, want %s", g, w)}
		}
	case model.Vector:
		return compareVectors(w, got.(model.Vector), order)
	case model.Matrix:
		return compareMatrices(w, got.(model.Matrix), order)
	default:
		return []string{fmt.Sprintf("cannot compare a %T", want)}
	}
	return nil
}

func typeOf(v model.Value) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().String()
}

// key is a label set's identity: model.Metric's text, sorted by name.
func key(m model.Metric) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", n, m[model.LabelName(n)])
	}
	b.WriteByte('}')
	return b.String()
}

// diffList collects differences up to maxDiffs and counts the rest.
type diffList struct {
	out  []string
	more int
}

func (d *diffList) add(format string, args ...any) {
	if len(d.out) < maxDiffs {
		d.out = append(d.out, fmt.Sprintf(format, args...))
		return
	}
	d.more++
}

func (d *diffList) list() []string {
	if d.more > 0 {
		d.out = append(d.out, fmt.Sprintf("... and %d more differences", d.more))
	}
	return d.out
}

// compareKeys lists the series only one side has, and returns the keys
// both have, in want's order.
func compareKeys(d *diffList, want, got []string) []string {
	gotSet := map[string]int{}
	for _, k := range got {
		gotSet[k]++
	}
	wantSet := map[string]int{}
	var both []string
	for _, k := range want {
		wantSet[k]++
		switch {
		case wantSet[k] > 1:
			d.add("the reference answers series %s twice", k)
		case gotSet[k] == 0:
			d.add("missing series %s", k)
		default:
			both = append(both, k)
		}
	}
	for _, k := range got {
		switch {
		case gotSet[k] > 1:
			d.add("series %s answered %d times", k, gotSet[k])
			gotSet[k] = 1
		case wantSet[k] == 0:
			d.add("unexpected series %s", k)
		}
	}
	return both
}

func compareVectors(want, got model.Vector, order Order) []string {
	var d diffList
	wk, gk := make([]string, len(want)), make([]string, len(got))
	bySeries := map[string]*model.Sample{}
	for i, s := range want {
		wk[i] = key(s.Metric)
	}
	for i, s := range got {
		gk[i] = key(s.Metric)
		bySeries[gk[i]] = s
	}
	wantBy := map[string]*model.Sample{}
	for i, s := range want {
		wantBy[wk[i]] = s
	}
	for _, k := range compareKeys(&d, wk, gk) {
		w, g := wantBy[k], bySeries[k]
		if w.Timestamp != g.Timestamp || !SameFloat(float64(w.Value), float64(g.Value)) {
			d.add("%s: %s @ %s, want %s @ %s", k, g.Value, g.Timestamp, w.Value, w.Timestamp)
		}
	}
	if order == ByValue && len(want) == len(got) {
		for i := range want {
			if !SameFloat(float64(want[i].Value), float64(got[i].Value)) {
				d.add("sorted differently: value %d is %s (%s), want %s (%s)", i, got[i].Value, gk[i], want[i].Value, wk[i])
				break
			}
		}
	}
	return d.list()
}

func compareMatrices(want, got model.Matrix, order Order) []string {
	var d diffList
	wk, gk := make([]string, len(want)), make([]string, len(got))
	wantBy, gotBy := map[string]*model.SampleStream{}, map[string]*model.SampleStream{}
	for i, s := range want {
		wk[i] = key(s.Metric)
		wantBy[wk[i]] = s
	}
	for i, s := range got {
		gk[i] = key(s.Metric)
		gotBy[gk[i]] = s
	}
	for _, k := range compareKeys(&d, wk, gk) {
		compareStreams(&d, k, wantBy[k].Values, gotBy[k].Values)
	}
	if order == ByLabels && len(d.out) == 0 && !slices.Equal(wk, gk) {
		d.add("series in another order than the reference's (by labels): %v, want %v", gk, wk)
	}
	return d.list()
}

// compareStreams lists the differences of one series' points.
func compareStreams(d *diffList, k string, want, got []model.SamplePair) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i].Timestamp < got[j].Timestamp):
			d.add("%s: missing point %s @ %s", k, want[i].Value, want[i].Timestamp)
			i++
		case i == len(want) || got[j].Timestamp < want[i].Timestamp:
			d.add("%s: unexpected point %s @ %s", k, got[j].Value, got[j].Timestamp)
			j++
		default:
			if !SameFloat(float64(want[i].Value), float64(got[j].Value)) {
				d.add("%s: %s @ %s, want %s", k, got[j].Value, got[j].Timestamp, want[i].Value)
			}
			i++
			j++
		}
	}
}

// CompareLabelSets lists how two answers of /series differ, as sets.
func CompareLabelSets(want, got []model.LabelSet) []string {
	var d diffList
	wk, gk := make([]string, len(want)), make([]string, len(got))
	for i, s := range want {
		wk[i] = key(model.Metric(s))
	}
	for i, s := range got {
		gk[i] = key(model.Metric(s))
	}
	compareKeys(&d, wk, gk)
	return d.list()
}

// CompareStrings lists how two answers of /labels or /label/{name}/values
// differ: the same strings, sorted as the reference sorts them.
func CompareStrings(want, got []string) []string {
	var d diffList
	compareKeys(&d, want, got)
	if len(d.out) == 0 && !slices.Equal(want, got) {
		d.add("order %q, want %q", got, want)
	}
	return d.list()
}
