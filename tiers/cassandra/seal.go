package cassandra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/sealed"
)

// tableRawChunks holds the sealed chunks of points_raw buckets (see
// tiers/sealed), keyed like points_raw, one row per chunk by its first
// point. A bucket's chunks hold the points of all its event buckets and
// are kept under event bucket 0.
const tableRawChunks = "points_raw_chunks"

// chunkTable is the table of the sealed chunks of the data table t:
// points_raw_chunks, or the rollup table's name and "_chunks".
func chunkTable(t tiers.Table) string {
	if t == tiers.TableRaw {
		return tableRawChunks
	}
	return string(t) + "_chunks"
}

// chunkStmts are the statements of a chunk table and of sealing.
type chunkStmts struct {
	// rollup says the chunks are rollup rows' (sealed.EncodeRollup).
	rollup bool
	// read selects the chunks of a partition that start before a time,
	// its mark among them.
	read string
	// readBatch selects every chunk of a series' partitions over a list
	// of buckets, marks among them, with their buckets (rollup tables).
	readBatch string
	// readAll selects every chunk of a partition with its write time, its
	// mark among them.
	readAll string
	// rowsWithTime selects a data partition's rows with their write times.
	rowsWithTime string
	// clear deletes a partition's chunks written up to a timestamp; insert
	// writes one chunk.
	clear, insert string
	// deleteRows deletes a data partition's rows written up to a timestamp.
	deleteRows string
	// clearMark deletes a partition's mark written up to a timestamp.
	clearMark string
}

// markFirst is the first time of a chunk partition's mark: a row before
// every chunk, whose write time is that of the newest rows written to
// the data partitions since their last seal (see Store.Write). A seal
// folds the rows in and deletes the mark with the chunks it replaces; a
// read that finds chunks and no mark reads the chunks alone, not the
// rows. The mark's data is empty.
const markFirst = tiers.MinTime - 1

// newChunkStmts returns the statements of the chunks of table t, of kind
// kindRaw or kindRollup.
func newChunkStmts(ks string, t tiers.Table, k kind) *chunkStmts {
	where, keyCols, keyVals, rows := "series = ? AND bucket = ?", "series, bucket", "?, ?", "t, min, max, sum, count, extras, WRITETIME(sum)"
	if k == kindRaw {
		where, keyCols, keyVals, rows = where+" AND eb = ?", keyCols+", eb", keyVals+", ?", "t, v, WRITETIME(v)"
	}
	ct := chunkTable(t)
	return &chunkStmts{
		rollup:       k == kindRollup,
		read:         fmt.Sprintf("SELECT first, last, retention, sealed_at, data FROM %s.%s WHERE %s AND first < ?", ks, ct, where),
		readBatch:    fmt.Sprintf("SELECT bucket, first, last, retention, sealed_at, data FROM %s.%s WHERE series = ? AND bucket IN ?", ks, ct),
		readAll:      fmt.Sprintf("SELECT first, last, retention, data, sealed_at, WRITETIME(data) FROM %s.%s WHERE %s", ks, ct, where),
		rowsWithTime: fmt.Sprintf("SELECT %s FROM %s.%s WHERE %s", rows, ks, t, where),
		clear:        fmt.Sprintf("DELETE FROM %s.%s USING TIMESTAMP ? WHERE %s", ks, ct, where),
		insert: fmt.Sprintf("INSERT INTO %s.%s (%s, first, last, retention, sealed_at, data) VALUES (%s, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?",
			ks, ct, keyCols, keyVals),
		deleteRows: fmt.Sprintf("DELETE FROM %s.%s USING TIMESTAMP ? WHERE %s", ks, t, where),
		clearMark:  fmt.Sprintf("DELETE FROM %s.%s USING TIMESTAMP ? WHERE %s AND first = ?", ks, ct, where),
	}
}

// chunkSchema is the CQL of the chunk table of tier t: partitioned and
// compacted like its data table, a chunk expiring (by its TTL) with its
// last row.
func chunkSchema(ks string, t tiers.Tier) string {
	key, eb := "(series, bucket)", ""
	if t.Level == tiers.LevelRaw {
		key, eb = "(series, bucket, eb)", "    eb smallint,\n"
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    series text,\n    bucket timestamp,\n%s    first timestamp,\n"+
		"    last timestamp,\n    retention bigint,\n    sealed_at timestamp,\n    data blob,\n    PRIMARY KEY (%s, first)\n) WITH CLUSTERING ORDER BY (first ASC)\n  AND %s",
		ks, chunkTable(t.Table), eb, key, tierOptions(t.BucketWidth, t.BucketWidth, t.Retention))
}

// readChunks returns the rows of a partition's chunks in span that have
// not expired, ascending: for a raw partition the points of its event
// bucket, for a rollup partition its rows, with their extras when extras
// is set. withRows says whether the partition's rows must be read too:
// it has no chunks, or rows written since its seal (a mark), or chunks
// sealed before the store kept marks.
func (s *Store) readChunks(ctx context.Context, cs *chunkStmts, key tiers.PartitionKey, span tiers.Span, extras bool, batch *tiers.PartitionBatch) (rows []tiers.Row, withRows bool, err error) {
	var chunks []storedChunk
	if cs.rollup {
		if chunks, err = s.batchChunks(ctx, cs, batch, key); err != nil && ctx.Err() == nil {
			chunks, err = s.queryChunks(ctx, cs, key, span.To)
		}
	} else {
		chunks, err = s.rawChunks(ctx, key, span.To)
	}
	if err != nil {
		return nil, true, err
	}
	now := s.now().UnixMilli()
	withRows = len(chunks) == 0
	if cs.rollup {
		// Sized once: a day of minute rows grown row by row is a dozen
		// copies of up to 70 KiB of rows the collector must then scan.
		n := 0
		for _, c := range chunks {
			if c.first != markFirst && c.last >= span.From && c.first < span.To {
				k, _ := sealed.Count(c.data)
				n += k
			}
		}
		rows = make([]tiers.Row, 0, n)
	}
	for _, c := range chunks {
		if c.first == markFirst || c.sealedAt < s.marksSince.Load() {
			withRows = true
		}
		if c.first == markFirst || c.last < span.From {
			continue
		}
		oldest := sealed.Oldest(now, c.retention)
		if cs.rollup {
			// The rows' sketches may keep the blob, which is this read's
			// own (rollup chunks are not shared).
			rows, err = sealed.DecodeRollup(rows, c.data, span, oldest, extras)
		} else {
			rows, err = sealed.Decode(rows, c.data, span, oldest, key.EventBucket)
		}
		if err != nil {
			return nil, true, fmt.Errorf("cassandra: chunk of %s %q bucket %d/%d: %w", key.Table, key.Series, key.Bucket, key.EventBucket, err)
		}
	}
	return rows, withRows, nil
}

// RowReadsSkipped counts the partition reads that found chunks and no
// mark, and so sent no query for rows.
func (s *Store) RowReadsSkipped() int64 { return s.rowReadsSkipped.Load() }

// storedChunk is a chunk row (or a mark) as read.
type storedChunk struct {
	first, last, retention, sealedAt int64
	data                             []byte
}

// queryChunks reads the chunks of a partition that start before to; a raw
// bucket's are kept under event bucket 0 and hold every event bucket's
// points.
func (s *Store) queryChunks(ctx context.Context, cs *chunkStmts, key tiers.PartitionKey, to int64) ([]storedChunk, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	args := []any{key.Series, key.Bucket}
	if !cs.rollup {
		args = append(args, int16(0))
	}
	iter := s.read(session.Query(cs.read, append(args, to)...)).IterContext(ctx)
	var chunks []storedChunk
	var c storedChunk
	for iter.Scan(&c.first, &c.last, &c.retention, &c.sealedAt, &c.data) {
		chunks = append(chunks, c)
		c.data = nil // the driver gives each blob a slice of its own
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	return chunks, nil
}

// maxBatchBuckets bounds the buckets of one batched chunk query: an IN
// list is held by the coordinator for the whole query.
const maxBatchBuckets = 32

// batchChunks returns the chunks of key's partition, read with those of
// the other partitions of batch by one query that their reads share: IN
// over their buckets, every chunk of each (the reads' spans differ, and a
// read for the cache wants its bucket whole). A week of minute rows of a
// series is then one request to the node instead of one a day, which on
// a cold read of many series is most of what the node spends. Each
// partition's chunks go to one read; a read of a partition the batch does
// not hold, or holds no longer, or whose query failed, gets an error and
// reads on its own.
func (s *Store) batchChunks(ctx context.Context, cs *chunkStmts, batch *tiers.PartitionBatch, key tiers.PartitionKey) ([]storedChunk, error) {
	if batch == nil || len(batch.Buckets) > maxBatchBuckets || !batch.Has(key.Bucket) {
		return nil, errNotBatched
	}
	v, err := batch.Do(ctx, func() (any, error) {
		session, err := s.sess()
		if err != nil {
			return nil, err
		}
		bc := &batchedChunks{series: key.Series, table: key.Table, parts: make(map[int64][]storedChunk, len(batch.Buckets)), taken: map[int64]bool{}}
		iter := s.read(session.Query(cs.readBatch, key.Series, batch.Buckets)).IterContext(ctx)
		var bucket int64
		var c storedChunk
		for iter.Scan(&bucket, &c.first, &c.last, &c.retention, &c.sealedAt, &c.data) {
			bc.parts[bucket] = append(bc.parts[bucket], c)
			c.data = nil // the driver gives each blob a slice of its own
		}
		if err := iter.Close(); err != nil {
			return nil, err
		}
		return bc, nil
	})
	if err != nil {
		return nil, err
	}
	bc := v.(*batchedChunks)
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.series != key.Series || bc.table != key.Table || bc.taken[key.Bucket] {
		return nil, errNotBatched
	}
	bc.taken[key.Bucket] = true
	// In clustering order within a partition, whatever order the
	// partitions came in.
	return bc.parts[key.Bucket], nil
}

// errNotBatched says a partition read must query its own chunks.
var errNotBatched = errors.New("cassandra: not the batch's partition")

// batchedChunks are the chunks of a batch's partitions (batchChunks).
type batchedChunks struct {
	series string
	table  tiers.Table
	parts  map[int64][]storedChunk

	mu    sync.Mutex
	taken map[int64]bool
}

// rawChunks reads a raw bucket's chunks for the read of one of its event
// buckets. The reads of a bucket's event buckets run at once (a merge
// needs them all) and all want the same chunks: the first one's query
// serves those that ask while it runs, which share its blobs, read only.
// A read whose shared query failed on another read's context asks again
// on its own.
func (s *Store) rawChunks(ctx context.Context, key tiers.PartitionKey, to int64) ([]storedChunk, error) {
	flight := fmt.Sprintf("%s\x00%d\x00%d", key.Series, key.Bucket, to)
	v, err, shared := s.chunkFlights.Do(flight, func() (any, error) {
		return s.queryChunks(ctx, s.chunks, key, to)
	})
	if err != nil && shared && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return s.queryChunks(ctx, s.chunks, key, to)
	}
	if err != nil {
		return nil, err
	}
	return v.([]storedChunk), nil
}

// sealedPages reads a raw or rollup partition: its chunks, and its row
// pages merged over them unless the chunks say the rows hold nothing
// they lack (readChunks). The chunks are read at the first Next, then the
// first page of rows when they are wanted: a seal writes chunks before
// it deletes rows, and deletes them only SealedRowsGrace after that,
// longer than a read lasts, so a read sees every point in its rows or in
// its chunks. A sealed partition costs one query; one that was never
// sealed, an empty query before its rows; one whose bucket the read knows
// ends after now (ReadRequest.End), its rows alone.
type sealedPages struct {
	s      *Store
	chunks *chunkStmts
	ctx    context.Context
	req    tiers.ReadRequest
	rows   tiers.RowPages
	merged tiers.RowPages
	size   int
}

func (p *sealedPages) Next() ([]tiers.Row, error) {
	if p.merged != nil {
		return p.merged.Next()
	}
	if p.req.End > p.s.now().UnixMilli() {
		// Not sealed: a seal waits for the bucket's end, its lateness and
		// the grace that bounds how far writers' clocks lag (the rule
		// writes rely on too, see tiers.PartitionWrite.Open), so the rows
		// are all the partition holds. The open buckets of a refreshed
		// panel cost one query each, not two.
		p.merged = p.rows
		return p.merged.Next()
	}
	var points, first []tiers.Row
	rowsErr := tiers.ErrDone
	points, withRows, err := p.s.readChunks(p.ctx, p.chunks, p.req.Key, p.req.Span, p.req.Extras, p.req.Batch)
	if err == nil && withRows {
		first, rowsErr = p.rows.Next()
	}
	switch {
	case err != nil:
		p.merged = &failedPages{err: fmt.Errorf("cassandra: read %s %q bucket %d/%d: %w",
			p.req.Key.Table, p.req.Key.Series, p.req.Key.Bucket, p.req.Key.EventBucket, wrapCtx(p.ctx, err))}
		_ = p.rows.Close()
	case rowsErr != nil && !errors.Is(rowsErr, tiers.ErrDone):
		p.merged = &failedPages{err: rowsErr}
		_ = p.rows.Close()
	default:
		if !withRows {
			p.s.rowReadsSkipped.Add(1)
		}
		p.merged = sealed.Merge(points, &pushedBack{page: first, done: rowsErr != nil, rows: p.rows}, p.req.Desc, p.size)
	}
	return p.merged.Next()
}

func (p *sealedPages) Close() error {
	if p.merged != nil {
		return p.merged.Close()
	}
	return p.rows.Close()
}

// pushedBack returns page first, then the rest of rows.
type pushedBack struct {
	page []tiers.Row
	done bool
	rows tiers.RowPages
}

func (p *pushedBack) Next() ([]tiers.Row, error) {
	if p.page != nil {
		page := p.page
		p.page = nil
		return page, nil
	}
	if p.done {
		return nil, tiers.ErrDone
	}
	return p.rows.Next()
}

func (p *pushedBack) Close() error { return p.rows.Close() }

// failedPages is a read that failed.
type failedPages struct{ err error }

func (p *failedPages) Next() ([]tiers.Row, error) { return nil, p.err }
func (p *failedPages) Close() error               { return nil }

// SealBucket rewrites the points_raw partitions of a bucket as chunks
// (tiers.Sealer), kept under event bucket 0.
//
// It reads the bucket's chunks and rows with their write times. When rows
// hold points the chunks lack (or hold differently), it writes the merged
// points as new chunks, replacing the old ones in one single-partition
// batch: a delete of the chunks at timestamp w-1 and the inserts at w,
// where w is one more than the newest write time read, so that of two
// gateways sealing at once the one that read more rows wins. Rows whose
// points the chunks hold are deleted once the chunks are SealedRowsGrace
// old: at once when it is 0 or the chunks are older, else by
// DeleteSealedRows once it is over; with a partition delete at the newest write
// time read in the partition: a row written after the read has a later
// write time and survives until the next seal folds it in. (A row
// written concurrently by a client whose clock lags that much could be
// deleted unread.)
func (s *Store) SealBucket(ctx context.Context, series string, bucket int64, eventBuckets int, retention int64) (tiers.SealReport, error) {
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket}
	if _, err := s.table(key); err != nil {
		return tiers.SealReport{}, err
	}
	if eventBuckets < 1 || eventBuckets > tiers.MaxEventBuckets {
		return tiers.SealReport{}, fmt.Errorf("cassandra: %d event buckets", eventBuckets)
	}
	return s.seal(ctx, s.chunks, key, eventBuckets, retention)
}

// SealRollup rewrites a rollup partition as chunks (tiers.Sealer), as
// SealBucket does a raw bucket.
func (s *Store) SealRollup(ctx context.Context, key tiers.PartitionKey, retention int64) (tiers.SealReport, error) {
	t, err := s.table(key)
	if err != nil {
		return tiers.SealReport{}, err
	}
	if t.kind != kindRollup {
		return tiers.SealReport{}, fmt.Errorf("cassandra: %s is not a rollup table", key.Table)
	}
	return s.seal(ctx, t.chunks, key, 1, retention)
}

// seal rewrites the eventBuckets partitions from key (a raw bucket's, or
// one rollup partition) as chunks.
func (s *Store) seal(ctx context.Context, cs *chunkStmts, key tiers.PartitionKey, eventBuckets int, retention int64) (tiers.SealReport, error) {
	var rep tiers.SealReport
	if retention < 0 {
		return rep, fmt.Errorf("cassandra: negative retention %d", retention)
	}
	session, err := s.sess()
	if err != nil {
		return rep, err
	}
	series, bucket := key.Series, key.Bucket
	what := fmt.Sprintf("%s %q bucket %d", key.Table, series, bucket)
	now := s.now().UnixMilli()
	args := func(eb int) []any {
		if cs.rollup {
			return []any{series, bucket}
		}
		return []any{series, bucket, int16(eb)}
	}
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}

	// The chunks, with the time of the newest write and the oldest seal,
	// and the mark's write time; then each partition's rows, with its
	// newest write time, read at once, so that a seal costs four round
	// trips in sequence (the chunks, the rows, the batch of chunks, the
	// deletes) rather than one per partition. The chunks go first: the
	// rows a mark that is read stands for were written before it, so
	// they are read, and a seal that deletes the mark folds them in.
	type chunk struct {
		data      []byte
		retention int64
	}
	var chunks []chunk
	var newest, sealedAt, marked int64 = math.MinInt64, math.MaxInt64, math.MinInt64
	iter := s.read(session.Query(cs.readAll, args(0)...)).IterContext(ctx)
	var chunkFirst, last, ret, at, wt int64
	var data []byte
	for iter.Scan(&chunkFirst, &last, &ret, &data, &at, &wt) {
		newest = max(newest, wt)
		if chunkFirst == markFirst {
			marked = wt
			continue
		}
		// Decoded only when rows are to be folded in.
		chunks = append(chunks, chunk{data, ret})
		data = nil // the driver gives each blob a slice of its own
		sealedAt = min(sealedAt, at)
	}
	if err := iter.Close(); err != nil {
		return rep, fmt.Errorf("cassandra: seal %s: %w", what, wrapCtx(ctx, err))
	}
	ebRows := make([][]tiers.Row, eventBuckets)
	written := make([]int64, eventBuckets)
	g, gctx := errgroup.WithContext(ctx)
	for eb := range eventBuckets {
		written[eb] = math.MinInt64
		g.Go(func() error {
			iter := s.read(session.Query(cs.rowsWithTime, args(eb)...)).IterContext(gctx)
			var r tiers.Row
			var v float64
			var enc []byte
			var wt int64
			dest := []any{&r.T, &v, &wt}
			if cs.rollup {
				dest = []any{&r.T, &r.Min, &r.Max, &r.Sum, &r.Count, &enc, &wt}
			}
			for iter.Scan(dest...) {
				row := tiers.PointRow(r.T, v)
				if cs.rollup {
					row = r
					x, err := tiers.DecodeExtras(row, enc)
					if err != nil {
						iter.Close()
						return fmt.Errorf("row at %d: %w", row.T, err)
					}
					row.X, enc = x, nil
				}
				ebRows[eb] = append(ebRows[eb], row)
				written[eb] = max(written[eb], wt)
			}
			return wrapCtx(gctx, iter.Close())
		})
	}
	if err := g.Wait(); err != nil {
		return rep, fmt.Errorf("cassandra: seal %s: %w", what, err)
	}
	var rows []tiers.Row
	rowsWritten := int64(math.MinInt64)
	for eb := range eventBuckets {
		rows = append(rows, ebRows[eb]...)
		rowsWritten = max(rowsWritten, written[eb])
	}
	// A mark read is deleted (at its own write time, so that a newer one
	// stays) by the batch that replaces the chunks, or else here: its rows
	// are in the chunks already, or gone.
	clearMark := func() error {
		if marked == math.MinInt64 {
			return nil
		}
		err := session.Query(cs.clearMark, append(append([]any{marked}, args(0)...), markFirst)...).Idempotent(true).ExecContext(ctx)
		if err != nil {
			return fmt.Errorf("cassandra: seal %s: clear its mark: %w", what, wrapCtx(ctx, err))
		}
		return nil
	}
	if len(rows) == 0 {
		if err := clearMark(); err != nil {
			return rep, err
		}
		// Nothing to fold in: what the chunks hold is in their headers.
		for _, c := range chunks {
			n, err := sealed.Count(c.data)
			if err != nil {
				return rep, fmt.Errorf("cassandra: seal %s: %w", what, err)
			}
			rep.Points += n
		}
		return rep, nil
	}
	var old []tiers.Row
	for _, c := range chunks {
		if cs.rollup {
			old, err = sealed.DecodeRollup(old, c.data, all, sealed.Oldest(now, c.retention), true)
		} else {
			old, err = sealed.Decode(old, c.data, all, sealed.Oldest(now, c.retention), sealed.AllEventBuckets)
		}
		if err != nil {
			return rep, fmt.Errorf("cassandra: seal %s: %w", what, err)
		}
	}
	rep.Points = len(old)
	// Each partition's rows are ascending; a time is in one partition only.
	slices.SortFunc(rows, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	points := sealed.MergePoints(old, rows)
	first, _ := slices.BinarySearchFunc(points, sealed.Oldest(now, retention), func(r tiers.Row, t int64) int { return cmp.Compare(r.T, t) })
	points = points[first:]
	rep.Rows = changed(old, rows, cs.rollup)
	if rep.Rows > 0 {
		var chunks []sealed.Chunk
		if cs.rollup {
			chunks, err = sealed.EncodeRollup(points)
		} else {
			chunks, err = sealed.Encode(points, eventBuckets)
		}
		if err != nil {
			return rep, fmt.Errorf("cassandra: seal %s: %w", what, err)
		}
		stamp := max(newest, rowsWritten) + 1
		b := session.Batch(gocql.UnloggedBatch)
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: cs.clear, Args: append([]any{stamp - 1}, args(0)...), Idempotent: true})
		rep.Points = 0
		for _, c := range chunks {
			ttl, ok := rowTTL(c.Last, retention, now)
			if !ok {
				continue
			}
			b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: cs.insert,
				Args: append(args(0), c.First, c.Last, retention, now, c.Data, ttl, stamp), Idempotent: true})
			rep.Points += c.Count
			rep.Chunks++
		}
		if err := b.ExecContext(ctx); err != nil {
			return rep, fmt.Errorf("cassandra: seal %s: %w", what, wrapCtx(ctx, err))
		}
		sealedAt = now
	} else if err := clearMark(); err != nil {
		return rep, err
	}
	if rep.Chunks == 0 {
		rep.Chunks = chunkCount(len(points))
	}
	if grace := s.cfg.SealedRowsGrace.Milliseconds(); now-sealedAt < grace {
		// The rows go once reads that missed the chunks are over.
		if len(points) == 0 {
			return rep, nil // they expire first
		}
		ttl, ok := rowTTL(points[len(points)-1].T, retention, now)
		if !ok {
			return rep, nil
		}
		if err := s.noteSealedRows(ctx, key, written, sealedAt+grace, ttl); err != nil {
			return rep, fmt.Errorf("cassandra: seal %s: note its rows: %w", what, wrapCtx(ctx, err))
		}
		return rep, nil
	}
	g, gctx = errgroup.WithContext(ctx)
	for eb, wt := range written {
		if wt == math.MinInt64 {
			continue
		}
		g.Go(func() error {
			return wrapCtx(gctx, session.Query(cs.deleteRows, append([]any{wt}, args(eb)...)...).Idempotent(true).ExecContext(gctx))
		})
	}
	if err := g.Wait(); err != nil {
		return rep, fmt.Errorf("cassandra: seal %s: delete rows: %w", what, err)
	}
	return rep, nil
}

// changed counts the rows whose point (or rollup row) the chunks lack or
// hold with other bits. Both are ascending.
func changed(old, rows []tiers.Row, rollup bool) int {
	n, i := 0, 0
	for _, r := range rows {
		for i < len(old) && old[i].T < r.T {
			i++
		}
		switch {
		case i == len(old) || old[i].T != r.T:
			n++
		case rollup:
			if !tiers.SameRow(old[i], r) || math.Float64bits(old[i].Sum) != math.Float64bits(r.Sum) {
				n++
			}
		case math.Float64bits(old[i].Sum) != math.Float64bits(r.Sum):
			n++
		}
	}
	return n
}

func chunkCount(points int) int { return (points + sealed.MaxSamples - 1) / sealed.MaxSamples }
