package promapi

// The endpoints that describe series rather than read points: what
// Grafana's query builder and metric browser call.

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"slices"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/go-chi/chi/v5"
)

// truncated is Prometheus' warning for an answer cut at its limit.
const truncated = "results truncated due to limit"

// listScope reads what the listing endpoints look in: the series the
// match[] selectors name (see matchSelectors) between start and end.
func listScope(r *http.Request, required bool) (sels []*selector, start, end int64, err error) {
	if sels, err = matchSelectors(r, required); err != nil {
		return nil, 0, 0, err
	}
	start, end, err = formSpan(r)
	return sels, start, end, err
}

// matchSelectors compiles the match[] parameters; required says whether
// at least one must be given.
func matchSelectors(r *http.Request, required bool) ([]*selector, error) {
	texts := r.Form["match[]"]
	if len(texts) == 0 && required {
		return nil, badData("no match[] parameter provided")
	}
	out := make([]*selector, 0, len(texts))
	for _, text := range texts {
		e, err := metricsql.Parse(text)
		if err != nil {
			return nil, badData("invalid parameter \"match[]\": %v", err)
		}
		me, ok := e.(*metricsql.MetricExpr)
		if !ok {
			return nil, badData("invalid parameter \"match[]\": %q is not a series selector like tsgate{series=\"id\"}", text)
		}
		var s selector
		if err := s.compile(me); err != nil {
			return nil, err
		}
		out = append(out, &s)
	}
	return out, nil
}

// matching lists the ids of the series that match any of sels and may have
// points in [start, end], sorted, at most limit of them (0: the
// configured maximum); it says whether there were more.
func (a *API) matching(ctx context.Context, sels []*selector, start, end int64, limit int) ([]string, bool, error) {
	maxListed := a.cfg.MaxSeries
	if limit > 0 {
		maxListed = min(limit, maxListed)
	}
	if len(sels) == 0 {
		sels = []*selector{{}} // every series
	}
	var ids []string
	cut := false
	for _, s := range sels {
		if s.noMetric {
			continue
		}
		infos, err := a.resolve(ctx, s, start, end, maxListed)
		var ae *apiError
		if errors.As(err, &ae) && ae.limit == "max_series" {
			cut, err = true, nil
		}
		if err != nil {
			return nil, false, err
		}
		for _, info := range infos {
			ids = append(ids, info.ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > maxListed {
		ids, cut = ids[:maxListed], true
	}
	return ids, cut, nil
}

func (a *API) series(r *http.Request) (any, []string, error) {
	sels, start, end, err := listScope(r, true)
	if err != nil {
		return nil, nil, err
	}
	limit, err := formLimit(r)
	if err != nil {
		return nil, nil, err
	}
	ids, cut, err := a.matching(r.Context(), sels, start, end, limit)
	if err != nil {
		return nil, nil, err
	}
	out := make([]map[string]string, len(ids))
	for i, id := range ids {
		out[i] = map[string]string{"__name__": metricName, seriesLabel: id}
	}
	return out, warnIf(cut), nil
}

func (a *API) labels(r *http.Request) (any, []string, error) {
	sels, start, end, err := listScope(r, false)
	if err != nil {
		return nil, nil, err
	}
	ids, _, err := a.matching(r.Context(), sels, start, end, 1)
	if err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return []string{}, nil, nil
	}
	return []string{"__name__", seriesLabel}, nil, nil
}

func (a *API) labelValues(r *http.Request) (any, []string, error) {
	name := chi.URLParam(r, "name")
	sels, start, end, err := listScope(r, false)
	if err != nil {
		return nil, nil, err
	}
	limit, err := formLimit(r)
	if err != nil {
		return nil, nil, err
	}
	switch name {
	case "__name__":
		ids, _, err := a.matching(r.Context(), sels, start, end, 1)
		if err != nil || len(ids) == 0 {
			return []string{}, nil, err
		}
		return []string{metricName}, nil, nil
	case seriesLabel:
		ids, cut, err := a.matching(r.Context(), sels, start, end, limit)
		if err != nil {
			return nil, nil, err
		}
		return ids, warnIf(cut), nil
	default:
		if !isLabelName(name) {
			return nil, nil, badData("invalid label name: %q", name)
		}
		return []string{}, nil, nil
	}
}

func (a *API) metadata(r *http.Request) (any, []string, error) {
	type meta struct {
		Type string `json:"type"`
		Help string `json:"help"`
		Unit string `json:"unit"`
	}
	out := map[string][]meta{}
	if m := r.Form.Get("metric"); m == "" || m == metricName {
		out[metricName] = []meta{{Type: "gauge", Help: "A series of the tsgate gateway; the label series is its id.", Unit: ""}}
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
