package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/tsgate/tsgate/problem"
)

// mediaType is the request's media type without parameters, lower case;
// "" when the header is missing or malformed.
func mediaType(r *http.Request) string {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// hasMediaType reports whether the request's body is declared as exactly
// one of types (parameters such as charset aside): a prefix match would
// take application/jsonxyz, and text/plain must never pass, or a web page
// could post to the gateway without a CORS preflight.
func hasMediaType(r *http.Request, types ...string) bool {
	mt := mediaType(r)
	for _, t := range types {
		if mt == t {
			return true
		}
	}
	return false
}

// unsupportedMedia is the 415 problem of a body in the wrong media type.
func unsupportedMedia(want, got string) *problem.Problem {
	if got == "" {
		got = "missing"
	} else {
		got = `"` + got + `"`
	}
	return problem.New(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
		want+" (Content-Type was "+got+")")
}

// jsonProblem says what is wrong with a JSON body in the API's words,
// rather than the decoder's.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "the body"
		}
		return fmt.Sprintf("%s holds a JSON %s, which is not what it takes", where, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends before the JSON value does"
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown member " + name
	}
	return "not valid JSON"
}
