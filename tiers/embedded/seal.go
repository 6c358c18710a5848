package embedded

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/sealed"
)

// chunkCode keys the sealed chunks of points_raw buckets as a table of
// their own, one record per chunk under the chunk's first time. A
// bucket's chunks hold the points of all its event buckets and are keyed
// under event bucket 0.
var chunkCode = tableCode{prefix: []byte{kindRawChunk}, eventBuckets: true}

// chunkHeadLen is the fixed part of a chunk's value: expiry, the retention
// it was sealed with, and the time of its last point.
const chunkHeadLen = expiryLen + 8 + timeLen

// chunkBounds are the keys of the chunks of the partition's bucket whose
// first point lies before to.
func chunkBounds(key tiers.PartitionKey, to int64) (lower, upper []byte) {
	key.EventBucket = 0
	lower = appendPartition(nil, chunkCode, key)
	return lower, appendTime(slices.Clone(lower), to)
}

// loadChunks appends to dst the points in span of partition eventBucket
// (sealed.AllEventBuckets: of every partition), not expired at now, of the
// chunks it visits. it must be bounded to chunk keys of one bucket; the
// points come back ascending.
func loadChunks(dst []tiers.Row, it *pebble.Iterator, span tiers.Span, now int64, eventBucket int) ([]tiers.Row, error) {
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return dst, err
		}
		if len(v) < chunkHeadLen {
			return dst, fmt.Errorf("embedded: corrupt chunk %x", it.Key())
		}
		if expired(getExpiry(v), now) || getTime(v[expiryLen+8:]) < span.From {
			continue
		}
		oldest := sealed.Oldest(now, getInt64(v[expiryLen:]))
		if dst, err = sealed.Decode(dst, v[chunkHeadLen:], span, oldest, eventBucket); err != nil {
			return dst, fmt.Errorf("embedded: chunk %x: %w", it.Key(), err)
		}
	}
	return dst, it.Error()
}

// SealBucket rewrites the points_raw partitions of a bucket as sealed
// chunks (see the package doc). The read and the batch that replaces the
// partitions run under the lock that writes of expiring records hold
// shared, so no row is written between them; the batch is atomic, so
// reads see the bucket whole before or after.
func (s *Store) SealBucket(ctx context.Context, series string, bucket int64, eventBuckets int, retention int64) (tiers.SealReport, error) {
	var rep tiers.SealReport
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket}
	code, err := checkPartition(key)
	if err != nil {
		return rep, err
	}
	if eventBuckets < 1 || eventBuckets > tiers.MaxEventBuckets {
		return rep, fmt.Errorf("embedded: %d event buckets", eventBuckets)
	}
	if retention < 0 {
		return rep, fmt.Errorf("embedded: negative retention %d", retention)
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if err := s.enter(); err != nil {
		return rep, err
	}
	defer s.mu.RUnlock()
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()

	now := s.nowMs()
	chunkLower, _ := chunkBounds(key, 0)
	chunkUpper := prefixEnd(chunkLower)
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: chunkLower, UpperBound: chunkUpper})
	if err != nil {
		return rep, fmt.Errorf("embedded: seal: %w", err)
	}
	defer it.Close()
	// Point deletions of the keys read, not range deletions: every range
	// tombstone in the memtable slows down every iterator opened over it,
	// and a store sealing thousands of buckets would read through
	// thousands of them until the next flush.
	var dead [][]byte
	for valid := it.First(); valid; valid = it.Next() {
		dead = append(dead, slices.Clone(it.Key()))
	}
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}
	old, err := loadChunks(nil, it, all, now, sealed.AllEventBuckets)
	if err != nil {
		return rep, fmt.Errorf("embedded: seal: %w", err)
	}
	// The same iterator, so the same view of the store, reads the rows.
	var rows []tiers.Row
	for eb := range eventBuckets {
		key.EventBucket = eb
		rowLower := appendPartition(nil, code, key)
		it.SetBounds(rowLower, prefixEnd(rowLower))
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return rep, fmt.Errorf("embedded: seal: %w", err)
			}
			dead = append(dead, slices.Clone(it.Key()))
			if len(v) < expiryLen || expired(getExpiry(v), now) {
				continue
			}
			r, ok := getRow(v, true, getTime(it.Key()[len(rowLower):]))
			if !ok {
				return rep, fmt.Errorf("embedded: corrupt row %x", it.Key())
			}
			rows = append(rows, r)
		}
		if err := it.Error(); err != nil {
			return rep, fmt.Errorf("embedded: seal: %w", err)
		}
	}
	rep.Rows = len(rows)
	if len(rows) == 0 {
		// Sealed already, or empty: nothing to rewrite.
		rep.Points = len(old)
		return rep, nil
	}
	// Each partition's rows are ascending; a time is in one partition only.
	slices.SortFunc(rows, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	points := sealed.MergePoints(old, rows)
	first, _ := slices.BinarySearchFunc(points, sealed.Oldest(now, retention), func(r tiers.Row, t int64) int { return cmp.Compare(r.T, t) })
	points = points[first:]
	chunks, err := sealed.Encode(points, eventBuckets)
	if err != nil {
		return rep, fmt.Errorf("embedded: seal: %w", err)
	}

	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range dead {
		if err := b.Delete(k, nil); err != nil {
			return rep, fmt.Errorf("embedded: seal: %w", err)
		}
	}
	for _, c := range chunks {
		v := make([]byte, chunkHeadLen, chunkHeadLen+len(c.Data))
		putInt64(v, expiry(c.Last, retention))
		putInt64(v[expiryLen:], retention)
		putTime(v[expiryLen+8:], c.Last)
		if err := b.Set(appendTime(slices.Clone(chunkLower), c.First), append(v, c.Data...), nil); err != nil {
			return rep, fmt.Errorf("embedded: seal: %w", err)
		}
		rep.Points += c.Count
		rep.Chunks++
	}
	if err := ctx.Err(); err != nil {
		return tiers.SealReport{}, err
	}
	// Not synced: a seal lost in a crash leaves the rows it read, which
	// still hold every point, and the next seal redoes it; the next
	// synced write makes it durable anyway.
	if err := b.Commit(pebble.NoSync); err != nil {
		return tiers.SealReport{}, fmt.Errorf("embedded: seal: %w", err)
	}
	return rep, nil
}
