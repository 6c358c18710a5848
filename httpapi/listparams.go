package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tsgate/tsgate/params"
)

// The aggregates take several values. The contract describes them as an
// array, which generated clients send as a repeated query parameter
// (agg=min&agg=max), while people and older clients write a comma list
// (agg=min,max). Both are accepted for the parameters the contract marks
// x-comma-list; the contract checks each item whichever form was used.
// Other arrays (match: selectors hold commas) are only repeated.

// splitListParams rewrites the values of the query parameters that the
// operation describes as arrays into one value per item, so that the
// contract checks each item however the list was written. A value given
// empty (agg=) is dropped: an empty optional parameter is one left out.
func splitListParams(r *http.Request, op *openapi3.Operation) {
	if r.URL.RawQuery == "" {
		return
	}
	var q url.Values
	for _, p := range op.Parameters {
		if p.Value == nil || p.Value.In != openapi3.ParameterInQuery || !isArrayParam(p.Value) || p.Value.Extensions["x-comma-list"] != true {
			continue
		}
		if q == nil {
			q = r.URL.Query()
		}
		vals, ok := q[p.Value.Name]
		if !ok {
			continue
		}
		var items []string
		for _, v := range vals {
			if v != "" {
				items = append(items, strings.Split(v, ",")...)
			}
		}
		if len(items) == 0 {
			q.Del(p.Value.Name)
		} else {
			q[p.Value.Name] = items
		}
	}
	if q != nil {
		r.URL.RawQuery = q.Encode()
	}
}

// repeatedParams names each query parameter that takes one value but is
// given more than once: which of the values was meant is a guess the
// gateway does not make.
func repeatedParams(q url.Values, op *openapi3.Operation) params.Errors {
	var errs params.Errors
	for _, p := range op.Parameters {
		if p.Value == nil || p.Value.In != openapi3.ParameterInQuery || isArrayParam(p.Value) {
			continue
		}
		if n := len(q[p.Value.Name]); n > 1 {
			errs.Add(p.Value.Name, "is given %d times; it takes one value", n)
		}
	}
	return errs
}

func isArrayParam(p *openapi3.Parameter) bool {
	return p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Type.Is("array")
}
