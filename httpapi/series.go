package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/cursor"
	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Listing limits: a page of the series list.
const (
	defaultSeriesLimit = 100
	maxSeriesLimit     = 10000
)

type seriesEntry struct {
	ID     string       `json:"id"`
	First  int64        `json:"first"`
	Last   int64        `json:"last"`
	Labels tiers.Labels `json:"labels"`
}

func entryOf(info tiers.SeriesInfo) seriesEntry {
	return seriesEntry{ID: info.ID, First: info.First, Last: info.Last, Labels: labelsOf(info.Labels)}
}

func (s *Server) listSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), ""
	var errs params.Errors
	if prefix != "" {
		if err := params.SeriesPrefix(prefix); err != nil {
			errs.Add("prefix", "%s", err)
		}
	}
	if token := q.Get("cursor"); token != "" {
		// The cursor carries the last id of the previous page, checked, so
		// that text that is not a next_cursor is refused, not taken as a
		// place to resume.
		id, err := cursor.DecodeList(token)
		if err == nil {
			err = params.SeriesID(id)
		}
		if err != nil {
			errs.Add("cursor", "not a next_cursor of this listing: %s", err)
		}
		after = id
	}
	limit := defaultSeriesLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxSeriesLimit {
			errs.Add("limit", "must be an integer from 1 to %d", maxSeriesLimit)
		}
		limit = n
	}
	sels, err := selectors(r, "match")
	errs = append(errs, params.List(err)...)
	if len(errs) > 0 {
		s.writeProblem(w, r, errs)
		return
	}
	// One more than asked tells whether another page exists.
	var list []tiers.SeriesInfo
	if sels != nil {
		list, err = s.matchingPage(r, sels, prefix, after, limit+1)
	} else {
		list, err = s.deps.Registry.ListSeries(r.Context(), prefix, after, limit+1)
	}
	if err != nil {
		if failure.Of(err) == failure.Internal {
			err = failure.Mark(err, failure.Unavailable)
		}
		s.writeProblem(w, r, err)
		return
	}
	out := struct {
		Series     []seriesEntry `json:"series"`
		NextCursor string        `json:"next_cursor,omitempty"`
	}{Series: make([]seriesEntry, 0, min(len(list), limit))}
	for i, info := range list {
		if i == limit {
			out.NextCursor = cursor.EncodeList(list[limit-1].ID)
			break
		}
		out.Series = append(out.Series, entryOf(info))
	}
	writeValue(w, http.StatusOK, out)
}

// matchingPage is a page of the listing of the series sels match: those
// after after (and starting with prefix), ascending, at most limit, each
// one the registry knows, with its span and labels.
func (s *Server) matchingPage(r *http.Request, sels []index.Selector, prefix, after string, limit int) ([]tiers.SeriesInfo, error) {
	ids, _, err := s.deps.Index.Matching(r.Context(), sels)
	if err != nil {
		return nil, err
	}
	var out []tiers.SeriesInfo
	for _, id := range ids {
		if id <= after || !strings.HasPrefix(id, prefix) {
			continue
		}
		info, err := s.deps.Registry.LookupSeries(r.Context(), id)
		if errors.Is(err, tiers.ErrNotFound) {
			continue // labelled, not written yet
		}
		if err != nil {
			return nil, err
		}
		if out = append(out, info); len(out) == limit {
			break
		}
	}
	return out, nil
}

type tierInfo struct {
	Name            string `json:"name"`
	StepMs          int64  `json:"step_ms"`
	BucketMs        int64  `json:"bucket_ms"`
	EventBuckets    int    `json:"event_buckets"`
	RetentionS      int64  `json:"retention_s"`
	OldestAvailable *int64 `json:"oldest_available"`
}

func (s *Server) getSeries(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := params.SeriesID(id); err != nil {
		s.writeProblem(w, r, params.Bad("id", "%s", err))
		return
	}
	info, err := s.deps.Registry.LookupSeries(r.Context(), id)
	if errors.Is(err, tiers.ErrNotFound) {
		s.writeProblem(w, r, err)
		return
	}
	if err != nil {
		s.writeProblem(w, r, failure.Mark(err, failure.Unavailable))
		return
	}
	now := s.deps.Now().UnixMilli()
	p := s.deps.Pyramid
	out := struct {
		seriesEntry
		Tiers []tierInfo `json:"tiers"`
	}{seriesEntry: entryOf(info)}
	for _, l := range p.Levels() {
		t := p.Tier(l)
		ti := tierInfo{Name: t.Name, StepMs: t.Step, BucketMs: t.BucketWidth, EventBuckets: t.EventBuckets, RetentionS: t.Retention / 1000}
		if l == tiers.LevelRaw && info.Layout != nil {
			// The layout in force now is the one a reader of recent data meets.
			b := info.Layout.BucketOf(now)
			ti.BucketMs, ti.EventBuckets = b.End-b.Start, b.EventBuckets
		}
		if t.Retention > 0 {
			// The oldest point this tier can still hold for this series.
			oldest := max(t.OldestAvailable(now), info.First)
			ti.OldestAvailable = &oldest
		} else {
			first := info.First
			ti.OldestAvailable = &first
		}
		out.Tiers = append(out.Tiers, ti)
	}
	writeValue(w, http.StatusOK, out)
}
