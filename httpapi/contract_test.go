package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/httpapi"
)

// The contract, api/openapi.yaml, is enforced three ways here: the routes
// of the server are exactly the paths of the document; every answer of
// every test server (newTestServer) is validated against the document; and
// golden files pin a few representative answers byte for byte.

// notInSpec lists routes the server has on purpose outside the document,
// with the reason; add a route here only if it is not part of the API
// (static assets of a page, say). Everything else the server routes must
// be an operation of the document, and every operation must be routed.
var notInSpec = map[string]string{
	"GET /assets/*":  "the dashboard's static files",
	"HEAD /assets/*": "the dashboard's static files",
	"HEAD /":         "the dashboard page, for HEAD",
}

// exemptAnswer reports whether a request is outside the document on
// purpose, so its answer is not checked against it: the routes of
// notInSpec, and CORS preflights of the Grafana datasource, which the
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

// TestRoutesMatchSpec walks the chi routes and the document's paths and
// fails on any difference.
func TestRoutesMatchSpec(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(httpapi.Deps{Gatherer: prometheus.NewRegistry()}, httpapi.DefaultConfig())
	mux, ok := srv.Handler().(chi.Routes)
	if !ok {
		t.Fatalf("the handler is a %T, not a chi router", srv.Handler())
	}
	routed := map[string]bool{}
	err = chi.Walk(mux, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+normalizeRoute(route)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	specified := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			specified[method+" "+normalizeRoute(path)] = true
		}
	}
	var missing, unrouted []string
	for r := range routed {
		if !specified[r] && notInSpec[r] == "" {
			missing = append(missing, r)
		}
	}
	for r := range specified {
		if !routed[r] {
			unrouted = append(unrouted, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(unrouted)
	for _, r := range missing {
		t.Errorf("route %s is not in api/openapi.yaml", r)
	}
	for _, r := range unrouted {
		t.Errorf("api/openapi.yaml has %s, which the server does not route", r)
	}
	if len(routed) < 10 {
		t.Errorf("only %d routes walked: %v", len(routed), routed)
	}
}

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// normalizeRoute makes chi patterns and OpenAPI paths comparable: path
// parameters lose their names (and chi's regular expressions), and a
// trailing slash is dropped.
func normalizeRoute(route string) string {
	route = pathParam.ReplaceAllString(route, "{}")
	if len(route) > 1 {
		route = strings.TrimSuffix(route, "/")
	}
	return route
}

// TestProblemTypesAreDocumented checks that the problem types the code
// uses, the document's x-problem-types, the Problem schema's type enum and
// the anchors of /docs are the same set, with the same statuses.
func TestProblemTypesAreDocumented(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	types, err := api.ProblemTypes(doc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]int{}
	for _, p := range types {
		documented[p.Slug] = p.Status
	}
	var enum []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		enum = append(enum, strings.TrimPrefix(v.(string), "/docs#problem-"))
	}
	used := problemTypesInCode(t)
	for _, slugs := range []struct {
		where string
		slugs []string
	}{{"the Problem schema's type enum", enum}, {"the code", used}} {
		for _, s := range slugs.slugs {
			if _, ok := documented[s]; !ok {
				t.Errorf("%s has problem type %q, which x-problem-types does not explain", slugs.where, s)
			}
		}
		for s := range documented {
			if !slices.Contains(slugs.slugs, s) {
				t.Errorf("x-problem-types explains %q, which %s does not have", s, slugs.where)
			}
		}
	}
	s := newTestServer(t)
	status, ct, page := s.do("GET", "/docs", "", "")
	if status != 200 || !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("GET /docs: %d %s", status, ct)
	}
	for slug := range documented {
		if !bytes.Contains(page, []byte(`id="problem-`+slug+`"`)) {
			t.Errorf("/docs has no anchor #problem-%s", slug)
		}
	}
}

// problemTypesInCode lists the slugs passed to problemType in the
// package's source.
func problemTypesInCode(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var slugs []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "problemType" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				if !slices.Contains(slugs, s) {
					slugs = append(slugs, s)
				}
			}
			return true
		})
	}
	// problem.go's fallback for a problem that cannot be encoded.
	slugs = append(slugs, "internal")
	return slices.Compact(slices.Sorted(slices.Values(slugs)))
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
	doc, err := api.Load()
	if err != nil {
		return nil, err
	}
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
		statuses["/docs#problem-"+p.Slug] = p.Status
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
			err = checkAnswer(r, rec.status, rec.Header(), rec.body.Bytes())
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

// checkAnswer validates one answer against the document.
func checkAnswer(r *http.Request, status int, header http.Header, body []byte) error {
	cc, err := checkerSetup()
	if err != nil {
		return err
	}
	ctx := context.Background()
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
	route, params, err := cc.router.FindRoute(r)
	if err != nil {
		// Not an operation of the document: the router's own 404 or 405.
		want := http.StatusNotFound
		if errors.Is(err, routers.ErrMethodNotAllowed) {
			want = http.StatusMethodNotAllowed
		}
		if status != want {
			return fmt.Errorf("unrouted request (%v) answered %d, want %d", err, status, want)
		}
		if strings.HasPrefix(r.URL.Path, "/grafana") {
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

// The checker itself must catch answers that break the document, or the
// e2e tests prove nothing.
func TestCheckerCatchesViolations(t *testing.T) {
	get := func(path string) *http.Request {
		r, err := http.NewRequest("GET", path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	problemCT := http.Header{"Content-Type": {"application/problem+json"}}
	okAnswer := `{"series":"s","from":1,"to":2,"tier":"raw","resolution_ms":0,"order":"asc","columns":["t","v"],"segments":[],"points":[[1,2.5]],"partial":false,"covered":[1,2],"stats":{"buckets":1,"partitions":1,"rows_read":1,"cache_hits":0,"elapsed_ms":0.1}}`
	if err := checkAnswer(get("/v1/series/s/points?from=1"), 200, jsonCT, []byte(okAnswer)); err != nil {
		t.Fatalf("a valid answer is refused: %v", err)
	}
	bad := []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
	}{
		{"missing member", get("/v1/series/s/points?from=1"), 200, jsonCT, strings.Replace(okAnswer, `"partial":false,`, "", 1)},
		{"wrong tier", get("/v1/series/s/points?from=1"), 200, jsonCT, strings.Replace(okAnswer, `"tier":"raw"`, `"tier":"second"`, 1)},
		{"string point", get("/v1/series/s/points?from=1"), 200, jsonCT, strings.Replace(okAnswer, `[[1,2.5]]`, `[["1",2.5]]`, 1)},
		{"undocumented status", get("/v1/series/s/points?from=1"), 201, jsonCT, okAnswer},
		{"wrong content type", get("/v1/series/s/points?from=1"), 200, http.Header{"Content-Type": {"text/plain"}}, okAnswer},
		{"problem without detail", get("/v1/series/s/points?from=1"), 404, problemCT, `{"type":"/docs#problem-series-not-found","title":"Series not found","status":404}`},
		{"problem of the wrong status", get("/v1/series/s/points?from=1"), 404, problemCT, `{"type":"/docs#problem-invalid-parameter","title":"x","status":404,"detail":"x"}`},
		{"unknown problem type", get("/v1/series/s/points?from=1"), 404, problemCT, `{"type":"/docs#problem-oops","title":"x","status":404,"detail":"x"}`},
		{"unrouted 200", get("/v2/nothing"), 200, jsonCT, `{}`},
	}
	for _, b := range bad {
		if err := checkAnswer(b.req, b.status, b.header, []byte(b.body)); err == nil {
			t.Errorf("%s: the checker lets it pass", b.name)
		}
	}
}
