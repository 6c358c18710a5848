package grafana_test

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// labelledSeries are the series the selector tests write, with their
// labels: two of them (twin.1, twin.2) have the same labels, cpu.d has no
// dc, plain has no labels at all.
var labelledSeries = []struct {
	id     string
	labels map[string]string
}{
	{"cpu.a", map[string]string{"__name__": "cpu", "dc": "eu", "host": "a"}},
	{"cpu.b", map[string]string{"__name__": "cpu", "dc": "eu", "host": "b"}},
	{"cpu.c", map[string]string{"__name__": "cpu", "dc": "us", "host": "c"}},
	{"cpu.d", map[string]string{"__name__": "cpu", "host": "d"}},
	{"mem.a", map[string]string{"__name__": "mem", "dc": "eu", "host": "a"}},
	{"twin.1", map[string]string{"__name__": "twin", "dc": "eu"}},
	{"twin.2", map[string]string{"__name__": "twin", "dc": "eu"}},
	{"plain", nil},
}

// seedLabelled writes the labelled series, a point a minute (with
// jitter, so that points do not sit on window boundaries, and values of
// their own per series) over the hours before now, labels with the first
// batch of each; then runs the rollups, so that reads come from every
// tier.
func seedLabelled(t *testing.T, s *testServer, hours int64) truth {
	t.Helper()
	now := s.Now()
	start := now - hours*tiers.Hour
	tr := truth{}
	for k, ls := range labelledSeries {
		tr[ls.id] = map[int64]float64{}
		var pts []string
		for i := int64(0); ; i++ {
			ts := start + i*tiers.Minute + (i*7919+int64(k)*1009)%59000
			if ts >= now {
				break
			}
			v := float64((i*31+int64(k)*17)%97)*0.5 - 11
			tr[ls.id][ts] = v
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%v}`, ls.id, ts, v))
		}
		labels := ""
		if ls.labels != nil {
			labels = fmt.Sprintf(`,"series_labels":{%q:%s}`, ls.id, mustMarshal(ls.labels))
		}
		for len(pts) > 0 {
			n := min(len(pts), 5000)
			body := `{"points":[` + strings.Join(pts[:n], ",") + `]` + labels + `}`
			if st, _, b := s.Do("POST", "/v1/points", "application/json", body); st != 200 {
				t.Fatalf("write %s: %d %s", ls.id, st, b)
			}
			pts, labels = pts[n:], ""
		}
	}
	if status, _, body := s.Do("POST", "/v1/admin/rollups/run", "", ""); status != 200 {
		t.Fatalf("rollups: %d %s", status, body)
	}
	return tr
}

// groupPoints is the brute-force answer of a group of series (or of one):
// the windows of width step whose start lies in the read's span (the
// window holding the range start whole), each aggregating every point of
// every series of the group in it.
func groupPoints(tr truth, ids []string, span tiers.Span, step int64, agg string) [][2]float64 {
	read := tiers.Span{From: tiers.AlignDown(span.From, step), To: tiers.AlignUp(span.To, step)}
	type acc struct{ min, max, sum, count float64 }
	accs := map[int64]*acc{}
	for _, id := range ids {
		for ts, v := range tr[id] {
			if !read.Contains(ts) {
				continue
			}
			w := tiers.AlignDown(ts, step)
			a := accs[w]
			if a == nil {
				a = &acc{min: math.Inf(1), max: math.Inf(-1)}
				accs[w] = a
			}
			a.min, a.max, a.sum, a.count = min(a.min, v), max(a.max, v), a.sum+v, a.count+1
		}
	}
	var out [][2]float64
	for _, w := range slices.Sorted(func(yield func(int64) bool) {
		for w := range accs {
			if !yield(w) {
				return
			}
		}
	}) {
		a := accs[w]
		v := map[string]float64{"min": a.min, "max": a.max, "sum": a.sum, "count": a.count, "avg": a.sum / a.count}[agg]
		out = append(out, [2]float64{float64(w), v})
	}
	return out
}

// wantElement is one element a selector target answers: its name, the
// series it holds (one, or a group's), its tags.
type wantElement struct {
	name string
	ids  []string
	tags map[string]string
}

// checkSelectorAnswer matches the elements to want by name and checks
// each: refId, title, tags, meta, and the points against the brute force.
func checkSelectorAnswer(t *testing.T, what string, got []grafanaElement, refID string, want []wantElement, tr truth, span tiers.Span, step int64, agg string, grouped bool) {
	t.Helper()
	var names []string
	for _, e := range got {
		names = append(names, e.Target+e.Name)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: elements %q, want %d", what, names, len(want))
	}
	for _, w := range want {
		i := slices.Index(names, w.name)
		if i < 0 {
			t.Fatalf("%s: no element %s among %q", what, w.name, names)
		}
		e := got[i]
		if e.refID() != refID {
			t.Errorf("%s %s: refId %s", what, w.name, e.refID())
		}
		if e.Type != "table" && (e.Title != w.name || !mapsEqual(e.Tags, w.tags)) {
			t.Errorf("%s %s: title %q tags %v, want tags %v", what, w.name, e.Title, e.Tags, w.tags)
		}
		if e.Meta == nil || e.Meta.Custom == nil || e.Meta.Custom.StepMs != step || e.Meta.Custom.Partial || len(e.Meta.Notices) != 0 {
			t.Fatalf("%s %s: meta %+v, want step %d, complete", what, w.name, e.Meta, step)
		}
		if c := e.Meta.Custom; grouped && (c.SeriesCount != len(w.ids) || c.Series != "") || !grouped && (c.Series != w.ids[0] || c.SeriesCount != 0) {
			t.Errorf("%s %s: meta.custom series %q seriesCount %d, want %v", what, w.name, c.Series, c.SeriesCount, w.ids)
		}
		pts := e.points(t)
		wantPts := groupPoints(tr, w.ids, span, step, agg)
		if len(wantPts) == 0 {
			t.Fatalf("%s %s: the test expects no points; pick a range with data", what, w.name)
		}
		if len(pts) != len(wantPts) {
			t.Fatalf("%s %s: %d points, want %d", what, w.name, len(pts), len(wantPts))
		}
		for k := range wantPts {
			if pts[k][0] != wantPts[k][0] || math.Abs(pts[k][1]-wantPts[k][1]) > 1e-9*max(1, math.Abs(wantPts[k][1])) {
				t.Fatalf("%s %s: point %d = %v, want %v (step %d, %s)", what, w.name, k, pts[k], wantPts[k], step, agg)
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// tagsOf is a series' tags: its labels and its id.
func tagsOf(id string) map[string]string {
	out := map[string]string{"series": id}
	for _, ls := range labelledSeries {
		if ls.id == id {
			for k, v := range ls.labels {
				out[k] = v
			}
		}
	}
	return out
}

func one(name, id string) wantElement { return wantElement{name, []string{id}, tagsOf(id)} }

// A target whose text is a selector, or whose payload has match, reads
// every series the selectors match, narrowed by the ad hoc filters: one
// time series per series, named and tagged by its labels, or per group
// of payload.group_by, named and tagged by the group's values; each
// equal to the brute force over what was written.
func TestGrafanaSelectorTargets(t *testing.T) {
	s := newTestServer(t)
	tr := seedLabelled(t, s, 26)
	now := s.Now()
	span6h := tiers.Span{From: now - 6*tiers.Hour, To: now}
	span20h := tiers.Span{From: now - 20*tiers.Hour - 1234, To: now - 2*tiers.Hour}
	eu := map[string]string{"dc": "eu"}
	cases := []struct {
		name    string
		target  string
		payload map[string]any
		kind    string // the legacy plugin's type
		set     map[string]any
		span    tiers.Span
		step    int64 // 0: the rule's, for maxDataPoints 500
		agg     string
		grouped bool
		want    []wantElement
	}{
		{name: "selector as the target", target: `cpu{dc="eu"}`, span: span6h, agg: "avg",
			want: []wantElement{one(`cpu{dc="eu",host="a"}`, "cpu.a"), one(`cpu{dc="eu",host="b"}`, "cpu.b")}},
		{name: "Grafana's multi-value regex in the target", target: `cpu{host=~"(a|c)"}`, span: span20h, agg: "avg",
			want: []wantElement{one(`cpu{dc="eu",host="a"}`, "cpu.a"), one(`cpu{dc="us",host="c"}`, "cpu.c")}},
		{name: "several selectors in payload.match", target: "hosts a", span: span6h, agg: "count",
			payload: map[string]any{"match": []any{`cpu{host="a"}`, `mem{host="a"}`}, "agg": "count"},
			want:    []wantElement{one(`cpu{dc="eu",host="a"}`, "cpu.a"), one(`mem{dc="eu",host="a"}`, "mem.a")}},
		{name: "series with the same labels add their id", target: `twin{}`, span: span6h, agg: "max",
			payload: map[string]any{"agg": "max"},
			want:    []wantElement{one(`twin{dc="eu",series="twin.1"}`, "twin.1"), one(`twin{dc="eu",series="twin.2"}`, "twin.2")}},
		{name: "a series without labels by its id", target: `{series=~"plain|cpu\\.a"}`, span: span6h, agg: "avg",
			want: []wantElement{one("plain", "plain"), one(`cpu{dc="eu",host="a"}`, "cpu.a")}},
		{name: "group_by dc", target: "cpu by dc", span: span20h, agg: "sum", grouped: true,
			payload: map[string]any{"match": "cpu{}", "group_by": "dc", "agg": "sum"},
			want: []wantElement{
				{`{dc=""}`, []string{"cpu.d"}, map[string]string{"dc": ""}},
				{`{dc="eu"}`, []string{"cpu.a", "cpu.b"}, eu},
				{`{dc="us"}`, []string{"cpu.c"}, map[string]string{"dc": "us"}},
			}},
		{name: "group_by two labels, from the builder's multi-select", target: "by dc and metric", span: span6h, agg: "min", grouped: true,
			payload: map[string]any{"match": `{dc!=""}`, "group_by": []any{"dc", "__name__"}, "agg": []any{"min"}},
			want: []wantElement{
				{`cpu{dc="eu"}`, []string{"cpu.a", "cpu.b"}, map[string]string{"dc": "eu", "__name__": "cpu"}},
				{`mem{dc="eu"}`, []string{"mem.a"}, map[string]string{"dc": "eu", "__name__": "mem"}},
				{`twin{dc="eu"}`, []string{"twin.1", "twin.2"}, map[string]string{"dc": "eu", "__name__": "twin"}},
				{`cpu{dc="us"}`, []string{"cpu.c"}, map[string]string{"dc": "us", "__name__": "cpu"}},
			}},
		{name: "one group of all, named by the target", target: "all of eu", span: span20h, step: 5 * tiers.Minute, agg: "max", grouped: true,
			payload: map[string]any{"match": `{dc="eu"}`, "group_by": "", "agg": "max", "resolution": "5m"},
			want:    []wantElement{{"all of eu", []string{"cpu.a", "cpu.b", "mem.a", "twin.1", "twin.2"}, map[string]string{}}}},
		{name: "one group of all without a target text, named by its selector", target: "", span: span6h, agg: "avg", grouped: true,
			payload: map[string]any{"match": `cpu{}`, "group_by": ""},
			want:    []wantElement{{"cpu{}", []string{"cpu.a", "cpu.b", "cpu.c", "cpu.d"}, map[string]string{}}}},
		{name: "ad hoc filters narrow a selector", target: `cpu{}`, span: span6h, agg: "avg",
			set: map[string]any{"filters": []any{
				map[string]any{"key": "host", "operator": "!=", "value": "a"},
				map[string]any{"key": "dc", "operator": "=|", "value": "eu", "values": []any{"eu", "us"}},
			}},
			want: []wantElement{one(`cpu{dc="eu",host="b"}`, "cpu.b"), one(`cpu{dc="us",host="c"}`, "cpu.c")}},
		{name: "the older plugin's adhocFilters", target: `cpu{}`, span: span6h, agg: "avg",
			set:  map[string]any{"adhocFilters": []any{map[string]any{"key": "dc", "operator": "=~", "value": "u.*"}}},
			want: []wantElement{one(`cpu{dc="us",host="c"}`, "cpu.c")}},
		{name: "filters win over adhocFilters", target: `cpu{}`, span: span6h, agg: "avg",
			set: map[string]any{
				"filters":      []any{map[string]any{"key": "host", "operator": "=", "value": "b"}},
				"adhocFilters": []any{map[string]any{"key": "host", "operator": "=", "value": "c"}},
			},
			want: []wantElement{one(`cpu{dc="eu",host="b"}`, "cpu.b")}},
		{name: "filters narrow groups, on the id too", target: "by dc", span: span6h, agg: "avg", grouped: true,
			payload: map[string]any{"match": "cpu{}", "group_by": "dc"},
			set:     map[string]any{"filters": []any{map[string]any{"key": "series", "operator": "!~", "value": `cpu\.d`}}},
			want: []wantElement{
				{`{dc="eu"}`, []string{"cpu.a", "cpu.b"}, eu},
				{`{dc="us"}`, []string{"cpu.c"}, map[string]string{"dc": "us"}},
			}},
		{name: "a table target of the older plugin", target: `cpu{host="b"}`, kind: "table", span: span6h, agg: "avg",
			want: []wantElement{one(`cpu{dc="eu",host="b"}`, "cpu.b")}},
		{name: "a selector that matches nothing", target: `cpu{host="nope"}`, span: span6h, agg: "avg"},
	}
	for _, c := range cases {
		target := map[string]any{"refId": "S", "target": c.target}
		if c.payload != nil {
			target["payload"] = c.payload
		}
		if c.kind != "" {
			target["type"] = c.kind
		}
		set := map[string]any{"maxDataPoints": 500, "targets": []any{target}}
		for k, v := range c.set {
			set[k] = v
		}
		got := s.grafanaQuery(withRange(t, `{}`, c.span.From, c.span.To, set))
		step := c.step
		if step == 0 {
			_, step = expectStep(c.span, 0, 500, now)
		}
		checkSelectorAnswer(t, c.name, got, "S", c.want, tr, c.span, step, c.agg, c.grouped)
	}
}

// Ad hoc filters narrow selector targets only: a target that names series
// by id reads them as named, beside a selector target that the same
// filters narrow; operators the datasource refuses do not fail a query
// with no selector target.
func TestGrafanaFiltersLeaveIDTargets(t *testing.T) {
	s := newTestServer(t)
	tr := seedLabelled(t, s, 7)
	now := s.Now()
	span := tiers.Span{From: now - 6*tiers.Hour, To: now}
	_, step := expectStep(span, 0, 500, now)
	filters := []any{map[string]any{"key": "host", "operator": "=", "value": "b"}}
	got := s.grafanaQuery(withRange(t, `{}`, span.From, span.To, map[string]any{"maxDataPoints": 500, "filters": filters,
		"targets": []any{map[string]any{"refId": "A", "target": "(cpu.a|plain)"}, map[string]any{"refId": "B", "target": "cpu{}"}}}))
	if len(got) != 3 {
		t.Fatalf("%d elements", len(got))
	}
	checkElement(t, got[0], "A", "cpu.a", tr["cpu.a"], span, step, "avg")
	checkElement(t, got[1], "A", "plain", tr["plain"], span, step, "avg")
	checkSelectorAnswer(t, "filtered selector", got[2:], "B", []wantElement{one(`cpu{dc="eu",host="b"}`, "cpu.b")}, tr, span, step, "avg", false)

	got = s.grafanaQuery(withRange(t, `{}`, span.From, span.To, map[string]any{"maxDataPoints": 500,
		"filters":      []any{map[string]any{"key": "host", "operator": "<", "value": "5"}},
		"adhocFilters": "not even a list",
		"targets":      []any{map[string]any{"refId": "A", "target": "cpu.a"}}}))
	if len(got) != 1 {
		t.Fatalf("%d elements", len(got))
	}
	checkElement(t, got[0], "A", "cpu.a", tr["cpu.a"], span, step, "avg")
}

// A selector target that cannot be read as sent is a 400 naming the query
// and the member: a bad or empty selector, a group_by that is no label
// name or of raw points, a group_by of series named by id, a filter
// with an operator label values do not take (< and >) or a bad regular
// expression, and a selector that matches more than
// --max-series-per-query series.
func TestGrafanaSelectorBadRequests(t *testing.T) {
	s := &testServer{Server: apitest.NewMemServerWith(t, querytest.Options{Configure: func(c *gateway.Config) {
		c.Query.MaxSeriesPerQuery = 3
	}}), t: t}
	seedLabelled(t, s, 1)
	query := func(target string, payload any, set map[string]any) string {
		m := map[string]any{"targets": []any{
			map[string]any{"refId": "A", "target": "cpu.a"},
			map[string]any{"refId": "B", "target": target, "payload": payload},
		}}
		for k, v := range set {
			m[k] = v
		}
		return mustMarshal(m)
	}
	filter := func(member, key, op, value string) map[string]any {
		return map[string]any{member: []any{map[string]any{"key": "dc", "operator": "=", "value": "eu"}, map[string]any{"key": key, "operator": op, "value": value}}}
	}
	cases := []struct {
		body string
		has  []string
	}{
		{query("cpu", map[string]any{"match": "cpu{"}, nil), []string{"query B: payload.match", `"cpu{"`, "not a selector"}},
		{query(`cpu{host=}`, map[string]any{}, nil), []string{"query B: target", "not a selector"}},
		{query(`{host!="a"}`, map[string]any{}, nil), []string{"query B: target", "does not match the empty string"}},
		{query("x", map[string]any{"match": []any{`cpu{}`, `{host=~".*"}`}}, nil), []string{"query B: payload.match", "does not match the empty string"}},
		{query("x", map[string]any{"match": map[string]any{"a": 1}}, nil), []string{"query B: payload.match", "string"}},
		{query(`cpu{}`, map[string]any{}, nil), []string{"query B: target", "matches 4 series", "more than 3", "--max-series-per-query"}},
		{query("x", map[string]any{"match": "{__name__=~\"cpu|mem\"}"}, nil), []string{"query B: payload.match", "matches 5 series", "more than 3"}},
		{query(`cpu{dc="eu"}`, map[string]any{"group_by": "dc", "resolution": "raw"}, nil), []string{"query B: payload.group_by", "raw"}},
		{query(`cpu{dc="eu"}`, map[string]any{"group_by": "dc,9x"}, nil), []string{"query B: payload.group_by", `"9x"`}},
		{query(`cpu{dc="eu"}`, map[string]any{"group_by": map[string]any{}}, nil), []string{"query B: payload.group_by"}},
		{query(`cpu{dc="eu"}`, map[string]any{"agg": "median"}, nil), []string{"query B: payload.agg"}},
		{query(`cpu{dc="eu"}`, map[string]any{"resolution": "500ms"}, nil), []string{"query B: payload.resolution"}},
		{query("(cpu.a|cpu.b)", map[string]any{"group_by": "dc"}, nil), []string{"query B", "payload.group_by", "selector"}},
		{query(`cpu{}`, map[string]any{}, filter("filters", "host", "<", "5")), []string{"filters[1].operator", `"<"`, "=~"}},
		{query(`cpu{}`, map[string]any{}, filter("adhocFilters", "host", ">", "5")), []string{"adhocFilters[1].operator", `">"`}},
		{query(`cpu{}`, map[string]any{}, filter("filters", "host", "=~", "(")), []string{"filters[1].value", "regular expression"}},
		{query(`cpu{}`, map[string]any{}, filter("filters", "my-key", "=", "a")), []string{"filters[1].key", "my-key"}},
		{query(`cpu{}`, map[string]any{}, map[string]any{"filters": "dc=eu"}), []string{"filters must be a list"}},
		{query(`cpu{}`, map[string]any{}, map[string]any{"filters": []any{"dc=eu"}}), []string{"filters[0] must be an ad hoc filter"}},
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

// A selector target's answer is held within --answer-memory-bytes like
// every other: reserved before it is read, so that a selector whose
// reads need more than the whole budget is refused as overloaded in the
// datasource's envelope, while a smaller one is answered.
func TestGrafanaSelectorAnswerMemory(t *testing.T) {
	s := &testServer{Server: apitest.NewMemServerWith(t, querytest.Options{Configure: func(c *gateway.Config) {
		c.HTTP.Limits.AnswerMemory = 4 << 20
		c.HTTP.Limits.MaxQueueWait = 50 * time.Millisecond
		c.Query.MaxLimit = 100_000
	}}), t: t}
	seedLabelled(t, s, 1)
	body := func(target string) string {
		return fmt.Sprintf(`{"targets":[{"refId":"A","target":%q,"payload":{"resolution":"raw"}}]}`, target)
	}
	if got := s.grafanaQuery(body(`cpu{host="a"}`)); len(got) != 1 {
		t.Fatalf("one series within the budget: %d elements", len(got))
	}
	msg := s.grafanaFails("query", body(`{dc="eu"}`), 503)
	if !strings.Contains(msg, "--answer-memory-bytes") {
		t.Errorf("refusal %q does not name the budget", msg)
	}
}

// /tag-keys offers the label names, /tag-values the values of one, as
// the protocol shapes them; the values of series are the ids; a key that
// is no label has none; the body's filters and range do not narrow them.
func TestGrafanaTagKeysAndValues(t *testing.T) {
	s := newTestServer(t)
	seedLabelled(t, s, 1)
	for _, body := range []string{"", "{}", fixture(t, "tag-keys-scenes.json"), `{"filters":[{"key":"dc","operator":"=","value":"us"}]}`} {
		var keys []map[string]string
		s.grafanaOK("tag-keys", body, &keys)
		want := []map[string]string{{"type": "string", "text": "__name__"}, {"type": "string", "text": "dc"}, {"type": "string", "text": "host"}}
		if !slices.EqualFunc(keys, want, mapsEqual) {
			t.Errorf("tag-keys %s: %v, want %v", body, keys, want)
		}
	}
	cases := map[string][]string{
		`{"key":"dc"}`: {"eu", "us"},
		`{"key":"host","filters":[{"key":"dc","operator":"=","value":"us"}],"timeRange":{"from":"2024-06-26T04:00:00.000Z","to":"2024-06-26T10:00:00.000Z"}}`: {"a", "b", "c", "d"},
		`{"key":"__name__"}`: {"cpu", "mem", "twin"},
		`{"key":"series"}`:   {"cpu.a", "cpu.b", "cpu.c", "cpu.d", "mem.a", "plain", "twin.1", "twin.2"},
		`{"key":"City"}`:     {},
		`{"key":"my-key"}`:   {},
		`{"key":""}`:         {},
		`{}`:                 {},
		``:                   {},
	}
	for body, want := range cases {
		var got []map[string]string
		s.grafanaOK("tag-values", body, &got)
		var values []string
		for _, v := range got {
			if len(v) != 1 {
				t.Errorf("tag-values %s: value %v is not {text}", body, v)
			}
			values = append(values, v["text"])
		}
		if !slices.Equal(values, want) && (len(values) != 0 || len(want) != 0) {
			t.Errorf("tag-values %s: %v, want %v", body, values, want)
		}
	}
	s.grafanaFails("tag-values", `{"key":{"a":1}}`, 400)
	var raw json.RawMessage
	s.grafanaOK("tag-keys", `[1,2]`, &raw) // the body is not read
}

// A selector target whose reads the budget cuts short answers what every
// one of its series was read through, each element saying so in a
// notice; one whose reads could not move at all is one element, named by
// the target, that says why, and the panel's other queries are answered.
func TestGrafanaSelectorPartialAnswers(t *testing.T) {
	br := &blockingReader{series: "lat.slow"}
	br.cut.Store(tiers.MaxTime)
	// A read that cannot complete its first window goes on up to the
	// maximum budget before it gives up: a short one keeps the test short.
	s := newBudgetServerWith(t, br, func(c *gateway.Config) { c.Query.MaxSLO = time.Second })
	now := s.Now()
	tr := truth{"lat.slow": {}, "lat.fast": {}}
	var pts []string
	for ts := now - 3*tiers.Hour; ts < now; ts += 30 * tiers.Second {
		for id, m := range tr {
			m[ts] = float64(ts%1000003) / 7
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%v}`, id, ts, m[ts]))
		}
	}
	body := `{"points":[` + strings.Join(pts, ",") + `],"series_labels":{"lat.slow":{"__name__":"lat","host":"slow"},"lat.fast":{"__name__":"lat","host":"fast"}}}`
	if st, _, b := s.Do("POST", "/v1/points", "application/json", body); st != 200 {
		t.Fatalf("write: %d %s", st, b)
	}
	span := tiers.Span{From: now - 3*tiers.Hour, To: now}
	_, step := expectStep(span, 0, 100, now)
	cut := tiers.AlignDown(now-tiers.Hour, tiers.Hour)
	br.cut.Store(cut)
	got := s.grafanaQuery(withRange(t, `{"maxDataPoints":100}`, span.From, span.To, map[string]any{"targets": []any{
		map[string]any{"refId": "A", "target": "lat{}"},
	}}))
	if len(got) != 2 {
		t.Fatalf("%d elements", len(got))
	}
	for _, e := range got {
		c := e.Meta.Custom
		if !c.Partial || c.PartialReason != "slo" || c.Covered[0] != span.From || c.Covered[1] > cut || c.Covered[1] < cut-step {
			t.Fatalf("%s: custom %+v (cut at %d)", e.Target, c, cut)
		}
		if len(e.Meta.Notices) != 1 || e.Meta.Notices[0].Severity != "warning" || !strings.HasPrefix(e.Meta.Notices[0].Text, "partial answer (slo): covered ") {
			t.Errorf("%s: notices %+v", e.Target, e.Meta.Notices)
		}
		var complete [][2]float64
		for _, p := range wantPoints(tr[c.Series], span, step, "avg") {
			if int64(p[0]) < c.Covered[1] {
				complete = append(complete, p)
			}
		}
		if p := e.points(t); !slices.Equal(p, complete) {
			t.Errorf("%s: %d points, want the %d before the watermark", e.Target, len(p), len(complete))
		}
	}

	// Cut from the range's start: nothing of the target can be sent.
	br.cut.Store(tiers.MinTime)
	got = s.grafanaQuery(withRange(t, `{"maxDataPoints":100}`, span.From, span.To, map[string]any{"targets": []any{
		map[string]any{"refId": "A", "target": "lat{}"},
		map[string]any{"refId": "B", "target": "lat.fast"},
	}}))
	if len(got) != 2 {
		t.Fatalf("%d elements", len(got))
	}
	e := got[0]
	if e.Target != "lat{}" || e.refID() != "A" || e.Datapoints == nil || len(e.Datapoints) != 0 || e.Meta == nil ||
		len(e.Meta.Notices) != 1 || e.Meta.Notices[0].Severity != "error" || !strings.Contains(e.Meta.Notices[0].Text, "latency budget") {
		t.Errorf("failed selector element %+v", e)
	}
	checkElement(t, got[1], "B", "lat.fast", tr["lat.fast"], span, step, "avg")
}

// In the query builder, a selector typed as the metric's custom value is
// listed first, with group_by besides agg and resolution, so that the
// builder shows those options; group_by's options are the label names.
// Text that is not a selector, or not a valid one, lists the series only.
func TestGrafanaBuilderSelectorMetric(t *testing.T) {
	s := newTestServer(t)
	seedLabelled(t, s, 1)
	var ids []string
	for _, ls := range labelledSeries {
		ids = append(ids, ls.id)
	}
	slices.Sort(ids)
	cases := []struct {
		body  string
		first string // "": the series only
	}{
		{`{"metric":"cpu{dc=\"eu\"}","payload":{"group_by":["dc"]}}`, `cpu{dc="eu"}`},
		{`{"metric":"{series=~\"cpu\\\\..*\"}"}`, `{series=~"cpu\\..*"}`},
		{`{"metric":"cpu{"}`, ""},
		{`{"metric":"{host!=\"a\"}"}`, ""},
		{`{"metric":"cpu.a"}`, ""},
		{`{}`, ""},
	}
	for _, c := range cases {
		var got []grafanaMetric
		s.grafanaOK("metrics", c.body, &got)
		var values []string
		for _, m := range got {
			values = append(values, m.Value)
		}
		want := ids
		if c.first != "" {
			want = append([]string{c.first}, ids...)
			var names []string
			for _, p := range got[0].Payloads {
				names = append(names, p.Name+":"+p.Type)
			}
			if !slices.Equal(names, []string{"agg:select", "resolution:select", "group_by:multi-select"}) {
				t.Errorf("%s: the selector offers %v", c.body, names)
			}
		}
		if !slices.Equal(values, want) {
			t.Errorf("%s: listed %q, want %q", c.body, values, want)
		}
	}
	var opts []struct{ Value, Label string }
	s.grafanaOK("metric-payload-options", `{"metric":"cpu{}","payload":{},"name":"group_by"}`, &opts)
	var values []string
	for _, o := range opts {
		values = append(values, o.Value)
	}
	if !slices.Equal(values, []string{"__name__", "dc", "host"}) {
		t.Errorf("group_by options %v", values)
	}
}

// A Query variable lists the values of a label for label_values(name),
// or {"label": name} in raw JSON mode, as values for selectors such as
// cpu{host=~"$host"}; series ids otherwise, as before.
func TestGrafanaVariableLabelValues(t *testing.T) {
	s := newTestServer(t)
	seedLabelled(t, s, 1)
	cases := map[string][]string{
		`{"payload":{"target":"label_values(dc)"}}`:       {"eu", "us"},
		`{"payload":{"target":" label_values( host ) "}}`: {"a", "b", "c", "d"},
		`{"payload":{"label":"__name__"}}`:                {"cpu", "mem", "twin"},
		`{"payload":{"target":"label_values(series)"}}`:   {"cpu.a", "cpu.b", "cpu.c", "cpu.d", "mem.a", "plain", "twin.1", "twin.2"},
		`{"payload":{"target":"label_values(9x)"}}`:       {},
		`{"payload":{"target":"label_values(City)"}}`:     {},
		`{"payload":{"target":"cpu\\."}}`:                 {"cpu.a", "cpu.b", "cpu.c", "cpu.d"},
	}
	for body, want := range cases {
		var got []map[string]string
		s.grafanaOK("variable", body, &got)
		var values []string
		for _, o := range got {
			if len(o) != 2 || o["__text"] != o["__value"] {
				t.Errorf("%s: option %v", body, o)
			}
			values = append(values, o["__value"])
		}
		if !slices.Equal(values, want) && (len(values) != 0 || len(want) != 0) {
			t.Errorf("%s: %v, want %v", body, values, want)
		}
	}
}
