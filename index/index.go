// Package index answers selectors: from PromQL vector selectors
// (cpu{host="a", dc=~"eu-.*"}) to the series that match them, through the
// label index the store keeps (tiers.LabelIndex), never by reading every
// series' metadata. Equality matchers narrow first, by intersecting their
// posting lists, as Prometheus does; a selector without one reads the
// postings of the values its first restrictive matcher accepts; what is
// left is checked against every matcher with the candidates' labels. The
// pseudo-label series is the id: it matches by id and, alone, reads the
// registry's listing.
package index

import (
	"cmp"
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Store is what selectors are answered from.
type Store interface {
	tiers.LabelIndex
	// LookupSeriesOf gives the series that exist among ids, with their
	// spans and labels, in one lookup; usually the series cache.
	tiers.RegistryBatch
	// ListSeries lists the registry by id.
	ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error)
}

// Selector is one parsed vector selector.
type Selector struct {
	Text     string
	Matchers []*labels.Matcher
}

// Parse parses the selectors of one parameter (param names it in errors)
// with Prometheus' parser. Each must have a matcher that does not match
// the empty string, as in Prometheus: {job!="x"} alone would select every
// series there is.
func Parse(param string, texts []string) ([]Selector, error) {
	var errs params.Errors
	p := parser.NewParser(parser.Options{})
	out := make([]Selector, 0, len(texts))
	for _, text := range texts {
		ms, err := p.ParseMetricSelector(text)
		if err != nil {
			errs.Add(param, "%q is not a selector: %s", text, strings.TrimSpace(err.Error()))
			continue
		}
		restrictive := false
		for _, m := range ms {
			if !m.Matches("") {
				restrictive = true
			}
		}
		if !restrictive {
			errs.Add(param, "%q: a selector needs at least one matcher that does not match the empty string, such as name{} or {job=\"api\"}", text)
			continue
		}
		out = append(out, Selector{Text: text, Matchers: ms})
	}
	return out, errs.Err()
}

// Index answers selectors from a store.
type Index struct {
	store Store
	// maxScan bounds the registry entries a selector on the series
	// pseudo-label alone may read.
	maxScan int
}

// New returns the index over store.
func New(store Store) *Index { return &Index{store: store, maxScan: 1_000_000} }

// postingsParallelism is how many posting lists are read at once.
const postingsParallelism = 16

// labelChunk is how many series' labels one SeriesLabels call asks.
const labelChunk = 1000

// Matching returns the ids of the series, labelled or only registered,
// that match any of sels, ascending, with their labels. It does not check
// that a labelled series has points (Select does).
func (ix *Index) Matching(ctx context.Context, sels []Selector) ([]string, map[string]tiers.Labels, error) {
	set := map[string]bool{}
	all := map[string]tiers.Labels{}
	for _, sel := range sels {
		ids, ls, err := ix.matching(ctx, sel)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range ids {
			set[id] = true
			all[id] = ls[id]
		}
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, all, nil
}

// Select returns the series that match any of sels and exist in the
// registry, ascending by id, each with its span and labels. More than max
// (when positive) is a bad param that says how many were found.
func (ix *Index) Select(ctx context.Context, param string, sels []Selector, max int) ([]tiers.SeriesInfo, error) {
	ids, _, err := ix.Matching(ctx, sels)
	if err != nil {
		return nil, err
	}
	if max > 0 && len(ids) > max {
		return nil, params.Bad(param, "the selector matches %d series, more than %d (--max-series-per-query); narrow it", len(ids), max)
	}
	// One lookup for the series, not one each.
	byID, err := ix.store.LookupSeriesOf(ctx, ids)
	if err != nil {
		return nil, failure.Mark(err, failure.Unavailable)
	}
	out := make([]tiers.SeriesInfo, 0, len(byID))
	for _, id := range ids {
		// Absent: labelled before its first write was acknowledged, no
		// points to read yet.
		if info, ok := byID[id]; ok {
			out = append(out, info)
		}
	}
	return out, nil
}

// matching is Matching for one selector.
func (ix *Index) matching(ctx context.Context, sel Selector) ([]string, map[string]tiers.Labels, error) {
	candidates, err := ix.candidates(ctx, sel)
	if err != nil {
		return nil, nil, failure.Mark(err, failure.Unavailable)
	}
	ls, err := ix.labelsOf(ctx, candidates)
	if err != nil {
		return nil, nil, failure.Mark(err, failure.Unavailable)
	}
	out := candidates[:0]
	for _, id := range candidates {
		if matches(sel.Matchers, id, ls[id]) {
			out = append(out, id)
		}
	}
	return out, ls, nil
}

// matches tells whether a series, its id and labels, satisfies every
// matcher; an absent label is the empty string.
func matches(ms []*labels.Matcher, id string, l tiers.Labels) bool {
	for _, m := range ms {
		v := l[m.Name]
		if m.Name == tiers.SeriesLabel {
			v = id
		}
		if !m.Matches(v) {
			return false
		}
	}
	return true
}

// candidates is a superset of the series a selector matches, ascending:
// the intersection of the postings of its equality matchers; else the
// union of the postings of the values its first restrictive matcher
// accepts; else, for a selector on the id alone, the ids it names or the
// registry's listing.
func (ix *Index) candidates(ctx context.Context, sel Selector) ([]string, error) {
	var eq []*labels.Matcher
	for _, m := range sel.Matchers {
		if m.Type == labels.MatchEqual && m.Value != "" && m.Name != tiers.SeriesLabel {
			eq = append(eq, m)
		}
	}
	if len(eq) > 0 {
		lists := make([][]string, len(eq))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(postingsParallelism)
		for i, m := range eq {
			g.Go(func() (err error) {
				lists[i], err = ix.store.Postings(gctx, m.Name, m.Value)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		// Shortest first: the intersection never grows.
		slices.SortFunc(lists, func(a, b []string) int { return cmp.Compare(len(a), len(b)) })
		out := lists[0]
		for _, l := range lists[1:] {
			out = intersect(out, l)
		}
		return out, nil
	}
	for _, m := range sel.Matchers {
		if m.Name == tiers.SeriesLabel || m.Matches("") {
			continue
		}
		values, err := ix.store.LabelValues(ctx, m.Name)
		if err != nil {
			return nil, err
		}
		var lists [][]string
		var mu sync.Mutex
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(postingsParallelism)
		for _, v := range values {
			if !m.Matches(v) {
				continue
			}
			g.Go(func() error {
				l, err := ix.store.Postings(gctx, m.Name, v)
				mu.Lock()
				lists = append(lists, l)
				mu.Unlock()
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		return union(lists), nil
	}
	// Only the id restricts the selector.
	for _, m := range sel.Matchers {
		if m.Name != tiers.SeriesLabel {
			continue
		}
		if m.Type == labels.MatchEqual {
			return []string{m.Value}, nil
		}
		return ix.scan(ctx, m)
	}
	return nil, nil
}

// scan lists the registry for the ids a matcher on the id accepts, from
// the literal prefix its regular expression starts with, if any.
func (ix *Index) scan(ctx context.Context, m *labels.Matcher) ([]string, error) {
	prefix := ""
	if m.Type == labels.MatchRegexp {
		if re, err := regexp.Compile(m.Value); err == nil {
			prefix, _ = re.LiteralPrefix()
		}
	}
	if prefix != "" && params.SeriesPrefix(prefix) != nil {
		return nil, nil // no id starts so
	}
	var out []string
	after := ""
	for scanned := 0; scanned < ix.maxScan; {
		page, err := ix.store.ListSeries(ctx, prefix, after, 10000)
		if err != nil {
			return nil, err
		}
		for _, info := range page {
			if m.Matches(info.ID) {
				out = append(out, info.ID)
			}
		}
		scanned += len(page)
		if len(page) < 10000 {
			break
		}
		after = page[len(page)-1].ID
	}
	return out, nil
}

// labelsOf reads the labels of ids, labelChunk at a time, side by side.
func (ix *Index) labelsOf(ctx context.Context, ids []string) (map[string]tiers.Labels, error) {
	out := make(map[string]tiers.Labels, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	parts := make([]map[string]tiers.Labels, (len(ids)+labelChunk-1)/labelChunk)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range parts {
		chunk := ids[i*labelChunk : min(len(ids), (i+1)*labelChunk)]
		g.Go(func() (err error) {
			parts[i], err = ix.store.SeriesLabels(gctx, chunk)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, p := range parts {
		for id, l := range p {
			out[id] = l
		}
	}
	return out, nil
}

// LabelNames returns the label names of the series sels match, or of all
// series when sels is empty, ascending.
func (ix *Index) LabelNames(ctx context.Context, sels []Selector) ([]string, error) {
	if len(sels) == 0 {
		names, err := ix.store.LabelNames(ctx)
		return names, failure.Mark(err, failure.Unavailable)
	}
	ids, ls, err := ix.Matching(ctx, sels)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, id := range ids {
		for name, v := range ls[id] {
			if v != "" {
				set[name] = true
			}
		}
	}
	return sortedKeys(set), nil
}

// LabelValues returns the values label name has on the series sels
// match, or on all series when sels is empty, ascending. The pseudo-label
// series gives the ids of the matching series.
func (ix *Index) LabelValues(ctx context.Context, name string, sels []Selector) ([]string, error) {
	if len(sels) == 0 && name != tiers.SeriesLabel {
		values, err := ix.store.LabelValues(ctx, name)
		return values, failure.Mark(err, failure.Unavailable)
	}
	if len(sels) == 0 {
		return nil, params.Bad("match", "the values of the pseudo-label series are the ids: list them with GET /v1/series, or give a selector")
	}
	ids, ls, err := ix.Matching(ctx, sels)
	if err != nil {
		return nil, err
	}
	if name == tiers.SeriesLabel {
		return ids, nil
	}
	set := map[string]bool{}
	for _, id := range ids {
		if v := ls[id][name]; v != "" {
			set[v] = true
		}
	}
	return sortedKeys(set), nil
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// intersect returns the ids both ascending lists hold.
func intersect(a, b []string) []string {
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch c := strings.Compare(a[i], b[j]); {
		case c == 0:
			out = append(out, a[i])
			i++
			j++
		case c < 0:
			i++
		default:
			j++
		}
	}
	return out
}

// union returns the ids any of the lists holds, ascending, once each.
func union(lists [][]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
