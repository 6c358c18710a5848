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

// chunkCode keys the sealed chunks of points_raw partitions as a table of
// their own, one record per chunk under the chunk's first time.
var chunkCode = tableCode{prefix: []byte{kindRawChunk}, eventBuckets: true}

// chunkHeadLen is the fixed part of a chunk's value: expiry, the retention
// it was sealed with, and the time of its last point.
const chunkHeadLen = expiryLen + 8 + timeLen

// chunkBounds are the keys of the chunks of a partition whose first point
// lies before to.
func chunkBounds(key tiers.PartitionKey, to int64) (lower, upper []byte) {
	lower = appendPartition(nil, chunkCode, key)
	return lower, appendTime(slices.Clone(lower), to)
}

// loadChunks appends to dst the points in span, not expired at now, of the
// chunks it visits. it must be bounded to chunk keys of one partition;
// the points come back ascending.
func loadChunks(dst []tiers.Row, it *pebble.Iterator, span tiers.Span, now int64) ([]tiers.Row, error) {
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
		if dst, err = sealed.Decode(dst, v[chunkHeadLen:], span, oldest); err != nil {
			return dst, fmt.Errorf("embedded: chunk %x: %w", it.Key(), err)
		}
	}
	return dst, it.Error()
}

// SealPartition rewrites a points_raw partition as sealed chunks (see the
// package doc). The read and the batch that replaces the partition run
// under the lock that writes of expiring records hold shared, so no row
// is written between them; the batch is atomic, so reads see the
// partition whole before or after.
func (s *Store) SealPartition(ctx context.Context, key tiers.PartitionKey, retention int64) (tiers.SealReport, error) {
	var rep tiers.SealReport
	if key.Table != tiers.TableRaw {
		return rep, fmt.Errorf("embedded: only %s partitions are sealed, not %s", tiers.TableRaw, key.Table)
	}
	code, err := checkPartition(key)
	if err != nil {
		return rep, err
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
	rowLower := appendPartition(nil, code, key)
	rowUpper := prefixEnd(rowLower)

	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: chunkLower, UpperBound: chunkUpper})
	if err != nil {
		return rep, fmt.Errorf("embedded: seal: %w", err)
	}
	defer it.Close()
	// Point deletions of the keys read, not range deletions: every range
	// tombstone in the memtable slows down every iterator opened over it,
	// and a store sealing thousands of partitions would read through
	// thousands of them until the next flush.
	var dead [][]byte
	for valid := it.First(); valid; valid = it.Next() {
		dead = append(dead, slices.Clone(it.Key()))
	}
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}
	old, err := loadChunks(nil, it, all, now)
	if err != nil {
		return rep, fmt.Errorf("embedded: seal: %w", err)
	}
	// The same iterator, so the same view of the store, reads the rows.
	it.SetBounds(rowLower, rowUpper)
	var rows []tiers.Row
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
	rep.Rows = len(rows)
	if len(rows) == 0 {
		// Sealed already, or empty: nothing to rewrite.
		rep.Points = len(old)
		return rep, nil
	}
	points := sealed.MergePoints(old, rows)
	oldest := sealed.Oldest(now, retention)
	first, _ := slices.BinarySearchFunc(points, oldest, func(r tiers.Row, t int64) int { return cmp.Compare(r.T, t) })
	points = points[first:]
	chunks, err := sealed.Encode(points)
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
