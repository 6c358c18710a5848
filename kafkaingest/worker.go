package kafkaingest

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// worker writes the records of one partition, in order, with its
// processor, and pauses the partition's fetching while the store fails or
// while its fetched records fill its share of the queue.
type worker struct {
	c         *Consumer
	client    *kgo.Client
	partition int32
	proc      *processor

	// ctx ends the write in flight (cancel); halted stops the processing
	// before its next attempt (halt).
	ctx      context.Context
	cancel   context.CancelFunc
	halted   chan struct{}
	haltOnce sync.Once
	wake     chan struct{}
	done     chan struct{}

	mu sync.Mutex
	// queue holds fetched records not yet taken, inflight the taken ones
	// not yet marked durable; bytes counts both.
	queue, inflight []*kgo.Record
	bytes           int
	// next is the offset of the next record to write; -1 until the first
	// record arrives.
	next            int64
	paused, failing bool
}

func newWorker(c *Consumer, client *kgo.Client, partition int32) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{
		c: c, client: client, partition: partition, ctx: ctx, cancel: cancel,
		halted: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{}), next: -1,
	}
	w.proc = &processor{
		writer: c.deps.Writer, dead: producer{client, c.cfg.deadLetterTopic()},
		newSeries: c.deps.NewSeries, registry: c.deps.Registry,
		mark: w.mark, failing: w.setFailing, halt: w.halted, now: c.deps.Now,
		batchPoints: c.cfg.BatchPoints, retryMin: retryMin, retryMax: c.cfg.RetryMax,
		metrics: c.metrics, log: c.log.With("partition", partition), retries: &c.retries, refusals: &c.refusals,
	}
	return w
}

// run writes records as they come until the worker is halted.
func (w *worker) run() {
	defer close(w.done)
	defer w.cancel()
	for {
		recs := w.take()
		if recs == nil {
			return
		}
		if err := w.proc.process(w.ctx, recs); err != nil {
			return // halted
		}
	}
}

// take waits for fetched records and takes them all; nil once halted.
func (w *worker) take() []*kgo.Record {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			recs := w.queue
			w.queue = nil
			w.inflight = append(w.inflight, recs...)
			w.mu.Unlock()
			return recs
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.halted:
			return nil
		}
	}
}

// enqueue adds fetched records, which follow those queued before.
func (w *worker) enqueue(recs []*kgo.Record) {
	w.mu.Lock()
	if w.next < 0 {
		w.next = recs[0].Offset
	}
	w.queue = append(w.queue, recs...)
	for _, r := range recs {
		w.bytes += size(r)
	}
	w.adjust()
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// mark is told that rec and every record before it are durably handled:
// their offsets may be committed and their memory is released.
func (w *worker) mark(rec *kgo.Record) {
	w.client.MarkCommitRecords(rec)
	w.mu.Lock()
	n := 0
	for n < len(w.inflight) && w.inflight[n].Offset <= rec.Offset {
		w.bytes -= size(w.inflight[n])
		n++
	}
	w.inflight = w.inflight[n:]
	w.next = rec.Offset + 1
	w.adjust()
	w.mu.Unlock()
	w.c.released()
}

// setFailing pauses the partition's fetching while the store fails.
func (w *worker) setFailing(failing bool) {
	w.mu.Lock()
	w.failing = failing
	w.adjust()
	w.mu.Unlock()
}

// adjust pauses the partition's fetching while the store fails or its
// records fill its share of the queue, and resumes it once the store
// answers and half the share is free. w.mu is held.
func (w *worker) adjust() {
	share := int(w.c.shareBytes.Load())
	switch {
	case !w.paused && (w.failing || w.bytes >= share):
		w.paused = true
		w.client.PauseFetchPartitions(map[string][]int32{w.c.cfg.Topic: {w.partition}})
		w.c.metrics.paused.Inc()
	case w.paused && !w.failing && w.bytes < share/2:
		w.paused = false
		w.client.ResumeFetchPartitions(map[string][]int32{w.c.cfg.Topic: {w.partition}})
		w.c.metrics.paused.Dec()
	}
}

func (w *worker) halt() { w.haltOnce.Do(func() { close(w.halted) }) }

// position is the offset of the next record to write; -1 when unknown.
func (w *worker) position() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

func (w *worker) queuedBytes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

func (w *worker) isPaused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}

// size is the memory a record holds, about.
func size(r *kgo.Record) int { return len(r.Key) + len(r.Value) + 64 }
