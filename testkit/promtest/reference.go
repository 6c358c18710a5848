package promtest

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// Reference is the brute force of the suite: Prometheus' engine, set up as
// the gateway sets it up, over the samples that were written, kept in
// plain slices.
type Reference struct {
	All []promql.Series
}

var refEngine = promql.NewEngine(promql.EngineOpts{
	MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
	EnableAtModifier: true, EnableNegativeOffset: true,
	NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
})

// Range evaluates qs over [start, end] at step.
func (r *Reference) Range(qs string, start, end time.Time, step time.Duration) (model.Value, error) {
	q, err := refEngine.NewRangeQuery(context.Background(), r, nil, qs, start, end, step)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	return toModel(q.Exec(context.Background()))
}

// Instant evaluates qs at at.
func (r *Reference) Instant(qs string, at time.Time) (model.Value, error) {
	q, err := refEngine.NewInstantQuery(context.Background(), r, nil, qs, at)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	return toModel(q.Exec(context.Background()))
}

// Listed is what /series of sel lists: the label sets, as text, sorted.
func (r *Reference) Listed(sel string) []string {
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(sel)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, s := range r.All {
		if matchAll(ms, s.Metric) {
			out = append(out, model.LabelSet(toLabelSet(s.Metric)).String())
		}
	}
	slices.Sort(out)
	return out
}

func matchAll(ms []*labels.Matcher, l labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func toLabelSet(l labels.Labels) model.LabelSet {
	out := model.LabelSet{}
	l.Range(func(x labels.Label) { out[model.LabelName(x.Name)] = model.LabelValue(x.Value) })
	return out
}

func toModel(res *promql.Result) (model.Value, error) {
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Matrix:
		out := model.Matrix{}
		for _, s := range v {
			ss := &model.SampleStream{Metric: model.Metric(toLabelSet(s.Metric))}
			for _, p := range s.Floats {
				ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.Time(p.T), Value: model.SampleValue(p.F)})
			}
			out = append(out, ss)
		}
		return out, nil
	case promql.Vector:
		out := model.Vector{}
		for _, s := range v {
			out = append(out, &model.Sample{Metric: model.Metric(toLabelSet(s.Metric)), Timestamp: model.Time(s.T), Value: model.SampleValue(s.F)})
		}
		return out, nil
	case promql.Scalar:
		return &model.Scalar{Timestamp: model.Time(v.T), Value: model.SampleValue(v.V)}, nil
	}
	return nil, nil
}

// The reference storage: every series, filtered by the matchers and the
// time range.

func (r *Reference) Querier(mint, maxt int64) (storage.Querier, error) {
	return refQuerier{r: r, mint: mint, maxt: maxt}, nil
}

type refQuerier struct {
	r          *Reference
	mint, maxt int64
}

func (q refQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	var out []storage.Series
	for _, s := range q.r.All {
		if !matchAll(ms, s.Metric) {
			continue
		}
		var samples []chunks.Sample
		for _, p := range s.Floats {
			if p.T >= mint && p.T <= maxt {
				samples = append(samples, refSample{p.T, p.F})
			}
		}
		if len(samples) > 0 {
			out = append(out, storage.NewListSeries(s.Metric, samples))
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &refSet{series: out, i: -1}
}

func (refQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (refQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (refQuerier) Close() error { return nil }

type refSample struct {
	t int64
	f float64
}

func (s refSample) T() int64                      { return s.t }
func (s refSample) ST() int64                     { return 0 }
func (s refSample) F() float64                    { return s.f }
func (s refSample) H() *histogram.Histogram       { return nil }
func (s refSample) FH() *histogram.FloatHistogram { return nil }
func (s refSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s refSample) Copy() chunks.Sample           { return s }

type refSet struct {
	series []storage.Series
	i      int
}

func (s *refSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *refSet) At() storage.Series                { return s.series[s.i] }
func (s *refSet) Err() error                        { return nil }
func (s *refSet) Warnings() annotations.Annotations { return nil }
