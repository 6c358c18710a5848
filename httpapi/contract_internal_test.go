package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
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

// BenchmarkReadPoints is a whole read of one series over the embedded
// store, validation included: the scale against which to judge the
// validation's cost.
func BenchmarkReadPoints(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(b, store, store)
	h := New(Deps{Engine: env.Engine, Writer: env.Writer, Registry: store, Rollups: env.Rollups, Ready: store.Ping, Now: env.Clock.Now}, DefaultConfig()).Handler()
	now := env.Clock.Now().UnixMilli()
	var body strings.Builder
	body.WriteString(`{"points":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"series":"sensor-1","t":%d,"v":%d.5}`, now-tiers.Hour+int64(i)*3*tiers.Second, i)
	}
	body.WriteString(`]}`)
	req := httptest.NewRequest("POST", "/v1/points", strings.NewReader(body.String()))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("write: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct{ name, path string }{
		{"raw-1000", "/v1/series/sensor-1/points?from=now-2h&resolution=raw"},
		{"5m-12", "/v1/series/sensor-1/points?from=now-2h&resolution=5m&agg=min,max,avg"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", c.path, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
