// Package promtest is the behavioural suite of the Prometheus API over a
// real store: random series go in through the write path and are rolled
// up, and every answer — of each range function, each aggregation, range
// and instant queries, aligned and not — read through the Prometheus Go
// client must equal a brute-force evaluation of the documented window rule
// ([T-range, T)) over the points that were written.
//
// The embedded store runs it in unit tests and the Cassandra store in the
// integration tests.
package promtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/tsgate/tsgate/httpapi/apitest"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/promapi"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// Server is the gateway's HTTP API, the Prometheus endpoints included,
// over one store.
type Server struct {
	*httptest.Server
	Env    *querytest.Env
	API    v1.API
	tables *tableCounter
}

// NewServer serves the API over store, reading through a decorator that
// records which tables reads touch. In tests (not benchmarks) every answer
// is checked against api/openapi.yaml.
func NewServer(t testing.TB, store tiers.Store) *Server {
	return NewServerWith(t, store, querytest.Options{})
}

// NewServerWith is NewServer with the environment's options (its reader
// wrapper is kept, inside the table counter).
func NewServerWith(t testing.TB, store tiers.Store, opts querytest.Options) *Server {
	t.Helper()
	tc := &tableCounter{tables: map[tiers.Table]int{}}
	wrap := opts.Wrap
	opts.Wrap = func(r tiers.PartitionReader) tiers.PartitionReader {
		if wrap != nil {
			r = wrap(r)
		}
		tc.PartitionReader = r
		return tc
	}
	env := querytest.NewEnv(t, store, opts)
	h := env.Gateway.Handler()
	if tt, ok := t.(*testing.T); ok {
		h = apitest.Checked(tt, h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	client, err := promclient.NewClient(promclient.Config{Address: ts.URL + "/prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	return &Server{Server: ts, Env: env, API: v1.NewAPI(client), tables: tc}
}

// tableCounter records the tables of the partitions read, and slows
// every partition read down by delay when it is set.
type tableCounter struct {
	tiers.PartitionReader
	mu     sync.Mutex
	tables map[tiers.Table]int
	delay  atomic.Int64 // ns
}

func (c *tableCounter) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	c.mu.Lock()
	c.tables[req.Key.Table]++
	c.mu.Unlock()
	if d := c.delay.Load(); d > 0 {
		select {
		case <-time.After(time.Duration(d)):
		case <-ctx.Done():
		}
	}
	return c.PartitionReader.Read(ctx, req)
}

func (c *tableCounter) reset() map[tiers.Table]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.tables
	c.tables = map[tiers.Table]int{}
	return old
}

// Truth is what was written: the points of each series, ascending.
type Truth map[string][]tiers.Row

// Load writes about three days of points of n series named prefix.<k> at
// irregular intervals with gaps, a quarter of them on whole minutes, integer values (so that sums are exact
// in any order), and rolls them up.
func (s *Server) Load(t testing.TB, prefix string, n int, r *rand.Rand) Truth {
	t.Helper()
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	truth := Truth{}
	for k := range n {
		id := fmt.Sprintf("%s.%c", prefix, 'a'+k)
		var batch []ingest.Point
		for ts := now - 3*tiers.Day + r.Int64N(tiers.Hour); ts < now-tiers.Minute; {
			if r.IntN(4) == 0 {
				// On a minute boundary: where windows start and end, so
				// that which window holds it matters.
				ts = tiers.AlignUp(ts, tiers.Minute)
			}
			v := float64(r.IntN(2001) - 1000)
			batch = append(batch, ingest.Point{Series: id, T: ts, V: v})
			truth[id] = append(truth[id], tiers.PointRow(ts, v))
			if r.IntN(200) == 0 {
				ts += r.Int64N(4 * tiers.Hour) // a gap
			} else {
				ts += 1 + r.Int64N(3*tiers.Minute)
			}
		}
		if _, err := s.Env.Writer.Backfill(ctx, batch); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	s.Env.Clock.Advance(2 * time.Hour)
	if _, err := s.Env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatalf("rollups: %v", err)
	}
	return truth
}

// Run runs the suite on store.
func Run(t *testing.T, store tiers.Store) {
	s := NewServer(t, store)
	r := rand.New(rand.NewPCG(7, 11))
	prefix := fmt.Sprintf("pt%08x", r.Uint32())
	truth := s.Load(t, prefix, 4, r)
	t.Run("RangeQueriesEqualBruteForce", func(t *testing.T) { s.rangeQueries(t, prefix, truth, r) })
	t.Run("UnalignedStartMovesToTheGrid", func(t *testing.T) { s.unaligned(t, prefix, truth) })
	t.Run("InstantQueriesEqualBruteForce", func(t *testing.T) { s.instantQueries(t, prefix, truth, r) })
	t.Run("LongRangeReadsTheHourTier", func(t *testing.T) { s.hourTier(t, prefix, truth) })
	t.Run("SeriesAndLabels", func(t *testing.T) { s.seriesAndLabels(t, prefix, truth) })
	t.Run("BadRequests", func(t *testing.T) { s.badRequests(t, prefix) })
	t.Run("FormPost", func(t *testing.T) { s.formPost(t, prefix, truth) })
	t.Run("PartialAnswersWarn", func(t *testing.T) { s.partialAnswers(t, prefix, truth) })
}

// partialAnswers slows the store down so that a short timeout cuts the
// reads short: the answer says so in a warning, and what it holds is
// exact, a prefix of the full answer of each series.
func (s *Server) partialAnswers(t *testing.T, prefix string, truth Truth) {
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	s.tables.delay.Store(int64(50 * time.Millisecond))
	defer s.tables.delay.Store(0)
	step := 5 * tiers.Minute
	end := tiers.AlignDown(now-2*tiers.Hour, step)
	start := end - 2*tiers.Day
	sel := fmt.Sprintf(`tsgate{series=~"%s\\.(a|c)"}`, prefix)
	q := query{fn: "last_over_time", rng: step}
	got, warnings, _, err := s.API.QueryRange(ctx, q.expr(sel), v1.Range{Start: time.UnixMilli(start), End: time.UnixMilli(end), Step: 5 * time.Minute},
		v1.WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	partial := 0
	for _, w := range warnings {
		if strings.HasPrefix(w, "partial: slo") {
			partial++
		}
	}
	if partial == 0 {
		t.Fatalf("warnings %v, want partial: slo; got %d series %.300v", warnings, len(got.(model.Matrix)), got)
	}
	var times []int64
	for ts := start; ts <= end; ts += step {
		times = append(times, ts)
	}
	want := Expect(truth, matchIDs(truth, sel, prefix), q, step, times)
	gotMap := map[string][]Sample{}
	for _, ss := range got.(model.Matrix) {
		for _, p := range ss.Values {
			gotMap[ss.Metric.String()] = append(gotMap[ss.Metric.String()], Sample{int64(p.Timestamp), float64(p.Value)})
		}
	}
	cut := 0
	for key, w := range want {
		g := gotMap[key]
		if len(g) > len(w) || !slices.Equal(g, w[:len(g)]) {
			t.Errorf("%s: partial answer is not a prefix of the full one:\n got  %v\n want %v", key, head(g), head(w))
		}
		if len(g) < len(w) {
			cut++
		}
	}
	if cut != partial {
		t.Errorf("%d series cut short, %d partial warnings (%v)", cut, partial, warnings)
	}
}

// query is one expression under test.
type query struct {
	fn, agg, grouping string
	rng               int64 // 0: a bare selector
}

func (q query) expr(sel string) string {
	inner := sel
	if q.rng > 0 {
		inner = fmt.Sprintf("%s(%s[%s])", q.fn, sel, promDuration(q.rng))
	}
	if q.agg == "" {
		return inner
	}
	return fmt.Sprintf("%s %s (%s)", q.agg, q.grouping, inner)
}

func promDuration(ms int64) string {
	if ms%tiers.Second == 0 {
		return fmt.Sprintf("%ds", ms/tiers.Second)
	}
	return fmt.Sprintf("%dms", ms)
}

var fns = []string{"min_over_time", "max_over_time", "avg_over_time", "sum_over_time", "count_over_time", "last_over_time"}

func (s *Server) rangeQueries(t *testing.T, prefix string, truth Truth, r *rand.Rand) {
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	steps := []int64{30 * tiers.Second, tiers.Minute, 90 * tiers.Second, 5 * tiers.Minute, 15 * tiers.Minute, tiers.Hour, 2 * tiers.Hour}
	sels := []string{
		fmt.Sprintf(`tsgate{series=~"%s\\..*"}`, prefix),
		fmt.Sprintf(`{series=~"%s\\.(a|c)"}`, prefix),
		fmt.Sprintf(`tsgate{series="%s.b"}`, prefix),
		fmt.Sprintf(`tsgate{series=~"%s.*", series!="%s.a"}`, prefix, prefix),
	}
	nonEmpty := 0
	defer func() {
		// Most answers must hold points, or equality proves little.
		if nonEmpty < 40 {
			t.Errorf("only %d of 60 answers held points", nonEmpty)
		}
	}()
	for i := range 60 {
		step := steps[r.IntN(len(steps))]
		q := query{fn: fns[i%len(fns)], rng: step * int64(1+r.IntN(3))}
		switch r.IntN(4) {
		case 0:
			q.rng = 0
		case 1:
			q.rng = 2 * tiers.Minute // a range that is not a multiple of the step
		}
		if r.IntN(2) == 0 {
			q.agg = []string{"sum", "min", "max", "avg", "count"}[r.IntN(5)]
			q.grouping = []string{"", "by (series)", "without (series)"}[r.IntN(3)]
		}
		n := 1 + r.Int64N(200)
		start := tiers.AlignDown(now-r.Int64N(3*tiers.Day), step)
		end := start + (n-1)*step + r.Int64N(step) // an end between evaluation times
		sel := sels[r.IntN(len(sels))]
		expr := q.expr(sel)
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			got, warnings, _, err := s.API.QueryRange(ctx, expr, v1.Range{Start: time.UnixMilli(start), End: time.UnixMilli(end), Step: time.Duration(step) * time.Millisecond})
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			if len(warnings) > 0 {
				t.Errorf("%s: warnings %v", expr, warnings)
			}
			times := make([]int64, 0, n)
			for ts := start; ts <= end; ts += step {
				times = append(times, ts)
			}
			rng := q.rng
			if rng == 0 {
				rng = step
			}
			want := Expect(truth, matchIDs(truth, sel, prefix), q, rng, times)
			if len(want) > 0 {
				nonEmpty++
			}
			equalMatrix(t, expr, got.(model.Matrix), want)
		})
	}
}

// matchIDs is the brute-force selector of the suite's selectors.
func matchIDs(truth Truth, sel, prefix string) []string {
	var ids []string
	for id := range truth {
		ok := strings.HasPrefix(id, prefix+".")
		switch {
		case strings.Contains(sel, "(a|c)"):
			ok = id == prefix+".a" || id == prefix+".c"
		case strings.Contains(sel, `series="`):
			ok = id == prefix+".b"
		case strings.Contains(sel, `series!="`):
			ok = ok && id != prefix+".a"
		}
		if ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Sample is one value of an expected answer.
type Sample struct {
	T int64
	V float64
}

// Expect evaluates q by brute force at the given times: each series'
// function over its points in [T-rng, T), then the aggregation across
// series (avg as the sum of what lies under the values over its count:
// the points for avg_over_time, one per series otherwise). The answer is
// keyed by the metric's string form.
func Expect(truth Truth, ids []string, q query, rng int64, times []int64) map[string][]Sample {
	type cell struct {
		n                   int
		sum, min, max, wsum float64
		weight              float64
	}
	out := map[string][]Sample{}
	groups := map[string][]cell{}
	fn := q.fn
	if q.rng == 0 {
		fn = "last_over_time"
	}
	for _, id := range ids {
		for i, T := range times {
			var pts []tiers.Row
			for _, p := range truth[id] {
				if p.T >= T-rng && p.T < T {
					pts = append(pts, p)
				}
			}
			if len(pts) == 0 {
				continue
			}
			var v, wsum float64
			weight := 1.0
			switch fn {
			case "min_over_time":
				v = pts[0].Sum
				for _, p := range pts {
					v = min(v, p.Sum)
				}
			case "max_over_time":
				v = pts[0].Sum
				for _, p := range pts {
					v = max(v, p.Sum)
				}
			case "sum_over_time", "avg_over_time":
				for _, p := range pts {
					v += p.Sum
				}
				if fn == "avg_over_time" {
					wsum, weight = v, float64(len(pts))
					v /= float64(len(pts))
				}
			case "count_over_time":
				v = float64(len(pts))
			case "last_over_time":
				v = pts[len(pts)-1].Sum
			}
			if fn != "avg_over_time" {
				wsum = v
			}
			if q.agg == "" {
				m := model.Metric{"series": model.LabelValue(id)}
				if fn == "last_over_time" {
					m["__name__"] = "tsgate"
				}
				out[m.String()] = append(out[m.String()], Sample{T, v})
				continue
			}
			m := model.Metric{}
			if q.grouping == "by (series)" {
				m["series"] = model.LabelValue(id)
			}
			key := m.String()
			if groups[key] == nil {
				groups[key] = make([]cell, len(times))
			}
			c := &groups[key][i]
			if c.n == 0 {
				c.min, c.max = v, v
			}
			c.min, c.max = min(c.min, v), max(c.max, v)
			c.n++
			c.sum += v
			c.wsum += wsum
			c.weight += weight
		}
	}
	for key, cells := range groups {
		for i, c := range cells {
			if c.n == 0 {
				continue
			}
			var v float64
			switch q.agg {
			case "sum":
				v = c.sum
			case "min":
				v = c.min
			case "max":
				v = c.max
			case "count":
				v = float64(c.n)
			case "avg":
				v = c.wsum / c.weight
			}
			out[key] = append(out[key], Sample{times[i], v})
		}
	}
	return out
}

func equalMatrix(t *testing.T, expr string, got model.Matrix, want map[string][]Sample) {
	t.Helper()
	gotMap := map[string][]Sample{}
	for _, ss := range got {
		for _, p := range ss.Values {
			gotMap[ss.Metric.String()] = append(gotMap[ss.Metric.String()], Sample{int64(p.Timestamp), float64(p.Value)})
		}
	}
	compareAnswers(t, expr, gotMap, want)
	for i := 1; i < len(got); i++ {
		if !(got[i-1].Metric.String() < got[i].Metric.String()) {
			t.Errorf("%s: series not sorted by labels: %s before %s", expr, got[i-1].Metric, got[i].Metric)
		}
	}
}

func compareAnswers(t *testing.T, expr string, got, want map[string][]Sample) {
	t.Helper()
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	for k := range keys {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("%s: series %s:\n got  %v\n want %v", expr, k, head(got[k]), head(want[k]))
		}
	}
}

func head(s []Sample) []Sample { return s[:min(len(s), 8)] }

func (s *Server) unaligned(t *testing.T, prefix string, truth Truth) {
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	sel := fmt.Sprintf(`tsgate{series="%s.b"}`, prefix)
	// 17s past the hour: 1s windows would be exact but too many (50 hours
	// of them), so evaluation moves back to whole minutes.
	start := tiers.AlignDown(now-2*tiers.Day, tiers.Hour) + 17*tiers.Second
	end := start + 49*tiers.Hour
	q := query{fn: "max_over_time", rng: tiers.Hour}
	got, warnings, _, err := s.API.QueryRange(ctx, q.expr(sel), v1.Range{Start: time.UnixMilli(start), End: time.UnixMilli(end), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "is not a multiple of 1m") {
		t.Errorf("warnings = %v, want one saying the start moved to whole minutes", warnings)
	}
	var times []int64
	for ts := start - 17*tiers.Second; ts <= end; ts += tiers.Hour {
		times = append(times, ts)
	}
	equalMatrix(t, q.expr(sel), got.(model.Matrix), Expect(truth, []string{prefix + ".b"}, q, tiers.Hour, times))

	// 17s past a 5-minute boundary over 2 hours: 1s windows are few
	// enough, so the answer is exact at the times asked for.
	start = tiers.AlignDown(now-tiers.Day, 5*tiers.Minute) + 17*tiers.Second
	end = start + 2*tiers.Hour
	q = query{fn: "sum_over_time", rng: 5 * tiers.Minute}
	got, warnings, _, err = s.API.QueryRange(ctx, q.expr(sel), v1.Range{Start: time.UnixMilli(start), End: time.UnixMilli(end), Step: 5 * time.Minute})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("err %v, warnings %v", err, warnings)
	}
	times = times[:0]
	for ts := start; ts <= end; ts += 5 * tiers.Minute {
		times = append(times, ts)
	}
	equalMatrix(t, q.expr(sel), got.(model.Matrix), Expect(truth, []string{prefix + ".b"}, q, 5*tiers.Minute, times))
}

func (s *Server) instantQueries(t *testing.T, prefix string, truth Truth, r *rand.Rand) {
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	sel := fmt.Sprintf(`tsgate{series=~"%s\\..*"}`, prefix)
	ids := matchIDs(truth, sel, prefix)
	for i := range 24 {
		at := tiers.AlignDown(now-r.Int64N(3*tiers.Day), tiers.Second)
		q := query{fn: fns[i%len(fns)], rng: []int64{tiers.Minute, tiers.Hour, 6 * tiers.Hour}[r.IntN(3)]}
		rng := q.rng
		if i%7 == 0 {
			q.rng, rng = 0, 5*tiers.Minute // a bare selector looks back 5 minutes
		}
		if i%3 == 0 {
			q.agg = "sum"
		}
		expr := q.expr(sel)
		got, _, _, err := s.API.Query(ctx, expr, time.UnixMilli(at))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		vec := got.(model.Vector)
		gotMap := map[string][]Sample{}
		evalAt := at
		for _, smp := range vec {
			gotMap[smp.Metric.String()] = append(gotMap[smp.Metric.String()], Sample{int64(smp.Timestamp), float64(smp.Value)})
			evalAt = int64(smp.Timestamp)
		}
		if q.fn == "last_over_time" || q.rng == 0 || 6*tiers.Hour/tiers.Second <= int64(promapi.DefaultConfig().MaxWindows) {
			if evalAt != at {
				t.Errorf("%s: evaluated at %d, want %d", expr, evalAt, at)
			}
		}
		compareAnswers(t, expr, gotMap, Expect(truth, ids, q, rng, []int64{evalAt}))
	}
	// A range of 2 days at a time that is no multiple of a minute: the
	// windows of a second would be too many, so the time moves back to
	// the minute.
	at := tiers.AlignDown(now-tiers.Hour, tiers.Minute) + 23*tiers.Second
	q := query{fn: "max_over_time", rng: 2 * tiers.Day}
	got, _, _, err := s.API.Query(ctx, q.expr(sel), time.UnixMilli(at))
	if err != nil {
		t.Fatal(err)
	}
	vec := got.(model.Vector)
	if len(vec) == 0 || int64(vec[0].Timestamp) != at-23*tiers.Second {
		t.Fatalf("answer %v, want samples at %d", vec, at-23*tiers.Second)
	}
	gotMap := map[string][]Sample{}
	for _, smp := range vec {
		gotMap[smp.Metric.String()] = append(gotMap[smp.Metric.String()], Sample{int64(smp.Timestamp), float64(smp.Value)})
	}
	compareAnswers(t, q.expr(sel), gotMap, Expect(truth, ids, q, q.rng, []int64{at - 23*tiers.Second}))

	// A number: Grafana's "Save & test" asks for 1+1.
	got, _, _, err = s.API.Query(ctx, "1+1", time.UnixMilli(at))
	if err != nil {
		t.Fatal(err)
	}
	if sc, ok := got.(*model.Scalar); !ok || sc.Value != 2 || int64(sc.Timestamp) != at {
		t.Errorf("1+1 = %#v", got)
	}
}

func (s *Server) hourTier(t *testing.T, prefix string, truth Truth) {
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	// 90 days at a step of an hour, ending where the hour tier is rolled
	// up: the hour tier serves it all.
	end := tiers.AlignDown(now-6*tiers.Hour, tiers.Hour)
	start := end - 90*tiers.Day
	sel := fmt.Sprintf(`tsgate{series=~"%s\\..*"}`, prefix)
	q := query{fn: "max_over_time", rng: tiers.Hour, agg: "max", grouping: "by (series)"}
	s.tables.reset()
	got, warnings, _, err := s.API.QueryRange(ctx, q.expr(sel), v1.Range{Start: time.UnixMilli(start), End: time.UnixMilli(end), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	read := s.tables.reset()
	for table, n := range read {
		if table != tiers.RollupTable(tiers.Hour) {
			t.Errorf("read %d partitions of %s; want the hour tier only (all reads: %v)", n, table, read)
		}
	}
	if read[tiers.RollupTable(tiers.Hour)] == 0 {
		t.Errorf("no partition of the hour tier read: %v", read)
	}
	var times []int64
	for ts := start; ts <= end; ts += tiers.Hour {
		times = append(times, ts)
	}
	_ = warnings
	equalMatrix(t, q.expr(sel), got.(model.Matrix), Expect(truth, matchIDs(truth, sel, prefix), q, tiers.Hour, times))
}

func (s *Server) seriesAndLabels(t *testing.T, prefix string, truth Truth) {
	ctx := context.Background()
	ids := matchIDs(truth, "", prefix)
	far := time.UnixMilli(s.Env.Clock.Now().UnixMilli() + tiers.Day)
	long := time.UnixMilli(s.Env.Clock.Now().UnixMilli() - 30*tiers.Day)
	match := []string{fmt.Sprintf(`tsgate{series=~"%s\\..*"}`, prefix)}
	names, _, _, err := s.API.LabelNames(ctx, match, long, far)
	if err != nil || !slices.Equal(names, model.LabelNames{"__name__", "series"}) {
		t.Errorf("label names = %v, %v", names, err)
	}
	names, _, _, err = s.API.LabelNames(ctx, []string{`{series="no.such.series"}`}, long, far)
	if err != nil || len(names) != 0 {
		t.Errorf("label names of nothing = %v, %v", names, err)
	}
	values, _, _, err := s.API.LabelValues(ctx, "series", match, long, far)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range values {
		got = append(got, string(v))
	}
	if !slices.Equal(got, ids) {
		t.Errorf("series values = %v, want %v", got, ids)
	}
	values, _, _, err = s.API.LabelValues(ctx, "__name__", nil, long, far)
	if err != nil || len(values) != 1 || values[0] != "tsgate" {
		t.Errorf("__name__ values = %v, %v", values, err)
	}
	sets, _, _, err := s.API.Series(ctx, []string{fmt.Sprintf(`{series=~"%s\\.(b|d)"}`, prefix)}, long, far)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.LabelSet{
		{"__name__": "tsgate", "series": model.LabelValue(prefix + ".b")},
		{"__name__": "tsgate", "series": model.LabelValue(prefix + ".d")},
	}
	if fmt.Sprint(sets) != fmt.Sprint(want) {
		t.Errorf("series = %v, want %v", sets, want)
	}
	// A range before any point: no series.
	sets, _, _, err = s.API.Series(ctx, match, long.Add(-time.Hour), long)
	if err != nil || len(sets) != 0 {
		t.Errorf("series before the data = %v, %v", sets, err)
	}
	// The limit truncates, with Prometheus' warning.
	sets, warnings, _, err := s.API.Series(ctx, match, long, far, v1.WithLimit(2))
	if err != nil || len(sets) != 2 || len(warnings) != 1 {
		t.Errorf("limited series = %v, %v, %v", sets, warnings, err)
	}
	ex, err := s.API.QueryExemplars(ctx, match[0], long, far)
	if err != nil || len(ex) != 0 {
		t.Errorf("exemplars = %v, %v", ex, err)
	}
	if _, err := s.API.Buildinfo(ctx); err != nil {
		t.Errorf("buildinfo: %v", err)
	}
	meta, err := s.API.Metadata(ctx, "", "")
	if err != nil || len(meta["tsgate"]) != 1 || meta["tsgate"][0].Type != v1.MetricTypeGauge {
		t.Errorf("metadata = %v, %v", meta, err)
	}
}

// badRequests checks that what the gateway cannot answer is a bad_data
// error that says why.
func (s *Server) badRequests(t *testing.T, prefix string) {
	now := s.Env.Clock.Now().Unix()
	sel := fmt.Sprintf(`tsgate{series="%s.a"}`, prefix)
	for _, c := range []struct {
		name, path string
		status     int
		errType    string
		contains   string
	}{
		{"syntax", "/api/v1/query?query=" + url.QueryEscape("max_over_time("+sel), 400, "bad_data", "query"},
		{"unknown function", "/api/v1/query?query=" + url.QueryEscape("rate("+sel+"[5m])"), 400, "bad_data", "function rate is not supported; supported are"},
		{"no such function", "/api/v1/query?query=" + url.QueryEscape("nosuch("+sel+"[5m])"), 400, "bad_data", "nosuch"},
		{"binary operator", "/api/v1/query?query=" + url.QueryEscape(sel+" * 2"), 400, "bad_data", "operator * is not supported"},
		{"other metric", "/api/v1/query?query=up", 400, "bad_data", "every series of the gateway is tsgate"},
		{"range alone", "/api/v1/query?query=" + url.QueryEscape(sel+"[5m]"), 400, "bad_data", "wrap it in a function"},
		{"offset", "/api/v1/query?query=" + url.QueryEscape("max_over_time("+sel+"[5m] offset 1h)"), 400, "bad_data", "offset"},
		{"nested aggregation", "/api/v1/query?query=" + url.QueryEscape("sum(max("+sel+"))"), 400, "bad_data", "nested aggregations"},
		{"topk", "/api/v1/query?query=" + url.QueryEscape("topk(2, "+sel+")"), 400, "bad_data", "aggregation topk is not supported"},
		{"empty matchers", "/api/v1/query?query=" + url.QueryEscape(`{series=~".*"}`), 400, "bad_data", "non-empty matcher"},
		{"too many points", fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=1", url.QueryEscape(sel), now-11001, now), 400, "bad_data", "11,000 points"},
		{"huge range", "/api/v1/query?query=" + url.QueryEscape("max_over_time("+sel+"[20000y])"), 400, "bad_data", "range"},
		{"no step", fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d", url.QueryEscape(sel), now-200, now), 400, "bad_data", "step"},
		{"bad start", "/api/v1/query_range?query=x&start=yesterday&end=1&step=1", 400, "bad_data", "start"},
		{"sub-second", fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=0.5", url.QueryEscape("max_over_time("+sel+"[1s])"), now-200, now), 400, "bad_data", "1s"},
		{"too many windows", fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=1", url.QueryEscape("max_over_time("+sel+"[7d])"), now-3600, now), 400, "bad_data", "--prometheus-max-windows"},
		{"last value before raw retention", fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=3600", url.QueryEscape(sel), now-30*86400, now-20*86400), 400, "bad_data", "raw points, which are kept 7d"},
		{"series without match", "/api/v1/series", 400, "bad_data", "match[]"},
		{"bad timeout", "/api/v1/query?query=1&timeout=soon", 400, "bad_data", "timeout"},
		{"no endpoint", "/api/v1/rules", 404, "not_found", "query_range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Get(s.URL + "/prometheus" + c.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text := string(body)
			if resp.StatusCode != c.status || !strings.Contains(text, `"status":"error"`) || !strings.Contains(text, `"errorType":"`+c.errType+`"`) || !strings.Contains(text, c.contains) {
				t.Errorf("%s: %d %s; want %d %s mentioning %q", c.path, resp.StatusCode, text, c.status, c.errType, c.contains)
			}
		})
	}
	// The client sees a bad_data error.
	_, _, _, err := s.API.Query(context.Background(), "rate("+sel+"[5m])", s.Env.Clock.Now())
	if e, ok := err.(*v1.Error); !ok || e.Type != v1.ErrBadData {
		t.Errorf("client error = %#v, want bad_data", err)
	}
}

// formPost sends a query as a form body, as Grafana does.
func (s *Server) formPost(t *testing.T, prefix string, truth Truth) {
	now := s.Env.Clock.Now().UnixMilli()
	// Data ends two hours before the clock (it moved on after loading).
	end := tiers.AlignDown(now-3*tiers.Hour, tiers.Minute)
	start := end - 6*tiers.Hour
	sel := fmt.Sprintf(`tsgate{series="%s.c"}`, prefix)
	q := query{fn: "count_over_time", rng: 5 * tiers.Minute}
	form := url.Values{"query": {q.expr(sel)}, "start": {time.UnixMilli(start).UTC().Format(time.RFC3339)}, "end": {fmt.Sprint(end / 1000)}, "step": {"5m"}}
	resp, err := http.Post(s.URL+"/prometheus/api/v1/query_range", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"series":"`+prefix+`.c"},"values":[[`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var times []int64
	for ts := start; ts <= end; ts += 5 * tiers.Minute {
		times = append(times, ts)
	}
	want := Expect(truth, []string{prefix + ".c"}, q, q.rng, times)
	var b strings.Builder
	for _, smp := range want[model.Metric{"series": model.LabelValue(prefix + ".c")}.String()] {
		fmt.Fprintf(&b, `[%d,"%d"],`, smp.T/1000, int64(smp.V))
	}
	if !strings.Contains(string(body), strings.TrimSuffix(b.String(), ",")+"]") {
		t.Errorf("body %s\nwant values %s", body, b.String())
	}
}
