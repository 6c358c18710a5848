package httpapi

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
)

// readFields are the read parameters of /points, /plan and the queries of
// a batch, as text. The syntax of each is parsed here; what the values mean
// together (ranges, limits, defaults, the cursor) is the engine's to check,
// once, when it normalises the request.
type readFields struct {
	From, To, Resolution, MaxPoints, Order, Limit, Cursor, SLO, Partial string
	// Agg is every value given: agg=min,max and agg=min&agg=max alike.
	Agg []string
}

// singleValued are the read parameters that take one value; a query string
// that repeats one is refused rather than silently truncated.
var singleValued = []string{"from", "to", "resolution", "max_points", "order", "limit", "cursor", "slo", "partial"}

// queryFields reads the read parameters of a query string.
func queryFields(q url.Values) (readFields, params.Errors) {
	var errs params.Errors
	for _, name := range singleValued {
		if len(q[name]) > 1 {
			errs.Add(name, "is given %d times; it takes one value", len(q[name]))
		}
	}
	return readFields{
		From: q.Get("from"), To: q.Get("to"), Resolution: q.Get("resolution"), MaxPoints: q.Get("max_points"),
		Agg: q["agg"], Order: q.Get("order"), Limit: q.Get("limit"), Cursor: q.Get("cursor"),
		SLO: q.Get("slo"), Partial: q.Get("partial"),
	}, errs
}

// request parses the fields' syntax into a typed request for series;
// name maps a parameter to the name the client knows it by.
func (f readFields) request(series string, name func(string) string) (query.Request, params.Errors) {
	var errs params.Errors
	bad := func(param, format string, args ...any) { errs.Add(name(param), format, args...) }
	req := query.Request{Series: series, Cursor: f.Cursor, Start: time.Now()}
	if f.From != "" {
		t, err := params.ParseInstant(f.From)
		if err != nil {
			bad("from", "%s", err)
		}
		req.From = t
	} else {
		bad("from", "required: the start of the range (RFC 3339, Unix ms, or now-<duration>)")
	}
	if f.To != "" {
		t, err := params.ParseInstant(f.To)
		if err != nil {
			bad("to", "%s", err)
		}
		req.To = t
	}
	res, err := query.ParseResolution(f.Resolution)
	if err != nil {
		bad("resolution", "%s", err)
	}
	req.Resolution = res
	if f.MaxPoints != "" {
		// The range of a number is the engine's to check; what does not
		// parse as one is out of range too.
		n, err := strconv.ParseInt(f.MaxPoints, 10, 64)
		if err != nil || n < 1 {
			n = -1
		}
		req.MaxPoints = n
	}
	if aggs := nonEmpty(f.Agg); len(aggs) > 0 {
		aggs, err := query.ParseAggs(strings.Join(aggs, ","))
		if err != nil {
			bad("agg", "%s", err)
		}
		req.Aggs = aggs
	}
	switch f.Order {
	case "", "asc":
	case "desc":
		req.Desc = true
	default:
		bad("order", "must be asc or desc")
	}
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n < 1 {
			n = -1
		}
		req.Limit = n
	}
	if f.SLO != "" {
		d, err := params.Duration(f.SLO)
		switch {
		case err != nil:
			bad("slo", "must be a positive duration like 500ms: %s", err)
		case d == 0:
			req.SLO = -1
		default:
			req.SLO = time.Duration(d) * time.Millisecond
		}
	}
	switch f.Partial {
	case "", "allow":
	case "deny":
		req.Deny = true
	default:
		bad("partial", "must be allow or deny")
	}
	return req, errs
}

// keep returns parameter names unchanged.
func keep(s string) string { return s }

// nonEmpty drops empty values: an empty optional parameter means its
// default.
func nonEmpty(values []string) []string {
	var out []string
	for _, v := range values {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
