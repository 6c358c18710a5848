// Package httpapi is the gateway's REST front end: the routes of the v1
// API, the operational endpoints, the dashboard, and request validation
// against the OpenAPI contract; other front ends (Grafana, the Prometheus
// API) are mounted beside it. Handlers parse their parameters' syntax into
// a typed query.Request, call the engine, the write path or the registry,
// and encode answers; errors go through the one table of package problem.
// They hold no storage logic.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/web"
)

// Registry is the series registry as the API shows it.
type Registry interface {
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error)
}

// Config tunes the HTTP layer.
type Config struct {
	// MaxBodyBytes bounds a write's body; larger bodies get 413.
	MaxBodyBytes int64
	// MaxQueries bounds the series of one batch query.
	MaxQueries int
	// SpoolBytes is how much of an answer is buffered before the status is
	// sent: an answer that fails before that point can still become a
	// problem instead of a truncated 200, and one that ends before it goes
	// with its length, in one write. The default, 256 KiB, holds a
	// dashboard panel's answer (90 days of hourly windows are 123 KB); the
	// buffers are pooled.
	SpoolBytes int
	// Limits bound requests, answers and connections (limits.go).
	Limits Limits
}

// DefaultConfig returns the HTTP defaults.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 16 << 20, MaxQueries: DefaultMaxQueries, SpoolBytes: 256 << 10, Limits: DefaultLimits()}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MaxBodyBytes < 1024 {
		return errors.New("the body limit must be at least 1 KiB")
	}
	if c.MaxQueries < 1 {
		return errors.New("the queries of a batch must be bounded by at least 1")
	}
	if c.SpoolBytes < 512 {
		return errors.New("the spool must be at least 512 bytes")
	}
	return c.Limits.Validate()
}

// Deps are the parts the HTTP layer serves.
type Deps struct {
	Engine query.Engine
	// Many reads many series through Engine (batches, selectors).
	Many *query.Many
	// Index answers selectors.
	Index *index.Index
	// Limits are the engine's; the contract states the page limit.
	Limits  query.Limits
	Pyramid tiers.Pyramid
	Writer  *ingest.Writer
	// Importer writes history (POST /v1/import).
	Importer *ingest.Importer
	Registry Registry
	// Rollups runs pending rollups on demand.
	Rollups interface {
		RunOnce(ctx context.Context, all bool) (rollup.Report, error)
	}
	// Ready reports whether the store answers.
	Ready  func(context.Context) error
	Logger *slog.Logger
	Now    func() time.Time
	// Metrics and Gatherer serve /metrics; both may be nil.
	Metrics  *Metrics
	Gatherer prometheus.Gatherer
	// Home serves GET /; the dashboard of package web when nil.
	Home http.Handler
	// Mounts are the other front ends (/grafana, /prometheus, the
	// operators' /debug/pprof), served behind the same guards.
	Mounts []Mount
	// Tokens, when set, turn authentication on; AuthMetrics makes
	// /metrics need the read role.
	Tokens      *auth.Tokens
	AuthMetrics bool
	// Layouts serves the layout administration and the blocked list; its
	// routes answer 404 when nil.
	Layouts LayoutAdmin
	// NewSeries bounds the series writes create, shared with the other
	// ways in; one of the limits' bounds, for this server alone, when nil.
	NewSeries *ingest.NewSeriesLimit
}

// Mount is another front end, served under Prefix behind the guards of
// the v1 API: roles, limits, accepted bodies.
type Mount struct {
	Prefix  string
	Handler http.Handler
	// Role is what its routes need; a zero Role is refused by Validate's
	// callers, so that no mount is open by omission.
	Role auth.Role
	// Bodies are the media types its POST bodies may have besides
	// application/json (the Prometheus API takes HTML forms: its
	// read-only answers carry no CORS header, so a page of another origin
	// that posts a form learns nothing).
	Bodies []string
	// Refuse writes the guards' refusals other than authentication's
	// (overload, media type) in the front end's own error envelope;
	// problem+json with message and error members (problem.Shown) when
	// nil. 401 and 403 are problem+json on every route.
	Refuse func(http.ResponseWriter, *problem.Problem)
	// CORS says the front end answers the CORS preflights of the origins
	// --cors-origins allows: those, and only those, pass the role check,
	// since a browser sends them without credentials.
	CORS bool
}

// Server serves the API.
type Server struct {
	deps  Deps
	cfg   Config
	rolls *rollupRuns
	fresh *ingest.NewSeriesLimit
	// budget bounds the memory of the answers being built and sent.
	budget *membudget.Budget
}

// New returns a server.
func New(deps Deps, cfg Config) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	fresh := deps.NewSeries
	if fresh == nil {
		fresh = cfg.Limits.NewSeriesLimit()
	}
	s := &Server{deps: deps, cfg: cfg, rolls: newRollupRuns(), fresh: fresh,
		budget: membudget.New(cfg.Limits.AnswerMemory, cfg.Limits.MaxQueueWait)}
	if m := deps.Metrics; m != nil && m.guard != nil {
		s.budget.Observe(func(n int64) { m.guard.answerMemory.Set(float64(n)) })
	}
	return s
}

// Handler returns the routed handler.
func (s *Server) Handler() http.Handler {
	c, docs := s.contract()
	r := s.router()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "no route "+r.URL.Path+"; the API is described at /docs"))
	})
	// Every route is an operation of api/openapi.yaml (TestRoutesMatchSpec
	// keeps the two equal). Middlewares of a group run once chi has matched
	// the route, so each request is validated against its own operation;
	// the role a group's routes need is checked first, so that a refused
	// request has nothing of it read (TestEveryRouteDeclaresARole keeps
	// every route in such a group).
	validate := s.validateRequests(c)
	r.Group(func(r chi.Router) {
		r.Use(s.need(auth.Read), validate)
		r.Get("/v1/series/{id}/points", s.readPoints)
		r.Get("/v1/series/{id}/plan", s.plan)
		r.Post("/v1/query", s.batchQuery)
		r.Get("/v1/series", s.listSeries)
		r.Get("/v1/series/{id}", s.getSeries)
		r.Get("/v1/series/{id}/layout", s.getLayout)
		r.Get("/v1/labels", s.labelNames)
		r.Get("/v1/labels/{name}/values", s.labelValues)
		r.Get("/v1/points", s.readMatch)
		r.Get("/v1/plan", s.planMatch)
	})
	r.Group(func(r chi.Router) {
		r.Use(s.need(auth.Write), validate)
		r.Post("/v1/points", s.writePoints)
		r.Post("/v1/import", s.importPoints)
	})
	r.Group(func(r chi.Router) {
		r.Use(s.need(auth.Admin), validate, jsonBodyOnly(s.refuseProblem))
		r.Post("/v1/admin/rollups/run", s.runRollups)
		r.Get("/v1/admin/rollups/runs/{run}", s.rollupRun)
		s.layoutAdminRoutes(r)
	})
	s.storelessRoutes(r, validate, docs)
	// The other front ends, outside the contract's validation (the Grafana
	// datasource protocol's envelopes carry whatever members Grafana
	// adds).
	for _, m := range s.deps.Mounts {
		r.Mount(m.Prefix, s.guardMount(m))
	}
	return r
}

// Starting returns the handler that serves while the gateway waits for its
// store, or is being assembled over it: what needs no store is served as
// Handler serves it (/healthz, /metrics, the dashboard, /docs,
// /openapi.yaml), /readyz says why the gateway is not ready (Deps.Ready's
// error, or that it is starting), and every other request gets the
// store-unavailable problem with that reason and a Retry-After.
func (s *Server) Starting() http.Handler {
	st := *s
	st.deps.Ready = func(ctx context.Context) error {
		if err := s.deps.Ready(ctx); err != nil {
			return err
		}
		return errors.New("the gateway is starting")
	}
	c, docs := st.contract()
	r := st.router()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		problem.Write(w, notReady(st.deps.Ready(ctx)))
	})
	st.storelessRoutes(r, st.validateRequests(c), docs)
	return r
}

// contract is the API's contract with the configured page limit, and the
// API reference rendered from it.
func (s *Server) contract() (*contract, []byte) {
	c, err := newContract(s.deps.Limits.MaxLimit)
	if err != nil {
		// The document is embedded: it is valid in any binary whose tests
		// passed.
		panic("httpapi: " + err.Error())
	}
	docs, err := api.RenderDocs(c.doc)
	if err != nil {
		panic("httpapi: " + err.Error())
	}
	return c, docs
}

// router is a router with the middlewares every request goes through.
func (s *Server) router() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.RequestID)
	if s.deps.Metrics != nil {
		r.Use(s.deps.Metrics.instrument)
	}
	r.Use(s.compress)
	r.Use(s.recoverer, s.checkHost, s.crossOrigin, s.limit(newLimiter(s.cfg.Limits)))
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, problem.New(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", r.Method+" is not allowed on "+r.URL.Path))
	})
	return r
}

// storelessRoutes are the routes that need no store: probes, metrics, the
// contract and its reference, the dashboard.
func (s *Server) storelessRoutes(r chi.Router, validate func(http.Handler) http.Handler, docs []byte) {
	r.Group(func(r chi.Router) {
		r.Use(s.need(s.metricsRole()), validate)
		if s.deps.Gatherer != nil {
			r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.deps.Gatherer, promhttp.HandlerOpts{}))
		}
	})
	r.Group(func(r chi.Router) {
		r.Use(s.need(auth.Open), validate)
		r.Get("/healthz", s.healthz)
		r.Get("/readyz", s.readyz)
		r.Get("/openapi.yaml", serveSpec)
		r.Get("/docs", serveDocs(docs))
		r.Get("/", s.home)
	})
	// Outside the contract's validation: the dashboard's static files.
	r.Group(func(r chi.Router) {
		r.Use(s.need(auth.Open))
		r.Method(http.MethodGet, "/assets/*", web.Handler())
		r.Method(http.MethodHead, "/assets/*", web.Handler())
		r.Head("/", s.home)
	})
}

// metricsRole is what /metrics needs: nothing, unless --auth-metrics.
func (s *Server) metricsRole() auth.Role {
	if s.deps.AuthMetrics {
		return auth.Read
	}
	return auth.Open
}

// maxQueries is the most queries one batch may hold.
func (s *Server) maxQueries() int {
	if s.cfg.MaxQueries < 1 {
		return DefaultMaxQueries
	}
	return s.cfg.MaxQueries
}

func serveSpec(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(api.Spec)
}

func serveDocs(page []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(page)
	}
}

// home serves the dashboard, or sends the visitor to the API reference
// when the gateway has none.
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	if s.deps.Home != nil {
		s.deps.Home.ServeHTTP(w, r)
		return
	}
	web.Handler().ServeHTTP(w, r)
}

// logger returns the request's logger, carrying its id.
func (s *Server) logger(r *http.Request) *slog.Logger {
	l := s.deps.Logger.With("request_id", middleware.GetReqID(r.Context()), "path", r.URL.Path)
	if name := tokenName(r.Context()); name != "" {
		l = l.With("token", name)
	}
	return l
}

// recoverer turns a panic into a logged 500 problem: a crash of one request
// must not take the process down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger(r).Error("panic while handling request", "panic", v, "stack", string(debug.Stack()))
				problem.Write(w, problem.From(errors.New("panic")))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.deps.Ready(ctx); err != nil {
		s.writeProblem(w, r, notReady(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
}

// notReady is the store-unavailable problem with the store's reason: a
// probe's answer is read by operators, who need to know why.
func notReady(err error) *problem.Problem {
	p := problem.New(http.StatusServiceUnavailable, "store-unavailable", "Store unavailable", "not ready: "+err.Error())
	p.Header = http.Header{"Retry-After": {problem.StoreRetryAfter}}
	return p
}
