package promapi

// The storage Prometheus' PromQL engine reads: a storage.Queryable whose
// Select finds series through the label index and reads their points
// through the engine's reads of many series (query.Many), page after
// page, under the query's budget.
//
// A labelled series is its labels. A series written without labels keeps
// the second round's name, {__name__="tsgate", series="<id>"}: it is
// selected when every matcher accepts that label set, and found through
// the registry's listing (the id's literal prefix narrows it).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// metricName and seriesLabel name the series written without labels.
const (
	metricName  = "tsgate"
	seriesLabel = tiers.SeriesLabel
)

// readParallelism is how many series one Select reads at once; each read
// fans out over its partitions.
const readParallelism = 8

// queryable is the storage of one API request: its budget and bounds.
type queryable struct {
	a *API
	// fromTiers lets a selector under a function that rollup windows
	// answer read them (windowsFor): PromQL queries, whose engine applies
	// the function; not remote read, whose client expects samples.
	fromTiers bool
	// facts are what the query's expression says of its selectors that
	// the select hints do not (see windowsFor).
	facts selectFacts
	// maxSeries bounds the series one Select may read.
	maxSeries int
	mu        sync.Mutex
	warnings  *annotations.Annotations
}

// warn records a warning of the query's reads (a partial answer).
func (q *queryable) warn(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.warnings == nil {
		q.warnings = annotations.New()
	}
	q.warnings.Add(err)
}

// annotations are the warnings of the query's reads.
func (q *queryable) annotations() annotations.Annotations {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.warnings == nil {
		return nil
	}
	return *q.warnings
}

func (q *queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{q: q, mint: mint, maxt: maxt}, nil
}

type querier struct {
	q          *queryable
	mint, maxt int64
}

func (*querier) Close() error { return nil }

// found is a series a selector found: its id and the labels PromQL sees.
type found struct {
	id     string
	labels labels.Labels
}

// selectSeries finds the series the matchers select, ascending by their
// labels.
func (q *querier) selectSeries(ctx context.Context, ms []*labels.Matcher) ([]found, error) {
	a := q.q.a
	var out []found
	restrictive := false
	for _, m := range ms {
		if !m.Matches("") {
			restrictive = true
		}
	}
	if restrictive {
		ids, ls, err := a.deps.Index.Matching(ctx, []index.Selector{{Matchers: ms}})
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if len(ls[id]) > 0 {
				out = append(out, found{id, labelsOf(ls[id])})
			}
		}
	}
	unlabelled, err := q.unlabelled(ctx, ms)
	if err != nil {
		return nil, err
	}
	out = append(out, unlabelled...)
	if len(out) > q.q.maxSeries {
		return nil, &apiError{typ: errExec, limit: "max_series",
			msg: fmt.Sprintf("the selector matches %d series, more than %d (--prometheus-max-series)", len(out), q.q.maxSeries)}
	}
	slices.SortFunc(out, func(a, b found) int { return labels.Compare(a.labels, b.labels) })
	return out, nil
}

// unlabelled finds the series written without labels that the matchers
// select as {__name__="tsgate", series="<id>"}.
func (q *querier) unlabelled(ctx context.Context, ms []*labels.Matcher) ([]found, error) {
	var idm *labels.Matcher
	for _, m := range ms {
		switch m.Name {
		case model.MetricNameLabel:
			if !m.Matches(metricName) {
				return nil, nil
			}
		case seriesLabel:
			idm = m
		default:
			if !m.Matches("") {
				return nil, nil
			}
		}
	}
	a := q.q.a
	accept := func(info tiers.SeriesInfo) bool {
		return len(info.Labels) == 0 && (idm == nil || idm.Matches(info.ID))
	}
	if idm != nil && idm.Type == labels.MatchEqual {
		info, err := a.deps.Registry.LookupSeries(ctx, idm.Value)
		if errors.Is(err, tiers.ErrNotFound) || err == nil && !accept(info) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []found{{info.ID, unlabelledSet(info.ID)}}, nil
	}
	prefix := ""
	if idm != nil && idm.Type == labels.MatchRegexp {
		if re, err := regexp.Compile(idm.Value); err == nil {
			prefix, _ = re.LiteralPrefix()
		}
		if prefix != "" && params.SeriesPrefix(prefix) != nil {
			return nil, nil
		}
	}
	var out []found
	after := ""
	for {
		page, err := a.deps.Registry.ListSeries(ctx, prefix, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, info := range page {
			if accept(info) {
				out = append(out, found{info.ID, unlabelledSet(info.ID)})
				if len(out) > q.q.maxSeries {
					return out, nil
				}
			}
		}
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// unlabelledSample is some of the series written without labels (those
// among the first 10,000 of the registry): enough to tell whether there
// are any, which the label listings need, without reading a registry of
// millions.
func (q *querier) unlabelledSample(ctx context.Context) ([]found, error) {
	page, err := q.q.a.deps.Registry.ListSeries(ctx, "", "", 10000)
	if err != nil {
		return nil, err
	}
	var out []found
	for _, info := range page {
		if len(info.Labels) == 0 {
			out = append(out, found{info.ID, unlabelledSet(info.ID)})
		}
	}
	return out, nil
}

// lastT is the time of the last sample, or from when there is none.
func lastT(pts []chunks.Sample, from int64) int64 {
	if len(pts) == 0 {
		return from
	}
	return pts[len(pts)-1].T()
}

func unlabelledSet(id string) labels.Labels {
	return labels.FromStrings(model.MetricNameLabel, metricName, seriesLabel, id)
}

// labelsOf is a labelled series' label set.
func labelsOf(l tiers.Labels) labels.Labels {
	b := labels.NewScratchBuilder(len(l))
	for _, name := range l.Names() {
		b.Add(name, l[name])
	}
	b.Sort()
	return b.Labels()
}

func (q *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	series, err := q.selectSeries(ctx, ms)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	if len(series) == 0 || maxt < mint {
		return storage.EmptySeriesSet()
	}
	samples := make([][]chunks.Sample, len(series))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readParallelism)
	span := tiers.Span{From: max(mint, tiers.MinTime), To: min(maxt+1, tiers.MaxTime)}
	// The reads stop before the query's own deadline, so that what they
	// could read is evaluated, with a warning, rather than nothing.
	var slo time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		slo = max(time.Millisecond, time.Until(deadline)*4/5)
	}
	start := time.Now()
	var windows windowed
	if q.q.fromTiers && hints != nil {
		if key := selectorKey(ms, hints.Range); !q.q.facts.unaligned[key] {
			phi := math.NaN()
			if v, ok := q.q.facts.quantiles[key]; ok && hints.Func == "quantile_over_time" {
				phi = v
			}
			windows = windowsFor(q.q.a.deps.Pyramid, hints, phi, q.q.a.approximates(hints.Start))
		}
	}
	var tiered atomic.Bool
	for i, s := range series {
		g.Go(func() error {
			pts, fromTiers, err := q.read(gctx, s, span, windows, hints, slo, start)
			if fromTiers {
				tiered.Store(true)
			}
			samples[i] = pts
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return storage.ErrSeriesSet(err)
	}
	if tiered.Load() {
		q.q.a.deps.Metrics.servedFromTiers(windows.fn)
	}
	out := make([]storage.Series, 0, len(series))
	for i, s := range series {
		if len(samples[i]) > 0 {
			out = append(out, storage.NewListSeries(s.labels, samples[i]))
		}
	}
	return &seriesSet{series: out, i: -1}
}

// errRolledUpWithoutExtras says a window was rolled up before rollups
// kept counter summaries or sketches: the series is read from raw points
// instead.
var errRolledUpWithoutExtras = errors.New("a rollup window without the counter summary or sketch it needs")

// read reads one series over span (raw points; hints and slo as Select
// got them): as windows of w, when w has a width and the series' rollups
// can answer, else raw points. fromTiers says which it was. A read cut by
// the budget or the store returns what it read, with a warning.
func (q *querier) read(ctx context.Context, s found, span tiers.Span, w windowed, hints *storage.SelectHints, slo time.Duration, start time.Time) (pts []chunks.Sample, fromTiers bool, err error) {
	if w.width > 0 {
		windowSpan := tiers.Span{From: alignDown(hints.Start, w.width), To: alignDown(hints.End, w.width)}
		pts, err = q.readAs(ctx, s, windowSpan, w, slo, start)
		if !errors.Is(err, errRolledUpWithoutExtras) {
			return pts, true, err
		}
	}
	pts, err = q.readAs(ctx, s, span, windowed{}, slo, start)
	return pts, false, err
}

func (q *querier) readAs(ctx context.Context, s found, span tiers.Span, w windowed, slo time.Duration, start time.Time) ([]chunks.Sample, error) {
	req := query.Request{Series: s.id, From: params.At(span.From), To: params.At(span.To),
		Resolution: query.Raw, Limit: q.q.a.deps.MaxLimit, SLO: slo, Start: start, KeepStale: true}
	if w.width > 0 {
		req.Resolution = query.Windows(w.width)
		req.Aggs = []query.Agg{query.Min, query.Max, query.Sum, query.Count}
		req.KeepStale = false
		req.Extras = w.counter || w.sketch
	}
	var pts []chunks.Sample
	var run counterRun
	for it, err := range q.q.a.deps.Many.All(ctx, req, nil) {
		switch {
		case errors.Is(err, query.ErrSeriesNotFound):
			return nil, nil
		case errors.Is(err, query.ErrBudget), errors.Is(err, query.ErrUnavailable):
			// The points before the cut are all there are up to it:
			// evaluated, and said to be partial.
			reason := "slo"
			if errors.Is(err, query.ErrUnavailable) {
				reason = "unavailable"
			}
			q.q.warn(fmt.Errorf("partial: %s: the reads of %s stopped at %d of [%d, %d]", reason, s.labels, lastT(pts, span.From), span.From, span.To))
			return pts, nil
		case err != nil:
			return nil, err
		}
		switch {
		case w.counter:
			var ok bool
			if pts, ok = run.add(pts, it, w.width, w.thin); !ok {
				return nil, errRolledUpWithoutExtras
			}
		case w.sketch:
			if it.Row.X == nil || !it.Row.X.HasSketch() {
				return nil, errRolledUpWithoutExtras
			}
			pts = append(pts, w.sample(it))
		case w.width > 0:
			pts = append(pts, w.sample(it))
		default:
			pts = append(pts, sample{t: it.T, f: it.Row.Value()})
		}
	}
	return pts, nil
}

func (q *querier) LabelValues(ctx context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	series, err := q.selectSeries(ctx, ms)
	if err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	for _, s := range series {
		if v := s.labels.Get(name); v != "" {
			set[v] = true
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil, nil
}

func (q *querier) LabelNames(ctx context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	series, err := q.selectSeries(ctx, ms)
	if err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	for _, s := range series {
		s.labels.Range(func(l labels.Label) { set[l.Name] = true })
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil, nil
}

// sample is one float sample.
type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }

// seriesSet is the series of one Select, in label order.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
