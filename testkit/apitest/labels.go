package apitest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// matchAnswer is a page of a read by selector.
type matchAnswer struct {
	Results []struct {
		Series       string            `json:"series"`
		Labels       map[string]string `json:"labels"`
		Group        map[string]string `json:"group"`
		SeriesCount  int               `json:"series_count"`
		Tier         string            `json:"tier"`
		ResolutionMs int64             `json:"resolution_ms"`
		Columns      []string          `json:"columns"`
		Points       [][]float64       `json:"points"`
	} `json:"results"`
	Partial    bool    `json:"partial"`
	Covered    []int64 `json:"covered"`
	NextCursor string  `json:"next_cursor"`
}

// A user labels series as they write them, lists and selects them by
// label, reads them by selector, grouped or not, relabels one, and gets
// a problem naming the entry for every labelling mistake, with nothing
// written.
func labelsAndSelectors(t *testing.T, s *Server) {
	now := s.Now()
	t0 := tiers.AlignDown(now-3*tiers.Hour, tiers.Hour)
	var pts []string
	for i := range 60 {
		ts := t0 + int64(i)*tiers.Minute
		pts = append(pts, fmt.Sprintf(`{"series":"cpu.a","t":%d,"v":%d}`, ts, i), fmt.Sprintf(`{"series":"cpu.b","t":%d,"v":%d}`, ts, 2*i))
	}
	body := `{"points":[` + strings.Join(pts, ",") + `],"series_labels":{"cpu.a":{"__name__":"cpu","host":"a","dc":"eu"},"cpu.b":{"__name__":"cpu","host":"b","dc":"eu"}}}`
	if st, _, b := s.Do("POST", "/v1/points", "application/json", body); st != 200 {
		t.Fatalf("labelled write: %d %s", st, b)
	}
	ndjson := `{"series":"mem.c","labels":{"__name__":"mem","host":"c","dc":"us"}}` + "\n" +
		fmt.Sprintf(`{"series":"mem.c","t":%d,"v":5}`, t0) + "\n" + fmt.Sprintf(`{"series":"plain","t":%d,"v":7}`, t0) + "\n"
	if st, _, b := s.Do("POST", "/v1/points", "application/x-ndjson", ndjson); st != 200 {
		t.Fatalf("labelled NDJSON write: %d %s", st, b)
	}

	var one struct {
		ID     string            `json:"id"`
		Labels map[string]string `json:"labels"`
	}
	if st := s.Get("/v1/series/cpu.a", &one); st != 200 || one.Labels["host"] != "a" || one.Labels["__name__"] != "cpu" || len(one.Labels) != 3 {
		t.Fatalf("GET /v1/series/cpu.a: %d %+v", st, one)
	}
	one.Labels = nil
	if st := s.Get("/v1/series/plain", &one); st != 200 || one.Labels == nil || len(one.Labels) != 0 {
		t.Fatalf("a series without labels shows {}: %d %+v", st, one)
	}

	// Mistakes: each named, nothing written.
	for _, c := range []struct{ name, body, param string }{
		{"other labels for an existing series", fmt.Sprintf(`{"points":[{"series":"cpu.a","t":%d,"v":1},{"series":"new.x","t":%d,"v":1}],"series_labels":{"cpu.a":{"host":"z"}}}`, now-1000, now-1000), "series_labels.cpu.a"},
		{"a reserved name", fmt.Sprintf(`{"points":[{"series":"new.y","t":%d,"v":1}],"series_labels":{"new.y":{"__meta":"x"}}}`, now-1000), "series_labels.new.y"},
		{"a bad name", fmt.Sprintf(`{"points":[{"series":"new.y","t":%d,"v":1}],"series_labels":{"new.y":{"9x":"x"}}}`, now-1000), "series_labels.new.y"},
		{"the pseudo-label", fmt.Sprintf(`{"points":[{"series":"new.y","t":%d,"v":1}],"series_labels":{"new.y":{"series":"x"}}}`, now-1000), "series_labels.new.y"},
		{"a value that is not a string", fmt.Sprintf(`{"points":[{"series":"new.y","t":%d,"v":1}],"series_labels":{"new.y":{"a":1}}}`, now-1000), "series_labels.new.y"},
		{"a name twice", fmt.Sprintf(`{"points":[{"series":"new.y","t":%d,"v":1}],"series_labels":{"new.y":{"a":"1","a":"2"}}}`, now-1000), "series_labels.new.y"},
	} {
		st, _, b := s.Do("POST", "/v1/points", "application/json", c.body)
		var p Problem
		_ = json.Unmarshal(b, &p)
		if st != 400 || len(p.Errors) == 0 || p.Errors[0].Param != c.param {
			t.Fatalf("%s: %d %s, want 400 naming %s", c.name, st, b, c.param)
		}
	}
	for _, id := range []string{"new.x", "new.y"} {
		if st := s.Get("/v1/series/"+id, nil); st != 404 {
			t.Fatalf("a refused batch created %s: %d", id, st)
		}
	}
	if st, _, b := s.Do("GET", "/v1/series?"+url.Values{"match": {`{__name__="x"}`, `{job!="a"}`}}.Encode(), "", ""); st != 400 || !strings.Contains(string(b), `"param":"match"`) {
		t.Fatalf("a selector that matches the empty string: %d %s", st, b)
	}

	// Selecting.
	listed := func(query url.Values) []string {
		t.Helper()
		var l struct {
			Series []struct {
				ID     string            `json:"id"`
				Labels map[string]string `json:"labels"`
			} `json:"series"`
		}
		if st := s.Get("/v1/series?"+query.Encode(), &l); st != 200 {
			t.Fatalf("GET /v1/series?%s: %d", query.Encode(), st)
		}
		var ids []string
		for _, e := range l.Series {
			if e.Labels == nil {
				t.Fatalf("listing entry %s without labels", e.ID)
			}
			ids = append(ids, e.ID)
		}
		return ids
	}
	for _, c := range []struct {
		match []string
		want  []string
	}{
		{[]string{`cpu`}, []string{"cpu.a", "cpu.b"}},
		{[]string{`{dc="eu",host!="a"}`}, []string{"cpu.b"}},
		{[]string{`{host=~"a|c"}`}, []string{"cpu.a", "mem.c"}},
		{[]string{`{series=~"cpu\\..*"}`}, []string{"cpu.a", "cpu.b"}},
		{[]string{`{series="plain"}`}, []string{"plain"}},
		{[]string{`mem`, `{host="a"}`}, []string{"cpu.a", "mem.c"}},
		{[]string{`{dc="nowhere"}`}, nil},
	} {
		if got := listed(url.Values{"match": c.match}); !slices.Equal(got, c.want) {
			t.Fatalf("match %v lists %v, want %v", c.match, got, c.want)
		}
	}
	var names struct {
		Labels []string `json:"labels"`
	}
	if st := s.Get("/v1/labels", &names); st != 200 || !slices.Equal(names.Labels, []string{"__name__", "dc", "host"}) {
		t.Fatalf("/v1/labels: %d %v", st, names.Labels)
	}
	var values struct {
		Name   string   `json:"name"`
		Values []string `json:"values"`
	}
	if st := s.Get("/v1/labels/host/values?"+url.Values{"match": {`cpu`}}.Encode(), &values); st != 200 || values.Name != "host" || !slices.Equal(values.Values, []string{"a", "b"}) {
		t.Fatalf("/v1/labels/host/values?match=cpu: %d %+v", st, values)
	}
	if st := s.Get("/v1/labels/dc/values", &values); st != 200 || !slices.Equal(values.Values, []string{"eu", "us"}) {
		t.Fatalf("/v1/labels/dc/values: %d %+v", st, values)
	}

	// Reading by selector: per series, then grouped.
	q := url.Values{"match": {`{dc="eu"}`}, "from": {fmt.Sprint(t0)}, "to": {fmt.Sprint(t0 + tiers.Hour)}, "resolution": {"10m"}, "agg": {"sum,count,avg"}}
	var m matchAnswer
	get := func(path string) int {
		t.Helper()
		m = matchAnswer{}
		return s.Get(path, &m)
	}
	if st := get("/v1/points?" + q.Encode()); st != 200 || len(m.Results) != 2 || m.Results[0].Series != "cpu.a" || m.Results[1].Labels["host"] != "b" {
		t.Fatalf("read by selector: %d %+v", st, m)
	}
	if len(m.Results[0].Points) != 6 || m.Results[0].Points[0][1] != 45 || m.Results[1].Points[0][1] != 90 {
		t.Fatalf("windows of cpu.a, cpu.b: %v / %v", m.Results[0].Points, m.Results[1].Points)
	}
	q.Set("group_by", "dc")
	if st := get("/v1/points?" + q.Encode()); st != 200 || len(m.Results) != 1 || m.Results[0].Group["dc"] != "eu" || m.Results[0].SeriesCount != 2 {
		t.Fatalf("grouped read: %d %+v", st, m)
	}
	// The first window: 0..9 and 0..18 by 2: sum 45+90, count 20, avg their quotient.
	if w := m.Results[0].Points[0]; w[0] != float64(t0) || w[1] != 135 || w[2] != 20 || w[3] != 135.0/20 {
		t.Fatalf("the group's first window %v", w)
	}
	q.Set("group_by", "")
	q.Set("match", `{__name__=~".+"}`)
	if st := get("/v1/points?" + q.Encode()); st != 200 || len(m.Results) != 1 || len(m.Results[0].Group) != 0 || m.Results[0].SeriesCount != 3 {
		t.Fatalf("one group of all: %d %+v", st, m)
	}
	q.Set("resolution", "raw")
	if st, _, b := s.Do("GET", "/v1/points?"+q.Encode(), "", ""); st != 400 || !strings.Contains(string(b), `"param":"group_by"`) {
		t.Fatalf("raw points grouped: %d %s", st, b)
	}
	// Paging across series: following the cursor gives every point once.
	q = url.Values{"match": {`cpu`}, "from": {fmt.Sprint(t0)}, "to": {fmt.Sprint(t0 + tiers.Hour)}, "resolution": {"raw"}, "limit": {"7"}}
	seen := map[string]int{}
	for page := 0; ; page++ {
		if page > 30 {
			t.Fatal("the cursor does not end")
		}
		if st := get("/v1/points?" + q.Encode()); st != 200 {
			t.Fatalf("page %d: %d", page, st)
		}
		for _, r := range m.Results {
			for _, p := range r.Points {
				seen[fmt.Sprintf("%s@%d", r.Series, int64(p[0]))]++
			}
		}
		if m.NextCursor == "" {
			break
		}
		q.Set("cursor", m.NextCursor)
	}
	if len(seen) != 120 {
		t.Fatalf("pages held %d distinct points, want 120", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s came %d times", k, n)
		}
	}
	var plan struct {
		Series     int `json:"series"`
		Partitions int `json:"partitions"`
	}
	if st := s.Get("/v1/plan?"+url.Values{"match": {`{dc="eu"}`}, "from": {fmt.Sprint(t0)}, "to": {fmt.Sprint(t0 + tiers.Hour)}}.Encode(), &plan); st != 200 || plan.Series != 2 || plan.Partitions == 0 {
		t.Fatalf("plan of a read by selector: %d %+v", st, plan)
	}
	// A batch item by selector.
	st, _, b := s.Do("POST", "/v1/query", "application/json", fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"10m","queries":[{"series":"plain"},{"match":"cpu","group_by":"host"}]}`, t0, t0+tiers.Hour))
	var batch struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(b, &batch); st != 200 || err != nil || len(batch.Results) != 2 {
		t.Fatalf("batch with a selector: %d %s", st, b)
	}
	m = matchAnswer{}
	if err := json.Unmarshal(batch.Results[1], &m); err != nil || len(m.Results) != 2 || m.Results[0].Group["host"] != "a" {
		t.Fatalf("the selector's item: %s", batch.Results[1])
	}

	// Relabelling.
	if st, _, b := s.Do("PUT", "/v1/admin/series/cpu.a/labels", "application/json", `{"labels":{"__name__":"cpu","host":"z","dc":"eu"}}`); st != 200 || !strings.Contains(string(b), `"host":"z"`) {
		t.Fatalf("relabel: %d %s", st, b)
	}
	if got := listed(url.Values{"match": {`{host="a"}`}}); got != nil {
		t.Fatalf("the old label still selects %v", got)
	}
	if got := listed(url.Values{"match": {`{host="z"}`}}); !slices.Equal(got, []string{"cpu.a"}) {
		t.Fatalf("the new label selects %v", got)
	}
	if st, _, _ := s.Do("PUT", "/v1/admin/series/nope/labels", "application/json", `{"labels":{"a":"b"}}`); st != 404 {
		t.Fatalf("relabelling an unknown series: %d", st)
	}
	if st, _, b := s.Do("PUT", "/v1/admin/series/cpu.a/labels", "application/json", `{"labels":{"__x":"b"}}`); st != 400 || !strings.Contains(string(b), `"param":"labels"`) {
		t.Fatalf("relabelling with a reserved name: %d %s", st, b)
	}
}
