package query

import (
	"strconv"
	"time"

	"github.com/tsgate/tsgate/cursor"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// Request is one read of one series, typed: every front end (the REST API,
// batches, Grafana, the Prometheus API) parses its own syntax into one and
// hands it to an Engine, which normalises it — defaults, limits, the
// clock, the cursor's binding — and validates it in one place.
//
// The zero value of every optional field means "the default".
type Request struct {
	Series string
	// From is required; To defaults to now. Relative instants resolve at
	// the engine's clock when the first page is served, and the cursor
	// pins that resolution for the pages after it.
	From, To   params.Instant
	Resolution router.Resolution
	// MaxPoints bounds the windows of an auto answer (0: no bound).
	MaxPoints int64
	// MinWindow is the narrowest window MaxPoints may choose (Grafana's
	// interval); 0: none.
	MinWindow int64
	// WholeFirstWindow includes the window holding From, whole, in an
	// aggregated answer, so that charts have no gap at their left edge.
	WholeFirstWindow bool
	// Aggs are the answer's columns for windows; avg when empty.
	Aggs []Agg
	// Extras reads the rollup rows' extras (tiers.Extras) even when no
	// aggregate needs them, so that windows carry them in Item.Row.X: the
	// counter summary a reset-aware increase needs, the sketch. Percentile
	// aggregates read them anyway.
	Extras bool
	Desc   bool
	// Limit is the page size; the configured default when 0.
	Limit int
	// Cursor is the next_cursor of the previous page.
	Cursor string
	// SLO is the latency budget; the configured default when 0, and never
	// more than the configured maximum.
	SLO time.Duration
	// Deny turns a cut-short answer into an error (ErrBudget or
	// ErrUnavailable) instead of a partial page.
	Deny bool
	// Start is when the request arrived, on the wall clock; the budget runs
	// from it. Zero means when the engine is called.
	Start time.Time
	// KeepStale delivers the stale markers of a raw read (see
	// tiers.IsStale) as points. Only PromQL's storage asks for them: they
	// end a series for its lookback, and mean nothing to any other reader.
	KeepStale bool
}

// The types of the router that requests and answers carry, under the
// engine's names: front ends read and build them without planning
// anything themselves.
type (
	// Resolution is what a request asks of the answer's windows.
	Resolution = router.Resolution
	// Plan is the engine's plan of a read: tier, window, segments.
	Plan = router.Plan
	// Segment is the part of a plan one tier serves.
	Segment = router.Segment
)

// Raw asks for raw points.
var Raw = Resolution{Kind: router.RawPoints}

// Windows asks for windows of width ms.
func Windows(width int64) Resolution { return Resolution{Kind: router.Window, Window: width} }

// ParseResolution reads the resolution parameter: auto, raw, or a window
// of at least a second.
func ParseResolution(s string) (Resolution, error) { return router.ParseResolution(s) }

// Limits are the defaults and bounds a request is normalised against.
type Limits struct {
	DefaultSLO, MaxSLO     time.Duration
	DefaultLimit, MaxLimit int
}

// MaxMaxPoints bounds max_points; beyond it the answer is raw-resolution
// anyway and the page limit applies.
const MaxMaxPoints = 10_000_000

// prepared is a normalised request: its range resolved, its defaults
// filled in, its binding computed.
type prepared struct {
	Request
	span    tiers.Span
	slo     time.Duration
	limit   int
	binding cursor.Binding
}

// normalize checks every parameter of r at clock now and reports all that
// are wrong, each under its own name (params.Errors).
func (r Request) normalize(lim Limits, now int64) (prepared, error) {
	var errs params.Errors
	p := prepared{Request: r}
	if err := params.SeriesID(r.Series); err != nil {
		errs.Add("series", "%s", err)
	}
	fromOK, toOK := false, false
	if r.From.IsZero() {
		errs.Add("from", "required: the start of the range (RFC 3339, Unix ms, or now-<duration>)")
	} else if t, err := r.From.Resolve(now); err != nil {
		errs.Add("from", "%s", err)
	} else {
		p.span.From, fromOK = t, true
	}
	if r.To.IsZero() {
		p.To = params.FromNow(0)
	}
	if t, err := p.To.Resolve(now); err != nil {
		errs.Add("to", "%s", err)
	} else {
		p.span.To, toOK = t, true
	}
	if fromOK && toOK && p.span.Empty() {
		errs.Add("from", "must be before to (ranges are [from, to))")
	}
	switch r.Resolution.Kind {
	case router.Auto, router.RawPoints:
	case router.Window:
		if r.Resolution.Window < router.MinWindow {
			errs.Add("resolution", "a window must be at least 1s")
		}
	default:
		errs.Add("resolution", "must be auto, raw or a window duration like 5m")
	}
	switch {
	case r.MaxPoints < 0 || r.MaxPoints > MaxMaxPoints:
		errs.Add("max_points", "must be an integer from 1 to %d", MaxMaxPoints)
	case r.MaxPoints > 0 && r.Resolution.Kind != router.Auto:
		errs.Add("max_points", "applies only to resolution=auto")
	}
	if r.MinWindow < 0 || r.MinWindow > tiers.MaxTime-tiers.MinTime {
		errs.Add("interval", "must be a positive duration")
	}
	if len(r.Aggs) == 0 {
		p.Aggs = []Agg{Avg}
	} else if err := checkAggs(r.Aggs); err != nil {
		errs.Add("agg", "%s", err)
	}
	p.limit = r.Limit
	if p.limit == 0 {
		p.limit = lim.DefaultLimit
	}
	if p.limit < 1 || p.limit > lim.MaxLimit {
		errs.Add("limit", "must be an integer from 1 to %d", lim.MaxLimit)
	}
	p.slo = r.SLO
	switch {
	case p.slo < 0:
		errs.Add("slo", "must be a positive duration like 500ms")
	case p.slo == 0:
		p.slo = lim.DefaultSLO
	}
	p.slo = min(p.slo, lim.MaxSLO)
	if len(errs) > 0 {
		return p, errs
	}
	p.binding = p.bind()
	return p, nil
}

// bind digests the parameters that define the answer, so that a cursor is
// accepted only by the request it was issued for. Relative times enter as
// written: their meaning moves with the clock and the cursor pins it.
func (p *prepared) bind() cursor.Binding {
	res := "auto"
	switch p.Resolution.Kind {
	case router.RawPoints:
		res = "raw"
	case router.Window:
		res = strconv.FormatInt(p.Resolution.Window, 10)
	}
	order := "asc"
	if p.Desc {
		order = "desc"
	}
	var flags string
	if p.WholeFirstWindow {
		flags = "whole-first"
	}
	return cursor.Bind(p.Series, p.From.Canon(), p.To.Canon(), res,
		strconv.FormatInt(p.MaxPoints, 10), strconv.FormatInt(p.MinWindow, 10), flags, FormatAggs(p.Aggs), order)
}

// routerRequest is what the router needs of the request.
func (p *prepared) routerRequest(span tiers.Span) router.Request {
	return router.Request{
		Span: span, Resolution: p.Resolution, MaxPoints: p.MaxPoints,
		MinWindow: p.MinWindow, WholeFirstWindow: p.WholeFirstWindow,
	}
}

// AnswerBytes is at most how many bytes a page of req takes as JSON (the
// answers' encoding, Head.AppendItem), when defaultLimit is the engine's
// default page size: its items at their widest — a raw point or a window
// of every aggregate asked — and the envelope. Front ends reserve it from
// the memory budget before they read, so that requests wait for the budget
// whole rather than in parts.
func AnswerBytes(req Request, defaultLimit int) int64 {
	limit := req.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	// A millisecond time is 13 digits; a float at most 24 characters, the
	// shortest form of most is under 12.
	perItem := max(2+13+1+16, 2+13+(1+16)*max(1, len(req.Aggs)))
	return int64(limit)*int64(perItem) + 1024
}
