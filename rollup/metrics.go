package rollup

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the worker's Prometheus metrics.
type Metrics struct {
	windows *prometheus.CounterVec
	lag     *prometheus.GaugeVec
	// corrected counts series whose complete windows late points changed.
	corrected prometheus.Counter
}

// NewMetrics registers the worker's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		windows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_rollup_windows_recomputed_total",
			Help: "Rollup rows rewritten, by tier.",
		}, []string{"tier"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tsgate_rollup_lag_seconds",
			Help: "How far behind the clock each tier's watermark is.",
		}, []string{"tier"}),
		corrected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_rollup_corrected_series_total",
			Help: "Series whose complete rollup windows were rewritten (late points), given a new generation so that caches reload them.",
		}),
	}
	reg.MustRegister(m.windows, m.lag, m.corrected)
	return m
}
