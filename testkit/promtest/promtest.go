// Package promtest is the behavioural suite of the Prometheus API over a
// real store: random series — labelled counters with resets, gauges, the
// buckets of a classic histogram, and series written without labels — go
// in through the write path, and every answer of a broad list of PromQL
// expressions, range and instant, read through the Prometheus Go client,
// must equal the answer of Prometheus' engine over a plain in-memory
// storage of the same samples (reference.go). The engine is the same on
// both sides, so what is checked is the gateway's storage: which series a
// selector finds, with which labels, and every sample of them.
//
// The embedded store runs it in unit tests and the Cassandra store in the
// integration tests. The answers of a real Prometheus server to the same
// samples are compared in the integration tests too (the oracle).
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	promclient "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
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

// Tables returns the tables read since the last call, with their reads.
func (s *Server) Tables() map[tiers.Table]int {
	s.tables.mu.Lock()
	defer s.tables.mu.Unlock()
	old := s.tables.tables
	s.tables.tables = map[tiers.Table]int{}
	return old
}

// Load writes about a day of samples of labelled series named by prefix
// — counters of two jobs and three instances with resets, gauges, the
// buckets, sum and count of a classic histogram — and two series without
// labels, at irregular times (never on whole seconds, so that both ends
// of a range selector are never hit exactly), and rolls them up. It
// returns the reference storage of the same samples.
func (s *Server) Load(t testing.TB, prefix string, r *rand.Rand) *Reference {
	t.Helper()
	ctx := context.Background()
	now := s.Env.Clock.Now().UnixMilli()
	ref := &Reference{}
	var b ingest.Batch
	b.Labels = map[string]tiers.Labels{}
	add := func(id string, l tiers.Labels, v func(i int, prev float64) float64) {
		if l != nil {
			b.Labels[id] = l
		}
		lset := unlabelled(id)
		if l != nil {
			lset = labels.FromMap(l)
		}
		var samples []promql.FPoint
		prev := 0.0
		ts := now - tiers.Day + 137 + r.Int64N(5000)
		for i := 0; ts < now-2*tiers.Minute; i++ {
			prev = v(i, prev)
			b.Points = append(b.Points, ingest.Point{Series: id, T: ts, V: prev})
			samples = append(samples, promql.FPoint{T: ts, F: prev})
			ts += 15*tiers.Second + 1 + r.Int64N(4*tiers.Second)
			if r.IntN(300) == 0 {
				ts += r.Int64N(20 * tiers.Minute) // a gap
			}
		}
		ref.All = append(ref.All, promql.Series{Metric: lset, Floats: samples})
	}
	for _, job := range []string{"api", "batch"} {
		for inst := range 3 {
			l := tiers.Labels{"__name__": prefix + "_requests_total", "job": job, "instance": fmt.Sprintf("host-%d:9100", inst)}
			add(seriesID(l), l, func(i int, prev float64) float64 {
				if r.IntN(400) == 0 {
					return float64(r.IntN(5)) // a restart
				}
				return prev + float64(r.IntN(20))
			})
			g := tiers.Labels{"__name__": prefix + "_temperature", "job": job, "instance": fmt.Sprintf("host-%d:9100", inst)}
			add(seriesID(g), g, func(int, float64) float64 { return math.Round(20+10*r.NormFloat64()) / 4 })
		}
	}
	var buckets []float64
	for _, le := range []string{"0.1", "0.5", "1", "5", "+Inf"} {
		l := tiers.Labels{"__name__": prefix + "_latency_seconds_bucket", "job": "api", "le": le}
		share := map[string]float64{"0.1": 0.2, "0.5": 0.6, "1": 0.8, "5": 0.95, "+Inf": 1}[le]
		k := len(buckets)
		buckets = append(buckets, 0)
		add(seriesID(l), l, func(i int, prev float64) float64 {
			buckets[k] += math.Floor(share*float64(10+r.IntN(10)) + 0.5)
			return buckets[k]
		})
	}
	for _, name := range []string{"_sum", "_count"} {
		l := tiers.Labels{"__name__": prefix + "_latency_seconds" + name, "job": "api"}
		add(seriesID(l), l, func(i int, prev float64) float64 { return prev + float64(1+r.IntN(30)) })
	}
	for _, id := range []string{prefix + ".plain.a", prefix + ".plain.b"} {
		add(id, nil, func(int, float64) float64 { return float64(r.IntN(2001) - 1000) })
	}
	if _, err := s.Env.Writer.BackfillBatch(ctx, b); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := s.Env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatalf("rollups: %v", err)
	}
	return ref
}

// seriesID is the id of a labelled series, as remote write derives it.
func seriesID(l tiers.Labels) string {
	return fmt.Sprintf("%s.%08x", l["__name__"], labels.FromMap(l).Hash()&0xffffffff)
}

func unlabelled(id string) labels.Labels {
	return labels.FromStrings(model.MetricNameLabel, "tsgate", "series", id)
}

// Exprs are the expressions the suite asks, with %s for the prefix of
// the metric names.
var Exprs = []string{
	`%s_requests_total`,
	`%s_requests_total{job="api"}`,
	`%s_requests_total{instance=~"host-[01]:.*"}`,
	`rate(%s_requests_total[5m])`,
	`irate(%s_requests_total[5m])`,
	`increase(%s_requests_total[1h])`,
	`sum by (job) (rate(%s_requests_total[10m]))`,
	`sum without (instance) (rate(%s_requests_total[10m]))`,
	`topk(2, rate(%s_requests_total[5m]))`,
	`resets(%s_requests_total[1h])`,
	`changes(%s_temperature[30m])`,
	`avg_over_time(%s_temperature[10m])`,
	`min_over_time(%s_temperature[1h])`,
	`max_over_time(%s_temperature[1h]) - min_over_time(%s_temperature[1h])`,
	`quantile_over_time(0.9, %s_temperature[30m])`,
	`stddev_over_time(%s_temperature[30m])`,
	`count_over_time(%s_temperature[15m])`,
	`last_over_time(%s_temperature[5m])`,
	`deriv(%s_temperature[30m])`,
	`predict_linear(%s_temperature[30m], 600)`,
	`delta(%s_temperature[10m])`,
	`histogram_quantile(0.9, sum by (le) (rate(%s_latency_seconds_bucket[10m])))`,
	`rate(%s_latency_seconds_sum[5m]) / rate(%s_latency_seconds_count[5m])`,
	`%s_temperature > bool 5`,
	`%s_temperature * on(job, instance) group_left rate(%s_requests_total[5m])`,
	`quantile by (job) (0.5, %s_temperature)`,
	`count_values("t", round(%s_temperature))`,
	`absent(%s_nothing)`,
	`absent_over_time(%s_temperature[5m])`,
	`label_replace(%s_temperature, "host", "$1", "instance", "(.*):.*")`,
	`max_over_time(rate(%s_requests_total[5m])[30m:1m])`,
	`%s_temperature offset 10m`,
	`clamp_min(%s_temperature, 5)`,
	`sort_desc(sum by (instance) (%s_temperature))`,
	`tsgate{series=~"%s.plain.*"}`,
	`sum(tsgate{series=~"%s.plain.*"})`,
	`vector(1) + time()`,
}

// Run runs the suite on store.
func Run(t *testing.T, store tiers.Store) {
	s := NewServer(t, store)
	r := rand.New(rand.NewPCG(7, 11))
	prefix := fmt.Sprintf("pt%06x", r.Uint32()&0xffffff)
	ref := s.Load(t, prefix, r)
	t.Run("RangeQueriesEqualTheEngineOverTheSamples", func(t *testing.T) { s.rangeQueries(t, prefix, ref) })
	t.Run("InstantQueriesEqualTheEngineOverTheSamples", func(t *testing.T) { s.instantQueries(t, prefix, ref) })
	t.Run("ConcurrentQueriesKeepTheirOwnAnswers", func(t *testing.T) { s.concurrentQueries(t, prefix, ref) })
	t.Run("OverTimeFunctionsReadRollups", func(t *testing.T) { s.overTimeFromRollups(t, prefix, ref) })
	t.Run("SeriesAndLabels", func(t *testing.T) { s.seriesAndLabels(t, prefix, ref) })
	t.Run("BadRequests", func(t *testing.T) { s.badRequests(t) })
	t.Run("PartialReadsWarn", func(t *testing.T) { s.partialReads(t, prefix) })
	t.Run("RemoteWriteAndRead", func(t *testing.T) { s.remoteWriteAndRead(t, prefix) })
}

func expr(e, prefix string) string { return strings.ReplaceAll(e, "%s", prefix) }

func (s *Server) rangeQueries(t *testing.T, prefix string, ref *Reference) {
	ctx := context.Background()
	now := s.Env.Clock.Now()
	for _, c := range []struct {
		back, length, step time.Duration
	}{
		{3 * time.Hour, time.Hour, 30 * time.Second},
		{20 * time.Hour, 16 * time.Hour, 10 * time.Minute},
		{90 * time.Minute, 2 * time.Hour, time.Minute}, // past the end of the samples
	} {
		rg := v1.Range{Start: now.Add(-c.back), End: now.Add(-c.back + c.length), Step: c.step}
		for _, e := range Exprs {
			qs := expr(e, prefix)
			got, _, _, err := s.API.QueryRange(ctx, qs, rg)
			if err != nil {
				t.Fatalf("%s over %v: %v", qs, rg, err)
			}
			want, err := ref.Range(qs, rg.Start, rg.End, rg.Step)
			if err != nil {
				t.Fatalf("%s on the reference: %v", qs, err)
			}
			if d := Diff(got, want); d != "" {
				t.Fatalf("%s over %v..%v step %v: %s", qs, rg.Start, rg.End, rg.Step, d)
			}
		}
	}
}

// concurrentQueries asks every expression at once, several times over:
// the engine pools the slices of its answers, and an answer must be
// encoded before its query hands them back, or a query running beside it
// fills them with its own points.
func (s *Server) concurrentQueries(t *testing.T, prefix string, ref *Reference) {
	now := s.Env.Clock.Now()
	rg := v1.Range{Start: now.Add(-3 * time.Hour), End: now.Add(-2 * time.Hour), Step: 30 * time.Second}
	want := make([]model.Value, len(Exprs))
	for i, e := range Exprs {
		var err error
		if want[i], err = ref.Range(expr(e, prefix), rg.Start, rg.End, rg.Step); err != nil {
			t.Fatalf("%s on the reference: %v", expr(e, prefix), err)
		}
	}
	var g errgroup.Group
	for i, e := range Exprs {
		qs := expr(e, prefix)
		g.Go(func() error {
			for range 8 {
				got, _, _, err := s.API.QueryRange(context.Background(), qs, rg)
				if err != nil {
					return fmt.Errorf("%s: %w", qs, err)
				}
				if d := Diff(got, want[i]); d != "" {
					return fmt.Errorf("%s, asked beside the others: %s", qs, d)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// overTimeFromRollups asks functions that rollup windows answer, over
// ranges and steps the windows tile: the answers equal the engine's over
// the raw samples, and no raw partition is read.
func (s *Server) overTimeFromRollups(t *testing.T, prefix string, ref *Reference) {
	now := s.Env.Clock.Now()
	// A second gateway over the same store whose exact horizon is an
	// hour: counters and quantiles further back read the rollups.
	approximating := NewServerWith(t, s.Env.Store, querytest.Options{Pyramid: s.Env.Pyramid, Clock: s.Env.Clock, Configure: func(c *gateway.Config) {
		c.Prometheus.ExactWithin = time.Hour
	}})
	end := now.Add(-3 * time.Hour).Truncate(time.Hour)
	// Counters (rate, increase) with resets come from the rollups' counter
	// summaries, within 1 % of the engine's over the raw samples (only the
	// extrapolation at a range's ends may differ); quantiles from their
	// sketches; the others exactly.
	for _, c := range []struct {
		expr string
		step time.Duration
		rel  float64
	}{
		{`max_over_time(%s_temperature[1h])`, time.Hour, 0},
		{`min_over_time(%s_temperature[2h])`, time.Hour, 0},
		{`sum by (job) (sum_over_time(%s_requests_total[30m]))`, 10 * time.Minute, 0},
		{`avg_over_time(%s_temperature[1h])`, time.Hour, 0},
		{`present_over_time(%s_latency_seconds_sum[15m])`, 15 * time.Minute, 0},
		{`max_over_time(%s_temperature[1h]) - min_over_time(%s_temperature[1h])`, 20 * time.Minute, 0},
		{`rate(%s_requests_total[1h])`, time.Hour, 1e-9},
		{`increase(%s_requests_total[2h])`, time.Hour, 0.01},
		{`sum by (job) (rate(%s_requests_total[2h]))`, time.Hour, 0.01},
		{`rate(%s_latency_seconds_bucket[2h])`, 2 * time.Hour, 0.01},
		// From the windows' sketches, interpolated between order
		// statistics as the engine does: within the sketches' 1 %.
		{`quantile_over_time(0.9, %s_temperature[1h])`, time.Hour, 0.01},
		{`max by (job) (quantile_over_time(0.5, %s_temperature[1h]))`, time.Hour, 0.01},
	} {
		qs := expr(c.expr, prefix)
		rg := v1.Range{Start: end.Add(-16 * time.Hour), End: end, Step: c.step}
		want, err := ref.Range(qs, rg.Start, rg.End, rg.Step)
		if err != nil {
			t.Fatalf("%s on the reference: %v", qs, err)
		}
		// Answers within 1 % are given only past the exact horizon (by
		// default the raw tier's retention): on data the raw tier
		// holds, these read raw points and equal the reference.
		on := s
		if c.rel > 0 {
			s.Tables()
			got, _, _, err := s.API.QueryRange(context.Background(), qs, rg)
			if err != nil {
				t.Fatalf("%s: %v", qs, err)
			}
			if d := Diff(got, want); d != "" {
				t.Fatalf("%s step %v within the raw tier: %s", qs, rg.Step, d)
			}
			if read := s.Tables(); read[tiers.TableRaw] == 0 {
				t.Fatalf("%s step %v read %v within the raw tier, want raw points", qs, rg.Step, read)
			}
			on = approximating
		}
		on.Tables()
		got, _, _, err := on.API.QueryRange(context.Background(), qs, rg)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		read := on.Tables()
		d := Diff(got, want)
		if c.rel > 0 {
			d = DiffWithin(got, want, c.rel)
		}
		if d != "" {
			t.Fatalf("%s step %v: %s", qs, rg.Step, d)
		}
		if read[tiers.TableRaw] > 0 || len(read) == 0 {
			t.Fatalf("%s step %v read %v, want rollup tables alone", qs, rg.Step, read)
		}
	}
	// A step the windows do not tile, or a function they cannot answer:
	// raw points.
	for _, qs := range []string{`max_over_time(%s_temperature[1h])`, `count_over_time(%s_temperature[1h])`, `rate(%s_requests_total[30m])`} {
		step := 90 * time.Second // no tier step divides it
		switch {
		case strings.HasPrefix(qs, "count"):
			step = time.Hour
		case strings.HasPrefix(qs, "rate"):
			step = 10 * time.Minute // a counter's windows must be an hour at least
		}
		s.Tables()
		if _, _, _, err := s.API.QueryRange(context.Background(), expr(qs, prefix), v1.Range{Start: end.Add(-2 * time.Hour), End: end, Step: step}); err != nil {
			t.Fatal(err)
		}
		if read := s.Tables(); read[tiers.TableRaw] == 0 {
			t.Fatalf("%s step %v read %v, want raw points", qs, step, read)
		}
	}
	// Evaluations off the hour windows' grid, though the query's end is on
	// it (the step does not divide end-start), and a selector offset under
	// a subquery, whose steps the windows tile but whose ranges the offset
	// moves off them: the reference's answers exactly, even past the exact
	// horizon — from raw points for counters and quantiles, which need
	// windows of the range; max_over_time may read half-hour windows.
	for _, c := range []struct {
		expr string
		raw  bool
	}{
		{`rate(%s_requests_total[1h])`, true},
		{`max_over_time(%s_temperature[1h])`, false},
		{`quantile_over_time(0.9, %s_temperature[1h])`, true},
		{`max_over_time(rate(%s_requests_total[1h] offset 30m)[6h:1h])`, true},
	} {
		qs := expr(c.expr, prefix)
		rg := v1.Range{Start: end.Add(-8*time.Hour + 30*time.Minute), End: end, Step: time.Hour}
		if strings.Contains(qs, "offset") {
			rg.Start = end.Add(-8 * time.Hour)
		}
		want, err := ref.Range(qs, rg.Start, rg.End, rg.Step)
		if err != nil {
			t.Fatalf("%s on the reference: %v", qs, err)
		}
		approximating.Tables()
		got, _, _, err := approximating.API.QueryRange(context.Background(), qs, rg)
		if err != nil {
			t.Fatal(err)
		}
		if d := Diff(got, want); d != "" {
			t.Fatalf("%s over %v..%v step %v: %s", qs, rg.Start, rg.End, rg.Step, d)
		}
		if read := approximating.Tables(); c.raw && read[tiers.TableRaw] == 0 {
			t.Fatalf("%s over %v..%v read %v, want raw points", qs, rg.Start, rg.End, read)
		}
	}
}

func (s *Server) instantQueries(t *testing.T, prefix string, ref *Reference) {
	ctx := context.Background()
	now := s.Env.Clock.Now()
	for _, back := range []time.Duration{2 * time.Hour, 7*time.Hour + 13*time.Second, 23 * time.Hour, time.Minute} {
		at := now.Add(-back)
		for _, e := range Exprs {
			qs := expr(e, prefix)
			got, _, _, err := s.API.Query(ctx, qs, at)
			if err != nil {
				t.Fatalf("%s at %v: %v", qs, at, err)
			}
			want, err := ref.Instant(qs, at)
			if err != nil {
				t.Fatalf("%s on the reference: %v", qs, err)
			}
			if d := Diff(got, want); d != "" {
				t.Fatalf("%s at %v: %s", qs, at, d)
			}
		}
	}
}

func (s *Server) seriesAndLabels(t *testing.T, prefix string, ref *Reference) {
	ctx := context.Background()
	now := s.Env.Clock.Now()
	start, end := now.Add(-48*time.Hour), now
	for _, sel := range []string{prefix + `_requests_total`, `{job="api",__name__=~"` + prefix + `.*"}`, `tsgate{series=~"` + prefix + `.*"}`} {
		got, _, _, err := s.API.Series(ctx, []string{sel}, start, end)
		if err != nil {
			t.Fatal(err)
		}
		want := ref.Listed(sel)
		var gotSets []string
		for _, ls := range got {
			gotSets = append(gotSets, ls.String())
		}
		slices.Sort(gotSets)
		if !slices.Equal(gotSets, want) {
			t.Fatalf("/series %s = %v, want %v", sel, gotSets, want)
		}
	}
	names, _, _, err := s.API.LabelNames(ctx, []string{`{__name__=~"` + prefix + `.*"}`}, start, end)
	if err != nil || !slices.Equal(names, model.LabelNames{"__name__", "instance", "job", "le"}) {
		t.Fatalf("/labels = %v, %v", names, err)
	}
	values, _, _, err := s.API.LabelValues(ctx, "job", []string{`{__name__=~"` + prefix + `.*"}`}, start, end)
	if err != nil || len(values) != 2 || values[0] != "api" || values[1] != "batch" {
		t.Fatalf("/label/job/values = %v, %v", values, err)
	}
	all, _, _, err := s.API.LabelNames(ctx, nil, start, end)
	if err != nil || !slices.Contains(all, "job") || !slices.Contains(all, "series") {
		t.Fatalf("/labels without match[] = %v, %v: the labelled series' names and, for the unlabelled ones, series", all, err)
	}
}

func (s *Server) badRequests(t *testing.T) {
	ctx := context.Background()
	now := s.Env.Clock.Now()
	for _, qs := range []string{`rate(x[5m]`, `sum by (job (x)`, `{}`, `x{job!="a"} and`} {
		_, _, _, err := s.API.Query(ctx, qs, now)
		var ae *v1.Error
		if err == nil || !asAPIError(err, &ae) || ae.Type != v1.ErrBadData {
			t.Fatalf("%s: %v, want bad_data", qs, err)
		}
	}
	if _, _, _, err := s.API.QueryRange(ctx, `vector(1)`, v1.Range{Start: now.Add(-24 * time.Hour), End: now, Step: time.Second}); err == nil {
		t.Fatal("a range of more than 11,000 steps was evaluated")
	}
}

// partialReads slows every partition read so that a short timeout cuts
// the reads short: the answer is evaluated on what was read, with a
// warning that says so.
func (s *Server) partialReads(t *testing.T, prefix string) {
	ctx := context.Background()
	now := s.Env.Clock.Now()
	s.tables.delay.Store(int64(400 * time.Millisecond))
	defer s.tables.delay.Store(0)
	_, warnings, _, err := s.API.QueryRange(ctx, expr(`avg_over_time(%s_temperature[10m])`, prefix),
		v1.Range{Start: now.Add(-20 * time.Hour), End: now, Step: 10 * time.Minute}, v1.WithTimeout(time.Second))
	if err != nil {
		t.Fatalf("a slow read: %v, want an answer with warnings", err)
	}
	partial := false
	for _, w := range warnings {
		partial = partial || strings.Contains(w, "partial: slo")
	}
	if !partial {
		t.Fatalf("a read cut short answered without a warning: %v", warnings)
	}
}

func asAPIError(err error, target **v1.Error) bool {
	e, ok := err.(*v1.Error)
	if ok {
		*target = e
	}
	return ok
}

// Diff compares two answers of the API: the same series (by labels) in
// the same order for matrices, the same samples, values equal to float
// precision; "" when equal.
func Diff(got, want model.Value) string {
	if got.Type() != want.Type() {
		return fmt.Sprintf("a %s, want a %s", got.Type(), want.Type())
	}
	switch g := got.(type) {
	case model.Matrix:
		w := want.(model.Matrix)
		if len(g) != len(w) {
			return fmt.Sprintf("%d series %v, want %d %v", len(g), metrics(g), len(w), metrics(w))
		}
		for i := range g {
			if !g[i].Metric.Equal(w[i].Metric) {
				return fmt.Sprintf("series %d is %s, want %s", i, g[i].Metric, w[i].Metric)
			}
			if len(g[i].Values) != len(w[i].Values) {
				return fmt.Sprintf("%s: %d samples, want %d", g[i].Metric, len(g[i].Values), len(w[i].Values))
			}
			for k := range g[i].Values {
				if g[i].Values[k].Timestamp != w[i].Values[k].Timestamp || !same(float64(g[i].Values[k].Value), float64(w[i].Values[k].Value)) {
					return fmt.Sprintf("%s sample %d: %v, want %v", g[i].Metric, k, g[i].Values[k], w[i].Values[k])
				}
			}
		}
	case model.Vector:
		w := want.(model.Vector)
		if len(g) != len(w) {
			return fmt.Sprintf("%d samples %v, want %d %v", len(g), g, len(w), w)
		}
		byMetric := map[model.Fingerprint]*model.Sample{}
		for _, s := range w {
			byMetric[s.Metric.Fingerprint()] = s
		}
		for _, s := range g {
			ws, ok := byMetric[s.Metric.Fingerprint()]
			if !ok || ws.Timestamp != s.Timestamp || !same(float64(s.Value), float64(ws.Value)) {
				return fmt.Sprintf("%s: %v, want %v", s.Metric, s, ws)
			}
		}
	case *model.Scalar:
		w := want.(*model.Scalar)
		if g.Timestamp != w.Timestamp || !same(float64(g.Value), float64(w.Value)) {
			return fmt.Sprintf("%v, want %v", g, w)
		}
	}
	return ""
}

// DiffWithin is Diff for matrices whose values may differ by rel,
// relative to the larger magnitude (absolute near zero).
func DiffWithin(got, want model.Value, rel float64) string {
	g, ok1 := got.(model.Matrix)
	w, ok2 := want.(model.Matrix)
	if !ok1 || !ok2 {
		return fmt.Sprintf("want two matrices, got %s and %s", got.Type(), want.Type())
	}
	if gm, wm := metrics(g), metrics(w); !slices.Equal(gm, wm) {
		return fmt.Sprintf("series %v, want %v", gm, wm)
	}
	for i := range w {
		if len(g[i].Values) != len(w[i].Values) {
			return fmt.Sprintf("%s: %d points, want %d", w[i].Metric, len(g[i].Values), len(w[i].Values))
		}
		for k, wp := range w[i].Values {
			gp := g[i].Values[k]
			a, b := float64(gp.Value), float64(wp.Value)
			if gp.Timestamp != wp.Timestamp || math.Abs(a-b) > rel*max(math.Abs(a), math.Abs(b), 1e-9) {
				return fmt.Sprintf("%s: %v @ %v, want %v @ %v", w[i].Metric, gp.Value, gp.Timestamp, wp.Value, wp.Timestamp)
			}
		}
	}
	return ""
}

func metrics(m model.Matrix) []string {
	var out []string
	for _, s := range m {
		out = append(out, s.Metric.String())
	}
	return out
}

// same compares values to float precision: NaN equals NaN.
func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b))
}

// remoteWriteAndRead: a Prometheus server's remote write creates series
// with their labels under the id rule, whose samples PromQL reads back
// exactly; a stale marker ends a series for PromQL's lookback, as in
// Prometheus, and no other read sees it; a refused batch writes nothing;
// remote read returns what was written, stale marker included.
func (s *Server) remoteWriteAndRead(t *testing.T, prefix string) {
	now := s.Env.Clock.Now().UnixMilli()
	name := prefix + "_rw_total"
	series := []prompb.TimeSeries{}
	for _, inst := range []string{"a", "b"} {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "instance", Value: inst}, {Name: "job", Value: "rw"}}}
		for i := range 20 {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: now - 30*tiers.Minute + int64(i)*15_000 + 7, Value: float64(i * 3)})
		}
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: now - 24*tiers.Minute, Value: math.Float64frombits(value.StaleNaN)})
		series = append(series, ts)
	}
	if st, b := s.post(t, "/prometheus/api/v1/write", &prompb.WriteRequest{Timeseries: series}); st != 204 {
		t.Fatalf("remote write: %d %s", st, b)
	}
	wantID := params.LabelsID(tiers.Labels{"__name__": name, "instance": "a", "job": "rw"})
	var info struct {
		Labels map[string]string `json:"labels"`
	}
	if st, _, b := s.do(t, "GET", "/v1/series/"+wantID); st != 200 || json.Unmarshal(b, &info) != nil || info.Labels["instance"] != "a" || len(info.Labels) != 3 {
		t.Fatalf("the series %s: %d %s", wantID, st, b)
	}
	got, _, _, err := s.API.Query(context.Background(), fmt.Sprintf(`sum by (job) (max_over_time(%s[1h]))`, name), time.UnixMilli(now))
	if err != nil || len(got.(model.Vector)) != 1 || got.(model.Vector)[0].Value != 2*57 {
		t.Fatalf("the written series through PromQL: %v %v", got, err)
	}
	// The last sample (25m15s ago) is within the lookback 23 minutes ago,
	// but the stale marker after it ends the series; a minute earlier it
	// has not yet.
	for _, c := range []struct {
		ago  time.Duration
		want int
	}{{23 * time.Minute, 0}, {24*time.Minute + time.Second, 2}} {
		got, _, _, err := s.API.Query(context.Background(), name, time.UnixMilli(now).Add(-c.ago))
		if err != nil || len(got.(model.Vector)) != c.want {
			t.Fatalf("%s %v ago, the stale marker 24m ago: %v %v, want %d series", name, c.ago, got, err, c.want)
		}
	}
	// Native reads and rollups pass over the marker: 20 points, and
	// minute windows that count 20 points and sum them.
	if _, err := s.Env.Rollups.RunOnce(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for _, resolution := range []string{"raw", "1m"} {
		st, _, b := s.do(t, "GET", fmt.Sprintf("/v1/series/%s/points?from=%d&to=%d&resolution=%s&agg=count,sum", wantID, now-tiers.Hour, now, resolution))
		var page struct {
			Points [][]float64 `json:"points"`
		}
		if st != 200 || json.Unmarshal(b, &page) != nil {
			t.Fatalf("native read at %s: %d %s", resolution, st, b)
		}
		count, sum := 0.0, 0.0
		for _, p := range page.Points {
			if resolution == "raw" {
				count, sum = count+1, sum+p[1]
			} else {
				if p[1] == 0 {
					t.Fatalf("a minute window without points: %s", b)
				}
				count, sum = count+p[1], sum+p[2]
			}
		}
		if count != 20 || sum != 3*190 {
			t.Fatalf("native read at %s: %v points, sum %v; want 20 and %d: %s", resolution, count, sum, 3*190, b)
		}
	}
	// Refused whole: one sample too old; a native histogram; not snappy.
	old := []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: prefix + "_refused"}}, Samples: []prompb.Sample{{Timestamp: now - 60*tiers.Second, Value: 1}, {Timestamp: now - 30*tiers.Day, Value: 1}}}}
	if st, b := s.post(t, "/prometheus/api/v1/write", &prompb.WriteRequest{Timeseries: old}); st != 400 || !strings.Contains(string(b), "retention") {
		t.Fatalf("a sample older than the raw tier keeps: %d %s", st, b)
	}
	hist := []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: prefix + "_refused"}}, Histograms: []prompb.Histogram{{Timestamp: now}}}}
	if st, b := s.post(t, "/prometheus/api/v1/write", &prompb.WriteRequest{Timeseries: hist}); st != 400 || !strings.Contains(string(b), "native histograms") {
		t.Fatalf("a native histogram: %d %s", st, b)
	}
	if st, _, b := s.do(t, "GET", "/v1/series/"+params.LabelsID(tiers.Labels{"__name__": prefix + "_refused"})); st != 404 {
		t.Fatalf("a refused batch created its series: %d %s", st, b)
	}
	// Remote read: the same samples.
	rr := prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: now - tiers.Hour, EndTimestampMs: now,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: name}, {Type: prompb.LabelMatcher_EQ, Name: "instance", Value: "b"}}}}}
	st, b := s.post(t, "/prometheus/api/v1/read", &rr)
	if st != 200 {
		t.Fatalf("remote read: %d %s", st, b)
	}
	raw, err := snappy.Decode(nil, b)
	var resp prompb.ReadResponse
	if err != nil || resp.Unmarshal(raw) != nil || len(resp.Results) != 1 || len(resp.Results[0].Timeseries) != 1 || len(resp.Results[0].Timeseries[0].Samples) != 21 || !value.IsStaleNaN(resp.Results[0].Timeseries[0].Samples[20].Value) {
		t.Fatalf("remote read answered %v %+v", err, resp)
	}
}

// post sends a protobuf message snappy-compressed, as Prometheus does.
func (s *Server) post(t *testing.T, path string, m interface{ Marshal() ([]byte, error) }) (int, []byte) {
	t.Helper()
	raw, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.URL+path, bytes.NewReader(snappy.Encode(nil, raw)))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *Server) do(t *testing.T, method, path string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
