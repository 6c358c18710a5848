package query

// Reads of the series a selector matches: one answer, one budget, one
// cursor. Each series is read as a read of its own, with the same range
// (resolved once, so that relative times cannot drift between series)
// and the same parameters; the pages are then cut at one watermark, the
// position every series has been read through, so that the answer keeps
// the paging law across all of them: following next_cursor yields each
// series' points exactly once, and a group's window is sent only once
// every series of the group has been read through it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tsgate/tsgate/cursor"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Selecting finds the series of a selector (index.Index).
type Selecting interface {
	Select(ctx context.Context, param string, sels []index.Selector, max int) ([]tiers.SeriesInfo, error)
}

// ManyRequest is a read of every series some selectors match: the
// parameters of Request, shared (Series is ignored; Cursor is the cursor
// of the whole answer), the selectors, and how to group.
type ManyRequest struct {
	Request
	// Match are the selectors; the answer reads the series any matches.
	Match []index.Selector
	// Grouped aggregates the series into groups of equal GroupBy labels
	// (none: one group of all), window by window.
	Grouped bool
	GroupBy []string
	// Param is the name of the selectors' parameter in errors ("match",
	// "queries[2].match"); a parameter x of the shared request is named
	// by Rename(x).
	Param  string
	Rename func(string) string
}

// ManyResult is the answer for one series, or for one group.
type ManyResult struct {
	// Series and Labels name the series of an ungrouped answer.
	Series string
	Labels tiers.Labels
	// Group is the group's values of the GroupBy labels, SeriesCount how
	// many series it folds.
	Group       tiers.Labels
	SeriesCount int
	// Head is what a read of the series says of itself: tier, window,
	// segments, aggregates.
	Head  *Head
	Items []Item
}

// ManyAnswer is one page of a many-series read.
type ManyAnswer struct {
	Results []ManyResult
	Trailer Trailer
	// Warnings of the reads, once each.
	Warnings []string
}

// manyReadConfig is what Many needs for reads of selectors.
type manyReadConfig struct {
	index   Selecting
	signer  *cursor.Signer
	pyramid tiers.Pyramid
	now     func() time.Time
	// maxSeries bounds the series one read may match.
	maxSeries int
}

// WithSelectors lets m read the series of selectors: through ix, with
// the engine's signer, pyramid and clock, at most maxSeries series per
// read.
func (m *Many) WithSelectors(ix Selecting, signer *cursor.Signer, p tiers.Pyramid, now func() time.Time, maxSeries int) *Many {
	m.sel = &manyReadConfig{index: ix, signer: signer, pyramid: p, now: now, maxSeries: maxSeries}
	return m
}

// MaxSeries is the bound of the series one read may match.
func (m *Many) MaxSeries() int {
	if m.sel == nil {
		return 0
	}
	return m.sel.maxSeries
}

// manyBinding digests what defines a many-series answer: the selectors,
// the grouping, and the shared parameters as a one-series read digests
// them.
func manyBinding(p *prepared, req ManyRequest) cursor.Binding {
	texts := make([]string, len(req.Match))
	for i, s := range req.Match {
		texts[i] = s.Text
	}
	slices.Sort(texts)
	group := "-"
	if req.Grouped {
		group = "by:" + strings.Join(req.GroupBy, ",")
	}
	b := p.bind()
	return cursor.Bind("many", strings.Join(texts, "\x00"), group, string(b[:]))
}

// Read answers one page of the read of every series req's selectors
// match. Errors come before any output: bad parameters (the selectors,
// group_by, the shared ones, the cursor), too many series, and, when no
// series could move at all, the budget or the store.
func (m *Many) Read(ctx context.Context, req ManyRequest) (*ManyAnswer, error) {
	if m.sel == nil {
		return nil, errors.New("query: this reader has no selectors")
	}
	rename := req.Rename
	if rename == nil {
		rename = func(s string) string { return s }
	}
	if req.Start.IsZero() {
		req.Start = time.Now()
	}
	now := m.sel.now().UnixMilli()
	shared := req.Request
	shared.Series = "selector" // a valid id: the shared parameters alone are checked
	p, err := shared.normalize(m.limits, now)
	var errs params.Errors
	errs = append(errs, params.List(params.Rename(err, rename))...)
	if req.Grouped {
		for _, name := range req.GroupBy {
			if name == tiers.SeriesLabel {
				continue
			}
			if err := params.LabelName(name); err != nil {
				errs.Add(rename("group_by"), "%s", err)
			}
		}
	}
	if len(req.Match) == 0 {
		errs.Add(req.Param, "required: at least one selector")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	binding := manyBinding(&p, req)
	span := p.span
	var cur *cursor.Cursor
	if req.Cursor != "" {
		c, err := m.sel.signer.Decode(req.Cursor, binding)
		if err != nil {
			return nil, params.Bad(rename("cursor"), "%s", err)
		}
		cur, span = &c, tiers.Span{From: c.From, To: c.To}
	}
	series, err := m.sel.index.Select(ctx, req.Param, req.Match, m.sel.maxSeries)
	if err != nil {
		return nil, err
	}
	ans := &ManyAnswer{Trailer: Trailer{Covered: span}}
	if len(series) == 0 {
		ans.Trailer.Stats.Elapsed = time.Since(req.Start)
		return ans, nil
	}

	// One read per series, of the same absolute range.
	reqs := make([]Request, len(series))
	for i, info := range series {
		r := req.Request
		r.Series, r.From, r.To, r.Cursor = info.ID, params.At(span.From), params.At(span.To), ""
		if cur != nil {
			pr, err := r.normalize(m.limits, now)
			if err != nil {
				return nil, err
			}
			r.Cursor = m.sel.signer.Encode(cursor.Cursor{Binding: pr.binding, From: cur.From, To: cur.To,
				Position: cur.Position, TierName: cur.TierName, TierStep: cur.TierStep, Step: cur.Step})
		}
		reqs[i] = r
	}
	type page struct {
		head    *Head
		items   []Item
		trailer Trailer
		err     error
	}
	pages := make([]page, len(reqs))
	var mu sync.Mutex
	meter := membudget.From(ctx).Meter()
	held := 0
	err = m.Each(ctx, req.Start, reqs, func(i int, res Result, err error) error {
		if err != nil {
			pages[i].err = err
			return nil
		}
		pages[i].head = res.Head()
		// Windows come one per step of the span, at most a page of them:
		// sized once rather than grown through doublings.
		if h := pages[i].head; h.Plan.Step > 0 && h.Limit > 0 {
			pages[i].items = make([]Item, 0, min(int((h.Span.To-h.Span.From)/h.Plan.Step)+1, h.Limit+1))
		}
		extra := 0
		for res.Next() {
			it := res.Item()
			if it.Row.X != nil {
				// A window's live sketch takes a kilobyte, its encoding
				// tens of bytes: held encoded until the answer is written.
				it.Row.X = it.Row.X.Compact(it.Row)
				extra += int(it.Row.ExtrasBytes())
			}
			pages[i].items = append(pages[i].items, it)
		}
		pages[i].trailer = res.Trailer()
		mu.Lock()
		defer mu.Unlock()
		held += len(pages[i].items)*itemBytes + extra
		return meter.Track(ctx, held)
	})
	if err != nil {
		return nil, err
	}

	// The first page that planned says what the answer is: tier, window.
	var plan *Head
	for _, pg := range pages {
		if pg.head != nil {
			plan = pg.head
			break
		}
	}
	if plan == nil {
		// Not one series could be read: the first error says why.
		for _, pg := range pages {
			if pg.err != nil {
				return nil, params.Rename(pg.err, rename)
			}
		}
		return ans, nil
	}
	if req.Grouped && plan.Plan.Step == 0 {
		return nil, params.Bad(rename("group_by"), "groups aggregate windows: ask for an aggregated resolution (resolution=1m, or max_points), not raw points")
	}
	desc := req.Desc
	start, end := span.From, plan.Plan.Read.To
	if desc {
		start, end = span.To, plan.Plan.Read.From
	}
	if cur != nil {
		start = cur.Position
	}

	// The watermark: the position every series was read through.
	wm := end
	var stopErr error
	for _, pg := range pages {
		pos := end
		switch {
		case pg.err != nil && errors.Is(pg.err, ErrSeriesNotFound):
			// Gone since it was selected: nothing of it to wait for.
		case pg.err != nil:
			pos, stopErr = start, cmp.Or(stopErr, pg.err)
		case pg.trailer.Err != nil:
			pos, stopErr = start, cmp.Or(stopErr, pg.trailer.Err)
		case pg.trailer.NextCursor == "":
			// Complete: covered stops at the range's end, the read at the
			// end of its last window.
		case desc:
			pos = pg.trailer.Covered.From
		default:
			pos = pg.trailer.Covered.To
		}
		if desc {
			wm = max(wm, pos)
		} else {
			wm = min(wm, pos)
		}
		ans.Trailer.Stats.add(pg.trailer.Stats)
		if pg.trailer.Partial && !ans.Trailer.Partial {
			ans.Trailer.Partial, ans.Trailer.Reason = true, pg.trailer.Reason
		}
		if pg.head != nil {
			for _, w := range pg.head.Warnings {
				if !slices.Contains(ans.Warnings, w) {
					ans.Warnings = append(ans.Warnings, w)
				}
			}
		}
	}
	within := func(t int64) bool {
		if desc {
			return t >= wm
		}
		return t < wm
	}
	if wm == start {
		// Nothing moved: a page that would send itself again forever.
		if stopErr == nil {
			stopErr = ErrBudget
		}
		if errors.Is(stopErr, ErrUnavailable) || errors.Is(stopErr, ErrBudget) {
			return nil, stopErr
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, stopErr)
	}
	if stopErr != nil {
		ans.Trailer.Partial = true
		if ans.Trailer.Reason == "" {
			ans.Trailer.Reason = "unavailable"
			if errors.Is(stopErr, ErrBudget) {
				ans.Trailer.Reason = "slo"
			}
		}
	}
	if req.Deny && ans.Trailer.Partial {
		if ans.Trailer.Reason == "slo" {
			return nil, ErrBudget
		}
		return nil, ErrUnavailable
	}

	if req.Grouped {
		ans.Results = groups(series, func(i int) ([]Item, *Head) { return pages[i].items, pages[i].head }, req.GroupBy, within, desc, plan)
	} else {
		for i, info := range series {
			pg := pages[i]
			if pg.head == nil {
				continue
			}
			items := pg.items
			k := 0
			for k < len(items) && within(items[k].T) {
				k++
			}
			ans.Results = append(ans.Results, ManyResult{Series: info.ID, Labels: info.Labels, Head: pg.head, Items: items[:k]})
		}
	}
	if wm != end {
		ans.Trailer.NextCursor = m.sel.signer.Encode(cursor.Cursor{Binding: binding, From: span.From, To: span.To,
			Position: wm, TierName: plan.Plan.TierName, TierStep: m.sel.pyramid[plan.Plan.Tier].Step, Step: plan.Plan.Step})
	}
	if desc {
		ans.Trailer.Covered = tiers.Span{From: max(min(wm, span.To), span.From), To: span.To}
	} else {
		ans.Trailer.Covered = tiers.Span{From: span.From, To: min(max(wm, span.From), span.To)}
	}
	if wm == end {
		ans.Trailer.Covered = span
	}
	ans.Trailer.Stats.Elapsed = time.Since(req.Start)
	return ans, nil
}

// itemBytes is what an item held in memory costs, for the budget.
const itemBytes = 64

// groups folds the series' windows into one result per group of equal
// GroupBy labels (a label a series lacks counts as empty), each window
// min, max, sum and count over every point of the group's series in it,
// and the merged sketch for percentiles; avg is that sum over that count.
func groups(series []tiers.SeriesInfo, pageOf func(i int) ([]Item, *Head), by []string, within func(int64) bool, desc bool, plan *Head) []ManyResult {
	type group struct {
		labels  tiers.Labels
		key     string
		count   int
		head    *Head
		windows map[int64]tiers.Row
	}
	byKey := map[string]*group{}
	// Percentiles of a group's window are of all its series' points:
	// their sketches merge.
	extras := NeedsExtras(plan.Aggs)
	for i, info := range series {
		items, head := pageOf(i)
		if head == nil {
			continue
		}
		gl := tiers.Labels{}
		var key strings.Builder
		for _, name := range by {
			v := info.Labels[name]
			if name == tiers.SeriesLabel {
				v = info.ID
			}
			gl[name] = v
			key.WriteString(strconv.Quote(v))
			key.WriteByte(',')
		}
		g := byKey[key.String()]
		if g == nil {
			g = &group{labels: gl, key: key.String(), head: head, windows: map[int64]tiers.Row{}}
			byKey[g.key] = g
		}
		g.count++
		for _, it := range items {
			if !within(it.T) {
				break
			}
			acc := g.windows[it.T]
			if extras {
				acc.AddSeries(it.Row)
			} else {
				acc.Add(it.Row)
			}
			g.windows[it.T] = acc
		}
	}
	out := make([]ManyResult, 0, len(byKey))
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		g := byKey[key]
		ts := slices.Sorted(maps.Keys(g.windows))
		if desc {
			slices.Reverse(ts)
		}
		items := make([]Item, len(ts))
		for k, t := range ts {
			items[k] = Item{T: t, Row: g.windows[t]}
		}
		head := *plan
		head.Series = ""
		out = append(out, ManyResult{Group: g.labels, SeriesCount: g.count, Head: &head, Items: items})
	}
	return out
}

// add sums o into s.
func (s *Stats) add(o Stats) {
	s.Buckets += o.Buckets
	s.Partitions += o.Partitions
	s.RowsRead += o.RowsRead
	s.CacheHits += o.CacheHits
}

// ManyExplanation is the plan of a many-series read: how many series it
// reads, the plan of their reads, and the partitions each tier serves.
type ManyExplanation struct {
	Series int
	Plan   Plan
	Tiers  []TierPartitions
}

// TierPartitions counts the partitions one tier serves.
type TierPartitions struct {
	Name       string
	Partitions int
}

// Explain plans a many-series read without reading any point: the series
// the selectors match, and every partition their reads would open.
func (m *Many) Explain(ctx context.Context, req ManyRequest) (*ManyExplanation, error) {
	if m.sel == nil {
		return nil, errors.New("query: this reader has no selectors")
	}
	now := m.sel.now().UnixMilli()
	shared := req.Request
	shared.Series, shared.Cursor = "selector", ""
	p, err := shared.normalize(m.limits, now)
	if err != nil {
		return nil, err
	}
	if len(req.Match) == 0 {
		return nil, params.Bad(req.Param, "required: at least one selector")
	}
	series, err := m.sel.index.Select(ctx, req.Param, req.Match, m.sel.maxSeries)
	if err != nil {
		return nil, err
	}
	ex := &ManyExplanation{Series: len(series)}
	counts := map[string]int{}
	var order []string
	for _, info := range series {
		r := req.Request
		r.Series, r.From, r.To, r.Cursor = info.ID, params.At(p.span.From), params.At(p.span.To), ""
		e, err := m.e.Explain(ctx, r)
		if errors.Is(err, ErrSeriesNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ex.Plan = e.Plan
		for b := range e.Buckets {
			if _, ok := counts[b.TierName]; !ok {
				order = append(order, b.TierName)
			}
			counts[b.TierName] += b.Partitions
		}
	}
	for _, name := range order {
		ex.Tiers = append(ex.Tiers, TierPartitions{Name: name, Partitions: counts[name]})
	}
	return ex, nil
}
