package layouts

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/tiers"
)

// RawRowBytes is the estimated stored size of one raw row, for the byte
// estimate of a partition: the clustering timestamp, the value and
// Cassandra's per-row overhead (the sizing rule's usual 30 bytes).
const RawRowBytes = 30

// Wide is one tracked raw partition.
type Wide struct {
	Key           tiers.PartitionKey
	Rows          int64
	BytesEstimate int64
}

type wideEntry struct {
	written int64 // rows this process wrote to it
	seen    int64 // the most rows one read of it returned
	logged  bool
}

func (e *wideEntry) rows() int64 { return max(e.written, e.seen) }

// Tracker remembers the widest raw partitions this process has written
// and read. A partition's row count is not known without reading it all,
// so the tracker keeps the larger of two estimates: the rows this process
// wrote to it (an overwrite counts again, so this can overstate; rows
// other instances wrote are missing, so it can understate) and the most
// rows one read of it returned (exact when the read covered the whole
// partition, a lower bound otherwise).
//
// At most Tracked partitions are remembered; when more arrive, the smaller
// half is forgotten. A partition that goes over WideRows is counted in
// /metrics and logged once, and handed to onWide (auto-split).
type Tracker struct {
	limit    int64
	capacity int
	log      *slog.Logger
	onWide   func(ctx context.Context, key tiers.PartitionKey, rows int64, onWritePath bool)

	mu      sync.Mutex
	entries map[tiers.PartitionKey]*wideEntry
	widest  int64

	wideTotal prometheus.Counter
}

// NewTracker returns a tracker for cfg.WideRows and cfg.Tracked. onWide
// (may be nil) is called, outside the tracker's lock, each time a
// partition first goes over the limit.
func NewTracker(cfg Config, log *slog.Logger, reg prometheus.Registerer, onWide func(ctx context.Context, key tiers.PartitionKey, rows int64, onWritePath bool)) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tracker{
		limit: cfg.WideRows, capacity: max(1, cfg.Tracked), log: log, onWide: onWide,
		entries: map[tiers.PartitionKey]*wideEntry{},
		wideTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tsgate_wide_partitions_total", Help: "Raw partitions seen by this instance with more rows than --wide-partition-rows.",
		}),
	}
	if reg != nil {
		reg.MustRegister(t.wideTotal,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tsgate_widest_partition_rows", Help: "Estimated rows of the widest raw partition this instance has seen."},
				func() float64 { t.mu.Lock(); defer t.mu.Unlock(); return float64(t.widest) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tsgate_tracked_partitions", Help: "Raw partitions the wide-partition tracker remembers (bounded by --wide-partitions-tracked)."},
				func() float64 { t.mu.Lock(); defer t.mu.Unlock(); return float64(len(t.entries)) }),
		)
	}
	return t
}

// Wrote counts n rows written to the partition.
func (t *Tracker) Wrote(ctx context.Context, key tiers.PartitionKey, n int) {
	t.observe(ctx, key, func(e *wideEntry) { e.written += int64(n) }, true)
}

// Read records that one read of the partition returned n rows.
func (t *Tracker) Read(ctx context.Context, key tiers.PartitionKey, n int64) {
	t.observe(ctx, key, func(e *wideEntry) { e.seen = max(e.seen, n) }, false)
}

func (t *Tracker) observe(ctx context.Context, key tiers.PartitionKey, update func(*wideEntry), write bool) {
	t.mu.Lock()
	e := t.entries[key]
	if e == nil {
		if len(t.entries) >= t.capacity {
			t.evict()
		}
		e = &wideEntry{}
		t.entries[key] = e
	}
	update(e)
	rows := e.rows()
	t.widest = max(t.widest, rows)
	crossed := rows > t.limit && !e.logged
	if crossed {
		e.logged = true
	}
	t.mu.Unlock()
	if !crossed {
		return
	}
	t.wideTotal.Inc()
	t.log.Warn("wide partition: more rows than --wide-partition-rows",
		"series", key.Series, "bucket", key.Bucket, "event_bucket", key.EventBucket,
		"rows", rows, "bytes_estimate", rows*RawRowBytes, "limit", t.limit)
	if t.onWide != nil {
		t.onWide(ctx, key, rows, write)
	}
}

// evict forgets the smaller half of the partitions (by rows), keeping those
// already reported so that none is logged twice. Called with mu held.
func (t *Tracker) evict() {
	rows := make([]int64, 0, len(t.entries))
	for _, e := range t.entries {
		rows = append(rows, e.rows())
	}
	slices.Sort(rows)
	cut := rows[len(rows)/2]
	for k, e := range t.entries {
		if !e.logged && e.rows() <= cut {
			delete(t.entries, k)
		}
	}
	if len(t.entries) >= t.capacity {
		// Every entry is reported or as large as the median: drop any
		// unreported ones to make room.
		for k, e := range t.entries {
			if !e.logged {
				delete(t.entries, k)
				if len(t.entries) < t.capacity {
					break
				}
			}
		}
	}
}

// Wide returns up to n partitions, widest first (ties by key).
func (t *Tracker) Wide(n int) []Wide {
	t.mu.Lock()
	out := make([]Wide, 0, len(t.entries))
	for k, e := range t.entries {
		r := e.rows()
		out = append(out, Wide{Key: k, Rows: r, BytesEstimate: r * RawRowBytes})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Wide) int {
		if c := cmp.Compare(b.Rows, a.Rows); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Key.Series, b.Key.Series); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Key.Bucket, b.Key.Bucket); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.EventBucket, b.Key.EventBucket)
	})
	return out[:min(n, len(out))]
}

// Track returns store with every raw partition read and write counted by
// t. Rollup and late partitions are not counted.
func Track(store tiers.Store, t *Tracker) tiers.Store {
	return &tracked{Store: store, t: t}
}

type tracked struct {
	tiers.Store
	t *Tracker
}

func (s *tracked) Write(ctx context.Context, writes []tiers.PartitionWrite) error {
	if err := s.Store.Write(ctx, writes); err != nil {
		return err
	}
	for _, w := range writes {
		if w.Key.Table == tiers.TableRaw {
			s.t.Wrote(ctx, w.Key, len(w.Rows))
		}
	}
	return nil
}

func (s *tracked) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	pages := s.Store.Read(ctx, req)
	if req.Key.Table != tiers.TableRaw {
		return pages
	}
	return &countedPages{RowPages: pages, t: s.t, key: req.Key, ctx: ctx}
}

// countedPages counts the rows of one read and reports them when the read
// ends, completely or not.
type countedPages struct {
	tiers.RowPages
	t        *Tracker
	key      tiers.PartitionKey
	ctx      context.Context
	n        int64
	reported bool
}

func (p *countedPages) Next() ([]tiers.Row, error) {
	rows, err := p.RowPages.Next()
	p.n += int64(len(rows))
	if err != nil {
		p.report()
	}
	return rows, err
}

func (p *countedPages) Close() error {
	p.report()
	return p.RowPages.Close()
}

func (p *countedPages) report() {
	if p.reported || p.n == 0 {
		p.reported = true
		return
	}
	p.reported = true
	p.t.Read(p.ctx, p.key, p.n)
}
