package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/query"
)

// Metrics are the HTTP layer's Prometheus metrics.
type Metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	partitions *prometheus.CounterVec
	rowsRead   *prometheus.CounterVec
	pages      *prometheus.HistogramVec
	partials   *prometheus.CounterVec
	storeErrs  prometheus.Counter
	points     prometheus.Counter
	late       prometheus.Counter
	guard      *guardMetrics
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tsgate_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
		partitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_read_partitions_total", Help: "Partitions opened by reads, by the tier of the answer.",
		}, []string{"tier"}),
		rowsRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_read_rows_total", Help: "Rows read from the store by reads, by the tier of the answer.",
		}, []string{"tier"}),
		pages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tsgate_read_page_seconds", Help: "Time to answer one page of a read, by the tier of the answer.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tier"}),
		partials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_read_partial_answers_total", Help: "Read pages cut short, by reason (slo, unavailable).",
		}, []string{"reason"}),
		storeErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_store_errors_total", Help: "Requests or partitions that failed because the store did not answer.",
		}),
		points: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_points_written_total", Help: "Points accepted by the write API.",
		}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_late_points_total", Help: "Points that arrived later than the lateness threshold and went to the late table.",
		}),
	}
	for _, reason := range []string{"slo", "unavailable"} {
		m.partials.WithLabelValues(reason)
	}
	m.guard = newGuardMetrics(reg)
	reg.MustRegister(m.requests, m.latency, m.partitions, m.rowsRead, m.pages, m.partials, m.storeErrs, m.points, m.late)
	return m
}

// instrument counts and times every request under its route pattern, so
// that ids in paths do not explode the label space.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
		m.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
		if sw.status == http.StatusServiceUnavailable {
			m.storeErrs.Inc()
		}
	})
}

// ObserveRead records what one answered page did; the gateway wraps the
// engine with it (query.Observe), so that every front end's reads count.
func (m *Metrics) ObserveRead(h *query.Head, tr query.Trailer) {
	if m == nil {
		return
	}
	tier := h.Plan.TierName
	m.partitions.WithLabelValues(tier).Add(float64(tr.Stats.Partitions))
	m.rowsRead.WithLabelValues(tier).Add(float64(tr.Stats.RowsRead))
	m.pages.WithLabelValues(tier).Observe(tr.Stats.Elapsed.Seconds())
	if tr.Partial {
		m.partials.WithLabelValues(tr.Reason).Inc()
		if tr.Reason == "unavailable" {
			m.storeErrs.Inc()
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
