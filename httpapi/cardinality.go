package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/problem"
)

// NewSeriesLimit is the bound of the limits on the series writes create
// (ingest.NewSeriesLimit), for one server or for every way in at once.
func (l Limits) NewSeriesLimit() *ingest.NewSeriesLimit {
	return ingest.NewNewSeriesLimit(l.MaxNewSeriesPerBatch, l.MaxNewSeriesPerMinute)
}

// newSeriesProblem is the answer to a batch refused for the series it
// would create: 400 when the batch alone creates too many, 429 when the
// rate is exceeded.
func newSeriesProblem(e *ingest.NewSeriesError) *Problem {
	if e.PerMinute {
		return &Problem{Type: problem.Type("new-series-rate"), Title: "New series rate exceeded", Status: http.StatusTooManyRequests,
			Detail: e.Error() + "; retry later",
			Errors: []ParamError{{Param: "points", Message: fmt.Sprintf("creates %d new series beyond the rate of %d per minute", e.New, e.Limit)}}}
	}
	return &Problem{Type: problem.Type("too-many-new-series"), Title: "Too many new series", Status: http.StatusBadRequest,
		Detail: e.Error(),
		Errors: []ParamError{{Param: "points", Message: fmt.Sprintf("creates %d new series, more than %d", e.New, e.Limit)}}}
}

// checkNewSeries applies the bound and writes the refusal; it reports
// whether the batch may go on.
func (s *Server) checkNewSeries(w http.ResponseWriter, r *http.Request, points []ingest.Point) bool {
	var reg ingest.SeriesLookup
	if s.deps.Registry != nil {
		reg = s.deps.Registry
	}
	err := s.fresh.Check(r.Context(), reg, points, time.Now())
	if err == nil {
		return true
	}
	var ns *ingest.NewSeriesError
	if errors.As(err, &ns) {
		s.deps.Metrics.refuse(refusedNewSeries)
		if ns.PerMinute {
			w.Header().Set("Retry-After", strconv.Itoa(60))
		}
		problem.Write(w, newSeriesProblem(ns))
		return false
	}
	s.writeProblem(w, r, failure.Mark(err, failure.Unavailable))
	return false
}
