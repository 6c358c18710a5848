package cassandra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/tiers"
)

// table returns the statements of the key's table, checking that the key
// fits it.
func (s *Store) table(key tiers.PartitionKey) (*tableStmts, error) {
	t, ok := s.tables[key.Table]
	if !ok {
		return nil, fmt.Errorf("cassandra: unknown table %q", key.Table)
	}
	if t.kind == kindRaw {
		if key.EventBucket < 0 || key.EventBucket >= tiers.MaxEventBuckets {
			return nil, fmt.Errorf("cassandra: event bucket %d of %s is out of range", key.EventBucket, key.Table)
		}
	} else if key.EventBucket != 0 {
		return nil, fmt.Errorf("cassandra: %s is not split into event buckets (event bucket %d)", key.Table, key.EventBucket)
	}
	return t, nil
}

// partitionArgs are the bind values of the partition key.
func (t *tableStmts) partitionArgs(key tiers.PartitionKey, extra int) []any {
	args := make([]any, 0, 3+extra)
	args = append(args, key.Series, key.Bucket)
	if t.kind == kindRaw {
		args = append(args, int16(key.EventBucket))
	}
	return args
}

// stmt is one statement of a batch.
type stmt struct {
	cql  string
	args []any
}

// group is the statements of one partition.
type group struct {
	what  string // names the partition in errors
	stmts []stmt
}

// execGroups writes each group as UNLOGGED batches of at most MaxBatchRows
// statements, WriteParallelism batches at once. A batch never spans two
// partitions: a single-partition batch is applied as one mutation by the
// partition's replicas (the driver routes it to them), whereas a
// multi-partition batch makes its coordinator fan it out.
func (s *Store) execGroups(ctx context.Context, groups []group) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.WriteParallelism)
loop:
	for _, grp := range groups {
		for chunk := range slices.Chunk(grp.stmts, s.cfg.MaxBatchRows) {
			if gctx.Err() != nil {
				break loop
			}
			g.Go(func() error {
				if err := s.execBatch(gctx, chunk); err != nil {
					return fmt.Errorf("cassandra: write %s: %w", grp.what, err)
				}
				return nil
			})
		}
	}
	return wrapCtx(ctx, g.Wait())
}

// execBatch marks the batch idempotent: its rows carry their values and
// TTLs, so applying it twice stores the same, and the driver may resend it
// to another coordinator when the first fails with it in flight.
func (s *Store) execBatch(ctx context.Context, chunk []stmt) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	if len(chunk) == 1 {
		return session.Query(chunk[0].cql, chunk[0].args...).Idempotent(true).ExecContext(ctx)
	}
	b := session.Batch(gocql.UnloggedBatch)
	for _, st := range chunk {
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: st.cql, Args: st.args, Idempotent: true})
	}
	return b.ExecContext(ctx)
}

// Write stores every row with a TTL that expires it at T + Retention; rows
// whose retention has passed already are not written. A call must carry
// each (partition, T) once, as ingest ensures: two rows of the same T may
// share a batch, hence a write timestamp, and Cassandra then keeps the
// larger value rather than the later one.
//
// Once the rows are written, each partition that is not Open gets a mark
// in its chunk partition, written after them at a later timestamp: a
// read of a sealed partition reads its rows only when there is one (see
// markFirst). A read that begins once Write has returned finds the mark;
// one that finds a mark finds the rows.
func (s *Store) Write(ctx context.Context, writes []tiers.PartitionWrite) error {
	now := s.now().UnixMilli()
	groups := make([]group, 0, len(writes))
	type mark struct {
		last int64
		ttl  int
	}
	var marks map[tiers.PartitionKey]mark
	for _, w := range writes {
		t, err := s.table(w.Key)
		if err != nil {
			return err
		}
		if w.Retention < 0 {
			return fmt.Errorf("cassandra: negative retention %d", w.Retention)
		}
		grp := group{stmts: make([]stmt, 0, len(w.Rows))}
		written := mark{last: tiers.MinTime}
		for _, r := range w.Rows {
			ttl, ok := rowTTL(r.T, w.Retention, now)
			if !ok {
				continue
			}
			written = mark{last: max(written.last, r.T), ttl: max(written.ttl, ttl)}
			args := t.partitionArgs(w.Key, 7)
			switch t.kind {
			case kindRollup:
				// A row without extras leaves the cell unset: no tombstone.
				var extras any = gocql.UnsetValue
				if r.X != nil {
					extras = tiers.AppendExtras(nil, r)
				}
				args = append(args, r.T, r.Min, r.Max, r.Sum, r.Count, extras, ttl)
			default:
				args = append(args, r.T, r.Value(), ttl)
			}
			grp.stmts = append(grp.stmts, stmt{t.insert, args})
		}
		if len(grp.stmts) > 0 {
			grp.what = fmt.Sprintf("%s %q bucket %d/%d", w.Key.Table, w.Key.Series, w.Key.Bucket, w.Key.EventBucket)
			groups = append(groups, grp)
			if !w.Open && t.chunks != nil {
				// A raw bucket's chunks, and its mark, are under event
				// bucket 0.
				mk := tiers.PartitionKey{Table: w.Key.Table, Series: w.Key.Series, Bucket: w.Key.Bucket}
				if marks == nil {
					marks = map[tiers.PartitionKey]mark{}
				}
				if m, ok := marks[mk]; ok {
					written = mark{last: max(m.last, written.last), ttl: max(m.ttl, written.ttl)}
				}
				marks[mk] = written
			}
		}
	}
	if err := s.execGroups(ctx, groups); err != nil || len(marks) == 0 {
		return err
	}
	// Later than the rows' write times, which the driver took from the
	// same clock before they were acknowledged.
	stamp := time.Now().UnixMicro()
	markGroups := make([]group, 0, len(marks))
	for key, m := range marks {
		t := s.tables[key.Table]
		args := append(t.partitionArgs(key, 7), markFirst, m.last, int64(0), now, []byte{}, m.ttl, stamp)
		markGroups = append(markGroups, group{
			what:  fmt.Sprintf("the mark of %s %q bucket %d", key.Table, key.Series, key.Bucket),
			stmts: []stmt{{t.chunks.insert, args}},
		})
	}
	return s.execGroups(ctx, markGroups)
}

// Read reads one partition with the driver's paging. Nothing is sent until
// the first Next.
func (s *Store) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	t, err := s.table(req.Key)
	if err != nil {
		return &rowPages{err: err}
	}
	p := &rowPages{ctx: ctx, kind: t.kind, key: req.Key, pageSize: s.cfg.PageSize, store: s}
	if req.PageSize > 0 {
		p.pageSize = min(p.pageSize, req.PageSize)
	}
	if req.Span.Empty() {
		p.finished = true
		return p
	}
	cql := t.selAsc
	if req.Desc {
		cql = t.selDesc
	}
	if req.Extras && t.kind == kindRollup {
		p.extras = true
		cql = t.selExtrasAsc
		if req.Desc {
			cql = t.selExtrasDesc
		}
	}
	session, err := s.sess()
	if err != nil {
		p.fail(err)
		return p
	}
	args := append(t.partitionArgs(req.Key, 2), req.Span.From, req.Span.To)
	// The driver page is the caller's page, so one Next is about one round
	// trip, and the driver's prefetch of the next page overlaps with the
	// caller's work on this one.
	p.query = s.read(session.Query(cql, args...).PageSize(p.pageSize))
	if t.kind == kindRaw && !req.Desc && req.Together != nil && req.Together.EventBuckets > 1 {
		p.together, p.span, p.cql = req.Together, req.Span, cql
	}
	if a := req.Across; a != nil && t.kind != kindLate && !req.Desc && !p.extras && len(a.Series)*a.EventBuckets <= maxSeriesPages {
		p.across, p.span, p.cql = a, req.Span, cql
	}
	if t.chunks != nil {
		return &sealedPages{s: s, chunks: t.chunks, ctx: ctx, req: req, rows: p, size: p.pageSize}
	}
	return p
}

// maxSeriesPages bounds the partitions (series times event buckets) of
// one seriesPages query: an IN list is held by the coordinator for the
// whole query. maxSeriesRows bounds the rows it holds for its reads, some
// 10 MB: the rows each partition gets are cut to fit, and a read whose
// partition filled its share goes on alone.
const (
	maxSeriesPages = 400
	maxSeriesRows  = 200_000
)

// seriesPages returns the first page of rows (ascending from span.From)
// of key's partition, read by one query that the reads of the bucket
// share: IN over the series (the request's, or the one series whose
// event buckets a reader reads together) and a raw bucket's event
// buckets, at most pageSize rows of each partition, fewer when that many
// would not fit in maxSeriesRows; more says the partition may hold more
// rows in span. A bucket of four event buckets then costs the node one
// request rather than four, and a refresh of a panel of many series, which
// reads the partitions of the buckets that have not ended for every one
// of them each time, one request a bucket rather than one a series:
// most of what the node then spends on such reads. Each partition's page goes to one read; a
// read that finds its page taken, a table, bucket, span or page size
// other than the shared query's, or the query failed, gets an error and
// reads on its own.
func (s *Store) seriesPages(ctx context.Context, shared sharedRead, key tiers.PartitionKey, span tiers.Span, pageSize int) (rows []tiers.Row, more bool, err error) {
	t, err := s.table(key)
	if err != nil {
		return nil, false, err
	}
	if key.EventBucket >= shared.eventBuckets || !slices.Contains(shared.series, key.Series) {
		return nil, false, errors.New("cassandra: not the shared read's partition")
	}
	v, err := shared.load.Do(ctx, func() (any, error) {
		session, err := s.sess()
		if err != nil {
			return nil, err
		}
		n := len(shared.series) * shared.eventBuckets
		limit := max(1, min(pageSize, maxSeriesRows/n))
		sp := &sharedSeriesPages{table: key.Table, bucket: key.Bucket, span: span, pageSize: pageSize, limit: limit,
			parts: make(map[seriesPartition][]tiers.Row, n), taken: map[seriesPartition]bool{}}
		args := []any{shared.series, key.Bucket}
		var p seriesPartition
		var r tiers.Row
		var val float64
		dest := []any{&p.series, &r.T, &r.Min, &r.Max, &r.Sum, &r.Count}
		if t.kind == kindRaw {
			ebs := make([]int16, shared.eventBuckets)
			for i := range ebs {
				ebs[i] = int16(i)
			}
			args = append(args, ebs)
			dest = []any{&p.series, &p.eb, &r.T, &val}
		}
		q := s.read(session.Query(t.seriesPages, append(args, span.From, span.To, limit)...))
		iter := q.PageSize(min(n*limit, 10000)).IterContext(ctx)
		for iter.Scan(dest...) {
			if t.kind == kindRaw {
				r = tiers.PointRow(r.T, val)
			}
			sp.parts[p] = append(sp.parts[p], r)
		}
		if err := iter.Close(); err != nil {
			return nil, err
		}
		return sp, nil
	})
	if err != nil {
		return nil, false, err
	}
	sp := v.(*sharedSeriesPages)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	p := seriesPartition{series: key.Series, eb: int16(key.EventBucket)}
	if sp.table != key.Table || sp.bucket != key.Bucket || sp.span != span || sp.pageSize != pageSize || sp.taken[p] {
		return nil, false, errors.New("cassandra: not the shared read's partition")
	}
	sp.taken[p] = true
	rows = sp.parts[p]
	delete(sp.parts, p) // its reader's now
	return rows, len(rows) == sp.limit, nil
}

// sharedRead is a query that reads of one bucket's partitions share: its
// load (the reads' tiers.BucketReads or tiers.SeriesReads), its series
// and the bucket's event buckets.
type sharedRead struct {
	load interface {
		Do(ctx context.Context, load func() (any, error)) (any, error)
	}
	series       []string
	eventBuckets int
}

// seriesPartition names a partition of a bucket read for many series.
type seriesPartition struct {
	series string
	eb     int16
}

// sharedSeriesPages are the first pages of one bucket's partitions for
// many series, read together (seriesPages).
type sharedSeriesPages struct {
	table    tiers.Table
	bucket   int64
	span     tiers.Span
	pageSize int
	limit    int // the rows each partition got at most
	parts    map[seriesPartition][]tiers.Row

	mu    sync.Mutex
	taken map[seriesPartition]bool
}

// rowPages turns the driver's iterator into pages of at most pageSize rows.
type rowPages struct {
	ctx      context.Context
	store    *Store
	query    *gocql.Query
	started  bool // a page has been returned
	iter     *gocql.Iter
	kind     kind
	key      tiers.PartitionKey
	pageSize int
	// extras: the rollup rows' extras are read too (the extras column).
	extras   bool
	finished bool
	err      error // sticky: every Next after a failure returns it
	// together, until the first Next, is shared with the reads of the
	// bucket's other event buckets (see seriesPages); span and cql are
	// this read's, to go on after a full first page.
	together *tiers.BucketReads
	// across, until the first Next, is shared with the reads of the
	// bucket's partition for the request's other series (seriesPages).
	across *tiers.SeriesReads
	span   tiers.Span
	cql    string
}

func (p *rowPages) Next() ([]tiers.Row, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.finished {
		return nil, tiers.ErrDone
	}
	if err := p.ctx.Err(); err != nil {
		p.fail(err)
		return nil, p.err
	}
	if p.together != nil || p.across != nil {
		if page, ok := p.sharedFirstPage(); ok {
			return page, nil
		}
		if p.finished {
			return nil, tiers.ErrDone
		}
	}
	if p.iter == nil {
		p.iter = p.query.IterContext(p.ctx)
	}
	// Iter.Scan, not Iter.Scanner: only Scan starts the prefetch of the
	// next driver page.
	// Sized by the rows the driver holds: a partition of a few hundred
	// rows (an open raw bucket's event bucket) then costs no 48 KiB
	// page to allocate and collect, which on a read of a hundred of them
	// was a third of the gateway's CPU.
	rows := make([]tiers.Row, 0, max(1, min(p.pageSize, p.iter.NumRows())))
	// One destination list for the page: Scan's variadic arguments escape,
	// and built per row they were two allocations a raw point.
	var r tiers.Row
	var v float64
	var enc []byte
	var xs []tiers.Extras // the page's extras, one block
	dest := []any{&r.T, &v}
	switch {
	case p.extras:
		dest = []any{&r.T, &r.Min, &r.Max, &r.Sum, &r.Count, &enc}
		xs = make([]tiers.Extras, 0, cap(rows))
	case p.kind == kindRollup:
		dest = []any{&r.T, &r.Min, &r.Max, &r.Sum, &r.Count}
	}
	for len(rows) < p.pageSize {
		enc = nil
		if !p.iter.Scan(dest...) {
			break
		}
		if p.kind != kindRollup {
			r.Min, r.Max, r.Sum, r.Count = v, v, v, 1
		}
		if p.extras {
			// The driver gives each row's blob a slice of its own.
			xs = append(xs, tiers.Extras{})
			x := &xs[len(xs)-1]
			if err := tiers.DecodeExtrasInto(x, r, enc); err != nil {
				p.iter.Close()
				p.iter, p.finished = nil, true
				p.fail(err)
				return nil, p.err
			}
			r.X = x
		}
		rows = append(rows, r)
	}
	if len(rows) == p.pageSize {
		p.started = true
		return rows, nil
	}
	// The iterator ended: the partition is exhausted, or the read failed
	// after the rows scanned so far, which are still valid.
	err := p.iter.Close()
	p.iter = nil
	if len(rows) == 0 && !p.started && p.store.lostRace(err) {
		p.query = noSpeculation(p.query)
		p.store = nil // once
		return p.Next()
	}
	p.finished = true
	if err != nil {
		p.fail(err)
		if len(rows) == 0 {
			return nil, p.err
		}
	}
	if len(rows) == 0 {
		return nil, tiers.ErrDone
	}
	p.started = true
	return rows, nil
}

// sharedFirstPage returns this partition's first page from a query its
// reads share (seriesPages): the bucket's partitions of the request's
// series, else the bucket's event buckets. When that page is short, the
// partition is done; when full, the read goes on with a query of its
// own from after its last row. It reports false when there is no page to
// return: the partition is done (finished), or the shared query failed
// and the read asks on its own.
func (p *rowPages) sharedFirstPage() ([]tiers.Row, bool) {
	together, across := p.together, p.across
	p.together, p.across = nil, nil
	err := errors.New("no shared read")
	var rows []tiers.Row
	var more bool
	if across != nil {
		rows, more, err = p.store.seriesPages(p.ctx, sharedRead{across, across.Series, across.EventBuckets}, p.key, p.span, p.pageSize)
	}
	if err != nil && together != nil {
		rows, more, err = p.store.seriesPages(p.ctx, sharedRead{together, []string{p.key.Series}, together.EventBuckets}, p.key, p.span, p.pageSize)
	}
	if err != nil {
		return nil, false
	}
	if !more {
		p.finished = true
		return rows, len(rows) > 0
	}
	session, err := p.store.sess()
	if err != nil {
		return nil, false
	}
	p.started = true
	t, err := p.store.table(p.key)
	if err != nil {
		return nil, false
	}
	args := append(t.partitionArgs(p.key, 2), rows[len(rows)-1].T+1, p.span.To)
	p.query = p.store.read(session.Query(p.cql, args...).PageSize(p.pageSize))
	return rows, true
}

func (p *rowPages) fail(err error) {
	p.err = fmt.Errorf("cassandra: read %s %q bucket %d/%d: %w",
		p.key.Table, p.key.Series, p.key.Bucket, p.key.EventBucket, wrapCtx(p.ctx, err))
}

func (p *rowPages) Close() error {
	if p.iter != nil {
		p.iter.Close()
		p.iter = nil
	}
	p.finished = true
	return nil
}
