// Package promapi is the gateway's Prometheus API under /prometheus: the
// read endpoints Grafana's Prometheus datasource and other PromQL clients
// call (query, query_range, series, labels, label values, metadata,
// buildinfo), remote write (a Prometheus server as a source) and remote
// read (the gateway as a Prometheus server's remote storage).
//
// Expressions are evaluated by Prometheus' own PromQL engine
// (github.com/prometheus/prometheus/promql) over a storage.Queryable on
// the gateway's tiers (queryable.go): every function, operator and
// aggregation of that engine works, with Prometheus' semantics. Selectors
// find series through the label index; points are read through the
// engine's reads of many series under the query's budget.
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
	"github.com/prometheus/prometheus/promql"

	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/problem"
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
	// MaxSeries bounds the series one selector of a query or listing reads.
	MaxSeries int
	// MaxSamples bounds the samples one query may hold at once (the
	// engine's own limit; over it the query fails with its error).
	MaxSamples int
	// LookbackDelta is how far back an instant looks for a sample.
	LookbackDelta time.Duration
	// ExactWithin is how far back from now PromQL reads raw points for
	// rate, increase and quantile_over_time, whose answers from rollups
	// (counter summaries, sketches) are within 1 % and not exact; a
	// select reaching further back may read the rollups. 0: the raw
	// tier's retention, so that on data the raw tier holds the answers
	// equal Prometheus'.
	ExactWithin time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{MaxSeries: 1000, MaxSamples: 50_000_000, LookbackDelta: 5 * time.Minute}
}

// RegisterFlags adds the flags of the configuration.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxSeries, "prometheus-max-series", c.MaxSeries, "series one selector of a /prometheus query or listing may read")
	fs.IntVar(&c.MaxSamples, "prom-max-samples", c.MaxSamples, "samples one PromQL query may hold at once (more: 422 execution, the engine's error)")
	fs.DurationVar(&c.LookbackDelta, "prom-lookback-delta", c.LookbackDelta, "how far back PromQL looks for a sample at an instant (Prometheus' --query.lookback-delta)")
	fs.DurationVar(&c.ExactWithin, "prom-exact-within", c.ExactWithin, "PromQL's rate, increase and quantile_over_time over ranges reaching no further back than this read raw points, exactly; further back they may read the rollups' counter summaries and sketches, within 1 % (0: the raw tier's retention)")
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.MaxSeries < 1 {
		errs = append(errs, errors.New("--prometheus-max-series must be at least 1"))
	}
	if c.MaxSamples < 1 {
		errs = append(errs, errors.New("--prom-max-samples must be at least 1"))
	}
	if c.LookbackDelta <= 0 {
		errs = append(errs, errors.New("--prom-lookback-delta must be positive"))
	}
	if c.ExactWithin < 0 {
		errs = append(errs, errors.New("--prom-exact-within must not be negative (0: the raw tier's retention)"))
	}
	return errors.Join(errs...)
}

// Deps are what the API reads and writes.
type Deps struct {
	// Many reads the points of series; Index finds series by selector.
	Many     *query.Many
	Index    *index.Index
	Registry Registry
	// Writer takes remote writes; nil refuses them. NewSeries bounds the
	// series they create, with every other way in.
	Writer    *ingest.Writer
	NewSeries *ingest.NewSeriesLimit
	// MaxLimit is the page size of every read: the largest there is, since
	// every read goes to its end.
	MaxLimit int
	// Pyramid is the tiers the store keeps: a function over a range that
	// whole rollup windows answer reads them (see windowsFor).
	Pyramid tiers.Pyramid
	// Timeout is the longest a query may take (--slo-max).
	Timeout time.Duration
	Now     func() time.Time
	Logger  *slog.Logger
	// Metrics counts refusals and remote writes; nil counts nothing.
	Metrics *Metrics
}

// API serves the Prometheus endpoints.
type API struct {
	deps   Deps
	cfg    Config
	engine *promql.Engine
}

// New returns the API.
func New(deps Deps, cfg Config) *API {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Timeout <= 0 {
		deps.Timeout = time.Minute
	}
	engine := promql.NewEngine(promql.EngineOpts{
		Logger:               deps.Logger,
		MaxSamples:           cfg.MaxSamples,
		Timeout:              deps.Timeout,
		LookbackDelta:        cfg.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		// Prometheus' default for a subquery without a step: the global
		// evaluation interval, one minute.
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
	})
	return &API{deps: deps, cfg: cfg, engine: engine}
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

// RemoteWriteHandler is remote write, mounted on its own (it needs the
// write role): POST /prometheus/api/v1/write.
func (a *API) RemoteWriteHandler() http.Handler {
	r := chi.NewRouter()
	r.Post("/", a.remoteWrite)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "POST")
		problem.Write(w, problem.New(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", r.Method+" is not allowed on "+r.URL.Path+"; remote write POSTs"))
	})
	return r
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
	r.Post("/api/v1/read", a.remoteRead)
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
	errors  *prometheus.CounterVec
	samples prometheus.Counter
	dropped prometheus.Counter
	tiered  *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tsgate_prometheus_errors_total",
		Help: "Prometheus API requests answered with an error, by endpoint, errorType and the limit a refusal ran into (max_series, max_points, max_samples, max_partitions; none otherwise).",
	}, []string{"endpoint", "error_type", "limit"}),
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_remote_write_samples_total", Help: "Samples taken by Prometheus remote write.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_remote_write_samples_dropped_total", Help: "Remote-write samples left out: NaN and infinite values (stale markers are kept).",
		}),
		tiered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_prometheus_selects_from_rollups_total",
			Help: "PromQL selectors answered from rollup windows instead of raw points, by the function over them.",
		}, []string{"function"}),
	}
	reg.MustRegister(m.errors, m.samples, m.dropped, m.tiered)
	return m
}

// approximates says whether a select from start (Unix ms) may read the
// rollups' counter summaries and sketches: whether it reaches further
// back than the configured horizon (Config.ExactWithin).
func (a *API) approximates(start int64) bool {
	within := a.cfg.ExactWithin
	if within == 0 {
		within = time.Duration(a.deps.Pyramid.Raw().Retention) * time.Millisecond
		if within == 0 {
			return false // raw points are kept forever: always exact
		}
	}
	return start < a.deps.Now().Add(-within).UnixMilli()
}

func (m *Metrics) servedFromTiers(fn string) {
	if m != nil {
		m.tiered.WithLabelValues(fn).Inc()
	}
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
