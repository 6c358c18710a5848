package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-chi/chi/v5"
)

// The contract follows the configured page size, not the default the
// document states.
func TestContractFollowsConfiguredLimit(t *testing.T) {
	c, err := newContract(500)
	if err != nil {
		t.Fatal(err)
	}
	route := c.ops["GET /v1/series/{id}/points"]
	for limit, ok := range map[string]bool{"500": true, "501": false} {
		r := httptest.NewRequest("GET", "/v1/series/s/points?from=now-1h&limit="+limit, nil)
		err := openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
			Request: r, PathParams: map[string]string{"id": "s"}, Route: route, Options: &c.all,
		})
		if (err == nil) != ok {
			t.Errorf("limit=%s: %v", limit, err)
		}
		if err != nil {
			if errs := contractParamErrors(err); errs[0].Message != "must be an integer from 1 to 500" {
				t.Errorf("limit=%s: %+v", limit, errs)
			}
		}
	}
}

const benchRead = "/v1/series/sensor-1/points?from=now-6h&to=now&resolution=5m&agg=min,max,avg&limit=10000&order=asc&slo=2s"

// BenchmarkRequestValidation measures what validating a read's request
// against the contract costs, over routing alone.
func BenchmarkRequestValidation(b *testing.B) {
	s := New(Deps{}, DefaultConfig())
	c, err := newContract(100000)
	if err != nil {
		b.Fatal(err)
	}
	for _, validate := range []bool{false, true} {
		r := chi.NewRouter()
		r.Group(func(r chi.Router) {
			if validate {
				r.Use(s.validateRequests(c))
			}
			r.Get("/v1/series/{id}/points", func(w http.ResponseWriter, r *http.Request) {})
		})
		b.Run(fmt.Sprintf("validate=%v", validate), func(b *testing.B) {
			req := httptest.NewRequest("GET", benchRead, nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				r.ServeHTTP(w, req)
			}
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		})
	}
}
