package promapi

import (
	"errors"
	"slices"
	"testing"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/tsgate/tsgate/tiers"
)

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1768487842", 1768487842000, true},
		{"1768487842.123", 1768487842123, true},
		{"1768487842.1", 1768487842100, true},
		{"-1.5", -1500, true},
		{"2026-01-15T14:37:22.123Z", 1768487842123, true},
		{"2026-01-15T15:37:22+01:00", 1768487842000, true},
		{"yesterday", 0, false},
		{"NaN", 0, false},
		{"1e20", 0, false},
		{"", 0, false},
	} {
		got, err := parseTime("start", c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseTime(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !isBadData(err) {
			t.Errorf("parseTime(%q): %v is not bad_data", c.in, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"15", 15000, true}, {"0.5", 500, true}, {"1m", tiers.Minute, true}, {"1h30m", 90 * tiers.Minute, true},
		{"1d", tiers.Day, true}, {"1w", tiers.Week, true}, {"soon", 0, false}, {"Inf", 0, false},
	} {
		got, err := parseDuration("step", c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseDuration(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestAppendTimeAndValue(t *testing.T) {
	for ms, want := range map[int64]string{
		1768487842123: "1768487842.123", 1768487842100: "1768487842.1", 1768487842120: "1768487842.12",
		1768487842000: "1768487842", 1768487842001: "1768487842.001", -1500: "-1.5", 0: "0",
	} {
		if got := string(appendTime(nil, ms)); got != want {
			t.Errorf("appendTime(%d) = %s, want %s", ms, got, want)
		}
		if back, err := parseTime("t", want); err != nil || back != ms {
			t.Errorf("parseTime(%s) = %d, %v; want %d", want, back, err, ms)
		}
	}
	for v, want := range map[float64]string{1.5: `"1.5"`, -3: `"-3"`, 1e21: `"1000000000000000000000"`} {
		if got := string(appendValue(nil, v)); got != want {
			t.Errorf("appendValue(%v) = %s, want %s", v, got, want)
		}
	}
}

func TestCompile(t *testing.T) {
	for _, c := range []struct {
		expr string
		fn   rangeFn
		rng  int64
		agg  aggOp
		by   []string
	}{
		{`tsgate{series="a"}`, fnLast, 0, aggNone, nil},
		{`{series=~"a.*"}`, fnLast, 0, aggNone, nil},
		{`max_over_time(tsgate{series="a"}[1h])`, fnMax, tiers.Hour, aggNone, nil},
		{`MIN_OVER_TIME(tsgate{series="a"}[90s])`, fnMin, 90 * tiers.Second, aggNone, nil},
		{`sum by (series) (count_over_time(tsgate[5m]))`, fnCount, 5 * tiers.Minute, aggSum, []string{"series"}},
		{`avg(avg_over_time(tsgate{series!="x"}[1d]))`, fnAvg, tiers.Day, aggAvg, nil},
		{`count without (series) (tsgate{series=~"a|b"})`, fnLast, 0, aggCount, []string{"series"}},
		{`(sum_over_time(tsgate{series="a"}[2m]))`, fnSum, 2 * tiers.Minute, aggNone, nil},
		{`last_over_time({__name__="tsgate", series="a"}[10m])`, fnLast, 10 * tiers.Minute, aggNone, nil},
		{`max_over_time(tsgate{series="a"}[5i])`, fnMax, 5 * tiers.Minute, aggNone, nil},
	} {
		p, err := compile(c.expr, tiers.Minute)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if p.fn != c.fn || p.rng != c.rng || p.agg != c.agg || !slices.Equal(p.by, c.by) {
			t.Errorf("%s: fn %d rng %d agg %d by %v", c.expr, p.fn, p.rng, p.agg, p.by)
		}
	}
	for _, bad := range []string{"", "rate(tsgate[5m])", "max_over_time(tsgate)", "tsgate[5m]", "tsgate offset 5m",
		"max_over_time(tsgate[5m] @ 100)", "max_over_time(tsgate[1h:1m])", "sum(sum(tsgate))", "up", `{series=""}`,
		`tsgate{series="a" or series="b"}`, `tsgate{series=~"("}`, "tsgate > 1", `"text"`, "sum(1)", "quantile(0.5, tsgate)",
		"max_over_time(tsgate[5m]) keep_metric_names", "sum(tsgate) limit 3"} {
		if _, err := compile(bad, tiers.Minute); !isBadData(err) {
			t.Errorf("%q: err = %v, want bad_data", bad, err)
		}
	}
	if p, err := compile("2 * (1 + 2)", 0); err != nil || p.constant == nil || *p.constant != 6 {
		t.Errorf("constant: %v, %v", p, err)
	}
}

func TestSelectorListing(t *testing.T) {
	for _, c := range []struct {
		expr   string
		ids    []string // looked up directly; nil: listed
		prefix string
	}{
		{`tsgate{series="a.b"}`, []string{"a.b"}, ""},
		{`tsgate{series=~"room\\.(a|b)"}`, []string{"room.a", "room.b"}, ""},
		{`tsgate{series=~"s[12]"}`, []string{"s1", "s2"}, ""},
		{`tsgate{series=~"room\\..*"}`, nil, "room."},
		{`tsgate{series=~"(?i)room.*"}`, nil, ""},
		{`tsgate{series!="a"}`, nil, ""},
		{`tsgate{series!~"a.*", series=~"b.*"}`, nil, "b"},
	} {
		p, err := compile(c.expr, tiers.Minute)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		ids, ok := p.sel.literalIDs(100)
		slices.Sort(ids)
		if ok != (c.ids != nil) || !slices.Equal(ids, c.ids) {
			t.Errorf("%s: ids %v %v, want %v", c.expr, ids, ok, c.ids)
		}
		if c.ids == nil && p.sel.prefix() != c.prefix {
			t.Errorf("%s: prefix %q, want %q", c.expr, p.sel.prefix(), c.prefix)
		}
	}
	p, _ := compile(`tsgate{series=~"room\\.(a|b)", series!="room.b"}`, 0)
	if !p.sel.match("room.a") || p.sel.match("room.b") || p.sel.match("room.c") {
		t.Error("matchers do not all apply")
	}
	// Other labels are absent: their value is "", as in Prometheus.
	for expr, want := range map[string]bool{
		`tsgate{series="a", foo=""}`: true, `tsgate{series="a", foo="x"}`: false, `tsgate{series="a", foo!="x"}`: true,
		`tsgate{series="a", foo=~"x|"}`: true, `tsgate{series="a", foo!~""}`: false, `{__name__=~"ts.*", series="a"}`: true,
		`{__name__!="tsgate", series="a"}`: false,
	} {
		var s selector
		e, err := metricsql.Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.compile(e.(*metricsql.MetricExpr)); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := s.match("a"); got != want {
			t.Errorf("%s matches a: %v, want %v", expr, got, want)
		}
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{`max_over_time(tsgate{series="a"}[1h])`, `sum by (series) (tsgate)`, `1+1`, `tsgate{series=~"(a|b)"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := compile(expr, tiers.Minute)
		if err != nil && !isBadData(err) {
			t.Fatalf("%q: %v is not bad_data", expr, err)
		}
		if err == nil && p.constant == nil && p.fn == fnLast && p.rng < 0 {
			t.Fatalf("%q: negative range", expr)
		}
	})
}

func isBadData(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.typ == errBadData
}
