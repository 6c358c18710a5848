package gateway

import (
	"context"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/tiers"
)

// storeMetrics times the store's partition reads and writes by table, so
// that /metrics tells the store's latency apart from the gateway's.
type storeMetrics struct {
	reads  *prometheus.HistogramVec
	writes *prometheus.HistogramVec
}

var storeBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		reads: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tsgate_store_read_seconds", Help: "Time from a partition read's start to its first page (or its end), by table.",
			Buckets: storeBuckets,
		}, []string{"table"}),
		writes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tsgate_store_write_seconds", Help: "Time of one durable write of rows to the store.",
			Buckets: storeBuckets,
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.reads, m.writes)
	return m
}

// Instruments are the metrics that exist before the gateway is assembled:
// the registry, with Go's, the process's and the build's metrics, and the
// HTTP metrics. A server that starts before its store is ready counts its
// requests and serves /metrics with them; New adds the gateway's own
// metrics to the same registry.
type Instruments struct {
	Registry *prometheus.Registry
	HTTP     *httpapi.Metrics
}

// NewInstruments returns the instruments of a gateway of version ("dev"
// when empty).
func NewInstruments(version string) *Instruments {
	if version == "" {
		version = "dev"
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg, version)
	return &Instruments{Registry: reg, HTTP: httpapi.NewMetrics(reg)}
}

// registerBuildInfo publishes the version the gateway was built as.
func registerBuildInfo(reg prometheus.Registerer, version string) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tsgate_build_info", Help: "The gateway's version and the Go version it was built with; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// timedReader times partition reads.
type timedReader struct {
	tiers.PartitionReader
	m *storeMetrics
}

func (r timedReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	return &timedPages{RowPages: r.PartitionReader.Read(ctx, req), m: r.m, table: string(req.Key.Table), start: time.Now()}
}

type timedPages struct {
	tiers.RowPages
	m     *storeMetrics
	table string
	start time.Time
	done  bool
}

func (p *timedPages) Next() ([]tiers.Row, error) {
	rows, err := p.RowPages.Next()
	if !p.done {
		p.done = true
		p.m.reads.WithLabelValues(p.table).Observe(time.Since(p.start).Seconds())
	}
	return rows, err
}

// timedWriter times writes of rows.
type timedWriter struct {
	tiers.Store
	m *storeMetrics
}

func (w timedWriter) Write(ctx context.Context, writes []tiers.PartitionWrite) error {
	start := time.Now()
	err := w.Store.Write(ctx, writes)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	w.m.writes.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	return err
}
