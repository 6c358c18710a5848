package httpapi_test

import (
	"bytes"
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
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/testkit/apitest"
)

// The contract, api/openapi.yaml, is enforced three ways: the routes of
// the server are exactly the paths of the document (here); every answer of
// every test server (apitest.NewServer, under newTestServer) is validated
// against the document; and golden files pin a few representative answers
// byte for byte.

// TestRoutesMatchSpec walks the chi routes and the document's paths and
// fails on any difference.
func TestRoutesMatchSpec(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	h := apitest.NewMemServer(t).Env.Gateway.Handler()
	mux, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("the handler is a %T, not a chi router", h)
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
		if !specified[r] && apitest.NotInSpec[r] == "" {
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
		enum = append(enum, problem.Slug(v.(string)))
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
	status, ct, page := s.Do("GET", "/docs", "", "")
	if status != 200 || !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("GET /docs: %d %s", status, ct)
	}
	for slug := range documented {
		if !bytes.Contains(page, []byte(`id="problem/`+slug+`"`)) {
			t.Errorf("/docs has no anchor #problem/%s", slug)
		}
	}
}

// problemTypesInCode lists the slugs passed to problemType in the
// package's source.
func problemTypesInCode(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{".", "../problem", "../grafana"} {
		fs, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
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
		inProblem := file.Name.Name == "problem"
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			// problem.New(status, slug, ...) and problem.Type(slug), or
			// New and Type inside package problem.
			var name string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); ok && x.Name == "problem" {
					name = fn.Sel.Name
				}
			case *ast.Ident:
				if inProblem {
					name = fn.Name
				}
			}
			arg := -1
			switch {
			case name == "New" && len(call.Args) == 4:
				arg = 1
			case name == "Type" && len(call.Args) == 1:
				arg = 0
			}
			if arg < 0 {
				return true
			}
			if lit, ok := call.Args[arg].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				if !slices.Contains(slugs, s) {
					slugs = append(slugs, s)
				}
			}
			return true
		})
	}
	return slugs
}

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
	if err := apitest.CheckAnswer(get("/v1/series/s/points?from=1"), 200, jsonCT, []byte(okAnswer)); err != nil {
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
		{"wrong tier", get("/v1/series/s/points?from=1"), 200, jsonCT, strings.Replace(okAnswer, `"tier":"raw"`, `"tier":"Minute tier"`, 1)},
		{"string point", get("/v1/series/s/points?from=1"), 200, jsonCT, strings.Replace(okAnswer, `[[1,2.5]]`, `[["1",2.5]]`, 1)},
		{"undocumented status", get("/v1/series/s/points?from=1"), 201, jsonCT, okAnswer},
		{"wrong content type", get("/v1/series/s/points?from=1"), 200, http.Header{"Content-Type": {"text/plain"}}, okAnswer},
		{"problem without detail", get("/v1/series/s/points?from=1"), 404, problemCT, `{"type":"/docs#problem/series-not-found","title":"Series not found","status":404}`},
		{"problem of the wrong status", get("/v1/series/s/points?from=1"), 404, problemCT, `{"type":"/docs#problem/invalid-parameter","title":"x","status":404,"detail":"x"}`},
		{"unknown problem type", get("/v1/series/s/points?from=1"), 404, problemCT, `{"type":"/docs#problem/oops","title":"x","status":404,"detail":"x"}`},
		{"unrouted 200", get("/v2/nothing"), 200, jsonCT, `{}`},
	}
	for _, b := range bad {
		if err := apitest.CheckAnswer(b.req, b.status, b.header, []byte(b.body)); err == nil {
			t.Errorf("%s: the checker lets it pass", b.name)
		}
	}
}
