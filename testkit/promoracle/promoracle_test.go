package promoracle_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/value"

	"github.com/tsgate/tsgate/testkit/promoracle"
)

var now = time.Date(2026, time.January, 15, 14, 37, 22, 123_000_000, time.UTC)

// TestSetShape checks the promises of the sample set: deterministic,
// within [Base, End), off the whole second, ascending per series, with
// the resets, the gap, the late start and the stale end it names.
func TestSetShape(t *testing.T) {
	s := promoracle.NewSet(now)
	if again := promoracle.NewSet(now); !setsEqual(s, again) {
		t.Fatal("two sets of the same instant differ")
	}
	if s.End != time.Date(2026, time.January, 15, 14, 37, 0, 0, time.UTC) || s.Base != s.End.Add(-promoracle.Span) {
		t.Fatalf("Base %s, End %s", s.Base, s.End)
	}
	names := map[string]int{}
	for _, sr := range s.Series {
		names[sr.Labels["__name__"]]++
		for i, smp := range sr.Samples {
			if smp.T%1000 == 0 {
				t.Fatalf("%s: sample at %d is on a whole second", sr.Labels, smp.T)
			}
			if smp.T < s.Base.UnixMilli() || smp.T >= s.End.UnixMilli() {
				t.Fatalf("%s: sample at %d outside [Base, End)", sr.Labels, smp.T)
			}
			if i > 0 && smp.T <= sr.Samples[i-1].T {
				t.Fatalf("%s: samples not ascending at %d", sr.Labels, i)
			}
		}
	}
	want := map[string]int{
		"oracle_http_requests_total": 20, "oracle_cpu_seconds_total": 10, "oracle_temperature_celsius": 10,
		"oracle_queue_length": 5, "oracle_memory_bytes": 5, "oracle_build_info": 5,
		"oracle_request_duration_seconds_bucket": 21, "oracle_request_duration_seconds_sum": 3,
		"oracle_request_duration_seconds_count": 3, "oracle:queue_length:max5m": 2,
	}
	for n, c := range want {
		if names[n] != c {
			t.Errorf("%d series of %s, want %d", names[n], n, c)
		}
	}
	t.Logf("%d series, %d samples", len(s.Series), s.Samples())

	// 10.0.0.1's counters fall back twice; 10.0.1.2's series end with a
	// stale marker at 130 minutes; 10.0.0.2 has no sample in its gap;
	// 10.0.0.3 starts at 40 minutes.
	for _, sr := range s.Metric("oracle_http_requests_total") {
		l := sr.Labels
		if l["method"] != "GET" || l["code"] != "200" {
			continue
		}
		resets, stale := 0, 0
		for i := 1; i < len(sr.Samples); i++ {
			if value.IsStaleNaN(sr.Samples[i].V) {
				stale++
			} else if sr.Samples[i].V < sr.Samples[i-1].V {
				resets++
			}
		}
		first := time.UnixMilli(sr.Samples[0].T).Sub(s.Base)
		switch l["instance"] {
		case "10.0.0.1:8080":
			if resets != 2 {
				t.Errorf("%s: %d resets, want 2", l, resets)
			}
		case "10.0.1.1:80":
			if resets != 1 {
				t.Errorf("%s: %d resets, want 1", l, resets)
			}
		case "10.0.1.2:80":
			last := sr.Samples[len(sr.Samples)-1]
			if stale != 1 || !value.IsStaleNaN(last.V) || time.UnixMilli(last.T).Sub(s.Base).Round(time.Minute) != 130*time.Minute {
				t.Errorf("%s: %d stale markers, the last sample %v at Base+%s", l, stale, last.V, time.UnixMilli(last.T).Sub(s.Base))
			}
		case "10.0.0.2:8080":
			for _, smp := range sr.Samples {
				at := time.UnixMilli(smp.T).Sub(s.Base)
				if at >= 95*time.Minute && at < 107*time.Minute {
					t.Errorf("%s: a sample at Base+%s, in the gap", l, at)
				}
			}
		case "10.0.0.3:8080":
			if first < 40*time.Minute || first > 41*time.Minute {
				t.Errorf("%s: first sample at Base+%s, want Base+40m", l, first)
			}
		}
	}
}

func setsEqual(a, b *promoracle.Set) bool {
	if len(a.Series) != len(b.Series) {
		return false
	}
	for i := range a.Series {
		if a.Series[i].Labels.String() != b.Series[i].Labels.String() ||
			!slices.EqualFunc(a.Series[i].Samples, b.Series[i].Samples, func(x, y promoracle.Sample) bool {
				return x.T == y.T && math.Float64bits(x.V) == math.Float64bits(y.V)
			}) {
			return false
		}
	}
	return true
}

// TestWriteRequestsRoundTrip checks that the write requests carry every
// sample once, in time order across requests, and survive encoding
// (protobuf, snappy) bit for bit, stale markers included.
func TestWriteRequestsRoundTrip(t *testing.T) {
	s := promoracle.NewSet(now)
	reqs := s.WriteRequests(10 * time.Minute)
	if len(reqs) < 18 {
		t.Fatalf("%d requests for three hours in slices of ten minutes", len(reqs))
	}
	got := map[string][]promoracle.Sample{}
	var prevMax int64
	for i, req := range reqs {
		body, err := promoracle.Encode(req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := promoracle.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
		for _, ts := range back.Timeseries {
			l := promoracle.Labels{}
			for j, lb := range ts.Labels {
				if j > 0 && ts.Labels[j-1].Name >= lb.Name {
					t.Fatalf("request %d: labels not sorted: %v", i, ts.Labels)
				}
				l[lb.Name] = lb.Value
			}
			for _, smp := range ts.Samples {
				got[l.String()] = append(got[l.String()], promoracle.Sample{T: smp.Timestamp, V: smp.Value})
				minT, maxT = min(minT, smp.Timestamp), max(maxT, smp.Timestamp)
			}
		}
		if i > 0 && minT <= prevMax-int64(10*time.Minute/time.Millisecond) {
			t.Fatalf("request %d reaches back to %d, more than a slice before the previous one's %d", i, minT, prevMax)
		}
		prevMax = maxT
	}
	want := &promoracle.Set{}
	for _, sr := range s.Series {
		want.Series = append(want.Series, promoracle.Series{Labels: sr.Labels, Samples: got[sr.Labels.String()]})
	}
	if len(got) != len(s.Series) || !setsEqual(s, want) {
		t.Fatal("the decoded requests differ from the set")
	}
}

// TestSeriesID checks the id rule of the contract on a label set with
// characters that need quoting.
func TestSeriesID(t *testing.T) {
	l := promoracle.Labels{"__name__": "cpu", "b": "2", "a": `x"y\z`}
	// printf 'cpu{a="x\\"y\\\\z",b="2"}' | sha256sum
	const want = "cpu.66b48cd75c715fb0"
	if got := l.SeriesID(); got != want {
		t.Fatalf("SeriesID = %s, want %s", got, want)
	}
}

func TestSameFloat(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		a, b float64
		same bool
	}{
		{1, 1, true}, {1, 1 + 1e-12, true}, {1, 1 + 1e-8, false}, {1e20, 1e20 * (1 + 5e-10), true},
		{0, 1e-15, true}, {0, 1e-9, false}, {nan, nan, true}, {nan, 0, false}, {0, nan, false},
		{inf, inf, true}, {inf, -inf, false}, {-inf, -inf, true}, {inf, math.MaxFloat64, false},
		{math.Float64frombits(value.StaleNaN), nan, true},
	} {
		if got := promoracle.SameFloat(c.a, c.b); got != c.same {
			t.Errorf("SameFloat(%v, %v) = %v", c.a, c.b, got)
		}
	}
}

func TestCompareValues(t *testing.T) {
	m := func(kv ...string) model.Metric {
		out := model.Metric{}
		for i := 0; i < len(kv); i += 2 {
			out[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return out
	}
	a, b, c := m("job", "a"), m("job", "b"), m("job", "c")
	vec := func(ms ...model.Metric) model.Vector {
		var out model.Vector
		for i, x := range ms {
			out = append(out, &model.Sample{Metric: x, Value: model.SampleValue(i), Timestamp: 1000})
		}
		return out
	}
	// Sets: order does not matter, values and series do.
	if d := promoracle.CompareValues(vec(a, b), model.Vector{vec(a, b)[1], vec(a, b)[0]}, promoracle.Unordered); d != nil {
		t.Errorf("reordered vector: %v", d)
	}
	if d := promoracle.CompareValues(vec(a, b), vec(a, c), promoracle.Unordered); len(d) != 2 {
		t.Errorf("other series: %v", d)
	}
	if d := promoracle.CompareValues(vec(a, b), vec(b, a), promoracle.Unordered); len(d) != 2 {
		t.Errorf("other values: %v", d)
	}
	if d := promoracle.CompareValues(vec(a, b), model.Vector{vec(a, b)[1], vec(a, b)[0]}, promoracle.ByValue); len(d) != 1 ||
		!strings.Contains(d[0], "sorted differently") {
		t.Errorf("sorted differently: %v", d)
	}
	mat := func(ms ...model.Metric) model.Matrix {
		var out model.Matrix
		for _, x := range ms {
			out = append(out, &model.SampleStream{Metric: x, Values: []model.SamplePair{{Timestamp: 1000, Value: 1}, {Timestamp: 2000, Value: model.SampleValue(math.NaN())}}})
		}
		return out
	}
	if d := promoracle.CompareValues(mat(a, b), mat(a, b), promoracle.ByLabels); d != nil {
		t.Errorf("equal matrices: %v", d)
	}
	if d := promoracle.CompareValues(mat(a, b), mat(b, a), promoracle.ByLabels); len(d) != 1 || !strings.Contains(d[0], "order") {
		t.Errorf("matrix out of order: %v", d)
	}
	short := mat(a)
	short[0].Values = short[0].Values[:1]
	if d := promoracle.CompareValues(mat(a), short, promoracle.ByLabels); len(d) != 1 || !strings.Contains(d[0], "missing point") {
		t.Errorf("missing point: %v", d)
	}
	if d := promoracle.CompareValues(mat(a), vec(a), promoracle.Unordered); len(d) != 1 {
		t.Errorf("type: %v", d)
	}
	if d := promoracle.CompareValues(&model.Scalar{Value: 1, Timestamp: 5}, &model.Scalar{Value: 1, Timestamp: 6}, promoracle.Unordered); len(d) != 1 {
		t.Errorf("scalar time: %v", d)
	}
	if d := promoracle.CompareStrings([]string{"a", "b"}, []string{"b", "a"}); len(d) != 1 {
		t.Errorf("strings order: %v", d)
	}
}

// TestCasesExpand checks that every placeholder of the case list was
// replaced and that the cases are distinct.
func TestCasesExpand(t *testing.T) {
	s := promoracle.NewSet(now)
	seen := map[string]bool{}
	for _, c := range s.Cases() {
		if strings.Contains(c.Expr, "$R") || strings.Contains(c.Expr, "$T") || strings.Contains(c.Expr, "$M") ||
			strings.Contains(c.Expr, "$Q") || strings.Contains(c.Expr, "$H") || strings.Contains(c.Expr, "$B") ||
			strings.Contains(c.Expr, "$C") || strings.Contains(c.Expr, "$E") {
			t.Errorf("placeholder left in %s", c.Expr)
		}
		if seen[c.Expr] {
			t.Errorf("case %s twice", c.Expr)
		}
		seen[c.Expr] = true
	}
	t.Logf("%d cases, %d instants, %d ranges, %d metadata questions", len(seen), len(s.Instants()), len(s.Ranges()), len(s.MetaCases()))
}
