package promapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/problem"
)

// errorType is the errorType member of a Prometheus error answer.
type errorType string

// The error types and, in status, the statuses Prometheus answers them
// with.
const (
	errBadData     errorType = "bad_data"
	errExec        errorType = "execution"
	errUnavailable errorType = "unavailable"
	errTimeout     errorType = "timeout"
	errCanceled    errorType = "canceled"
	errInternal    errorType = "internal"
	errNotFound    errorType = "not_found"
	errMethod      errorType = "method_not_allowed"
)

func (t errorType) status() int {
	switch t {
	case errBadData:
		return http.StatusBadRequest
	case errExec:
		return http.StatusUnprocessableEntity
	case errUnavailable:
		return http.StatusServiceUnavailable
	case errTimeout:
		return http.StatusGatewayTimeout
	case errCanceled:
		// What Prometheus answers when the client went away.
		return 499
	case errNotFound:
		return http.StatusNotFound
	case errMethod:
		return http.StatusMethodNotAllowed
	default:
		return http.StatusInternalServerError
	}
}

// apiError is every failure of the API. limit names the configured bound
// a refusal ran into, for the metrics; status, when set, is the answer's
// status instead of the error type's.
type apiError struct {
	typ    errorType
	msg    string
	limit  string
	status int
}

func (e *apiError) Error() string { return string(e.typ) + ": " + e.msg }

func badData(format string, args ...any) *apiError {
	return &apiError{typ: errBadData, msg: fmt.Sprintf(format, args...)}
}

func overLimit(limit, format string, args ...any) *apiError {
	return &apiError{typ: errBadData, msg: fmt.Sprintf(format, args...), limit: limit}
}

// kindTypes are the Prometheus error types of the gateway's kinds of
// failure; the statuses are the gateway's one table's (problem.From), so
// that a failure has the same status on every route.
var kindTypes = map[failure.Kind]errorType{
	failure.BadInput: errBadData, failure.TooLarge: errBadData, failure.UnsupportedMedia: errBadData,
	failure.NotFound: errNotFound, failure.Blocked: errBadData, failure.Unauthorized: errBadData,
	failure.Forbidden: errBadData, failure.TooManyRequests: errUnavailable, failure.Overloaded: errUnavailable,
	failure.BudgetExceeded: errTimeout, failure.Unavailable: errUnavailable, failure.Canceled: errCanceled,
	failure.Internal: errInternal,
}

// engineError is the Prometheus error of what the query engine, the
// registry or the store returned, by its kind.
func engineError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	k := failure.Of(err)
	p := problem.From(err)
	msg := p.Detail
	switch k {
	case failure.BadInput:
		if list := params.List(err); list != nil {
			msg = list.Error()
		} else {
			msg = err.Error()
		}
	case failure.Blocked:
		msg = err.Error()
	}
	return &apiError{typ: kindTypes[k], msg: msg, status: p.Status}
}

func writeError(w http.ResponseWriter, err error) {
	ae := engineError(err)
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", string(ae.typ), ae.msg})
	status := ae.status
	if status == 0 {
		status = ae.typ.status()
	}
	write(w, status, append(b, '\n'))
}

// writeSuccess writes data, which is either raw JSON already encoded or a
// value to marshal.
func writeSuccess(w http.ResponseWriter, data any, warnings []string) {
	b := append(make([]byte, 0, 4096), `{"status":"success","data":`...)
	switch d := data.(type) {
	case json.RawMessage:
		b = append(b, d...)
	case result:
		b = appendResult(b, d)
	default:
		enc, err := json.Marshal(d)
		if err != nil {
			writeError(w, err)
			return
		}
		b = append(b, enc...)
	}
	if len(warnings) > 0 {
		enc, _ := json.Marshal(warnings)
		b = append(b, `,"warnings":`...)
		b = append(b, enc...)
	}
	write(w, http.StatusOK, append(b, '}', '\n'))
}

func write(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// appendTime writes a timestamp as Prometheus does: Unix seconds with the
// milliseconds as a fraction, trailing zeros dropped.
func appendTime(b []byte, ms int64) []byte {
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	sec, frac := ms/1000, ms%1000
	b = strconv.AppendInt(b, sec, 10)
	if frac == 0 {
		return b
	}
	b = append(b, '.', byte('0'+frac/100))
	if frac%100 != 0 {
		b = append(b, byte('0'+frac/10%10))
		if frac%10 != 0 {
			b = append(b, byte('0'+frac%10))
		}
	}
	return b
}

// appendValue writes a sample value as Prometheus does: a JSON string of
// the shortest decimal, or +Inf, -Inf, NaN.
func appendValue(b []byte, v float64) []byte {
	b = append(b, '"')
	switch {
	case math.IsInf(v, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(v, -1):
		b = append(b, "-Inf"...)
	case math.IsNaN(v):
		b = append(b, "NaN"...)
	default:
		b = jsonenc.AppendFloatF(b, v)
	}
	return append(b, '"')
}

// appendQuoted writes s as a JSON string.
func appendQuoted(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }

// WriteRefusal answers a refusal of the gateway's guards in front of this
// API (authentication, roles, media types, hosts, overload) in the API's
// error envelope, with the refusal's own status. Prometheus has no error
// types for these; the type is the problem's, so that a client tells them
// apart.
func WriteRefusal(w http.ResponseWriter, p *problem.Problem) {
	typ := problem.Slug(p.Type)
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", strings.ReplaceAll(typ, "-", "_"), p.Detail})
	for k, v := range p.Header {
		w.Header()[k] = v
	}
	write(w, p.Status, append(b, '\n'))
}
