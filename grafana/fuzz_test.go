package grafana

// Fuzz targets of the Grafana protocol's parsers: the target grammar, the
// listing prefix, the payload (its match and group_by too), the ad hoc
// filters and the range. FuzzGrafanaBody sends any body through the
// gateway's handler.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// fuzzMaxIDs is the series bound a target expands under.
const fuzzMaxIDs = 100

// FuzzGrafanaTargetIDs: a target either fails with a message or expands
// to 1 to MaxBatchQueries distinct series ids; text without the grammar's
// characters is the one id it is.
func FuzzGrafanaTargetIDs(f *testing.F) {
	for _, s := range []string{"s-42", `s\.42`, "(a|b)-(x|y)", `room\.(a|b)\.temp`, "((a|b)|c)", `s\`, "(a|)", "s.*", "(" + strings.Repeat("a|", 120) + "a)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		ids, err := grafanaTargetIDs(target, fuzzMaxIDs)
		if err != nil {
			if ids != nil || err.Error() == "" {
				t.Fatalf("%q: %v, %v", target, ids, err)
			}
			return
		}
		if len(ids) == 0 || len(ids) > fuzzMaxIDs {
			t.Fatalf("%q expands to %d ids", target, len(ids))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if params.SeriesID(id) != nil || seen[id] {
				t.Fatalf("%q expands to %q: invalid or repeated id %q", target, ids, id)
			}
			seen[id] = true
		}
		if !strings.ContainsAny(target, `\(|)`) && !slices.Equal(ids, []string{target}) {
			t.Fatalf("%q expands to %q", target, ids)
		}
	})
}

// FuzzGrafanaPrefix: a listing query gives an empty prefix (everything),
// a series id prefix, or nothing; the literal id asks for itself.
func FuzzGrafanaPrefix(f *testing.F) {
	for _, s := range []string{"", "*", ".*", "s-1", `s\.1`, `s\.*`, "room.*", `a\`, " s-1 ", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		prefix, ok := grafanaPrefix(q)
		if !ok {
			if prefix != "" {
				t.Fatalf("%q: prefix %q with ok false", q, prefix)
			}
			return
		}
		if prefix != "" && params.SeriesID(prefix) != nil {
			t.Fatalf("%q gives the prefix %q, which no series id starts with", q, prefix)
		}
		if params.SeriesID(q) == nil && prefix != q {
			t.Fatalf("the series id %q gives the prefix %q", q, prefix)
		}
	})
}

// FuzzGrafanaPayload: any payload decodes without a panic; the options
// read from it are either an error or one aggregate and a resolution
// text.
func FuzzGrafanaPayload(f *testing.F) {
	for _, s := range []string{`{"agg":"max","resolution":"1m"}`, `"{\"agg\":\"min\"}"`, `{"agg":["sum"]}`, `{"agg":["a","b"]}`, `{"resolution":"1\\.5h"}`, `"not json"`, `7`, `null`, ``, `{"agg":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		payload := grafanaPayload(raw)
		for key := range payload {
			_, _ = payloadString(payload, key)
		}
		agg, resolution, err := grafanaOptions(raw)
		if err != nil {
			if agg != 0 || resolution != "" || err.Error() == "" {
				t.Fatalf("%q: %q, %q, %v", raw, agg, resolution, err)
			}
			return
		}
		if aggs, err := query.ParseAggs(agg.String()); err != nil || len(aggs) != 1 || aggs[0] != agg {
			t.Fatalf("%q: aggregate %d (%v)", raw, agg, err)
		}
	})
}

// FuzzGrafanaSelectorPayload: payload.match and payload.group_by of any
// payload either fail with a message or give trimmed, non-empty texts,
// each group_by name once.
func FuzzGrafanaSelectorPayload(f *testing.F) {
	for _, s := range []string{
		`{"match":"cpu{dc=\"eu\"}","group_by":"dc,host"}`, `{"match":["a{}"," ","b{}"],"group_by":["dc","dc, host"]}`,
		`{"match":"","group_by":""}`, `{"match":null,"group_by":null}`, `{"match":[],"group_by":[]}`,
		`{"match":{"a":1},"group_by":7}`, `{"match":[1,[2]],"group_by":[{}]}`, `"{\"group_by\":\",,\"}"`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		payload := grafanaPayload(raw)
		match, err := payloadList(payload, "match")
		if err != nil && (match != nil || !strings.HasPrefix(err.Error(), "payload.match")) {
			t.Fatalf("%q: %q, %v", raw, match, err)
		}
		for _, m := range match {
			if m == "" || m != strings.TrimSpace(m) {
				t.Fatalf("%q: match %q", raw, match)
			}
		}
		grouped, by, err := payloadGroupBy(payload)
		if err != nil {
			if grouped || by != nil || !strings.HasPrefix(err.Error(), "payload.group_by") {
				t.Fatalf("%q: %v %q, %v", raw, grouped, by, err)
			}
			return
		}
		if !grouped && by != nil {
			t.Fatalf("%q: names %q without groups", raw, by)
		}
		seen := map[string]bool{}
		for _, name := range by {
			if name == "" || name != strings.TrimSpace(name) || strings.Contains(name, ",") || seen[name] {
				t.Fatalf("%q: group_by %q", raw, by)
			}
			seen[name] = true
		}
	})
}

// FuzzGrafanaFilters: ad hoc filters either are a 400 naming the member
// they are about, or give one matcher per filter, on a label name or the
// series pseudo-label, of the four selector operators.
func FuzzGrafanaFilters(f *testing.F) {
	for _, c := range [][2]string{
		{`[{"key":"dc","operator":"=","value":"eu"}]`, ``},
		{``, `[{"key":"dc","operator":"!~","value":"e.*"}]`},
		{`[{"key":"room","operator":"=|","value":"a","values":["a","b.c"]},{"key":"series","operator":"!=|","value":"x"}]`, `[]`},
		{`[{"key":"host","operator":"<","value":"5"}]`, ``}, {`null`, `[{"key":"9x","operator":"=","value":"a"}]`},
		{`[{"key":"a","operator":"=~","value":"("}]`, ``}, {`"dc=eu"`, ``}, {`[1]`, ``}, {`[{"key":1,"operator":"=","value":2}]`, ``},
	} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	f.Fuzz(func(t *testing.T, filters, adhoc []byte) {
		ms, err := grafanaFilters(filters, adhoc)
		if err != nil {
			p, ok := err.(*problem.Problem)
			if !ok || p.Status != http.StatusBadRequest || ms != nil ||
				!strings.HasPrefix(p.Detail, "filters") && !strings.HasPrefix(p.Detail, "adhocFilters") {
				t.Fatalf("filters %q adhocFilters %q: %#v", filters, adhoc, err)
			}
			return
		}
		used := filters
		var list []json.RawMessage
		if json.Unmarshal(used, &list) != nil || list == nil {
			used = adhoc
			list = nil
			_ = json.Unmarshal(used, &list)
		}
		if len(ms) != len(list) {
			t.Fatalf("filters %q adhocFilters %q: %d matchers of %d filters", filters, adhoc, len(ms), len(list))
		}
		for _, m := range ms {
			if m.Name != tiers.SeriesLabel && params.LabelName(m.Name) != nil {
				t.Fatalf("filters %q adhocFilters %q: matcher %v", filters, adhoc, m)
			}
		}
	})
}

// FuzzGrafanaSpan: a range is either a 400 or a non-empty span of
// representable times.
func FuzzGrafanaSpan(f *testing.F) {
	for _, c := range [][2]string{
		{`"2026-01-15T00:00:00Z"`, `"2026-01-15T06:00:00Z"`}, {`1768435200000`, `"now"`}, {`"now-6h"`, ``},
		{``, ``}, {`"now"`, `"now-1h"`}, {`[]`, `1`}, {`1e300`, `-1e300`}, {`"\u006eow"`, `null`},
	} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	now := time.Date(2026, 1, 15, 14, 37, 22, 0, time.UTC).UnixMilli()
	f.Fuzz(func(t *testing.T, from, to []byte) {
		span, err := grafanaSpan(&grafanaRange{From: from, To: to}, now)
		if err != nil {
			if p, ok := err.(*problem.Problem); !ok || p.Status != http.StatusBadRequest || p.Detail == "" {
				t.Fatalf("range %q %q: %#v", from, to, err)
			}
			return
		}
		if span.Empty() || span.From < tiers.MinTime || span.To > tiers.MaxTime {
			t.Fatalf("range %q %q: %+v", from, to, span)
		}
	})
}
