package httpapi

// Labels and selectors: the labels of series, the label index's names and
// values, and the selectors (match) that read it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// selectors parses the repeatable parameter name of the query; none is
// nil.
func selectors(r *http.Request, name string) ([]index.Selector, error) {
	texts := r.URL.Query()[name]
	if len(texts) == 0 {
		return nil, nil
	}
	return index.Parse(name, texts)
}

// labelsOf is a series' labels as the API shows them: {} when none.
func labelsOf(l tiers.Labels) tiers.Labels {
	if l == nil {
		return tiers.Labels{}
	}
	return l
}

// labelNames answers GET /v1/labels: the label names of all series, or of
// those match selects, sorted.
func (s *Server) labelNames(w http.ResponseWriter, r *http.Request) {
	sels, err := selectors(r, "match")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	names, err := s.deps.Index.LabelNames(r.Context(), sels)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if names == nil {
		names = []string{}
	}
	writeValue(w, http.StatusOK, struct {
		Labels []string `json:"labels"`
	}{names})
}

// labelValues answers GET /v1/labels/{name}/values.
func (s *Server) labelValues(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if name != tiers.SeriesLabel {
		if err := params.LabelName(name); err != nil {
			s.writeProblem(w, r, params.Bad("name", "%s", err))
			return
		}
	}
	sels, err := selectors(r, "match")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	values, err := s.deps.Index.LabelValues(r.Context(), name, sels)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if values == nil {
		values = []string{}
	}
	writeValue(w, http.StatusOK, struct {
		Name   string   `json:"name"`
		Values []string `json:"values"`
	}{name, values})
}

// putLabels answers PUT /v1/admin/series/{id}/labels: the body is
// {"labels": {...}}, or the labels object itself.
func (s *Server) putLabels(w http.ResponseWriter, r *http.Request) {
	id, ok := s.seriesParam(w, r)
	if !ok {
		return
	}
	var raw json.RawMessage
	if err := s.decodeBody(r, &raw); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	l, err := labelsBody(raw)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := s.deps.Writer.Relabel(r.Context(), id, l); err != nil {
		if failure.Of(err) == failure.Internal && !errors.Is(err, tiers.ErrNotFound) {
			err = failure.Mark(err, failure.Unavailable)
		}
		s.writeProblem(w, r, err)
		return
	}
	writeValue(w, http.StatusOK, struct {
		ID     string       `json:"id"`
		Labels tiers.Labels `json:"labels"`
	}{id, labelsOf(l.Stored())})
}

// labelsBody reads {"labels": {...}} or {...}: an object of label names
// and string values, no name twice.
func labelsBody(raw json.RawMessage) (tiers.Labels, error) {
	var wrapped struct {
		Labels json.RawMessage `json:"labels"`
	}
	if err := json.Unmarshal(raw, &wrapped); err == nil && len(wrapped.Labels) > 0 && bytes.HasPrefix(bytes.TrimSpace(wrapped.Labels), []byte("{")) {
		raw = wrapped.Labels
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, params.Bad("labels", `must be an object of label names and string values: {"labels": {"host": "a"}}`)
	}
	l := tiers.Labels{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, params.Bad("labels", "not valid JSON")
		}
		name, _ := tok.(string)
		tok, err = dec.Token()
		if err != nil {
			return nil, params.Bad("labels", "not valid JSON")
		}
		value, ok := tok.(string)
		if !ok {
			return nil, params.Bad("labels."+name, "must be a string")
		}
		if _, dup := l[name]; dup {
			return nil, params.Bad("labels."+name, "appears twice")
		}
		l[name] = value
	}
	return l, nil
}
