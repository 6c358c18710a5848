package promapi

// Which series a selector names. The series matchers decide how the
// registry is asked: an equality, or a regular expression that can only
// match a few literal ids (Grafana's multi-value variables, a|b|c), looks
// each id up; another regular expression lists the ids under its literal
// prefix; a negative matcher alone lists every series. Every candidate is
// then checked against all the matchers.

import (
	"context"
	"errors"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/tsgate/tsgate/tiers"
)

// listPage is how many series one registry listing call returns.
const listPage = 1000

// resolve returns the series the selector matches whose points may lie in
// [from, to], sorted by id, at most max of them; more is an error, returned
// with the first max.
func (a *API) resolve(ctx context.Context, s *selector, from, to int64, max int) ([]tiers.SeriesInfo, error) {
	var out []tiers.SeriesInfo
	keep := func(info tiers.SeriesInfo) error {
		if !s.match(info.ID) || info.Last < from || info.First > to {
			return nil
		}
		if len(out) == max {
			return overLimit("max_series", "the selector matches more than %d series (--prometheus-max-series); narrow it, for example with series=~\"prefix.*\"", max)
		}
		out = append(out, info)
		return nil
	}
	if ids, ok := s.literalIDs(max); ok {
		slices.Sort(ids)
		for _, id := range slices.Compact(ids) {
			info, err := a.deps.Registry.LookupSeries(ctx, id)
			if errors.Is(err, tiers.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, engineError(err)
			}
			if err := keep(info); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	prefix := s.prefix()
	after := ""
	for {
		page, err := a.deps.Registry.ListSeries(ctx, prefix, after, listPage)
		if err != nil {
			return nil, engineError(err)
		}
		for _, info := range page {
			if err := keep(info); err != nil {
				return out, err
			}
		}
		if len(page) < listPage {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// literalIDs returns the only ids the series matchers can match, when a
// positive matcher allows no more than max of them.
func (s *selector) literalIDs(max int) ([]string, bool) {
	for i := range s.matchers {
		m := &s.matchers[i]
		if m.label != seriesLabel || m.negative {
			continue
		}
		if m.re == nil {
			return []string{m.value}, true
		}
		re, err := syntax.Parse(m.value, syntax.Perl|syntax.DotNL)
		if err != nil {
			continue
		}
		if ids, ok := finite(re.Simplify(), max); ok {
			return ids, true
		}
	}
	return nil, false
}

// finite enumerates the strings a regular expression matches in full
// when they are at most max literal strings.
func finite(re *syntax.Regexp, max int) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCapture:
		return finite(re.Sub[0], max)
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(out) == max {
					return nil, false
				}
				out = append(out, string(r))
			}
		}
		return out, true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			ids, ok := finite(sub, max-len(out))
			if !ok {
				return nil, false
			}
			out = append(out, ids...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			ids, ok := finite(sub, max)
			if !ok || len(out)*len(ids) > max {
				return nil, false
			}
			next := make([]string, 0, len(out)*len(ids))
			for _, a := range out {
				for _, b := range ids {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	default:
		return nil, false
	}
}

// prefix is the longest literal prefix that every matching id has, from
// the positive series matchers.
func (s *selector) prefix() string {
	best := ""
	for i := range s.matchers {
		m := &s.matchers[i]
		if m.label != seriesLabel || m.negative || m.re == nil {
			continue
		}
		re, err := syntax.Parse(m.value, syntax.Perl|syntax.DotNL)
		if err != nil {
			continue
		}
		if p := literalPrefix(re.Simplify()); len(p) > len(best) {
			best = p
		}
	}
	return best
}

// literalPrefix is the literal text every match of re starts with.
func literalPrefix(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return ""
		}
		return string(re.Rune)
	case syntax.OpCapture:
		return literalPrefix(re.Sub[0])
	case syntax.OpConcat:
		var b strings.Builder
		for _, sub := range re.Sub {
			p := literalPrefix(sub)
			b.WriteString(p)
			if sub.Op != syntax.OpLiteral || p != string(sub.Rune) {
				break
			}
		}
		return b.String()
	default:
		return ""
	}
}
