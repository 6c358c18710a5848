package promapi

// The endpoints that describe series rather than read points: what
// Grafana's query builder and metric browser call.

import (
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"slices"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tsgate/tsgate/tiers"
)

// truncated is Prometheus' warning for an answer cut at its limit.
const truncated = "results truncated due to limit"

// matchers parses the match[] parameters with Prometheus' parser; required
// says whether at least one must be given.
func matchers(r *http.Request, required bool) ([][]*labels.Matcher, error) {
	texts := r.Form["match[]"]
	if len(texts) == 0 && required {
		return nil, badData("no match[] parameter provided")
	}
	p := parser.NewParser(parser.Options{})
	out := make([][]*labels.Matcher, 0, len(texts))
	for _, text := range texts {
		ms, err := p.ParseMetricSelector(text)
		if err != nil {
			return nil, badData("invalid parameter \"match[]\": %v", err)
		}
		restrictive := false
		for _, m := range ms {
			if !m.Matches("") {
				restrictive = true
			}
		}
		if !restrictive {
			return nil, badData("invalid parameter \"match[]\": match[] must contain at least one non-empty matcher")
		}
		out = append(out, ms)
	}
	return out, nil
}

// listed are the series the match[] selectors select whose points may lie
// in [start, end], in label order, and whether the list was cut at limit
// (0: the configured maximum).
func (a *API) listed(r *http.Request, sets [][]*labels.Matcher, start, end int64, limit int) ([]found, bool, error) {
	q := &querier{q: a.queryable(), mint: start, maxt: end}
	seen := map[string]bool{}
	var out []found
	for _, ms := range sets {
		series, err := q.selectSeries(r.Context(), ms)
		var ae *apiError
		if errors.As(err, &ae) && ae.limit == "max_series" {
			err = &apiError{typ: errBadData, limit: "max_series", msg: ae.msg}
		}
		if err != nil {
			return nil, false, err
		}
		for _, s := range series {
			if seen[s.id] {
				continue
			}
			seen[s.id] = true
			if start > tiers.MinTime || end < tiers.MaxTime-1 {
				info, err := a.deps.Registry.LookupSeries(r.Context(), s.id)
				if errors.Is(err, tiers.ErrNotFound) {
					continue
				}
				if err != nil {
					return nil, false, engineError(err)
				}
				if info.Last < start || info.First > end {
					continue
				}
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y found) int { return labels.Compare(x.labels, y.labels) })
	if limit > 0 && len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

func (a *API) series(r *http.Request) (any, []string, error) {
	sets, err := matchers(r, true)
	if err != nil {
		return nil, nil, err
	}
	start, end, err := formSpan(r)
	if err != nil {
		return nil, nil, err
	}
	limit, err := formLimit(r)
	if err != nil {
		return nil, nil, err
	}
	series, cut, err := a.listed(r, sets, start, end, limit)
	if err != nil {
		return nil, nil, err
	}
	b := []byte{'['}
	for i, s := range series {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMetric(b, s.labels)
	}
	return json.RawMessage(append(b, ']')), warnIf(cut), nil
}

func (a *API) labels(r *http.Request) (any, []string, error) {
	return a.labelList(r, "")
}

func (a *API) labelValues(r *http.Request) (any, []string, error) {
	name := chi.URLParam(r, "name")
	if !isLabelName(name) {
		return nil, nil, badData("invalid label name: %q", name)
	}
	return a.labelList(r, name)
}

// labelList answers /labels (name empty: the label names) and
// /label/{name}/values: from the label index when no match[] narrows
// them, else from the selected series.
func (a *API) labelList(r *http.Request, name string) (any, []string, error) {
	sets, err := matchers(r, false)
	if err != nil {
		return nil, nil, err
	}
	start, end, err := formSpan(r)
	if err != nil {
		return nil, nil, err
	}
	limit, err := formLimit(r)
	if err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	if len(sets) == 0 {
		var list []string
		switch name {
		case "":
			list, err = a.deps.Index.LabelNames(r.Context(), nil)
		case seriesLabel:
			// Only the series written without labels have it.
		default:
			list, err = a.deps.Index.LabelValues(r.Context(), name, nil)
		}
		if err != nil {
			return nil, nil, engineError(err)
		}
		for _, v := range list {
			set[v] = true
		}
		// The series written without labels, if there are any.
		if name == "" || name == model.MetricNameLabel || name == seriesLabel {
			q := &querier{q: a.queryable(), mint: start, maxt: end}
			un, err := q.unlabelledSample(r.Context())
			if err != nil {
				return nil, nil, engineError(err)
			}
			for _, s := range un {
				if name == "" {
					set[model.MetricNameLabel], set[seriesLabel] = true, true
				} else if v := s.labels.Get(name); v != "" {
					set[v] = true
				}
			}
		}
	} else {
		series, _, err := a.listed(r, sets, start, end, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range series {
			s.labels.Range(func(l labels.Label) {
				switch {
				case name == "":
					set[l.Name] = true
				case l.Name == name:
					set[l.Value] = true
				}
			})
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	cut := limit > 0 && len(out) > limit
	if cut {
		out = out[:limit]
	}
	return out, warnIf(cut), nil
}

func (a *API) metadata(r *http.Request) (any, []string, error) {
	type meta struct {
		Type string `json:"type"`
		Help string `json:"help"`
		Unit string `json:"unit"`
	}
	out := map[string][]meta{}
	if m := r.Form.Get("metric"); m == "" || m == metricName {
		out[metricName] = []meta{{Type: "gauge", Help: "A series of the tsgate gateway written without labels; the label series is its id.", Unit: ""}}
	}
	return out, nil, nil
}

func (a *API) buildinfo(r *http.Request) (any, []string, error) {
	// The version is the Prometheus API release whose read endpoints the
	// gateway answers, so that clients pick the matching features.
	return map[string]string{
		"version": "2.53.0", "revision": "", "branch": "", "buildUser": "", "buildDate": "",
		"goVersion": runtime.Version(), "application": "tsgate",
	}, nil, nil
}

// exemplars answers that there are none: the gateway keeps no exemplars,
// and Grafana asks for them beside a query when they are switched on.
func (a *API) exemplars(r *http.Request) (any, []string, error) {
	return []struct{}{}, nil, nil
}

func warnIf(cut bool) []string {
	if cut {
		return []string{truncated}
	}
	return nil
}

func isLabelName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
