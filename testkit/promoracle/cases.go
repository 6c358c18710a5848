package promoracle

import (
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Case is one PromQL expression of the oracle, asked as an instant query
// at each of the set's Instants and as a range query over each of its
// Ranges.
type Case struct {
	Expr string
	// Order is what order an instant query's vector must have.
	Order Order
	// InstantOnly: the expression is a range vector (x[5m], a subquery),
	// which only an instant query may ask for.
	InstantOnly bool
	// Empty: every answer is empty on the reference by design (absent()
	// of series that exist); a case that is not Empty must have data in
	// some answer of the reference, or it proves nothing.
	Empty bool
}

// Instants are the evaluation times of the instant queries: the end; a
// time after the second restart; just after the last target went away
// (its series are stale, not looked back at); inside a target's gap
// (more than the 5-minute lookback after its last sample); just after a
// restart; before the late target started, with ranges that reach back
// before the first sample.
func (s *Set) Instants() []time.Time {
	return []time.Time{
		s.End,
		s.At(157 * time.Minute),
		s.At(132 * time.Minute),
		s.At(101 * time.Minute),
		s.At(61 * time.Minute),
		s.At(21 * time.Minute),
	}
}

// Ranges are the range queries: nearly all of the set a minute apart,
// and 48 minutes across the gap, the stale end and a restart at the
// scrape interval.
func (s *Set) Ranges() []v1.Range {
	return []v1.Range{
		{Start: s.At(5 * time.Minute), End: s.End, Step: time.Minute},
		{Start: s.At(88 * time.Minute), End: s.At(136 * time.Minute), Step: 15 * time.Second},
	}
}

// Cases are the expressions: selectors; rates and increases over several
// ranges; the other range functions; the histogram; aggregations by and
// without labels; binary operators with vector matching; scalar and
// comparison arithmetic; label functions; offset, @ and subqueries;
// functions of time and of values.
func (s *Set) Cases() []Case {
	mid := unix(s.At(90 * time.Minute))
	early := unix(s.At(45 * time.Minute))
	// The longer names first: the replacer tries its pairs in order.
	r := strings.NewReplacer(
		"$MID", mid,
		"$EARLY", early,
		"$R", "oracle_http_requests_total",
		"$C", "oracle_cpu_seconds_total",
		"$T", "oracle_temperature_celsius",
		"$Q", "oracle_queue_length",
		"$M", "oracle_memory_bytes",
		"$H", "oracle_request_duration_seconds",
		"$B", "oracle_build_info",
	)
	c := func(expr string) Case { return Case{Expr: r.Replace(expr)} }
	sorted := func(expr string) Case { return Case{Expr: r.Replace(expr), Order: ByValue} }
	instant := func(expr string) Case { return Case{Expr: r.Replace(expr), InstantOnly: true} }
	empty := func(expr string) Case { return Case{Expr: r.Replace(expr), Empty: true} }
	return []Case{
		// Selectors: bare, with matchers of each kind, by name regex,
		// with offset and @, and range selectors (raw samples; the
		// widest is every sample of the set).
		c(`$R`),
		c(`$R{job="api", code="500"}`),
		c(`$R{instance=~"10\\.0\\.0\\..*", method!="POST"}`),
		c(`$R{instance!~".*:8080"}`),
		c(`{__name__=~"oracle_(queue_length|memory_bytes)"}`),
		c(`{__name__=~"oracle_http.*", code="500"}`),
		c(`oracle:queue_length:max5m`),
		c(`$B`),
		c(`$T offset 10m`),
		c(`$T offset -10m`),
		c(`$T @ $MID`),
		c(`$Q @ end()`),
		instant(`$R[5m]`),
		instant(`{__name__=~"oracle.+"}[3h]`),
		instant(`$T{sensor="board"}[3m] offset 2m`),
		instant(`$R{instance="10.0.1.2:80"}[10m]`),

		// Rates and increases.
		c(`rate($R[1m])`),
		c(`rate($R[5m])`),
		c(`rate($R[17m])`),
		c(`rate($R[1h])`),
		c(`irate($R[5m])`),
		c(`increase($R[10m])`),
		c(`increase($C[1h])`),
		c(`rate($C[5m])`),
		c(`increase($R[1h] offset 1h)`),
		c(`rate($R[5m] @ $MID)`),

		// The other range functions.
		c(`delta($T[10m])`),
		c(`idelta($T[5m])`),
		c(`deriv($T[15m])`),
		c(`predict_linear($T[30m], 3600)`),
		c(`predict_linear($M[10m], 600)`),
		c(`resets($R[30m])`),
		c(`resets($H_bucket[1h])`),
		c(`changes($Q[10m])`),
		c(`changes($T[1h])`),
		c(`avg_over_time($T[10m])`),
		c(`min_over_time($T[10m])`),
		c(`max_over_time($T[10m])`),
		c(`sum_over_time($Q[7m])`),
		c(`count_over_time($R[5m])`),
		c(`last_over_time($T[20m])`),
		c(`present_over_time($Q[10m])`),
		c(`stddev_over_time($T[30m])`),
		c(`stdvar_over_time($T[30m])`),
		c(`quantile_over_time(0.9, $T[30m])`),
		c(`quantile_over_time(0.5, $Q[1h])`),
		c(`absent_over_time($R{instance="10.0.1.2:80"}[5m])`),
		c(`absent_over_time($Q{instance="10.0.0.2:8080"}[3m])`),
		c(`absent_over_time(oracle_nonexistent[5m])`),
		c(`sum_over_time($B[1h])`),
		c(`timestamp($T)`),

		// The classic histogram.
		c(`histogram_quantile(0.9, rate($H_bucket[5m]))`),
		c(`histogram_quantile(0.5, sum by (le) (rate($H_bucket[10m])))`),
		c(`histogram_quantile(0.99, sum by (job, le) (increase($H_bucket[1h])))`),
		c(`histogram_quantile(0.9, rate($H_bucket[5m] offset 1h))`),
		c(`rate($H_sum[5m]) / rate($H_count[5m])`),

		// Aggregations.
		c(`sum(rate($R[5m]))`),
		c(`sum by (job) (rate($R[5m]))`),
		c(`sum without (instance) (rate($R[5m]))`),
		c(`avg by (job) ($T)`),
		c(`min by (instance) ($T)`),
		c(`max without (sensor) ($T)`),
		c(`count by (code) ($R)`),
		c(`count(count by (instance) ($R))`),
		c(`group by (job) ($R)`),
		c(`topk(3, rate($R[5m]))`),
		c(`bottomk(2, $T)`),
		c(`topk by (job) (1, $T)`),
		c(`quantile(0.75, $T)`),
		c(`quantile by (job) (0.25, rate($R[5m]))`),
		c(`quantile(0.5, rate($H_bucket[5m]))`),
		c(`stddev by (job) ($T)`),
		c(`stdvar($T)`),
		c(`count_values("value", $Q)`),
		c(`count_values by (job) ("v", round($T))`),
		c(`sum by (__name__) ({__name__=~"oracle_(queue_length|memory_bytes)"})`),

		// Binary operators and vector matching.
		c(`rate($R{code="500"}[5m]) / ignoring (code) rate($R{code="200"}[5m])`),
		c(`rate($R[5m]) / on (job, instance) group_left $Q`),
		c(`$Q * on (instance) group_left (version) $B`),
		c(`$B * on (instance) group_right (version, branch) rate($R[5m])`),
		c(`sum by (job, instance) (rate($R[5m])) / on (job, instance) $M`),
		c(`$R{job="api"} and on (instance) $Q > 3`),
		c(`$T or $Q`),
		c(`$R unless on (code) $R{code="500"}`),
		c(`rate($R[5m]) unless on (instance) $Q == 0`),

		// Comparisons, with and without bool, and arithmetic.
		c(`$T > 20`),
		c(`$T > bool 20`),
		c(`$Q == 0`),
		c(`$Q != bool 0`),
		c(`$T <= bool $T offset 5m`),
		c(`sum by (job) (rate($R[5m])) > bool 1`),
		c(`1 > bool 2`),
		c(`$T * 9 / 5 + 32`),
		c(`2 ^ $Q`),
		c(`$Q % 3`),
		c(`-$T`),
		c(`$M / 1024 / 1024`),
		c(`$Q / 0`),
		c(`scalar(sum($Q)) * $T`),
		c(`1 + 1`),
		c(`vector(1)`),
		c(`vector(scalar(sum($Q)))`),
		c(`time()`),
		c(`time() - timestamp($T)`),
		c(`scalar($Q{instance="10.0.0.1:8080"})`),

		// Functions of values and of time.
		sorted(`sort(rate($R[5m]))`),
		sorted(`sort_desc($T)`),
		sorted(`sort_desc(sum by (instance) (rate($R[5m])))`),
		c(`clamp_min($T, 10)`),
		c(`clamp_max($T, 15)`),
		c(`clamp($T, 5, 50)`),
		c(`round($T)`),
		c(`round($T, 0.5)`),
		c(`abs($T)`),
		c(`ceil($T)`),
		c(`floor($T)`),
		c(`sqrt($Q)`),
		c(`exp($T / 10)`),
		c(`ln($M)`),
		c(`log2($M)`),
		c(`log10($Q)`),
		c(`sgn($T)`),
		c(`hour()`),
		c(`day_of_week(timestamp($T))`),
		c(`minute(timestamp($Q))`),
		c(`days_in_month()`),

		// Labels.
		c(`label_replace($T, "host", "$1", "instance", "(.*):.*")`),
		c(`label_replace(rate($R[5m]), "code_class", "${1}xx", "code", "(.).*")`),
		c(`label_join($Q, "id", "/", "job", "instance")`),
		c(`label_join($B, "all", ",", "branch", "version")`),

		// absent().
		empty(`absent($R)`),
		c(`absent($R{job="nope"})`),
		c(`absent(oracle_nonexistent{job="x"})`),

		// Subqueries. Their ranges end 13 s short of a whole number of
		// steps: a subquery's points lie on its step's grid, and one on
		// the left bound of the range is in it for Prometheus 2.x (a
		// closed bound) and not for 3.x (an open one), so no range here
		// is a multiple of 15 s, the least step of the evaluation times.
		c(`max_over_time(rate($R[5m])[29m47s:1m])`),
		c(`avg_over_time($T[59m47s:5m])`),
		c(`min_over_time(sum by (job) (rate($R[1m]))[19m47s:])`),
		c(`deriv($T[29m47s:2m])`),
		c(`rate($R[9m47s:1m])`),
		c(`max_over_time(deriv($T[10m])[59m47s:5m])`),
		c(`sum_over_time($Q[9m47s:30s] @ $EARLY)`),
		instant(`rate($R[5m])[9m47s:1m]`),
	}
}

// MetaCase is one question to /series, /labels or /label/{name}/values.
type MetaCase struct {
	// Endpoint is "series", "labels" or "label_values".
	Endpoint string
	// Name is the label of label_values.
	Name       string
	Match      []string
	Start, End time.Time
}

// MetaCases are the questions to the metadata endpoints: with and
// without match[], over the whole set and over windows where a target
// had not started yet or had gone away. The windows of /labels and
// /label/{name}/values cover the whole set, since Prometheus answers
// those for every series of a block that overlaps the window.
func (s *Set) MetaCases() []MetaCase {
	all, end := s.Base, s.End
	before := s.At(30 * time.Minute)
	gone := s.At(150 * time.Minute)
	return []MetaCase{
		{Endpoint: "series", Match: []string{`oracle_http_requests_total`}, Start: all, End: end},
		{Endpoint: "series", Match: []string{`{job="web"}`}, Start: all, End: end},
		{Endpoint: "series", Match: []string{`{__name__=~"oracle_request_duration_seconds_.*", le=~"\\+Inf|0.5"}`, `oracle_build_info`}, Start: all, End: end},
		{Endpoint: "series", Match: []string{`{instance=~".+"}`}, Start: all, End: before},
		{Endpoint: "series", Match: []string{`{instance=~".+"}`}, Start: gone, End: end},
		{Endpoint: "series", Match: []string{`oracle_queue_length`}},
		{Endpoint: "labels", Start: all, End: end},
		{Endpoint: "labels", Match: []string{`oracle_build_info`}, Start: all, End: end},
		{Endpoint: "labels", Match: []string{`{__name__=~"oracle_request_duration_seconds_bucket|oracle:queue_length:max5m"}`}},
		{Endpoint: "label_values", Name: "__name__", Start: all, End: end},
		{Endpoint: "label_values", Name: "instance", Start: all, End: end},
		{Endpoint: "label_values", Name: "branch", Match: []string{`oracle_build_info`}, Start: all, End: end},
		{Endpoint: "label_values", Name: "le", Match: []string{`oracle_request_duration_seconds_bucket{instance="10.0.0.3:8080"}`}},
		{Endpoint: "label_values", Name: "nonexistent", Start: all, End: end},
	}
}
