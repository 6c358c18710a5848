package httpapi

import (
	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/problem"

	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/tiers"
)

// newSeries bounds how many series writes may create: per batch, and per
// minute across all batches, so that a client writing ids with a counter
// or a timestamp in them cannot fill the registry and the caches. A series
// is new when the registry (through the series cache, which also caches
// misses) does not know it.
type newSeries struct {
	perBatch, perMinute int
	mu                  sync.Mutex
	// counts of series created in each of the last 60 seconds
	secs  [60]int
	stamp [60]int64
}

func newNewSeries(l Limits) *newSeries {
	return &newSeries{perBatch: l.MaxNewSeriesPerBatch, perMinute: l.MaxNewSeriesPerMinute}
}

// errNewSeries is a batch refused for the series it would create.
type errNewSeries struct {
	problem *Problem
}

func (e errNewSeries) Error() string { return e.problem.Detail }

// check counts the batch's series the registry does not know and admits
// them, or refuses the whole batch.
func (g *newSeries) check(ctx context.Context, reg Registry, points []ingest.Point, now time.Time) error {
	if g == nil || (g.perBatch <= 0 && g.perMinute <= 0) || reg == nil {
		return nil
	}
	seen := map[string]bool{}
	fresh := 0
	for _, p := range points {
		if seen[p.Series] {
			continue
		}
		seen[p.Series] = true
		_, err := reg.LookupSeries(ctx, p.Series)
		switch {
		case errors.Is(err, tiers.ErrNotFound):
			fresh++
		case err != nil:
			return failure.Mark(err, failure.Unavailable)
		}
	}
	if fresh == 0 {
		return nil
	}
	if g.perBatch > 0 && fresh > g.perBatch {
		return errNewSeries{&Problem{Type: problem.Type("too-many-new-series"), Title: "Too many new series", Status: http.StatusBadRequest,
			Detail: fmt.Sprintf("the batch creates %d new series; at most %d per batch (--max-new-series-per-batch)", fresh, g.perBatch),
			Errors: []ParamError{{Param: "points", Message: fmt.Sprintf("creates %d new series, more than %d", fresh, g.perBatch)}}}}
	}
	if g.perMinute <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sec := now.Unix()
	total := 0
	for i := range g.secs {
		if sec-g.stamp[i] < 60 {
			total += g.secs[i]
		}
	}
	if total+fresh > g.perMinute {
		return errNewSeries{&Problem{Type: problem.Type("new-series-rate"), Title: "New series rate exceeded", Status: http.StatusTooManyRequests,
			Detail: fmt.Sprintf("the batch creates %d new series and %d were created in the last minute; at most %d per minute (--max-new-series-per-minute); retry later", fresh, total, g.perMinute),
			Errors: []ParamError{{Param: "points", Message: fmt.Sprintf("creates %d new series beyond the rate of %d per minute", fresh, g.perMinute)}}}}
	}
	i := sec % 60
	if g.stamp[i] != sec {
		g.stamp[i], g.secs[i] = sec, 0
	}
	g.secs[i] += fresh
	return nil
}

// checkNewSeries applies the bound and writes the refusal; it reports
// whether the batch may go on.
func (s *Server) checkNewSeries(w http.ResponseWriter, r *http.Request, points []ingest.Point) bool {
	err := s.fresh.check(r.Context(), s.deps.Registry, points, time.Now())
	if err == nil {
		return true
	}
	var ns errNewSeries
	if errors.As(err, &ns) {
		s.deps.Metrics.refuse(refusedNewSeries)
		if ns.problem.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(60))
		}
		problem.Write(w, ns.problem)
		return false
	}
	s.writeProblem(w, r, err)
	return false
}
