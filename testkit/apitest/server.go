// Package apitest is the end-to-end suite of the HTTP API: a user's
// scenarios — write, read raw and aggregated, page, query in batches, get
// problems for bad input — sent over HTTP to the whole gateway over a real
// store, some of them through the Go client generated from the contract.
//
// Every answer of every server of the package is validated against the
// contract, api/openapi.yaml: a test fails on any answer the document does
// not describe.
//
// The embedded store runs the suite in unit tests and the Cassandra store in
// the integration tests, so both stores serve the API identically.
package apitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// Server is the HTTP API over one store, on an httptest server, with the
// clock of a querytest environment. Every answer it gives is checked
// against the contract; the test fails at its end on any answer that
// breaks it.
type Server struct {
	*httptest.Server
	// Env is the engine, write path, rollup worker and clock the API
	// serves.
	Env *querytest.Env
	t   *testing.T
}

// NewServer serves the API over store, wired as the gateway wires it. The
// store closes with the test only if the caller arranges it.
func NewServer(t *testing.T, store tiers.Store) *Server {
	t.Helper()
	return Serve(t, querytest.NewEnv(t, store, querytest.Options{}))
}

// Serve serves the gateway env assembled. Tests that need another reader,
// budget or limit assemble env with querytest's options.
func Serve(t *testing.T, env *querytest.Env) *Server {
	t.Helper()
	checker := newContractChecker(t)
	ts := httptest.NewServer(checker.wrap(env.Gateway.Handler()))
	// Cleanups run last-registered first: the server closes, which waits
	// for its handlers, before the checker reports.
	t.Cleanup(checker.report)
	t.Cleanup(ts.Close)
	return &Server{Server: ts, Env: env, t: t}
}

// SetClock sets the environment's clock to a fixed time.
func (s *Server) SetClock(t time.Time) {
	s.Env.Clock.Advance(t.Sub(s.Env.Clock.Now()))
}

// Now is the environment's clock in Unix milliseconds.
func (s *Server) Now() int64 { return s.Env.Clock.Now().UnixMilli() }

// Do sends a request and returns the status, content type and body.
func (s *Server) Do(method, path, contentType, body string) (int, string, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// Get sends a GET, decodes the body into into (unless nil) and returns
// the status.
func (s *Server) Get(path string, into any) int {
	s.t.Helper()
	status, _, body := s.Do("GET", path, "", "")
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			s.t.Fatalf("GET %s: %d %s: %v", path, status, body, err)
		}
	}
	return status
}

// WritePoints writes points, each a JSON object of POST /v1/points, and
// fails the test unless they are accepted.
func (s *Server) WritePoints(points ...string) {
	s.t.Helper()
	status, _, body := s.Do("POST", "/v1/points", "application/json", `{"points":[`+strings.Join(points, ",")+`]}`)
	if status != 200 {
		s.t.Fatalf("write: %d %s", status, body)
	}
}

// Answer is a page of a read of one series.
type Answer struct {
	Series       string      `json:"series"`
	From         int64       `json:"from"`
	To           int64       `json:"to"`
	Tier         string      `json:"tier"`
	ResolutionMs int64       `json:"resolution_ms"`
	Order        string      `json:"order"`
	Columns      []string    `json:"columns"`
	Points       [][]float64 `json:"points"`
	Partial      bool        `json:"partial"`
	Reason       string      `json:"partial_reason"`
	Covered      []int64     `json:"covered"`
	NextCursor   string      `json:"next_cursor"`
	Warnings     []string    `json:"warnings"`
	Segments     []struct {
		From int64  `json:"from"`
		To   int64  `json:"to"`
		Tier string `json:"tier"`
	} `json:"segments"`
	Stats map[string]float64 `json:"stats"`
}

// Problem is a problem+json answer.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Param   string `json:"param"`
		Message string `json:"message"`
	} `json:"errors"`
}

// Query encodes the query string of the pairs key, value, ….
func Query(kv ...string) string {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

// NewMemStore opens an in-memory embedded store that decides expiry by
// now and closes with the test.
func NewMemStore(t testing.TB, now func() time.Time) *embedded.Store {
	t.Helper()
	store, err := embedded.OpenInMemory(embedded.Options{Now: now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// NewMemServer serves the API over a fresh in-memory embedded store that
// keeps time by the server's clock, so that a test may set it to a fixed
// time, in the past or not.
func NewMemServer(t *testing.T) *Server {
	t.Helper()
	return NewMemServerWith(t, querytest.Options{})
}

// NewMemServerWith is NewMemServer with the gateway assembled with opts
// (tokens, limits).
func NewMemServerWith(t *testing.T, opts querytest.Options) *Server {
	t.Helper()
	var env *querytest.Env
	store := NewMemStore(t, func() time.Time {
		if env == nil {
			return querytest.Start()
		}
		return env.Clock.Now()
	})
	s := Serve(t, querytest.NewEnv(t, store, opts))
	env = s.Env
	return s
}
