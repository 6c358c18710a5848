package gateway_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers/embedded"
)

func TestPprofOnlyWhenTurnedOn(t *testing.T) {
	for _, on := range []bool{false, true} {
		store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		env := querytest.NewEnv(t, store, querytest.Options{Configure: func(c *gateway.Config) { c.Pprof = on }})
		h := env.Gateway.Handler()
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
			if on && (w.Code != 200 || w.Body.Len() == 0) {
				t.Fatalf("--pprof: GET %s = %d %q", path, w.Code, w.Body.String())
			}
			if !on && w.Code != 404 {
				t.Fatalf("without --pprof: GET %s = %d, want 404", path, w.Code)
			}
		}
		if on {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/debug/pprof/heap?debug=1", nil))
			if !strings.Contains(w.Body.String(), "heap profile") {
				t.Fatalf("the heap profile reads %.200q", w.Body.String())
			}
		}
	}
}

// With tokens configured, the profiles need the admin role.
func TestPprofNeedsAdmin(t *testing.T) {
	tokens := map[auth.Role]string{}
	file := "tokens:\n"
	for _, r := range []auth.Role{auth.Read, auth.Write, auth.Admin} {
		tokens[r] = auth.NewToken()
		file += auth.FileLine("t-"+r.String(), r, tokens[r]) + "\n"
	}
	set, err := auth.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(t, store, querytest.Options{Tokens: auth.Static(set), Configure: func(c *gateway.Config) { c.Pprof = true }})
	h := env.Gateway.Handler()
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {tokens[auth.Read], 403}, {tokens[auth.Write], 403}, {tokens[auth.Admin], 200}} {
		req := httptest.NewRequest("GET", "/debug/pprof/cmdline", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Fatalf("GET /debug/pprof/cmdline with token %q: %d %s, want %d", c.token, w.Code, w.Body, c.want)
		}
	}
	// Every method needs the role: an OPTIONS, preflight-shaped or not,
	// must not run the profile (the command line holds the secrets given
	// as flags).
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/goroutine", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/"} {
		for _, preflight := range []bool{false, true} {
			req := httptest.NewRequest("OPTIONS", path, nil)
			if preflight {
				req.Header.Set("Origin", "https://grafana.example")
				req.Header.Set("Access-Control-Request-Method", "GET")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 401 || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("OPTIONS %s (preflight %v) without a token: %d %.200s", path, preflight, w.Code, w.Body)
			}
		}
	}
}
