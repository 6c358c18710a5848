package seal

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/tiers"
)

// Metrics are the worker's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	buckets prometheus.Counter
	points  prometheus.Counter
	chunks  prometheus.Counter
	// Rollup partitions and rows, by tier.
	partitions *prometheus.CounterVec
	rows       *prometheus.CounterVec
	errors     prometheus.Counter
	backlog    prometheus.Gauge
	// Partitions whose rows a store kept after their seal, deleted since.
	deleted prometheus.Counter
	runs    prometheus.Counter
	// Rewritten rollup partitions not noted for another seal.
	dropped prometheus.Counter
}

// NewMetrics registers the worker's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		buckets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_seal_buckets_total",
			Help: "Raw buckets (all their event buckets) rewritten as compressed chunks.",
		}),
		points: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_seal_points_total",
			Help: "Raw rows folded into compressed chunks.",
		}),
		chunks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_seal_chunks_total",
			Help: "Compressed chunks written by seals.",
		}),
		partitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_seal_rollup_partitions_total",
			Help: "Rollup partitions rewritten as compressed chunks, by tier.",
		}, []string{"tier"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_seal_rollup_rows_total",
			Help: "Rollup rows folded into compressed chunks, by tier.",
		}, []string{"tier"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_seal_errors_total",
			Help: "Seal runs that failed (the next run does their work again).",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tsgate_seal_backlog_seconds",
			Help: "Span of final raw buckets not sealed yet: from the seal checkpoint to the newest final bucket end, while a run works on it.",
		}),
	}
	m.deleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tsgate_seal_rows_deleted_partitions_total",
		Help: "Partitions whose rows the store kept for reads in flight after their seal (Cassandra's --cassandra-sealed-rows-grace), deleted since.",
	})
	m.runs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tsgate_seal_runs_total",
		Help: "Seal runs that completed, their checkpoints advanced.",
	})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tsgate_seal_rewritten_dropped_total",
		Help: "Rollup partitions rewritten after their seal that were not noted to be sealed again (too many between two runs); their rows stay beside their chunks.",
	})
	reg.MustRegister(m.buckets, m.points, m.chunks, m.partitions, m.rows, m.errors, m.backlog, m.deleted, m.runs, m.dropped)
	return m
}

func (m *Metrics) sealed(t tiers.Tier, r tiers.SealReport) {
	if m == nil {
		return
	}
	m.chunks.Add(float64(r.Chunks))
	if t.Level != tiers.LevelRaw {
		m.partitions.WithLabelValues(t.Name).Inc()
		m.rows.WithLabelValues(t.Name).Add(float64(r.Rows))
		return
	}
	m.buckets.Inc()
	m.points.Add(float64(r.Rows))
}

func (m *Metrics) failed() {
	if m != nil {
		m.errors.Inc()
	}
}

func (m *Metrics) setBacklog(d time.Duration) {
	if m != nil {
		m.backlog.Set(d.Seconds())
	}
}

func (m *Metrics) rowsDeleted(n int) {
	if m != nil {
		m.deleted.Add(float64(n))
	}
}

func (m *Metrics) ran() {
	if m != nil {
		m.runs.Inc()
	}
}

func (m *Metrics) rewrittenDropped() {
	if m != nil {
		m.dropped.Inc()
	}
}
