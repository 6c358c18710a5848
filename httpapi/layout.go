package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/layouts"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/tiers"
)

// LayoutAdmin is layout administration and the blocked list as the API
// shows them (layouts.Admin with the tracker and the blocked cache).
type LayoutAdmin interface {
	History(ctx context.Context, id string) (tiers.Layout, error)
	Change(ctx context.Context, id string, entry tiers.LayoutEntry) (tiers.Layout, error)
	Wide(n int) []layouts.Wide
	tiers.Blocks
}

// Bounds of the admin listings and of a block's reason.
const (
	defaultWideLimit = 20
	maxWideLimit     = 1000
	maxReasonLen     = 500
)

type layoutEntryJSON struct {
	Since        int64 `json:"since"`
	BucketMs     int64 `json:"bucket_ms"`
	EventBuckets int   `json:"event_buckets"`
}

type blockJSON struct {
	Series string `json:"series"`
	Reason string `json:"reason"`
	Since  int64  `json:"since"`
}

func (s *Server) layoutAdmin(w http.ResponseWriter, r *http.Request) (LayoutAdmin, bool) {
	if s.deps.Layouts == nil {
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "this gateway has no layout administration"))
		return nil, false
	}
	return s.deps.Layouts, true
}

// seriesParam reads and checks the {id} of the path.
func (s *Server) seriesParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if err := params.SeriesID(id); err != nil {
		s.writeProblem(w, r, params.Bad("id", "%s", err.Error()))
		return "", false
	}
	return id, true
}

func writeLayout(w http.ResponseWriter, id string, l tiers.Layout) {
	out := struct {
		ID      string            `json:"id"`
		Layouts []layoutEntryJSON `json:"layouts"`
	}{ID: id, Layouts: make([]layoutEntryJSON, len(l))}
	for i, e := range l {
		out.Layouts[i] = layoutEntryJSON{Since: e.Since, BucketMs: e.Width, EventBuckets: e.EventBuckets}
	}
	writeValue(w, http.StatusOK, out)
}

func (s *Server) getLayout(w http.ResponseWriter, r *http.Request) {
	a, ok := s.layoutAdmin(w, r)
	if !ok {
		return
	}
	id, ok := s.seriesParam(w, r)
	if !ok {
		return
	}
	l, err := a.History(r.Context(), id)
	if err != nil {
		s.writeProblem(w, r, registryError(err))
		return
	}
	writeLayout(w, id, l)
}

// registryError maps a registry lookup's error: an unknown series is a
// 404, anything else the store's failure.
func registryError(err error) error {
	if errors.Is(err, tiers.ErrNotFound) {
		return err
	}
	return failure.Mark(err, failure.Unavailable)
}

// decodeBody decodes a small JSON body strictly into v.
func (s *Server) decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return params.Bad("body", "is empty; send a JSON object")
		}
		return params.Bad("body", "not valid JSON for this request: %s", err.Error())
	}
	if dec.More() {
		return params.Bad("body", "holds more than one JSON value")
	}
	return nil
}

func (s *Server) putLayout(w http.ResponseWriter, r *http.Request) {
	a, ok := s.layoutAdmin(w, r)
	if !ok {
		return
	}
	id, ok := s.seriesParam(w, r)
	if !ok {
		return
	}
	var in struct {
		Since        *int64 `json:"since"`
		BucketMs     *int64 `json:"bucket_ms"`
		EventBuckets *int   `json:"event_buckets"`
	}
	if err := s.decodeBody(r, &in); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var errs params.Errors
	for _, m := range []struct {
		name    string
		missing bool
	}{{"since", in.Since == nil}, {"bucket_ms", in.BucketMs == nil}, {"event_buckets", in.EventBuckets == nil}} {
		if m.missing {
			errs.Add(m.name, "is required")
		}
	}
	if len(errs) > 0 {
		s.writeProblem(w, r, errs)
		return
	}
	l, err := a.Change(r.Context(), id, tiers.LayoutEntry{Since: *in.Since, Width: *in.BucketMs, EventBuckets: *in.EventBuckets})
	switch {
	case params.List(err) != nil:
		s.writeProblem(w, r, err)
		return
	case err != nil:
		s.writeProblem(w, r, registryError(err))
		return
	}
	writeLayout(w, id, l)
}

func (s *Server) widePartitions(w http.ResponseWriter, r *http.Request) {
	a, ok := s.layoutAdmin(w, r)
	if !ok {
		return
	}
	limit := defaultWideLimit
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxWideLimit {
			s.writeProblem(w, r, params.Bad("limit", "must be an integer from 1 to %d", maxWideLimit))
			return
		}
		limit = n
	}
	type part struct {
		Series        string `json:"series"`
		Bucket        int64  `json:"bucket"`
		EventBucket   int    `json:"event_bucket"`
		Rows          int64  `json:"rows"`
		BytesEstimate int64  `json:"bytes_estimate"`
	}
	out := struct {
		Partitions []part `json:"partitions"`
	}{Partitions: []part{}}
	for _, p := range a.Wide(limit) {
		out.Partitions = append(out.Partitions, part{p.Key.Series, p.Key.Bucket, p.Key.EventBucket, p.Rows, p.BytesEstimate})
	}
	writeValue(w, http.StatusOK, out)
}

func (s *Server) blockSeries(w http.ResponseWriter, r *http.Request) {
	a, ok := s.layoutAdmin(w, r)
	if !ok {
		return
	}
	id, ok := s.seriesParam(w, r)
	if !ok {
		return
	}
	var in struct {
		Reason *string `json:"reason"`
	}
	if err := s.decodeBody(r, &in); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	switch {
	case in.Reason == nil || *in.Reason == "":
		s.writeProblem(w, r, params.Bad("reason", "is required: say why the series is blocked"))
		return
	case utf8.RuneCountInString(*in.Reason) > maxReasonLen:
		s.writeProblem(w, r, params.Bad("reason", "must be at most %d characters", maxReasonLen))
		return
	}
	b := tiers.BlockedSeries{Series: id, Reason: *in.Reason, Since: s.deps.Now().UnixMilli()}
	if err := a.Block(r.Context(), b); err != nil {
		s.writeProblem(w, r, failure.Mark(err, failure.Unavailable))
		return
	}
	s.logger(r).Info("series blocked", "series", id, "reason", b.Reason)
	writeValue(w, http.StatusOK, blockJSON(b))
}

func (s *Server) unblockSeries(w http.ResponseWriter, r *http.Request) {
	a, ok := s.layoutAdmin(w, r)
	if !ok {
		return
	}
	id, ok := s.seriesParam(w, r)
	if !ok {
		return
	}
	if err := a.Unblock(r.Context(), id); err != nil {
		s.writeProblem(w, r, failure.Mark(err, failure.Unavailable))
		return
	}
	s.logger(r).Info("series unblocked", "series", id)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listBlocked(w http.ResponseWriter, r *http.Request) {
	a, ok := s.layoutAdmin(w, r)
	if !ok {
		return
	}
	list, err := a.ListBlocked(r.Context())
	if err != nil {
		s.writeProblem(w, r, failure.Mark(err, failure.Unavailable))
		return
	}
	out := struct {
		Blocked []blockJSON `json:"blocked"`
	}{Blocked: make([]blockJSON, len(list))}
	for i, b := range list {
		out.Blocked[i] = blockJSON(b)
	}
	writeValue(w, http.StatusOK, out)
}

// layoutAdminRoutes are the admin routes of layouts and blocks; the layout
// history itself (GET /v1/series/{id}/layout) is a read.
func (s *Server) layoutAdminRoutes(r chi.Router) {
	r.Put("/v1/admin/series/{id}/layout", s.putLayout)
	r.Put("/v1/admin/series/{id}/labels", s.putLabels)
	r.Get("/v1/admin/partitions/wide", s.widePartitions)
	r.Put("/v1/admin/series/{id}/blocked", s.blockSeries)
	r.Delete("/v1/admin/series/{id}/blocked", s.unblockSeries)
	r.Get("/v1/admin/blocked", s.listBlocked)
}
