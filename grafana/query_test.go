package grafana_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/grafana"
	"github.com/tsgate/tsgate/quantile"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// grafanaElement is one element of a /query answer: a time series
// ([[value, ms], ...]) or a table.
type grafanaElement struct {
	Target     string       `json:"target"`
	RefID      *string      `json:"refId"`
	Datapoints [][]*float64 `json:"datapoints"`
	Type       string       `json:"type"`
	Name       string       `json:"name"`
	Columns    []struct {
		Text string `json:"text"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows [][]*float64 `json:"rows"`
	// Title and Tags name a selector target's element.
	Title string            `json:"title"`
	Tags  map[string]string `json:"tags"`
	Meta  *struct {
		Notices []struct {
			Severity string `json:"severity"`
			Text     string `json:"text"`
		} `json:"notices"`
		Custom *struct {
			Tier          string  `json:"tier"`
			StepMs        int64   `json:"stepMs"`
			Agg           string  `json:"agg"`
			Partial       bool    `json:"partial"`
			PartialReason string  `json:"partialReason"`
			Covered       []int64 `json:"covered"`
			Series        string  `json:"series"`
			SeriesCount   int     `json:"seriesCount"`
		} `json:"custom"`
	} `json:"meta"`
}

func (e grafanaElement) refID() string {
	if e.RefID == nil {
		return "<none>"
	}
	return *e.RefID
}

// points returns the element's points as [t, value], from datapoints
// (value first) or from table rows (time first).
func (e grafanaElement) points(t *testing.T) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, dp := range e.Datapoints {
		if len(dp) != 2 || dp[0] == nil || dp[1] == nil {
			t.Fatalf("%s %s: datapoint %v is not [value, ms]", e.refID(), e.Target, dp)
		}
		out = append(out, [2]float64{*dp[1], *dp[0]})
	}
	for _, row := range e.Rows {
		if len(row) != 2 || row[0] == nil || row[1] == nil {
			t.Fatalf("%s %s: row %v is not [ms, value]", e.refID(), e.Name, row)
		}
		out = append(out, [2]float64{*row[0], *row[1]})
	}
	return out
}

// withRange sets the envelope's range to [from, to) as Grafana writes it
// (RFC 3339 in UTC with milliseconds), and the other members given.
func withRange(t *testing.T, envelope string, from, to int64, set map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(envelope), &m); err != nil {
		t.Fatal(err)
	}
	rg, _ := m["range"].(map[string]any)
	if rg == nil {
		rg = map[string]any{}
		m["range"] = rg
	}
	rg["from"] = time.UnixMilli(from).UTC().Format("2006-01-02T15:04:05.000Z")
	rg["to"] = time.UnixMilli(to).UTC().Format("2006-01-02T15:04:05.000Z")
	for k, v := range set {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s *testServer) grafanaQuery(body string) []grafanaElement {
	s.t.Helper()
	var out []grafanaElement
	s.grafanaOK("query", body, &out)
	if out == nil {
		s.t.Fatalf("query answered null, not an array")
	}
	return out
}

// wantPoints is the brute-force answer: the raw points in span (step 0),
// or the windows of width step whose start lies in span, each aggregating
// its whole window, ascending, as [t, value].
// percentileOf is the quantile of a percentile aggregate (p99, p999,
// p99.9).
func percentileOf(agg string) (float64, bool) {
	if agg == "p999" {
		return 0.999, true
	}
	digits, ok := strings.CutPrefix(agg, "p")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseFloat(digits, 64)
	return p / 100, err == nil
}

func wantPoints(pts map[int64]float64, span tiers.Span, step int64, agg string) [][2]float64 {
	read := span
	if step > 0 {
		// Grafana's reads include the window that holds the range start,
		// whole, so that charts have no gap at their left edge.
		read = tiers.Span{From: tiers.AlignDown(span.From, step), To: tiers.AlignUp(span.To, step)}
	}
	var ts []int64
	for t := range pts {
		if read.Contains(t) {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	var out [][2]float64
	if step == 0 {
		for _, t := range ts {
			out = append(out, [2]float64{float64(t), pts[t]})
		}
		return out
	}
	type acc struct {
		min, max, sum, count float64
		values               []float64
	}
	var starts []int64
	accs := map[int64]*acc{}
	for _, t := range ts {
		w := tiers.AlignDown(t, step)
		a := accs[w]
		if a == nil {
			a = &acc{min: math.Inf(1), max: math.Inf(-1)}
			accs[w] = a
			starts = append(starts, w)
		}
		v := pts[t]
		a.min, a.max, a.sum, a.count = min(a.min, v), max(a.max, v), a.sum+v, a.count+1
		a.values = append(a.values, v)
	}
	for _, w := range starts {
		a := accs[w]
		v := map[string]float64{"min": a.min, "max": a.max, "sum": a.sum, "count": a.count, "avg": a.sum / a.count}[agg]
		if q, ok := percentileOf(agg); ok {
			slices.Sort(a.values)
			v = a.values[quantile.Rank(q, int64(len(a.values)))]
		}
		out = append(out, [2]float64{float64(w), v})
	}
	return out
}

// checkElement asserts one series element (§6.7): its refId and name, and
// points that are ascending, inside the range, and equal to the
// brute-force answer for the step the rule chose.
func checkElement(t *testing.T, e grafanaElement, refID, series string, pts map[int64]float64, span tiers.Span, step int64, agg string) {
	t.Helper()
	if e.refID() != refID || (e.Target != series && e.Name != series) {
		t.Fatalf("element %s %s%s, want %s %s", e.refID(), e.Target, e.Name, refID, series)
	}
	if e.Meta == nil || e.Meta.Custom == nil || e.Meta.Custom.StepMs != step {
		t.Fatalf("%s %s: meta %+v, want step %d", refID, series, e.Meta, step)
	}
	got := e.points(t)
	for i, p := range got {
		// A window is in the answer when it overlaps the range: the first
		// one may start before the range does.
		if start := int64(p[0]); start >= span.To || start+max(step, 1) <= span.From {
			t.Fatalf("%s %s: point %v outside [%d, %d)", refID, series, p, span.From, span.To)
		}
		if i > 0 && p[0] <= got[i-1][0] {
			t.Fatalf("%s %s: point %v after %v: not ascending", refID, series, p, got[i-1])
		}
	}
	want := wantPoints(pts, span, step, agg)
	if len(want) == 0 {
		t.Fatalf("%s %s: the test expects no points; pick a range with data", refID, series)
	}
	if len(got) != len(want) {
		t.Fatalf("%s %s: %d points, want %d (step %d, %s)", refID, series, len(got), len(want), step, agg)
	}
	for i := range want {
		tolerance := 1e-9 * max(1, math.Abs(want[i][1]))
		if _, ok := percentileOf(agg); ok {
			// A percentile comes from a sketch: within 1 %.
			tolerance = quantile.RelativeAccuracy * (1 + 1e-9) * math.Abs(want[i][1])
		}
		if got[i][0] != want[i][0] || math.Abs(got[i][1]-want[i][1]) > tolerance {
			t.Fatalf("%s %s: point %d = %v, want %v (step %d, %s)", refID, series, i, got[i], want[i], step, agg)
		}
	}
}

// roundInterval is Grafana's rangeutil.roundInterval: how it turns
// range/maxDataPoints into intervalMs, rounding down as often as up.
func roundInterval(ms float64) int64 {
	steps := []struct {
		below float64
		to    int64
	}{
		{10, 1}, {15, 10}, {35, 20}, {75, 50}, {150, 100}, {350, 200}, {750, 500}, {1500, 1000},
		{3500, 2000}, {7500, 5000}, {12500, 10000}, {17500, 15000}, {25000, 20000}, {45000, 30000},
		{90000, 60000}, {210000, 120000}, {450000, 300000}, {750000, 600000}, {1050000, 900000},
		{1500000, 1200000}, {2700000, 1800000}, {5400000, 3600000}, {9000000, 7200000},
		{16200000, 10800000}, {32400000, 21600000}, {86400000, 43200000}, {604800000, 86400000},
		{1814400000, 604800000}, {3628800000, 2592000000},
	}
	for _, s := range steps {
		if ms < s.below {
			return s.to
		}
	}
	return 31536000000
}

// expectStep is the tier rule of the reference, computed here from the
// envelope: need = max(intervalMs, ceil(range / maxDataPoints)), then the
// max_points rule of the API.
func expectStep(span tiers.Span, intervalMs, maxDataPoints, now int64) (string, int64) {
	if maxDataPoints <= 0 {
		maxDataPoints = 1000
	}
	length := span.To - span.From
	need := max(intervalMs, (length+maxDataPoints-1)/maxDataPoints, 1)
	p := tiers.DefaultPyramid()
	level, w := grafana.RuleWindow(need, span, now, p)
	return p[level].Name, w
}

// seededServer is one server with the Grafana series written, shared by
// the query tests that only read.
func seededServer(t *testing.T) (*testServer, truth) {
	t.Helper()
	s := newTestServer(t)
	return s, seedGrafana(t, s)
}

// §6.5, §6.6, §6.7, §6.9: the plugin's v0.6 envelope as Grafana 11 Scenes
// dashboards post it.
func TestGrafanaQueryPluginEnvelope(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	span := tiers.Span{From: now - 6*tiers.Hour, To: now}
	got := s.grafanaQuery(withRange(t, fixture(t, "query-v06-scenes.json"), span.From, span.To, nil))
	tier, step := expectStep(span, 20000, 1158, now)
	// 20s is not a round step: the ladder's next is 30s.
	if tier != "raw" || step != 30*tiers.Second {
		t.Fatalf("the rule gives %s at %d for 6h/1158 at 20s; the test expects raw at 30s", tier, step)
	}
	// C is hidden and D has no target: no elements. B's (a|b) gives one
	// element per series, E's regex-escaped s\.44 the series s.44.
	want := []struct{ ref, series, agg string }{
		{"A", "s-42", "avg"}, {"B", "s-43", "max"}, {"B", "s.44", "max"}, {"E", "s.44", "avg"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d elements, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		checkElement(t, got[i], w.ref, w.series, tr[w.series], span, step, w.agg)
		c := got[i].Meta.Custom
		if c.Tier != tier || c.Agg != w.agg || c.Partial || !slices.Equal(c.Covered, []int64{span.From, span.To}) || len(got[i].Meta.Notices) != 0 {
			t.Errorf("%s %s: meta %+v %+v", w.ref, w.series, c, got[i].Meta.Notices)
		}
		if n := len(got[i].Datapoints); n > 1158 {
			t.Errorf("%s %s: %d points for maxDataPoints 1158", w.ref, w.series, n)
		}
	}
}

// §6.5: Explore's envelope as Grafana 9.5 posted it (panelId a string,
// foreign members of other datasources in the target, an interval of
// 100ms far below range/maxDataPoints), read with a payload agg of count.
func TestGrafanaQueryExploreEnvelope(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	span := tiers.Span{From: now - 2*tiers.Day - 7*tiers.Minute, To: now - 30*tiers.Minute}
	got := s.grafanaQuery(withRange(t, fixture(t, "query-explore-g95.json"), span.From, span.To, nil))
	tier, step := expectStep(span, 100, 1920, now)
	if tier != "minute" {
		t.Fatalf("the rule gives %s; the test expects the minute tier", tier)
	}
	if len(got) != 1 {
		t.Fatalf("%d elements", len(got))
	}
	checkElement(t, got[0], "A", "s-42", tr["s-42"], span, step, "count")
	for _, dp := range got[0].Datapoints {
		if *dp[0] != math.Trunc(*dp[0]) || *dp[0] < 1 {
			t.Fatalf("count %v is not a positive integer", *dp[0])
		}
	}
	if got[0].Meta.Custom.Tier != tier {
		t.Errorf("tier %s, want %s", got[0].Meta.Custom.Tier, tier)
	}
}

// §6.5, §6.7, §6.14: the legacy simple-json plugin's envelope, with a
// table target and adhocFilters.
func TestGrafanaQueryLegacySimpleJSON(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	span := tiers.Span{From: now - 6*tiers.Hour, To: now}
	got := s.grafanaQuery(withRange(t, fixture(t, "query-simplejson.json"), span.From, span.To, nil))
	_, step := expectStep(span, 30000, 550, now)
	if len(got) != 2 {
		t.Fatalf("%d elements", len(got))
	}
	checkElement(t, got[0], "A", "s-42", tr["s-42"], span, step, "avg")
	tbl := got[1]
	checkElement(t, tbl, "B", "s-43", tr["s-43"], span, step, "avg")
	if tbl.Type != "table" || len(tbl.Columns) != 2 || tbl.Columns[0].Type != "time" || tbl.Columns[1].Type != "number" || tbl.Datapoints != nil {
		t.Errorf("table element %+v", tbl.Columns)
	}
}

// §6.5, §6.9: Infinity's minimal body has no range, no maxDataPoints and no
// refId: the last 6 hours at the default of 1000 points.
func TestGrafanaQueryWithoutRange(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	span := tiers.Span{From: now - 6*tiers.Hour, To: now}
	got := s.grafanaQuery(fixture(t, "query-infinity-minimal.json"))
	_, step := expectStep(span, 0, 0, now)
	if len(got) != 1 {
		t.Fatalf("%d elements", len(got))
	}
	checkElement(t, got[0], "", "s-42", tr["s-42"], span, step, "avg")
	if len(got[0].Datapoints) > 1000 {
		t.Errorf("%d points for the default of 1000", len(got[0].Datapoints))
	}
}

// §6.8: annotation queries (refId Anno, scopedVars.__annotation, or
// dataQueryKind) get a frame with the annotation fields and no rows: the
// gateway keeps no events.
func TestGrafanaQueryAnnotations(t *testing.T) {
	s, _ := seededServer(t)
	now := s.Now()
	bodies := []string{
		withRange(t, fixture(t, "query-annotation.json"), now-6*tiers.Hour, now, nil),
		withRange(t, fixture(t, "query-annotation.json"), now-6*tiers.Hour, now, map[string]any{
			"dataQueryKind": "annotations", "scopedVars": map[string]any{},
			"targets": []any{map[string]any{"refId": "A", "target": "s-42"}}}),
	}
	for _, body := range bodies {
		got := s.grafanaQuery(body)
		if len(got) != 1 {
			t.Fatalf("%d elements", len(got))
		}
		var names []string
		for _, c := range got[0].Columns {
			names = append(names, c.Text+":"+c.Type)
		}
		if got[0].Type != "table" || (got[0].refID() != "Anno" && got[0].refID() != "A") || got[0].Rows == nil || len(got[0].Rows) != 0 ||
			!slices.Equal(names, []string{"time:time", "timeEnd:time", "title:string", "text:string", "tags:string"}) {
			t.Errorf("annotation frame %+v", got[0])
		}
	}
}

// §6.6: payloads as the code editor, the builder and older versions send
// them.
func TestGrafanaQueryPayloads(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	span := tiers.Span{From: now - 3*tiers.Hour - 1234, To: now - 2*tiers.Hour}
	_, auto := expectStep(span, 0, 800, now)
	cases := []struct {
		payload any
		step    int64
		agg     string
	}{
		{map[string]any{"resolution": "raw"}, 0, "avg"},
		{map[string]any{"resolution": "5m", "agg": "sum"}, 5 * tiers.Minute, "sum"},
		{map[string]any{"resolution": `1\.5m`}, 90 * tiers.Second, "avg"}, // builder values arrive regex-escaped
		{map[string]any{"agg": []any{"min"}}, auto, "min"},                // a builder multi-select
		{map[string]any{"agg": "count", "resolution": "auto"}, auto, "count"},
		{map[string]any{"agg": "p99", "resolution": "5m"}, 5 * tiers.Minute, "p99"},
		{map[string]any{"agg": `p99\.9`}, auto, "p99.9"}, // regex-escaped by the builder
		{map[string]any{"agg": []any{"p50"}, "resolution": "raw"}, 0, "avg"},
		{`{"agg":"max"}`, auto, "max"}, // saved as text by older versions
		{"not json", auto, "avg"},      // the plugin sends {} for invalid JSON; older saved queries may hold it
		{nil, auto, "avg"},
		{map[string]any{"sensor": "s-42", "unknown": []any{1, 2}}, auto, "avg"},
	}
	for _, c := range cases {
		target := map[string]any{"refId": "X", "target": "s-43"}
		if c.payload != nil {
			target["payload"] = c.payload
		}
		got := s.grafanaQuery(withRange(t, `{"maxDataPoints":800}`, span.From, span.To, map[string]any{"targets": []any{target}}))
		if len(got) != 1 {
			t.Fatalf("payload %v: %d elements", c.payload, len(got))
		}
		checkElement(t, got[0], "X", "s-43", tr["s-43"], span, c.step, c.agg)
	}
}

// §6.6, §6.7: nothing to read gives [], not null.
func TestGrafanaQueryNothingToRead(t *testing.T) {
	s, _ := seededServer(t)
	for _, body := range []string{
		"", "{}", `{"targets":null}`, `{"targets":[]}`,
		`{"targets":[{"refId":"A","hide":true,"target":"s-42"},{"refId":"B"},{"refId":"C","target":"  "}]}`,
	} {
		status, b := s.grafana("query", body)
		if status != 200 || strings.TrimSpace(string(b)) != "[]" {
			t.Errorf("%q: %d %s, want []", body, status, b)
		}
	}
}

// §6.12: a target or payload the gateway cannot read is a 400 naming it.
func TestGrafanaQueryBadRequests(t *testing.T) {
	s, _ := seededServer(t)
	target := func(tgt string, payload any) string {
		return fmt.Sprintf(`{"targets":[{"refId":"A","target":"s-42"},{"refId":"B","target":%q,"payload":%s}]}`, tgt, mustMarshal(payload))
	}
	cases := []struct {
		body string
		has  []string
	}{
		{target("s.*", map[string]any{}), []string{"query B", `"s.*"`, "not a series id"}},
		{target("(s-42|s-43", map[string]any{}), []string{"query B", "not closed"}},
		{target("s-42|s-43", map[string]any{}), []string{"query B", "(a|b)"}},
		{target("s-42", map[string]any{"agg": "median"}), []string{"query B", "payload.agg"}},
		{target("s-42", map[string]any{"agg": "min,max"}), []string{"query B", "payload.agg"}},
		{target("s-42", map[string]any{"agg": "p100"}), []string{"query B", "payload.agg", "percentile"}},
		{target("s-42", map[string]any{"agg": "p99.9999"}), []string{"query B", "payload.agg", "percentile"}},
		{target("s-42", map[string]any{"agg": []any{"min", "max"}}), []string{"query B", "payload.agg"}},
		{target("s-42", map[string]any{"resolution": "fast"}), []string{"query B", "payload.resolution"}},
		{target("s-42", map[string]any{"resolution": "500ms"}), []string{"query B", "payload.resolution", "1s"}},
		{target("("+strings.Repeat("s-42|", 100)+"s-43)", map[string]any{}), []string{"more than 100"}},
		{`{"range":{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"},"targets":[{"target":"s-42"}]}`, []string{"from must be before to"}},
		{`{"range":{"from":"yesterday"},"targets":[{"target":"s-42"}]}`, []string{"range.from"}},
		{`{"range":{"from":{}},"targets":[{"target":"s-42"}]}`, []string{"range.from"}},
		{`{"maxDataPoints":"many","targets":[{"target":"s-42"}]}`, []string{"maxDataPoints"}},
		{`{"targets":[{"refId":"Z","target":true}]}`, []string{"query Z", "target must be a string"}},
		{`{"targets":[{"refId":"Z","target":{"a":1}}]}`, []string{"query Z", "target must be a string"}},
		{`{"targets":{"refId":"A"}}`, []string{"targets"}},
		{`[{"target":"s-42"}]`, []string{"JSON object"}},
	}
	for _, c := range cases {
		msg := s.grafanaFails("query", c.body, 400)
		for _, h := range c.has {
			if !strings.Contains(msg, h) {
				t.Errorf("%s: message %q does not say %q", c.body, msg, h)
			}
		}
	}
}

func mustMarshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// An unknown series does not fail the panel: its element is empty and
// says why, the others are answered.
func TestGrafanaQueryUnknownSeries(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	span := tiers.Span{From: now - tiers.Hour, To: now}
	got := s.grafanaQuery(withRange(t, `{}`, span.From, span.To, map[string]any{"targets": []any{
		map[string]any{"refId": "A", "target": "(nope|s-42)"}}}))
	if len(got) != 2 {
		t.Fatalf("%d elements", len(got))
	}
	e := got[0]
	if e.Target != "nope" || e.refID() != "A" || e.Datapoints == nil || len(e.Datapoints) != 0 || e.Meta == nil ||
		len(e.Meta.Notices) != 1 || e.Meta.Notices[0].Severity != "error" || !strings.Contains(e.Meta.Notices[0].Text, "no series nope") {
		t.Errorf("unknown series element %+v", e)
	}
	_, step := expectStep(span, 0, 0, now)
	checkElement(t, got[1], "A", "s-42", tr["s-42"], span, step, "avg")
}

// §6.9: maxDataPoints and intervalMs choose tier and step by the rule, for
// the intervals Grafana's roundInterval produces and for ranges that do
// not divide evenly; the answer holds at most maxDataPoints points.
func TestGrafanaQueryStepRule(t *testing.T) {
	s, tr := seededServer(t)
	now := s.Now()
	cases := []struct {
		length, ago, maxDataPoints, minInterval int64
	}{
		{5 * tiers.Minute, 0, 1158, 0},
		{15 * tiers.Minute, 0, 1920, 0},
		{tiers.Hour, 0, 1158, 0},
		{6 * tiers.Hour, 0, 1158, 0},
		{6 * tiers.Hour, 0, 1158, tiers.Minute}, // the panel's Min interval
		{12 * tiers.Hour, 0, 500, 0},
		{24 * tiers.Hour, 0, 1158, 0},
		{2 * tiers.Day, 0, 1920, 0},
		{3 * tiers.Day, 0, 100, 0},
		{7 * tiers.Day, 0, 1158, 0},
		{30 * tiers.Day, 0, 1158, 0},
		{90 * tiers.Day, 0, 500, 0},
		{365 * tiers.Day, 0, 1000, 0},
		{5*tiers.Hour + 17*tiers.Minute + 3500, 47 * tiers.Minute, 1158, 0},
		{5*tiers.Hour + 17*tiers.Minute + 3500, 47 * tiers.Minute, 1158, 20 * tiers.Second}, // uneven: max_points floor(range/need) would give 21s for 20s
		{3*tiers.Hour + 1234567, 5 * tiers.Hour, 300, 0},
		{100 * tiers.Second, 2 * tiers.Hour, 1158, 45 * tiers.Second}, // two 45s windows: no max_points reaches 45s
		{6 * tiers.Hour, 0, 1158, tiers.Day},                          // an interval longer than the range
		{26 * tiers.Hour, 13 * tiers.Hour, 1158, tiers.Day},           // one day window, whole
	}
	for _, c := range cases {
		span := tiers.Span{From: now - c.ago - c.length, To: now - c.ago}
		interval := max(c.minInterval, roundInterval(float64(c.length)/float64(c.maxDataPoints)))
		tier, step := expectStep(span, interval, c.maxDataPoints, now)
		body := withRange(t, fixture(t, "query-v06-scenes.json"), span.From, span.To, map[string]any{
			"intervalMs": interval, "maxDataPoints": c.maxDataPoints,
			"targets": []any{map[string]any{"refId": "A", "target": "s-42", "payload": map[string]any{"agg": "max"}}},
		})
		got := s.grafanaQuery(body)
		if len(got) != 1 || got[0].Meta == nil || got[0].Meta.Custom == nil {
			t.Fatalf("range %d: %+v", c.length, got)
		}
		if m := got[0].Meta.Custom; m.Tier != tier || m.StepMs != step {
			t.Errorf("range %s ending %s ago, maxDataPoints %d, intervalMs %d: %s at %d, the rule says %s at %d",
				tiers.FormatDuration(span.To-span.From), tiers.FormatDuration(now-span.To), c.maxDataPoints, interval, m.Tier, m.StepMs, tier, step)
			continue
		}
		if n := int64(len(got[0].Datapoints)); n > c.maxDataPoints {
			t.Errorf("range %d: %d points for maxDataPoints %d", c.length, n, c.maxDataPoints)
		}
		if len(wantPoints(tr["s-42"], span, step, "max")) > 0 {
			checkElement(t, got[0], "A", "s-42", tr["s-42"], span, step, "max")
		} else if len(got[0].Datapoints) != 0 {
			t.Errorf("range %d: points where none were written", c.length)
		}
	}
}

// blockingReader makes the raw partitions of one series from cut on hang
// until the read's budget runs out, as a store that has stopped answering
// for them would.
type blockingReader struct {
	tiers.PartitionReader
	series string
	cut    atomic.Int64
}

func (b *blockingReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	if req.Key.Series == b.series && req.Key.Bucket >= b.cut.Load() {
		return blockedPages{ctx}
	}
	return b.PartitionReader.Read(ctx, req)
}

type blockedPages struct{ ctx context.Context }

func (p blockedPages) Next() ([]tiers.Row, error) {
	<-p.ctx.Done()
	return nil, context.Cause(p.ctx)
}

func (blockedPages) Close() error { return nil }

// newBudgetServer is the API over an engine with a short default SLO and
// a page limit of 200, reading through br.
func newBudgetServer(t *testing.T, br *blockingReader) *testServer {
	t.Helper()
	return newBudgetServerWith(t, br, func(*gateway.Config) {})
}

// newBudgetServerWith is newBudgetServer with more configuration.
func newBudgetServerWith(t *testing.T, br *blockingReader, configure func(*gateway.Config)) *testServer {
	t.Helper()
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := querytest.NewEnv(t, store, querytest.Options{
		Wrap: func(r tiers.PartitionReader) tiers.PartitionReader { br.PartitionReader = r; return br },
		Configure: func(c *gateway.Config) {
			c.Query.DefaultSLO, c.Query.DefaultLimit, c.Query.MaxLimit = 300*time.Millisecond, 200, 200
			configure(c)
		},
	})
	return &testServer{Server: apitest.Serve(t, env), t: t}
}

// §6.7, §6.12: a read cut short by the budget, or by the page limit,
// answers what is complete and says so in a notice Grafana shows, with
// the covered range in meta.custom. The budget is the server's default
// SLO, which stays well inside Grafana's 30s proxy timeout.
func TestGrafanaQueryPartialAnswersAreVisible(t *testing.T) {
	if slo := query.DefaultConfig().DefaultSLO; slo >= 30*time.Second {
		t.Errorf("the default SLO %v is not inside Grafana's 30s proxy timeout", slo)
	}
	br := &blockingReader{series: "slow-1"}
	br.cut.Store(tiers.MaxTime)
	s := newBudgetServer(t, br)
	now := s.Now()
	tr := truth{"slow-1": {}, "fast-1": {}}
	var pts []string
	for ts := now - 3*tiers.Hour; ts < now; ts += 30 * tiers.Second {
		for id, m := range tr {
			m[ts] = float64(ts%1000003) / 7
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%v}`, id, ts, m[ts]))
		}
	}
	s.WritePoints(pts...)
	cut := tiers.AlignDown(now-tiers.Hour, tiers.Hour)
	br.cut.Store(cut)
	fmtTime := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

	span := tiers.Span{From: now - 3*tiers.Hour, To: now}
	_, step := expectStep(span, 0, 100, now)
	got := s.grafanaQuery(withRange(t, `{"maxDataPoints":100}`, span.From, span.To, map[string]any{"targets": []any{
		map[string]any{"refId": "A", "target": "slow-1"},
		map[string]any{"refId": "B", "target": "fast-1", "payload": map[string]any{"resolution": "10m"}},
	}}))
	if len(got) != 2 {
		t.Fatalf("%d elements", len(got))
	}
	slow := got[0]
	c := slow.Meta.Custom
	if !c.Partial || c.PartialReason != "slo" || len(c.Covered) != 2 || c.Covered[0] != span.From || c.Covered[1] > cut || c.Covered[1] < cut-step {
		t.Fatalf("cut-short element: custom %+v (cut at %d)", c, cut)
	}
	covered := c.Covered[1]
	want := fmt.Sprintf("partial answer (slo): covered %s to %s", fmtTime(span.From), fmtTime(covered))
	if len(slow.Meta.Notices) != 1 || slow.Meta.Notices[0].Severity != "warning" || slow.Meta.Notices[0].Text != want {
		t.Errorf("notices %+v, want one warning %q", slow.Meta.Notices, want)
	}
	var complete [][2]float64
	for _, p := range wantPoints(tr["slow-1"], span, step, "avg") {
		if int64(p[0])+step <= covered {
			complete = append(complete, p)
		}
	}
	if gotPts := slow.points(t); len(gotPts) != len(complete) || !slices.Equal(gotPts, complete) {
		t.Errorf("cut-short element holds %d points, want the %d complete windows", len(gotPts), len(complete))
	}
	checkElement(t, got[1], "B", "fast-1", tr["fast-1"], span, 10*tiers.Minute, "avg")
	if got[1].Meta.Custom.Partial || len(got[1].Meta.Notices) != 0 {
		t.Errorf("the other series is marked partial: %+v", got[1].Meta)
	}

	// The page limit (200 here) cuts a raw read of 240 points.
	span = tiers.Span{From: now - 2*tiers.Hour, To: now}
	got = s.grafanaQuery(withRange(t, `{}`, span.From, span.To, map[string]any{"targets": []any{
		map[string]any{"refId": "A", "target": "fast-1", "payload": map[string]any{"resolution": "raw"}}}}))
	all := wantPoints(tr["fast-1"], span, 0, "")
	if len(got) != 1 || !slices.Equal(got[0].points(t), all[:200]) {
		t.Fatalf("limited raw read: %d points", len(got[0].Datapoints))
	}
	c = got[0].Meta.Custom
	end := int64(all[199][0]) + 1
	want = fmt.Sprintf("answer cut at 200 points: covered %s to %s; narrow the time range or choose a coarser resolution", fmtTime(span.From), fmtTime(end))
	if c.Partial || c.Tier != "raw" || c.StepMs != 0 || !slices.Equal(c.Covered, []int64{span.From, end}) ||
		len(got[0].Meta.Notices) != 1 || got[0].Meta.Notices[0].Text != want {
		t.Errorf("limited raw read: custom %+v notices %+v, want %q", c, got[0].Meta.Notices, want)
	}
}
