package promapi

// The PromQL the gateway answers, as a plan: a selector of series, one
// range function over it, optionally one aggregation across series — or a
// constant. Everything else is refused with a message naming what works.

import (
	"regexp"
	"slices"
	"strings"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/tsgate/tsgate/tiers"
)

// metricName is the one metric every series is.
const metricName = "tsgate"

// seriesLabel is the label holding the series id.
const seriesLabel = "series"

// rangeFn is a function over the points of one series in a window.
type rangeFn int

const (
	fnLast rangeFn = iota
	fnMin
	fnMax
	fnAvg
	fnSum
	fnCount
)

var rangeFns = map[string]rangeFn{
	"last_over_time": fnLast, "min_over_time": fnMin, "max_over_time": fnMax,
	"avg_over_time": fnAvg, "sum_over_time": fnSum, "count_over_time": fnCount,
}

// aggOp is an aggregation across series.
type aggOp int

const (
	aggNone aggOp = iota
	aggSum
	aggMin
	aggMax
	aggAvg
	aggCount
)

var aggOps = map[string]aggOp{"sum": aggSum, "min": aggMin, "max": aggMax, "avg": aggAvg, "count": aggCount}

// supported is the sentence every refusal ends with.
const supported = "supported are tsgate{series=...} selectors (=, !=, =~, !~), " +
	"min_over_time, max_over_time, avg_over_time, sum_over_time, count_over_time and last_over_time over a range selector, " +
	"sum, min, max, avg and count [by|without (labels)] over one of those, and number literals"

// plan is a compiled expression.
type plan struct {
	// constant is set for a number expression; nothing else is then.
	constant *float64
	sel      selector
	fn       rangeFn
	// rng is the window of fn in ms; 0 means the default: the step of a
	// range query, the lookback of an instant one.
	rng int64
	agg aggOp
	// by and without are the grouping of agg.
	by      []string
	without bool
}

// keepsName reports whether the per-series answer keeps __name__:
// Prometheus keeps it for a bare selector and last_over_time only.
func (p *plan) keepsName() bool { return p.fn == fnLast }

// compile parses expr. step (ms) resolves step-relative durations; 0 for
// instant queries.
func compile(expr string, step int64) (*plan, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, badData("invalid parameter \"query\": the query is empty; %s", supported)
	}
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	p := &plan{}
	switch x := e.(type) {
	case *metricsql.NumberExpr:
		v := x.N
		p.constant = &v
		return p, nil
	case *metricsql.AggrFuncExpr:
		op, ok := aggOps[strings.ToLower(x.Name)]
		if !ok {
			return nil, badData("aggregation %s is not supported; %s", x.Name, supported)
		}
		if len(x.Args) != 1 {
			return nil, badData("%s takes exactly one argument here; %s", x.Name, supported)
		}
		if x.Limit != 0 {
			return nil, badData("limit on %s is not supported; %s", x.Name, supported)
		}
		switch x.Modifier.Op {
		case "":
		case "by", "without":
			p.by = slices.Clone(x.Modifier.Args)
			p.without = x.Modifier.Op == "without"
		default:
			return nil, badData("%s modifier is not supported; %s", x.Modifier.Op, supported)
		}
		p.agg = op
		if err := p.compileSeries(x.Args[0], step); err != nil {
			return nil, err
		}
		return p, nil
	default:
		if err := p.compileSeries(e, step); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// compileSeries compiles the per-series part: a selector or a range
// function over one.
func (p *plan) compileSeries(e metricsql.Expr, step int64) error {
	switch x := e.(type) {
	case *metricsql.MetricExpr:
		p.fn = fnLast
		return p.compileSelector(x)
	case *metricsql.FuncExpr:
		fn, ok := rangeFns[strings.ToLower(x.Name)]
		if !ok {
			return badData("function %s is not supported; %s", x.Name, supported)
		}
		if len(x.Args) != 1 {
			return badData("%s takes exactly one argument, a range selector like tsgate{series=\"id\"}[5m]", x.Name)
		}
		if x.KeepMetricNames {
			return badData("keep_metric_names is not supported; %s", supported)
		}
		re, ok := x.Args[0].(*metricsql.RollupExpr)
		if !ok || re.Window == nil {
			return badData("%s needs a range selector like tsgate{series=\"id\"}[5m]", x.Name)
		}
		if err := checkRollup(re); err != nil {
			return err
		}
		me, ok := re.Expr.(*metricsql.MetricExpr)
		if !ok {
			return badData("%s over %s is not supported: its argument must be a selector with a range; %s", x.Name, re.Expr.AppendString(nil), supported)
		}
		rng, err := re.Window.NonNegativeDuration(step)
		if err != nil || rng <= 0 || rng > tiers.MaxTime-tiers.MinTime {
			return badData("the range of %s must be positive and within the years 1 to 9999", x.Name)
		}
		p.fn, p.rng = fn, rng
		return p.compileSelector(me)
	case *metricsql.RollupExpr:
		if err := checkRollup(x); err != nil {
			return err
		}
		return badData("a range selector alone is not supported: wrap it in a function such as max_over_time(%s); %s", x.AppendString(nil), supported)
	case *metricsql.AggrFuncExpr:
		return badData("nested aggregations are not supported; %s", supported)
	case *metricsql.BinaryOpExpr:
		return badData("operator %s is not supported (only arithmetic between numbers); %s", x.Op, supported)
	case *metricsql.NumberExpr:
		return badData("an aggregation over a number is not supported; %s", supported)
	case *metricsql.StringExpr:
		return badData("string expressions are not supported; %s", supported)
	default:
		return badData("%s is not supported; %s", e.AppendString(nil), supported)
	}
}

// compileSelector compiles the selector of a query, which must name the
// gateway's metric (or none).
func (p *plan) compileSelector(me *metricsql.MetricExpr) error {
	if err := p.sel.compile(me); err != nil {
		return err
	}
	if p.sel.noMetric {
		return badData("no metric %s: every series of the gateway is %s{series=\"<id>\"}", p.sel.text, metricName)
	}
	return nil
}

func checkRollup(re *metricsql.RollupExpr) error {
	switch {
	case re.Offset != nil:
		return badData("the offset modifier is not supported; %s", supported)
	case re.At != nil:
		return badData("the @ modifier is not supported; %s", supported)
	case re.Step != nil || re.InheritStep:
		return badData("subqueries are not supported; %s", supported)
	}
	return nil
}

// matcher is one label matcher.
type matcher struct {
	label, value string
	negative     bool
	re           *regexp.Regexp // for =~ and !~
}

// matches reports whether a label value matches; an absent label's value
// is "".
func (m *matcher) matches(v string) bool {
	var ok bool
	if m.re != nil {
		ok = m.re.MatchString(v)
	} else {
		ok = v == m.value
	}
	return ok != m.negative
}

// selector picks series by their labels.
type selector struct {
	matchers []matcher
	// noMetric is set when the selector's metric name is not tsgate: it
	// matches nothing.
	noMetric bool
	text     string
}

func (s *selector) compile(me *metricsql.MetricExpr) error {
	s.text = string(me.AppendString(nil))
	if len(me.LabelFilterss) != 1 {
		return badData("\"or\" between label matchers is not supported; use series=~\"a|b\"")
	}
	for _, lf := range me.LabelFilterss[0] {
		m := matcher{label: lf.Label, value: lf.Value, negative: lf.IsNegative}
		if lf.IsRegexp {
			re, err := regexp.Compile("^(?s:" + lf.Value + ")$")
			if err != nil {
				return badData("invalid regular expression %q for label %s: %v", lf.Value, lf.Label, err)
			}
			m.re = re
		}
		s.matchers = append(s.matchers, m)
	}
	nonEmpty := false
	for i := range s.matchers {
		m := &s.matchers[i]
		if !m.matches("") {
			nonEmpty = true
		}
		if m.label == "__name__" && !m.matches(metricName) {
			s.noMetric = true
		}
	}
	if !nonEmpty {
		return badData("vector selector must contain at least one non-empty matcher")
	}
	return nil
}

// labelsOf are the labels of a stored series.
func labelsOf(id string) labelSet {
	return labelSet{{"__name__", metricName}, {seriesLabel, id}}
}

// match reports whether a series matches every matcher.
func (s *selector) match(id string) bool {
	for i := range s.matchers {
		m := &s.matchers[i]
		v := ""
		switch m.label {
		case "__name__":
			v = metricName
		case seriesLabel:
			v = id
		}
		if !m.matches(v) {
			return false
		}
	}
	return !s.noMetric
}

// label is one name and value.
type label struct{ name, value string }

// labelSet is a set of labels sorted by name.
type labelSet []label

func (ls labelSet) key() string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.name)
		b.WriteByte(0)
		b.WriteString(l.value)
		b.WriteByte(0)
	}
	return b.String()
}

// group is the label set an aggregation keeps of a per-series label set.
func (p *plan) group(ls labelSet) labelSet {
	var out labelSet
	for _, l := range ls {
		listed := slices.Contains(p.by, l.name)
		if p.without {
			if !listed && l.name != "__name__" {
				out = append(out, l)
			}
		} else if listed {
			out = append(out, l)
		}
	}
	return out
}
