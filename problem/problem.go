// Package problem is the one table from errors to HTTP answers: every
// front end (the REST API, Grafana, the Prometheus API) turns the errors of
// the engine, the write path and its own parsing into a Problem here, and
// writes it as RFC 9457 problem+json or reshapes it into its protocol's
// error envelope. Handlers return errors; nothing else picks a status.
package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// ParamError is one entry of a problem's errors member.
type ParamError struct {
	Param   string `json:"param"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem detail. Every error the API returns is one.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail"`
	Errors []ParamError `json:"errors,omitempty"`
	// Series and Reason name a blocked series and why it is blocked.
	Series string `json:"series,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Message and Summary (the member error) repeat Detail and Title for
	// the clients of front ends that show those members (Grafana's JSON
	// datasource shows message, else error); see Shown.
	Message string `json:"message,omitempty"`
	Summary string `json:"error,omitempty"`
	// Header holds headers the answer carries besides its body, such as
	// Retry-After or WWW-Authenticate.
	Header http.Header `json:"-"`
}

// Shown is p with its detail and title repeated as the members message
// and error, which clients of other protocols show (Grafana's JSON
// datasource, Prometheus' API clients): it stays problem+json.
func Shown(p *Problem) *Problem {
	q := *p
	q.Message, q.Summary = p.Detail, p.Title
	return &q
}

// Error lets a Problem travel as an error to the one place that writes it.
func (p *Problem) Error() string { return p.Detail }

// Type is the type URI of a problem: a fragment of the API reference this
// gateway serves at /docs, where each is explained.
func Type(slug string) string { return typePrefix + slug }

// Slug is the name a problem type ends in: Type's inverse.
func Slug(typ string) string { return strings.TrimPrefix(typ, typePrefix) }

const typePrefix = "/docs#problem/"

// New returns a problem of the given slug, title and status.
func New(status int, slug, title, detail string) *Problem {
	return &Problem{Type: Type(slug), Title: title, Status: status, Detail: detail}
}

// BadParams is the 400 problem of bad parameters, the first one's message
// as its detail.
func BadParams(errs params.Errors) *Problem {
	out := make([]ParamError, 0, len(errs))
	seen := map[ParamError]bool{}
	for _, e := range errs {
		pe := ParamError{Param: e.Param, Message: e.Message}
		if !seen[pe] {
			seen[pe] = true
			out = append(out, pe)
		}
	}
	detail := "the request is invalid"
	if len(out) > 0 {
		detail = out[0].Param + ": " + out[0].Message
	}
	return &Problem{Type: Type("invalid-parameter"), Title: "Invalid parameter", Status: http.StatusBadRequest, Detail: detail, Errors: out}
}

// StoreRetryAfter is the Retry-After, in seconds, of the store-unavailable
// problem: long enough that clients do not hammer a store that is
// recovering, short against the seconds a node takes to be seen again.
const StoreRetryAfter = "5"

// Kind says what went wrong when a problem travels as an error (a guard's
// refusal passed on to another front end's renderer).
func (p *Problem) Kind() failure.Kind {
	switch p.Status {
	case http.StatusBadRequest, http.StatusMisdirectedRequest:
		return failure.BadInput
	case http.StatusUnauthorized:
		return failure.Unauthorized
	case http.StatusForbidden:
		if p.Type == Type("series-blocked") {
			return failure.Blocked
		}
		return failure.Forbidden
	case http.StatusNotFound:
		return failure.NotFound
	case http.StatusRequestEntityTooLarge:
		return failure.TooLarge
	case http.StatusUnsupportedMediaType:
		return failure.UnsupportedMedia
	case http.StatusTooManyRequests:
		return failure.TooManyRequests
	case http.StatusGatewayTimeout:
		return failure.BudgetExceeded
	case http.StatusServiceUnavailable:
		if p.Type == Type("overloaded") {
			return failure.Overloaded
		}
		return failure.Unavailable
	}
	return failure.Internal
}

// pointErrors is an error that names each bad point of a write.
type pointErrors interface{ PointErrors() []params.Error }

// From is the one table from errors to answers: the problem an error is
// already, a body over its limit, or else the problem of its kind
// (failure.Of). An error nobody gave a kind is a bug in the gateway: a 500
// whose detail hides the internals.
func From(err error) *Problem {
	var p *Problem
	var mbe *http.MaxBytesError
	if errors.As(err, &p) {
		return p
	}
	if errors.As(err, &mbe) {
		return New(http.StatusRequestEntityTooLarge, "body-too-large", "Body too large",
			"the body is larger than the limit of "+ByteSize(mbe.Limit)+"; split the batch")
	}
	switch failure.Of(err) {
	case failure.BadInput:
		var pe pointErrors
		if errors.As(err, &pe) {
			list := pe.PointErrors()
			errs := make([]ParamError, len(list))
			for i, e := range list {
				errs[i] = ParamError{Param: e.Param, Message: e.Message}
			}
			return &Problem{Type: Type("invalid-points"), Title: "Invalid points", Status: http.StatusBadRequest, Detail: err.Error(), Errors: errs}
		}
		if list := params.List(err); list != nil {
			return BadParams(list)
		}
		return New(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", err.Error())
	case failure.NotFound:
		return New(http.StatusNotFound, "series-not-found", "Series not found",
			"no series has this id; GET /v1/series lists the known ones")
	case failure.Blocked:
		var be *tiers.BlockedError
		if errors.As(err, &be) {
			return &Problem{
				Type: Type("series-blocked"), Title: "Series blocked", Status: http.StatusForbidden,
				Detail: be.Error() + "; an operator unblocks it with DELETE /v1/admin/series/{id}/blocked",
				Series: be.Block.Series, Reason: be.Block.Reason,
			}
		}
		return New(http.StatusForbidden, "series-blocked", "Series blocked", err.Error())
	case failure.Unauthorized:
		return New(http.StatusUnauthorized, "unauthorized", "Unauthorized", err.Error())
	case failure.Forbidden:
		return New(http.StatusForbidden, "forbidden", "Forbidden", err.Error())
	case failure.TooLarge:
		return New(http.StatusRequestEntityTooLarge, "body-too-large", "Body too large", err.Error())
	case failure.UnsupportedMedia:
		return New(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", err.Error())
	case failure.TooManyRequests:
		p := New(http.StatusTooManyRequests, "new-series-rate", "New series rate exceeded", err.Error())
		p.Header = http.Header{"Retry-After": {"60"}}
		return p
	case failure.Overloaded:
		p := New(http.StatusServiceUnavailable, "overloaded", "Overloaded",
			"the gateway is serving as much as it may ("+err.Error()+"); retry later, or ask for fewer points at once")
		p.Header = http.Header{"Retry-After": {"1"}}
		return p
	case failure.BudgetExceeded:
		return New(http.StatusGatewayTimeout, "budget-exceeded", "Latency budget exceeded",
			"the read did not complete within its latency budget (slo); use partial=allow to get the complete part, or a larger slo")
	case failure.Unavailable:
		p := New(http.StatusServiceUnavailable, "store-unavailable", "Store unavailable",
			"the store did not answer; retry later")
		p.Header = http.Header{"Retry-After": {StoreRetryAfter}}
		return p
	case failure.Canceled:
		return New(499, "canceled", "Client closed the request", "the client went away before the answer was ready")
	default:
		return New(http.StatusInternalServerError, "internal", "Internal error",
			"the gateway failed to handle this request; the error is in its log")
	}
}

// ByteSize writes a size the way limits are configured.
func ByteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// Write answers with p as application/problem+json.
func Write(w http.ResponseWriter, p *Problem) {
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"/docs#problem/internal","title":"Internal error","status":500,"detail":"could not encode the problem"}`)
	}
	h := w.Header()
	for k, v := range p.Header {
		h[k] = v
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}
