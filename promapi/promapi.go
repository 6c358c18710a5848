// Package promapi answers the read endpoints of the Prometheus HTTP API
// (query_range, query, series, labels, label values, metadata, buildinfo)
// so that Grafana's built-in Prometheus datasource charts the gateway's
// series with no plugin.
//
// It owns the mapping of PromQL onto the gateway: every series is
// tsgate{series="<id>"}; selectors pick series through the registry; the
// *_over_time functions become windowed reads that the router serves from
// the tier whose step divides the window; sum, min, max, avg and count
// merge the per-series answers. Expressions are parsed by metricsql and
// anything outside that subset is a bad_data error naming what is
// supported. docs/prometheus.md states the window rule and where it
// differs from Prometheus.
package promapi

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// MaxPointsPerSeries is Prometheus' own bound on the evaluation
// timestamps of a range query; clients expect its error beyond it.
const MaxPointsPerSeries = 11000

// Registry is the series registry as the API reads it.
type Registry interface {
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error)
}

// Config bounds the work of one request.
type Config struct {
	// MaxSeries bounds the series one query or listing reads.
	MaxSeries int
	// MaxWindows bounds the windows read for one series of a query: a
	// range function whose windows do not line up with the step reads
	// finer windows and folds them, and this caps how fine.
	MaxWindows int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{MaxSeries: 1000, MaxWindows: 100000} }

// RegisterFlags adds the flags of the configuration.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxSeries, "prometheus-max-series", c.MaxSeries, "series one /prometheus query or listing may read")
	fs.IntVar(&c.MaxWindows, "prometheus-max-windows", c.MaxWindows, "windows one /prometheus query may read per series")
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.MaxSeries < 1 {
		errs = append(errs, errors.New("--prometheus-max-series must be at least 1"))
	}
	if c.MaxWindows < MaxPointsPerSeries {
		errs = append(errs, errors.New("--prometheus-max-windows must be at least 11000, the points of one series"))
	}
	return errors.Join(errs...)
}

// Deps are what the API reads.
type Deps struct {
	Engine   query.Engine
	Registry Registry
	// Pyramid is the engine's tiers: the retention of raw points and the
	// steps of the rollups decide which windows are cheap.
	Pyramid tiers.Pyramid
	// MaxLimit is the page size of every read: the largest there is, since
	// every read goes to its end.
	MaxLimit int
	Now      func() time.Time
	Logger   *slog.Logger
	// Metrics counts refusals; nil counts nothing.
	Metrics *Metrics
}

// API serves the Prometheus endpoints.
type API struct {
	deps Deps
	cfg  Config
}

// New returns the API.
func New(deps Deps, cfg Config) *API {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{deps: deps, cfg: cfg}
}

// route is one endpoint: its path relative to the mount point, its name
// in metrics, its handler.
type route struct {
	path, name string
	h          func(r *http.Request) (any, []string, error)
}

func (a *API) routes() []route {
	return []route{
		{"/api/v1/query_range", "query_range", a.queryRange},
		{"/api/v1/query", "query", a.instantQuery},
		{"/api/v1/series", "series", a.series},
		{"/api/v1/labels", "labels", a.labels},
		{"/api/v1/label/{name}/values", "label_values", a.labelValues},
		{"/api/v1/metadata", "metadata", a.metadata},
		{"/api/v1/status/buildinfo", "buildinfo", a.buildinfo},
		{"/api/v1/query_exemplars", "query_exemplars", a.exemplars},
	}
}

// Handler returns the endpoints' routes (/api/v1/...), to be mounted at
// /prometheus.
func (a *API) Handler() http.Handler {
	r := chi.NewRouter()
	for _, rt := range a.routes() {
		h := a.endpoint(rt.name, rt.h)
		r.Get(rt.path, h)
		r.Post(rt.path, h)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{typ: errNotFound, msg: "no Prometheus API endpoint " + r.URL.Path +
			"; the gateway answers /api/v1/query_range, query, series, labels, label/{name}/values, metadata, status/buildinfo and query_exemplars"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, &apiError{typ: errMethod, msg: r.Method + " is not allowed on " + r.URL.Path + "; use GET or POST"})
	})
	return r
}

// endpoint parses the form (the query string, and a POSTed form body, as
// Grafana sends) and writes whatever the handler returns in the envelope.
func (a *API) endpoint(name string, h func(r *http.Request) (any, []string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			writeError(w, badData("cannot parse the form: %v", err))
			return
		}
		data, warnings, err := h(r)
		if err != nil {
			a.deps.Metrics.refused(name, err)
			var ae *apiError
			if !errors.As(err, &ae) || ae.typ == errInternal {
				a.deps.Logger.Error("prometheus request failed", "endpoint", name, "err", err)
			}
			writeError(w, err)
			return
		}
		writeSuccess(w, data, warnings)
	}
}

// maxFormBytes bounds a POSTed form: the longest expressions Grafana
// sends carry every value of a multi-value variable.
const maxFormBytes = 4 << 20

// Metrics are the API's Prometheus metrics.
type Metrics struct {
	errors *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tsgate_prometheus_errors_total",
		Help: "Prometheus API requests answered with an error, by endpoint, errorType and the limit a refusal ran into (max_series, max_windows, max_points, max_partitions; none otherwise).",
	}, []string{"endpoint", "error_type", "limit"})}
	reg.MustRegister(m.errors)
	return m
}

func (m *Metrics) refused(endpoint string, err error) {
	if m == nil {
		return
	}
	typ, limit := errInternal, "none"
	var ae *apiError
	if errors.As(err, &ae) {
		typ = ae.typ
		if ae.limit != "" {
			limit = ae.limit
		}
	}
	m.errors.WithLabelValues(endpoint, string(typ), limit).Inc()
}
