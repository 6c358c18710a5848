package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// MaxMaxPoints bounds max_points; beyond it the answer is raw-resolution
// anyway and the page limit applies.
const MaxMaxPoints = 10_000_000

// readInput is the text of a read's parameters, from a query string or a
// JSON body.
type readInput struct {
	Series, From, To, Resolution, MaxPoints, Agg, Order, Limit, Cursor, SLO, Partial string
}

// parseRead checks every read parameter and reports all that are wrong, each
// under its own name.
func (s *Server) parseRead(in readInput, now time.Time) (query.Request, []ParamError) {
	var errs []ParamError
	bad := func(param, msg string) { errs = append(errs, ParamError{Param: param, Message: msg}) }
	nowMs := now.UnixMilli()
	// The latency budget runs on the wall clock from the request's arrival,
	// whatever the clock that decides which data is current says.
	req := query.Request{Series: in.Series, Start: time.Now()}
	if err := params.SeriesID(in.Series); err != nil {
		bad("id", err.Error())
	}
	var fromCanon, toCanon string
	if in.From == "" {
		bad("from", "required: the start of the range (RFC 3339, Unix ms, or now-<duration>)")
	} else if t, err := params.Time(in.From, nowMs); err != nil {
		bad("from", err.Error())
	} else {
		req.Span.From, fromCanon = t, canonTime(in.From, t)
	}
	to := in.To
	if to == "" {
		to = "now"
	}
	if t, err := params.Time(to, nowMs); err != nil {
		bad("to", err.Error())
	} else {
		req.Span.To, toCanon = t, canonTime(to, t)
	}
	if fromCanon != "" && toCanon != "" && req.Span.From >= req.Span.To {
		bad("from", "must be before to (ranges are [from, to))")
	}
	resText := in.Resolution
	switch resText {
	case "", "auto":
		resText = "auto"
		req.Resolution = router.Resolution{Kind: router.Auto}
	case "raw":
		req.Resolution = router.Resolution{Kind: router.RawPoints}
	default:
		d, err := params.Duration(resText)
		switch {
		case err != nil:
			bad("resolution", "must be auto, raw or a window duration like 5m: "+err.Error())
		case d < router.MinWindow:
			bad("resolution", "a window must be at least 1s")
		default:
			req.Resolution = router.Resolution{Kind: router.Window, Window: d}
			resText = strconv.FormatInt(d, 10)
		}
	}
	if in.MaxPoints != "" {
		n, err := strconv.ParseInt(in.MaxPoints, 10, 64)
		switch {
		case err != nil || n < 1 || n > MaxMaxPoints:
			bad("max_points", "must be an integer from 1 to 10000000")
		case req.Resolution.Kind != router.Auto:
			bad("max_points", "applies only to resolution=auto")
		default:
			req.MaxPoints = n
		}
	}
	aggText := in.Agg
	if aggText == "" {
		aggText = "avg"
	}
	if aggs, err := query.ParseAggs(aggText); err != nil {
		bad("agg", err.Error())
	} else {
		req.Aggs = aggs
	}
	switch in.Order {
	case "", "asc":
	case "desc":
		req.Desc = true
	default:
		bad("order", "must be asc or desc")
	}
	cfg := s.deps.Engine.Config()
	if in.Limit != "" {
		n, err := strconv.Atoi(in.Limit)
		if err != nil || n < 1 || n > cfg.MaxLimit {
			bad("limit", "must be an integer from 1 to "+strconv.Itoa(cfg.MaxLimit))
		} else {
			req.Limit = n
		}
	}
	if in.SLO != "" {
		d, err := params.Duration(in.SLO)
		if err != nil || d <= 0 {
			msg := "must be a positive duration like 500ms"
			if err != nil {
				msg += ": " + err.Error()
			}
			bad("slo", msg)
		} else {
			req.SLO = time.Duration(d) * time.Millisecond
		}
	}
	switch in.Partial {
	case "", "allow":
	case "deny":
		req.Deny = true
	default:
		bad("partial", "must be allow or deny")
	}
	req.Cursor = in.Cursor
	order := "asc"
	if req.Desc {
		order = "desc"
	}
	var maxPoints string
	if req.MaxPoints > 0 {
		maxPoints = strconv.FormatInt(req.MaxPoints, 10)
	}
	req.Binding = partial.Bind(in.Series, fromCanon, toCanon, resText, maxPoints, query.FormatAggs(req.Aggs), order)
	return req, errs
}

// canonTime is how a time parameter enters a cursor's binding: relative
// times as written (their meaning moves with the clock, the cursor pins
// it), absolute ones as milliseconds so that equal instants bind equally.
func canonTime(text string, ms int64) string {
	if strings.HasPrefix(text, "now") {
		return text
	}
	return strconv.FormatInt(ms, 10)
}

// tierName is the API's name of a level.
func tierName(l tiers.Level) string { return l.String() }
