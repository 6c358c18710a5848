package apitest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/klauspost/compress/zstd"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/problem"
)

// NotInSpec lists routes the server has on purpose outside the document,
// with the reason; add a route here only if it is not part of the API
// (static assets of a page, say). Everything else the server routes must
// be an operation of the document, and every operation must be routed.
var NotInSpec = map[string]string{
	"GET /assets/*":  "the dashboard's static files",
	"HEAD /assets/*": "the dashboard's static files",
	"HEAD /":         "the dashboard page, for HEAD",
}

// exemptAnswer reports whether a request is outside the document on
// purpose, so its answer is not checked against it: the routes of
// NotInSpec, and CORS preflights of the Grafana datasource, which the
// browser sends before the documented POSTs.
func exemptAnswer(r *http.Request) bool {
	if r.Method == http.MethodOptions && strings.HasPrefix(r.URL.Path, "/grafana") {
		return true
	}
	if r.Method == http.MethodHead && r.URL.Path == "/" {
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/assets/") && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// contractChecker validates the answers of a test server against the
// document: status, content type and body of documented operations; a
// problem of the right shape and status for anything else.
type contractChecker struct {
	t        *testing.T
	mu       sync.Mutex
	problems []string
	answers  int
}

var checkerSetup = sync.OnceValues(func() (*checkerContract, error) {
	// Pages are text to the validator.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/yaml", openapi3filter.PlainBodyDecoder)
	doc, err := api.Load()
	if err != nil {
		return nil, err
	}
	// The document's server is any gateway's address; the router matches
	// paths on whatever address a test server has.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	types, err := api.ProblemTypes(doc)
	if err != nil {
		return nil, err
	}
	statuses := map[string]int{}
	for _, p := range types {
		statuses[problem.Type(p.Slug)] = p.Status
	}
	return &checkerContract{doc: doc, router: router, problemStatus: statuses}, nil
})

// checkerContract is the document as the checker uses it, shared by every
// test: it is only read.
type checkerContract struct {
	doc           *openapi3.T
	router        routers.Router
	problemStatus map[string]int
}

func newContractChecker(t *testing.T) *contractChecker {
	t.Helper()
	if _, err := checkerSetup(); err != nil {
		t.Fatal(err)
	}
	return &contractChecker{t: t}
}

// Checked wraps h so that every answer it gives is checked against the
// contract; the test fails at its end on any answer that breaks it. Start
// the server after calling it, so that the server closes first.
func Checked(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	c := newContractChecker(t)
	t.Cleanup(c.report)
	return c.wrap(h)
}

// wrap records every answer of next and checks it once it is complete.
func (c *contractChecker) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if !rec.wrote {
			rec.status = http.StatusOK
		}
		var err error
		if !exemptAnswer(r) {
			err = CheckAnswer(r, rec.status, rec.Header(), rec.body.Bytes())
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.answers++
		if err != nil {
			c.problems = append(c.problems, fmt.Sprintf("%s %s → %d %s:\n%v\nbody: %.600s", r.Method, r.URL, rec.status, rec.Header().Get("Content-Type"), err, rec.body.Bytes()))
		}
	})
}

// report fails the test for every answer that broke the contract.
func (c *contractChecker) report() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.problems {
		c.t.Errorf("an answer breaks api/openapi.yaml: %s", p)
	}
}

// CheckAnswer validates one answer — its status, headers and body — to
// the request r against the document.
func CheckAnswer(r *http.Request, status int, header http.Header, body []byte) error {
	cc, err := checkerSetup()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if body, err = decodeAnswer(r, header, body); err != nil {
		return err
	}
	if strings.HasPrefix(header.Get("Content-Type"), "application/problem+json") {
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return fmt.Errorf("problem is not JSON: %w", err)
		}
		if p.Status != status || cc.problemStatus[p.Type] != status {
			return fmt.Errorf("problem %s with status %d in an answer of status %d (x-problem-types says %d)", p.Type, p.Status, status, cc.problemStatus[p.Type])
		}
	}
	if r.URL.Path == "/grafana/" {
		// The datasource URL as Grafana may call it: the document's
		// /grafana, which says so.
		r = r.Clone(ctx)
		r.URL.Path = "/grafana"
	}
	route, params, err := cc.router.FindRoute(r)
	if err != nil {
		// Not an operation of the document: the router's own 404 or 405.
		want := http.StatusNotFound
		if errors.Is(err, routers.ErrMethodNotAllowed) {
			want = http.StatusMethodNotAllowed
		}
		mounted := strings.HasPrefix(r.URL.Path, "/prometheus/") || strings.HasPrefix(r.URL.Path, "/grafana") || strings.HasPrefix(r.URL.Path, "/debug/pprof")
		if mounted && status == http.StatusUnauthorized {
			// A mounted front end's guard asks for a token before the
			// front end routes anything: no route is shown to a client
			// without one.
			want = status
		}
		if status != want {
			return fmt.Errorf("unrouted request (%v) answered %d, want %d", err, status, want)
		}
		switch {
		case status == http.StatusUnauthorized:
			// A problem, as on every route (below).
		case strings.HasPrefix(r.URL.Path, "/prometheus/"):
			// The Prometheus API answers everything in its own envelope.
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				return err
			}
			return cc.doc.Components.Schemas["PrometheusError"].Value.VisitJSON(v, openapi3.MultiErrors())
		case strings.HasPrefix(r.URL.Path, "/grafana"):
			// The datasource answers everything in Grafana's error shape.
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				return err
			}
			return cc.doc.Components.Schemas["GrafanaError"].Value.VisitJSON(v, openapi3.MultiErrors())
		}
		if ct := header.Get("Content-Type"); ct != "application/problem+json" {
			return fmt.Errorf("unrouted request answered with content type %q, want a problem", ct)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		return cc.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.MultiErrors())
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		return err
	}
	// A documented body needs its content type even where the validator
	// lets an empty body pass.
	if rv := route.Operation.Responses.Status(status); rv != nil && len(rv.Value.Content) > 0 && header.Get("Content-Type") == "" {
		return errors.New("no Content-Type")
	}
	return nil
}

// decodeAnswer undoes the Content-Encoding of an answer, which must be one
// the request accepted, announced by Vary.
func decodeAnswer(r *http.Request, header http.Header, body []byte) ([]byte, error) {
	ce := header.Get("Content-Encoding")
	if ce == "" || ce == "snappy" && r.URL.Path == "/prometheus/api/v1/read" {
		// Remote read answers snappy whatever the request accepts: its
		// protocol says so.
		return body, nil
	}
	if !strings.Contains(r.Header.Get("Accept-Encoding"), ce) {
		return nil, fmt.Errorf("answer in Content-Encoding %q to a request that accepts %q", ce, r.Header.Get("Accept-Encoding"))
	}
	if !slices.Contains(header.Values("Vary"), "Accept-Encoding") {
		return nil, fmt.Errorf("compressed answer without Vary: Accept-Encoding (Vary %q)", header.Values("Vary"))
	}
	var rd io.Reader
	switch ce {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("gzip answer: %w", err)
		}
		rd = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("zstd answer: %w", err)
		}
		defer zr.Close()
		rd = zr
	default:
		return nil, fmt.Errorf("answer in unknown Content-Encoding %q", ce)
	}
	out, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("%s answer does not decode: %w", ce, err)
	}
	return out, nil
}

// recorder passes an answer on and keeps a copy.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
