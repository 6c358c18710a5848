package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
)

// contract is api/openapi.yaml as the server enforces it. Operations are
// found by the route pattern chi matched rather than by a second router, so
// the path parameters validated are exactly those the handlers read, and
// finding one costs a map lookup.
type contract struct {
	doc *openapi3.T
	// ops maps "METHOD /pattern" to its operation; checks to the same
	// operation without security requirements, which requests are
	// validated against (see newContract).
	ops, checks map[string]*routers.Route
	// all validates parameters and body; params leaves the body to the
	// handler.
	all, params openapi3filter.Options
}

// handlerValidatesBody lists the operations whose body the handler checks
// itself rather than the contract: a write body is up to the configured
// limit (16 MiB by default) and is validated point by point as it streams,
// with a message per point.
var handlerValidatesBody = map[string]bool{"POST /v1/points": true, "POST /v1/import": true}

// newContract loads the document, adjusted to the configured maximum page
// size.
func newContract(maxLimit int) (*contract, error) {
	doc, err := api.Load()
	if err != nil {
		return nil, err
	}
	// The bounds the engine owns are patched in, so that the contract
	// and the engine cannot disagree.
	if p := doc.Components.Parameters["QueryLimit"]; p != nil && p.Value != nil && p.Value.Schema != nil && maxLimit > 0 {
		max := float64(maxLimit)
		p.Value.Schema.Value.Max = &max
	}
	if p := doc.Components.Parameters["QueryMaxPoints"]; p != nil && p.Value != nil && p.Value.Schema != nil {
		max := float64(query.MaxMaxPoints)
		p.Value.Schema.Value.Max = &max
	}
	c := &contract{doc: doc, ops: map[string]*routers.Route{}, checks: map[string]*routers.Route{}}
	noSecurity := &openapi3.SecurityRequirements{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			c.ops[key] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
			// Tokens are checked by the route guards, before validation.
			// The validator would read every body whole, unbounded, to
			// hand it to an authentication function: it checks none here.
			v := *op
			v.Security = noSecurity
			c.checks[key] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: &v}
		}
	}
	c.all = openapi3filter.Options{MultiError: true, SkipSettingDefaults: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	c.params = c.all
	c.params.ExcludeRequestBody = true
	return c, nil
}

// validateRequests checks each request against its operation before the
// handler runs; it must run after chi has routed the request (in a Group),
// so that the route pattern is known. A request that breaks the contract
// is answered with a 400 naming each offending parameter. Routes the
// contract does not describe pass through: TestRoutesMatchSpec keeps there
// being none.
func (s *Server) validateRequests(c *contract) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx := chi.RouteContext(r.Context())
			key := r.Method + " " + rctx.RoutePattern()
			route := c.checks[key]
			if route == nil {
				next.ServeHTTP(w, r)
				return
			}
			splitListParams(r, route.Operation)
			if errs := repeatedParams(r.URL.Query(), route.Operation); len(errs) > 0 {
				s.writeProblem(w, r, errs)
				return
			}
			opts := &c.all
			if body := route.Operation.RequestBody; body == nil || handlerValidatesBody[key] ||
				body.Value.Content.Get(r.Header.Get("Content-Type")) == nil {
				// Without a body the contract describes, the handler
				// answers (a wrong content type is its 415).
				opts = &c.params
			} else if r.Body != nil {
				// The validator reads the body whole before the handler
				// does: bound it as the handler would.
				r.Body = http.MaxBytesReader(w, r.Body, maxBatchBodyBytes)
			}
			var pathParams map[string]string
			if n := len(rctx.URLParams.Keys); n > 0 {
				pathParams = make(map[string]string, n)
				for i, k := range rctx.URLParams.Keys {
					pathParams[k] = rctx.URLParams.Values[i]
				}
			}
			in := &openapi3filter.RequestValidationInput{Request: r, PathParams: pathParams, Route: route, Options: opts}
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				s.writeProblem(w, r, contractError{err})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// contractError is a request that breaks the OpenAPI contract.
type contractError struct{ err error }

func (e contractError) Error() string { return "contract: " + e.err.Error() }
func (e contractError) Unwrap() error { return e.err }

// contractParamErrors names each parameter, or member of the body, that a
// contract violation is about, with what is expected of it.
func contractParamErrors(err error) params.Errors {
	var out params.Errors
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case contractError:
			walk(e.err)
		case openapi3.MultiError:
			for _, x := range e {
				walk(x)
			}
		case *openapi3filter.RequestError:
			switch {
			case e.Parameter != nil:
				out = append(out, parameterErrors(e.Parameter, e.Err)...)
			case e.RequestBody != nil:
				out = append(out, bodyErrors(e.Err)...)
			default:
				out = append(out, &params.Error{Param: "request", Message: e.Error()})
			}
		default:
			out = append(out, &params.Error{Param: "request", Message: err.Error()})
		}
	}
	walk(err)
	if len(out) == 0 {
		return params.Errors{{Param: "request", Message: err.Error()}}
	}
	return out
}

func parameterErrors(p *openapi3.Parameter, err error) params.Errors {
	if errors.Is(err, openapi3filter.ErrInvalidRequired) {
		return params.Errors{{Param: p.Name, Message: "required"}}
	}
	if errors.Is(err, openapi3filter.ErrInvalidEmptyValue) {
		return params.Errors{{Param: p.Name, Message: "must not be empty"}}
	}
	switch e := err.(type) {
	case openapi3.MultiError:
		var out params.Errors
		for _, x := range e {
			out = append(out, parameterErrors(p, x)...)
		}
		return out
	case *openapi3.SchemaError:
		return params.Errors{{Param: p.Name, Message: schemaMessage(e)}}
	case *openapi3filter.ParseError:
		var schema *openapi3.Schema
		if p.Schema != nil {
			schema = p.Schema.Value
		}
		return params.Errors{{Param: p.Name, Message: "must be " + expected(schema)}}
	default:
		return params.Errors{{Param: p.Name, Message: err.Error()}}
	}
}

func bodyErrors(err error) params.Errors {
	if errors.Is(err, openapi3filter.ErrInvalidRequired) {
		return params.Errors{{Param: "body", Message: "required: a JSON object"}}
	}
	switch e := err.(type) {
	case openapi3.MultiError:
		var out params.Errors
		for _, x := range e {
			out = append(out, bodyErrors(x)...)
		}
		return out
	case *openapi3.SchemaError:
		return params.Errors{{Param: pointerParam(e), Message: schemaMessage(e)}}
	case *openapi3filter.ParseError:
		msg := "not valid JSON"
		if e.Cause != nil {
			msg += ": " + e.Cause.Error()
		}
		return params.Errors{{Param: "body", Message: msg}}
	default:
		return params.Errors{{Param: "body", Message: err.Error()}}
	}
}

// pointerParam names a member of the body path-style: queries[2].agg. An
// unknown member is named itself.
func pointerParam(se *openapi3.SchemaError) string {
	ptr := se.JSONPointer()
	if se.SchemaField == "properties" || se.SchemaField == "additionalProperties" {
		if name, ok := unknownMember(se); ok {
			ptr = append(ptr, name)
		}
	}
	var b strings.Builder
	for _, p := range ptr {
		if _, err := strconv.Atoi(p); err == nil && b.Len() > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// unknownMember extracts the member name of an "unsupported property"
// error: `property "x" is unsupported`.
func unknownMember(se *openapi3.SchemaError) (string, bool) {
	_, rest, ok := strings.Cut(se.Reason, `property "`)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, `"`)
	return name, ok && name != ""
}

// schemaMessage says what the schema expects, in the words of the
// handlers' own messages.
func schemaMessage(se *openapi3.SchemaError) string {
	s := se.Schema
	if s == nil {
		return se.Reason
	}
	switch se.SchemaField {
	case "required":
		return "required"
	case "nullable":
		return "must not be null: " + expected(s)
	case "properties", "additionalProperties":
		return "unknown member"
	case "enum":
		msg := "must be one of " + enumList(s.Enum)
		if v, ok := se.Value.(string); ok {
			msg = fmt.Sprintf("%q: %s", v, msg)
		}
		return msg
	case "pattern":
		// A schema may say in words what its pattern accepts.
		if accepts, ok := s.Extensions["x-accepts"].(string); ok {
			if v, ok := se.Value.(string); ok {
				return fmt.Sprintf("%q: must be %s", v, accepts)
			}
			return "must be " + accepts
		}
		return "must match " + s.Pattern
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type", "oneOf", "anyOf", "format":
		return "must be " + expected(s)
	case "minLength":
		if s.MinLength == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters", s.MinLength)
	case "maxLength":
		return fmt.Sprintf("must be at most %d characters", *s.MaxLength)
	case "minItems":
		return fmt.Sprintf("must hold at least %d", s.MinItems)
	case "maxItems":
		return fmt.Sprintf("must hold at most %d", *s.MaxItems)
	case "uniqueItems":
		return "must not name a value twice"
	default:
		// The validator's own wording is not the API's: say what is
		// expected instead.
		return "must be " + expected(s)
	}
}

// expected describes the values a schema takes: "an integer from 1 to
// 100000", "a string or an integer".
func expected(s *openapi3.Schema) string {
	if s == nil {
		return "valid"
	}
	if len(s.OneOf) > 0 || len(s.AnyOf) > 0 {
		alts := s.OneOf
		if len(alts) == 0 {
			alts = s.AnyOf
		}
		var parts []string
		for _, a := range alts {
			parts = append(parts, expected(a.Value))
		}
		return strings.Join(parts, " or ")
	}
	if len(s.Enum) > 0 {
		return "one of " + enumList(s.Enum)
	}
	var what string
	switch {
	case s.Type.Is("integer"):
		what = "an integer"
	case s.Type.Is("number"):
		what = "a number"
	case s.Type.Is("string"):
		what = "a string"
		if accepts, ok := s.Extensions["x-accepts"].(string); ok {
			what = accepts
		} else if s.Pattern != "" {
			what += " matching " + s.Pattern
		}
	case s.Type.Is("boolean"):
		what = "true or false"
	case s.Type.Is("array"):
		what = "a list"
		if s.Items != nil && s.Items.Value != nil && len(s.Items.Value.Enum) > 0 {
			what = "a list of " + enumList(s.Items.Value.Enum)
		} else if s.Items != nil && s.Items.Value != nil {
			if accepts, ok := s.Items.Value.Extensions["x-accepts"].(string); ok {
				what = "a list of " + strings.TrimPrefix(accepts, "one of ")
			}
		}
	case s.Type.Is("object"):
		what = "an object"
	default:
		what = "a value"
	}
	lo, hi := s.Min, s.Max
	switch {
	case lo != nil && hi != nil:
		what += " from " + num(*lo) + " to " + num(*hi)
	case lo != nil:
		what += " of at least " + num(*lo)
	case hi != nil:
		what += " of at most " + num(*hi)
	}
	return what
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func enumList(values []any) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}
