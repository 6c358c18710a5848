package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/query"
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
}

// Error lets a Problem travel as an error to the one place that writes it.
func (p *Problem) Error() string { return p.Detail }

// problemType is the type URI of a problem: a fragment of the API
// reference this gateway serves at /docs, where each is explained.
func problemType(slug string) string { return "/docs#problem-" + slug }

func badParam(param, message string) *Problem {
	return &Problem{
		Type: problemType("invalid-parameter"), Title: "Invalid parameter", Status: http.StatusBadRequest,
		Detail: param + ": " + message, Errors: []ParamError{{Param: param, Message: message}},
	}
}

func badParams(detail string, errs []ParamError) *Problem {
	return &Problem{
		Type: problemType("invalid-parameter"), Title: "Invalid parameter", Status: http.StatusBadRequest,
		Detail: detail, Errors: errs,
	}
}

// toProblem is the one table from errors to HTTP answers. Anything it does
// not know is a bug in the gateway: a 500 whose detail hides the internals.
func toProblem(err error) *Problem {
	var p *Problem
	var qp *query.ParamError
	var ve *ingest.ValidationError
	var mbe *http.MaxBytesError
	var ce contractError
	var be *tiers.BlockedError
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &be):
		return blockedProblem(be)
	case errors.As(err, &qp):
		return badParam(qp.Param, qp.Err.Error())
	case errors.As(err, &ve):
		errs := make([]ParamError, len(ve.Errors))
		for i, e := range ve.Errors {
			errs[i] = ParamError{Param: e.Param, Message: e.Message}
		}
		return &Problem{
			Type: problemType("invalid-points"), Title: "Invalid points", Status: http.StatusBadRequest,
			Detail: ve.Error(), Errors: errs,
		}
	case errors.As(err, &mbe):
		return &Problem{
			Type: problemType("body-too-large"), Title: "Body too large", Status: http.StatusRequestEntityTooLarge,
			Detail: "the body is larger than the limit of " + byteSize(mbe.Limit) + "; split the batch",
		}
	case errors.As(err, &ce):
		errs := contractParamErrors(ce)
		return badParams(errs[0].Param+": "+errs[0].Message, errs)
	case errors.Is(err, query.ErrSeriesNotFound):
		return &Problem{
			Type: problemType("series-not-found"), Title: "Series not found", Status: http.StatusNotFound,
			Detail: "no series has this id; GET /v1/series lists the known ones",
		}
	case errors.Is(err, query.ErrBudget), errors.Is(err, partial.ErrBudgetExceeded), errors.Is(err, context.DeadlineExceeded):
		return &Problem{
			Type: problemType("budget-exceeded"), Title: "Latency budget exceeded", Status: http.StatusGatewayTimeout,
			Detail: "the read did not complete within its latency budget (slo); use partial=allow to get the complete part, or a larger slo",
		}
	case errors.Is(err, query.ErrUnavailable), isStoreError(err):
		return &Problem{
			Type: problemType("store-unavailable"), Title: "Store unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the store did not answer; retry later",
		}
	default:
		return &Problem{
			Type: problemType("internal"), Title: "Internal error", Status: http.StatusInternalServerError,
			Detail: "the gateway failed to handle this request; the error is in its log",
		}
	}
}

// storeError marks errors that come from the store, so they map to 503.
type storeError struct{ err error }

func (e storeError) Error() string { return "store: " + e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

func isStoreError(err error) bool {
	var se storeError
	return errors.As(err, &se)
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// writeProblem answers with the problem for err, logging server-side
// failures with the request's logger.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := toProblem(err)
	if p.Status >= 500 {
		level := slog.LevelWarn
		if p.Status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		s.logger(r).Log(r.Context(), level, "request failed", "status", p.Status, "err", err)
	}
	writeJSONProblem(w, p)
}

func writeJSONProblem(w http.ResponseWriter, p *Problem) {
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"/docs#problem-internal","title":"Internal error","status":500,"detail":"could not encode the problem"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}
