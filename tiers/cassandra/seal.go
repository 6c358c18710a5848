package cassandra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

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

// chunkStmts are the statements of the chunk table and of sealing.
type chunkStmts struct {
	// read selects the chunks of a bucket that start before a time.
	read string
	// readAll selects every chunk of a bucket with its write time.
	readAll string
	// rowsWithTime selects a raw partition's rows with their write times.
	rowsWithTime string
	// clear deletes a partition's chunks written up to a timestamp; insert
	// writes one chunk.
	clear, insert string
	// deleteRows deletes a raw partition's rows written up to a timestamp.
	deleteRows string
}

func newChunkStmts(ks string) chunkStmts {
	where := "series = ? AND bucket = ? AND eb = ?"
	return chunkStmts{
		read:         fmt.Sprintf("SELECT last, retention, data FROM %s.%s WHERE %s AND first < ?", ks, tableRawChunks, where),
		readAll:      fmt.Sprintf("SELECT last, retention, data, sealed_at, WRITETIME(data) FROM %s.%s WHERE %s", ks, tableRawChunks, where),
		rowsWithTime: fmt.Sprintf("SELECT t, v, WRITETIME(v) FROM %s.%s WHERE %s", ks, tiers.TableRaw, where),
		clear:        fmt.Sprintf("DELETE FROM %s.%s USING TIMESTAMP ? WHERE %s", ks, tableRawChunks, where),
		insert: fmt.Sprintf("INSERT INTO %s.%s (series, bucket, eb, first, last, retention, sealed_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?",
			ks, tableRawChunks),
		deleteRows: fmt.Sprintf("DELETE FROM %s.%s USING TIMESTAMP ? WHERE %s", ks, tiers.TableRaw, where),
	}
}

// chunkSchema is the CQL of the chunk table: partitioned and compacted
// like points_raw, a chunk expiring (by its TTL) with its last point.
func chunkSchema(ks string, raw *tiers.Tier) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    series text,\n    bucket timestamp,\n    eb smallint,\n    first timestamp,\n"+
		"    last timestamp,\n    retention bigint,\n    sealed_at timestamp,\n    data blob,\n    PRIMARY KEY ((series, bucket, eb), first)\n) WITH CLUSTERING ORDER BY (first ASC)\n  AND %s",
		ks, tableRawChunks, tierOptions(raw.BucketWidth, raw.BucketWidth, raw.Retention))
}

// readChunks returns the points of a raw partition's chunks in span that
// have not expired, ascending.
func (s *Store) readChunks(ctx context.Context, key tiers.PartitionKey, span tiers.Span) ([]tiers.Row, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	// A bucket's chunks are kept under event bucket 0 and hold every
	// event bucket's points.
	iter := s.read(session.Query(s.chunks.read, key.Series, key.Bucket, int16(0), span.To)).IterContext(ctx)
	var points []tiers.Row
	var last, retention int64
	var data []byte
	for iter.Scan(&last, &retention, &data) {
		if last < span.From {
			continue
		}
		if points, err = sealed.Decode(points, data, span, sealed.Oldest(now, retention), key.EventBucket); err != nil {
			iter.Close()
			return nil, fmt.Errorf("cassandra: chunk of %q bucket %d/%d: %w", key.Series, key.Bucket, key.EventBucket, err)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	return points, nil
}

// sealedPages reads a raw partition: its row pages merged over the points
// of its chunks. The chunks are read at the first Next, while the first
// page of rows is: a seal writes chunks before it deletes rows, and
// deletes them only SealedRowsGrace after that, longer than a read lasts,
// so a read sees every point in its rows or in its chunks. A partition
// that was never sealed costs the read one empty query, in parallel.
type sealedPages struct {
	s      *Store
	ctx    context.Context
	req    tiers.ReadRequest
	rows   tiers.RowPages
	merged tiers.RowPages
	size   int
}

// chunkRead is the outcome of readChunks.
type chunkRead struct {
	points []tiers.Row
	err    error
}

func (p *sealedPages) Next() ([]tiers.Row, error) {
	if p.merged == nil {
		chunks := make(chan chunkRead, 1)
		go func() {
			points, err := p.s.readChunks(p.ctx, p.req.Key, p.req.Span)
			chunks <- chunkRead{points, err}
		}()
		first, err := p.rows.Next()
		c := <-chunks
		if err != nil && !errors.Is(err, tiers.ErrDone) {
			p.merged = &failedPages{err: err}
			_ = p.rows.Close()
			return p.merged.Next()
		}
		if c.err != nil {
			p.merged = &failedPages{err: fmt.Errorf("cassandra: read %s %q bucket %d/%d: %w",
				p.req.Key.Table, p.req.Key.Series, p.req.Key.Bucket, p.req.Key.EventBucket, wrapCtx(p.ctx, c.err))}
			_ = p.rows.Close()
			return p.merged.Next()
		}
		p.merged = sealed.Merge(c.points, &pushedBack{page: first, done: err != nil, rows: p.rows}, p.req.Desc, p.size)
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
// old (at once when it is 0), with a partition delete at the newest write
// time read in the partition: a row written after the read has a later
// write time and survives until the next seal folds it in. (A row
// written concurrently by a client whose clock lags that much could be
// deleted unread.)
func (s *Store) SealBucket(ctx context.Context, series string, bucket int64, eventBuckets int, retention int64) (tiers.SealReport, error) {
	var rep tiers.SealReport
	if _, err := s.table(tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket}); err != nil {
		return rep, err
	}
	if eventBuckets < 1 || eventBuckets > tiers.MaxEventBuckets {
		return rep, fmt.Errorf("cassandra: %d event buckets", eventBuckets)
	}
	if retention < 0 {
		return rep, fmt.Errorf("cassandra: negative retention %d", retention)
	}
	session, err := s.sess()
	if err != nil {
		return rep, err
	}
	what := fmt.Sprintf("%q bucket %d", series, bucket)
	now := s.now().UnixMilli()
	args := func(eb int) []any { return []any{series, bucket, int16(eb)} }

	// The chunks, with the time of the newest write and the oldest seal,
	// and each partition's rows, with its newest write time: independent
	// reads, made at once, so that a seal costs three round trips in
	// sequence (the reads, the batch of chunks, the deletes) rather than
	// one per partition.
	var old []tiers.Row
	var newest, sealedAt int64 = math.MinInt64, math.MaxInt64
	ebRows := make([][]tiers.Row, eventBuckets)
	written := make([]int64, eventBuckets)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		iter := s.read(session.Query(s.chunks.readAll, args(0)...)).IterContext(gctx)
		var last, ret, at, wt int64
		var data []byte
		for iter.Scan(&last, &ret, &data, &at, &wt) {
			var err error
			if old, err = sealed.Decode(old, data, tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, sealed.Oldest(now, ret), sealed.AllEventBuckets); err != nil {
				iter.Close()
				return err
			}
			newest, sealedAt = max(newest, wt), min(sealedAt, at)
		}
		return wrapCtx(gctx, iter.Close())
	})
	for eb := range eventBuckets {
		written[eb] = math.MinInt64
		g.Go(func() error {
			iter := s.read(session.Query(s.chunks.rowsWithTime, args(eb)...)).IterContext(gctx)
			var t, wt int64
			var v float64
			for iter.Scan(&t, &v, &wt) {
				ebRows[eb] = append(ebRows[eb], tiers.PointRow(t, v))
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
	rep.Points = len(old)
	if len(rows) == 0 {
		return rep, nil
	}
	// Each partition's rows are ascending; a time is in one partition only.
	slices.SortFunc(rows, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	points := sealed.MergePoints(old, rows)
	first, _ := slices.BinarySearchFunc(points, sealed.Oldest(now, retention), func(r tiers.Row, t int64) int { return cmp.Compare(r.T, t) })
	points = points[first:]
	rep.Rows = changed(old, rows)
	if rep.Rows > 0 {
		chunks, err := sealed.Encode(points, eventBuckets)
		if err != nil {
			return rep, fmt.Errorf("cassandra: seal %s: %w", what, err)
		}
		stamp := max(newest, rowsWritten) + 1
		b := session.Batch(gocql.UnloggedBatch)
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.chunks.clear, Args: append([]any{stamp - 1}, args(0)...), Idempotent: true})
		rep.Points = 0
		for _, c := range chunks {
			ttl, ok := rowTTL(c.Last, retention, now)
			if !ok {
				continue
			}
			b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.chunks.insert,
				Args: []any{series, bucket, int16(0), c.First, c.Last, retention, now, c.Data, ttl, stamp}, Idempotent: true})
			rep.Points += c.Count
			rep.Chunks++
		}
		if err := b.ExecContext(ctx); err != nil {
			return rep, fmt.Errorf("cassandra: seal %s: %w", what, wrapCtx(ctx, err))
		}
		sealedAt = now
	}
	if rep.Chunks == 0 {
		rep.Chunks = chunkCount(len(points))
	}
	if now-sealedAt < s.cfg.SealedRowsGrace.Milliseconds() {
		return rep, nil // the rows go once reads that missed the chunks are over
	}
	g, gctx = errgroup.WithContext(ctx)
	for eb, wt := range written {
		if wt == math.MinInt64 {
			continue
		}
		g.Go(func() error {
			return wrapCtx(gctx, session.Query(s.chunks.deleteRows, append([]any{wt}, args(eb)...)...).Idempotent(true).ExecContext(gctx))
		})
	}
	if err := g.Wait(); err != nil {
		return rep, fmt.Errorf("cassandra: seal %s: delete rows: %w", what, err)
	}
	return rep, nil
}

// changed counts the rows whose point the chunks lack or hold with other
// bits. Both are ascending.
func changed(old, rows []tiers.Row) int {
	n, i := 0, 0
	for _, r := range rows {
		for i < len(old) && old[i].T < r.T {
			i++
		}
		if i == len(old) || old[i].T != r.T || math.Float64bits(old[i].Sum) != math.Float64bits(r.Sum) {
			n++
		}
	}
	return n
}

func chunkCount(points int) int { return (points + sealed.MaxSamples - 1) / sealed.MaxSamples }
