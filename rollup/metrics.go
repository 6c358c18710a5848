package rollup

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the worker's Prometheus metrics.
type Metrics struct {
	windows *prometheus.CounterVec
	lag     *prometheus.GaugeVec
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
	}
	reg.MustRegister(m.windows, m.lag)
	return m
}
