package kafkaingest

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the consumer's, on the gateway's registry.
type Metrics struct {
	records      prometheus.Counter
	points       prometheus.Counter
	deadLetters  *prometheus.CounterVec
	retries      *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	paused       prometheus.Gauge
	assigned     prometheus.Gauge
	delay        prometheus.Histogram
	commitErrors prometheus.Counter
}

// NewMetrics registers the consumer's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "tsgate_kafka_records_total",
			Help: "Kafka records done with: their points durably written, or the record sent to the dead-letter topic."}),
		points: prometheus.NewCounter(prometheus.CounterOpts{Name: "tsgate_kafka_points_total",
			Help: "Points of Kafka records durably written."}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tsgate_kafka_dead_letters_total",
			Help: "Kafka records that can never be written, sent to the dead-letter topic, by kind: invalid, media (no decoder for the content type), new_series."},
			[]string{"kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tsgate_kafka_write_retries_total",
			Help: "Attempts that failed and were retried, by cause: store (a write or lookup), dead_letter (the dead-letter topic), new_series_rate (--max-new-series-per-minute)."},
			[]string{"cause"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tsgate_kafka_consumer_lag",
			Help: "Records of a partition this gateway consumes that are not written yet: the partition's end offset less the offset of the next record to write."},
			[]string{"topic", "partition"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tsgate_kafka_paused_partitions",
			Help: "Partitions whose fetching is paused: the store is failing, or their fetched records fill their share of --kafka-queue-bytes."}),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tsgate_kafka_assigned_partitions",
			Help: "Partitions of the topic assigned to this gateway in its consumer group."}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tsgate_kafka_record_delay_seconds",
			Help:    "Time from a record's timestamp to its points being durably written (or the record dead-lettered).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tsgate_kafka_commit_errors_total",
			Help: "Offset commits that failed (the next commit covers them)."}),
	}
	reg.MustRegister(m.records, m.points, m.deadLetters, m.retries, m.lag, m.paused, m.assigned, m.delay, m.commitErrors)
	for _, k := range []string{refusedInvalid, refusedMedia, refusedNewSeries} {
		m.deadLetters.WithLabelValues(k)
	}
	for _, c := range []string{causeStore, causeDeadLetter, causeNewSeriesRate} {
		m.retries.WithLabelValues(c)
	}
	return m
}
