package promapi

import (
	"context"
	"time"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// budget is a request's latency budget: every read of the request ends by
// start + slo (the engine's default budget when slo is 0).
type budget struct {
	start time.Time
	slo   time.Duration
}

// readOutcome is what a read reports besides its rows.
type readOutcome struct {
	warnings []string
	// partial is "slo" or "unavailable" when the read was cut short;
	// covered is then the time before which every row was delivered.
	partial string
	covered int64
}

// read is the one place that calls the query engine. It reads one series
// over span — raw points when window is 0, else the windows of that width
// whose start lies in span, from the tier the router picks for it — and
// hands each row to emit in ascending order (T is the point's time or the
// window's start), following cursors until the answer is complete or cut
// short.
func (a *API) read(ctx context.Context, series string, span tiers.Span, window int64, b budget, emit func(tiers.Row)) (readOutcome, error) {
	req := query.Request{
		Series: series, From: params.At(span.From), To: params.At(span.To),
		Resolution: router.Resolution{Kind: router.RawPoints},
		Limit:      a.deps.MaxLimit, SLO: b.slo, Start: b.start,
	}
	if window > 0 {
		req.Resolution = router.Resolution{Kind: router.Window, Window: window}
	}
	out := readOutcome{covered: span.To}
	for page := 0; ; page++ {
		res, err := a.deps.Engine.Query(ctx, req)
		if err != nil {
			return out, err
		}
		for res.Next() {
			it := res.Item()
			row := it.Row
			row.T = it.T
			emit(row)
		}
		tr := res.Trailer()
		if page == 0 {
			out.warnings = res.Head().Warnings
		}
		res.Close()
		if tr.Err != nil {
			return out, tr.Err
		}
		if tr.Partial {
			out.partial, out.covered = tr.Reason, tr.Covered.To
			return out, nil
		}
		if tr.NextCursor == "" {
			return out, nil
		}
		req.Cursor = tr.NextCursor
	}
}
