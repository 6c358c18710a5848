// Package kafkaingest consumes points from an Apache Kafka topic and writes
// them through the gateway's one validated write path (ingest.Writer),
// records decoded by the HTTP writes' decoders (one function, keyed by the
// record's content-type header, picks the decoder).
//
// The contract:
//
//   - At least once. A record's offset is committed only once its points
//     are durably written (Writer.Write returned nil), or, for a record that
//     can never be written (the /v1/points validation refuses it, its
//     content type has no decoder, it creates too many series), once it is
//     durably in the dead-letter topic with the reason. Writes are
//     idempotent, so a record written again after a crash changes nothing.
//   - Store errors are never dead-lettered: the write is retried with
//     backoff until the store takes it, and the partition's fetching is
//     paused meanwhile.
//   - Gateways in one consumer group share the topic's partitions. Before
//     a partition is revoked, its processing stops (the write in flight
//     may finish within a grace period) and what is durable is committed;
//     what is not is never committed and is read again by the next owner.
//   - Memory is bounded: fetched records wait in a queue of at most
//     QueueBytes across partitions; a partition whose share is full stops
//     fetching (PauseFetchPartitions) until its records are written, and
//     polling stops while the whole queue is full. Nothing is dropped.
//
// Each assigned partition has a worker goroutine that writes its records
// in order; partitions are written concurrently.
package kafkaingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tsgate/tsgate/ingest"
)

// Deps are what the consumer writes with.
type Deps struct {
	Writer Writer
	// Registry and NewSeries apply the bound on new series of the HTTP
	// writes; NewSeries nil bounds nothing.
	Registry  ingest.SeriesLookup
	NewSeries *ingest.NewSeriesLimit
	// Registerer takes the consumer's metrics.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock of relative point times and of the record delay
	// metric; time.Now when nil.
	Now func() time.Time
}

// Consumer consumes one topic in a consumer group.
type Consumer struct {
	cfg     Config
	deps    Deps
	opts    []kgo.Opt
	metrics *Metrics
	log     *slog.Logger

	client *kgo.Client

	mu      sync.Mutex
	workers map[int32]*worker
	// shareBytes is the queued bytes one partition may hold before its
	// fetching pauses: QueueBytes shared by the assigned partitions.
	shareBytes atomic.Int64
	// room is signalled when queued records are written.
	room chan struct{}

	retries, refusals throttle
}

// Timings of the consumer that are not configuration.
const (
	// revokeGrace is how long a revoked partition's write in flight may
	// take before it is cancelled (and its records left to the next
	// owner).
	revokeGrace = 10 * time.Second
	// retryMin is the first wait before a failed write is retried.
	retryMin = 100 * time.Millisecond
	// pollRecords bounds the records of one poll.
	pollRecords = 10_000
	// minShare is the least queue share a partition gets.
	minShare = 1 << 20
	// fetchMaxWait is how long a broker holds a fetch without data.
	fetchMaxWait = 500 * time.Millisecond
)

// New returns a consumer of cfg, which must be valid and enabled; Run
// starts it.
func New(cfg Config, deps Deps) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("no --kafka-brokers")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	conn, err := cfg.connOpts()
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		cfg: cfg, deps: deps, metrics: NewMetrics(deps.Registerer),
		log:     deps.Logger.With("topic", cfg.Topic, "group", cfg.Group),
		workers: map[int32]*worker{}, room: make(chan struct{}, 1),
	}
	c.shareBytes.Store(int64(cfg.QueueBytes))
	deps.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tsgate_kafka_queued_bytes",
		Help: "Bytes of records fetched and not yet written (bounded by --kafka-queue-bytes, plus one poll)."},
		func() float64 { return float64(c.queued()) }))
	start := kgo.NewOffset().AtStart()
	if cfg.Start == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	partBytes := min(cfg.FetchMaxBytes, max(cfg.FetchMaxBytes/4, 1<<20))
	c.opts = append(conn,
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic), kgo.ConsumeStartOffset(start),
		// Offsets are committed as records are marked durable, and
		// synchronously before partitions are revoked; rebalances wait
		// until what a poll returned is queued to its partitions.
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(cfg.CommitInterval), kgo.AutoCommitCallback(c.committed),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.onAssigned), kgo.OnPartitionsRevoked(c.onRevoked), kgo.OnPartitionsLost(c.onLost),
		kgo.FetchMaxBytes(int32(cfg.FetchMaxBytes)), kgo.FetchMaxPartitionBytes(int32(partBytes)),
		// A partition resumed after a pause is fetched with the next
		// fetch, once the broker answered the one in flight, which waits
		// this long for data when its partitions have none.
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.BrokerMaxReadBytes(int32(max(100<<20, 2*cfg.FetchMaxBytes))),
		kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)),
		kgo.WithLogger(kgoLogger{deps.Logger.With("component", "kafka")}),
	)
	return c, nil
}

// Run consumes until ctx ends, then stops every partition's processing,
// commits what is durable and leaves the group. It returns an error only
// when the client cannot be made.
func (c *Consumer) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(c.opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	c.mu.Lock()
	c.client = cl
	c.mu.Unlock()
	c.log.Info("consuming points from Kafka", "brokers", c.cfg.Brokers, "dead_letter_topic", c.cfg.deadLetterTopic())

	lagDone := make(chan struct{})
	lagCtx, stopLag := context.WithCancel(ctx)
	go func() {
		defer close(lagDone)
		c.watchLag(lagCtx, kadm.NewClient(cl))
	}()
	var errs throttle
	for ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, pollRecords)
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				errs.log(c.log, "fetching from Kafka failed; the client retries", "partition", partition, "err", err)
			}
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				c.worker(cl, p.Partition).enqueue(p.Records)
			}
		})
		cl.AllowRebalance()
		c.waitRoom(ctx)
	}
	stopLag()
	<-lagDone
	c.stop(c.partitions(), true)
	cl.Close() // leaves the group
	c.log.Info("stopped consuming points from Kafka")
	return nil
}

// worker returns the worker of a partition, started when there is none.
func (c *Consumer) worker(cl *kgo.Client, partition int32) *worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.workers[partition]; w != nil {
		return w
	}
	w := newWorker(c, cl, partition)
	c.workers[partition] = w
	c.assignedChanged()
	go w.run()
	return w
}

// assignedChanged updates what depends on the number of partitions with a
// worker; c.mu is held.
func (c *Consumer) assignedChanged() {
	c.metrics.assigned.Set(float64(len(c.workers)))
	c.shareBytes.Store(int64(max(c.cfg.QueueBytes/max(1, len(c.workers)), minShare)))
}

// partitions are the partitions with a worker.
func (c *Consumer) partitions() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.workers))
	for p := range c.workers {
		out = append(out, p)
	}
	return out
}

// queued is the bytes of records fetched and not yet written.
func (c *Consumer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for _, w := range c.workers {
		total += w.queuedBytes()
	}
	return total
}

// waitRoom stops polling while the queue is full.
func (c *Consumer) waitRoom(ctx context.Context) {
	for {
		if c.queued() < c.cfg.QueueBytes {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-c.room:
		}
	}
}

// released tells the poll loop that queued records were written.
func (c *Consumer) released() {
	select {
	case c.room <- struct{}{}:
	default:
	}
}

func (c *Consumer) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	for _, p := range assigned[c.cfg.Topic] {
		c.worker(cl, p)
	}
	c.log.Info("partitions assigned", "partitions", assigned[c.cfg.Topic])
}

func (c *Consumer) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if ps := revoked[c.cfg.Topic]; len(ps) > 0 {
		c.log.Info("partitions revoked; committing what is written", "partitions", ps)
		c.stop(ps, true)
	}
}

func (c *Consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if ps := lost[c.cfg.Topic]; len(ps) > 0 {
		c.log.Warn("partitions lost; their records not yet committed go to the next owner", "partitions", ps)
		c.stop(ps, false)
	}
}

// stop ends the processing of partitions: the workers stop before their
// next write attempt, the attempt in flight has revokeGrace to finish;
// then, with commit, the offsets of what is durable are committed. The
// partitions' fetching is resumed, so that they are fetched when they are
// assigned again.
func (c *Consumer) stop(partitions []int32, commit bool) {
	c.mu.Lock()
	var ws []*worker
	for _, p := range partitions {
		if w := c.workers[p]; w != nil {
			ws = append(ws, w)
			delete(c.workers, p)
		}
	}
	c.assignedChanged()
	cl := c.client
	c.mu.Unlock()
	for _, w := range ws {
		w.halt()
	}
	grace := time.NewTimer(revokeGrace)
	defer grace.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-grace.C:
			w.cancel()
			<-w.done
		}
		if w.isPaused() {
			c.metrics.paused.Dec()
		}
		c.metrics.lag.DeleteLabelValues(c.cfg.Topic, strconv.Itoa(int(w.partition)))
	}
	if cl == nil {
		return
	}
	if commit {
		ctx, cancel := context.WithTimeout(context.Background(), revokeGrace)
		err := cl.CommitMarkedOffsets(ctx)
		cancel()
		if err != nil {
			c.metrics.commitErrors.Inc()
			c.log.Warn("committing the offsets of written records failed; they will be read again", "err", err)
		}
	}
	cl.ResumeFetchPartitions(map[string][]int32{c.cfg.Topic: partitions})
	c.released()
}

// committed counts failed automatic commits.
func (c *Consumer) committed(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err == nil && resp != nil {
	topics:
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					err = fmt.Errorf("partition %d: error code %d", p.Partition, p.ErrorCode)
					break topics
				}
			}
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		c.metrics.commitErrors.Inc()
		c.retries.log(c.log, "committing offsets failed; the next commit covers them", "err", err)
	}
}

// watchLag sets the lag gauge of the assigned partitions every
// LagInterval, from the partitions' end offsets and each worker's
// position.
func (c *Consumer) watchLag(ctx context.Context, adm *kadm.Client) {
	t := time.NewTicker(c.cfg.LagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ends, err := adm.ListEndOffsets(ctx, c.cfg.Topic)
		if err != nil {
			continue
		}
		committed := c.clientCommitted()
		var starts kadm.ListedOffsets
		c.mu.Lock()
		ws := make([]*worker, 0, len(c.workers))
		for _, w := range c.workers {
			ws = append(ws, w)
		}
		c.mu.Unlock()
		for _, w := range ws {
			end, ok := ends.Lookup(c.cfg.Topic, w.partition)
			if !ok || end.Err != nil {
				continue
			}
			pos := w.position()
			if o, ok := committed[w.partition]; pos < 0 && ok {
				pos = o
			}
			if pos < 0 {
				if starts == nil {
					if starts, err = adm.ListStartOffsets(ctx, c.cfg.Topic); err != nil {
						continue
					}
				}
				s, ok := starts.Lookup(c.cfg.Topic, w.partition)
				if !ok || s.Err != nil {
					continue
				}
				pos = s.Offset
			}
			c.metrics.lag.WithLabelValues(c.cfg.Topic, strconv.Itoa(int(w.partition))).Set(float64(max(0, end.Offset-pos)))
		}
	}
}

// clientCommitted are the group's committed offsets of the topic as the
// client knows them (from joining and from its commits).
func (c *Consumer) clientCommitted() map[int32]int64 {
	out := map[int32]int64{}
	c.mu.Lock()
	cl := c.client
	c.mu.Unlock()
	for p, o := range cl.CommittedOffsets()[c.cfg.Topic] {
		out[p] = o.Offset
	}
	return out
}
