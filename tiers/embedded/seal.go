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

// chunkPartition returns the key prefix of the chunks of the partition
// key of a table coded code: points_raw's under chunkCode, a rollup
// table's under kindRollupChunk followed by the partition's own prefix.
func chunkPartition(code tableCode, key tiers.PartitionKey) []byte {
	if key.Table == tiers.TableRaw {
		key.EventBucket = 0
		return appendPartition(nil, chunkCode, key)
	}
	return appendPartition([]byte{kindRollupChunk}, code, key)
}

// sealable reports whether the table's partitions are sealed: points_raw
// and the rollup tables; points_late's rows are few and short-lived.
func sealable(key tiers.PartitionKey) bool { return key.Table != tiers.TableLate }

// chunkHeadLen is the fixed part of a chunk's value: expiry, the retention
// it was sealed with, and the time of its last point.
const chunkHeadLen = expiryLen + 8 + timeLen

// chunkBounds are the keys of the chunks of the partition's bucket whose
// first point lies before to.
func chunkBounds(code tableCode, key tiers.PartitionKey, to int64) (lower, upper []byte) {
	lower = chunkPartition(code, key)
	return lower, appendTime(slices.Clone(lower), to)
}

// chunkRead says which rows of the chunks loadChunks visits it keeps.
type chunkRead struct {
	span tiers.Span
	now  int64
	// eventBucket is the raw partition whose points are kept
	// (sealed.AllEventBuckets: every partition's).
	eventBucket int
	// rollup says the chunks are rollup chunks; extras that their rows
	// are decoded with their extras.
	rollup, extras bool
}

// loadChunks appends to dst the rows in r.span, not expired at r.now, of
// the chunks it visits. it must be bounded to chunk keys of one bucket;
// the rows come back ascending.
func loadChunks(dst []tiers.Row, it *pebble.Iterator, r chunkRead) ([]tiers.Row, error) {
	span, now := r.span, r.now
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
		switch {
		case r.rollup && r.extras:
			// The rows' sketches are slices of what they decode from,
			// which the iterator owns.
			dst, err = sealed.DecodeRollup(dst, slices.Clone(v[chunkHeadLen:]), span, oldest, true)
		case r.rollup:
			dst, err = sealed.DecodeRollup(dst, v[chunkHeadLen:], span, oldest, false)
		default:
			dst, err = sealed.Decode(dst, v[chunkHeadLen:], span, oldest, r.eventBucket)
		}
		if err != nil {
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
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket}
	code, err := checkPartition(key)
	if err != nil {
		return tiers.SealReport{}, err
	}
	if eventBuckets < 1 || eventBuckets > tiers.MaxEventBuckets {
		return tiers.SealReport{}, fmt.Errorf("embedded: %d event buckets", eventBuckets)
	}
	return s.seal(ctx, code, key, eventBuckets, retention)
}

// SealRollup rewrites a rollup partition as sealed chunks, as SealBucket
// does a raw bucket.
func (s *Store) SealRollup(ctx context.Context, key tiers.PartitionKey, retention int64) (tiers.SealReport, error) {
	code, err := checkPartition(key)
	if err != nil {
		return tiers.SealReport{}, err
	}
	if code.raw {
		return tiers.SealReport{}, fmt.Errorf("embedded: %s is not a rollup table", key.Table)
	}
	return s.seal(ctx, code, key, 1, retention)
}

// seal rewrites the eventBuckets partitions from key (a raw bucket's, or
// one rollup partition) as chunks.
func (s *Store) seal(ctx context.Context, code tableCode, key tiers.PartitionKey, eventBuckets int, retention int64) (tiers.SealReport, error) {
	var rep tiers.SealReport
	rollup := !code.raw
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
	chunkLower := chunkPartition(code, key)
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
	// The rows first, through the iterator that then reads the chunks:
	// one view of the store.
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
			r, ok := getRow(v, !rollup, getTime(it.Key()[len(rowLower):]))
			if !ok {
				return rep, fmt.Errorf("embedded: corrupt row %x", it.Key())
			}
			if rollup {
				if r.X, err = tiers.DecodeExtras(r, slices.Clone(extrasOf(v))); err != nil {
					return rep, fmt.Errorf("embedded: row %x: %w", it.Key(), err)
				}
			}
			rows = append(rows, r)
		}
		if err := it.Error(); err != nil {
			return rep, fmt.Errorf("embedded: seal: %w", err)
		}
	}
	it.SetBounds(chunkLower, chunkUpper)
	rep.Rows = len(rows)
	if len(rows) == 0 {
		// Sealed already, or empty: nothing to rewrite, and what the
		// chunks hold is in their headers (a chunk whose first points
		// have expired counts them still).
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return rep, fmt.Errorf("embedded: seal: %w", err)
			}
			if len(v) < chunkHeadLen {
				return rep, fmt.Errorf("embedded: corrupt chunk %x", it.Key())
			}
			if expired(getExpiry(v), now) {
				continue
			}
			n, err := sealed.Count(v[chunkHeadLen:])
			if err != nil {
				return rep, fmt.Errorf("embedded: chunk %x: %w", it.Key(), err)
			}
			rep.Points += n
		}
		return rep, it.Error()
	}
	for valid := it.First(); valid; valid = it.Next() {
		dead = append(dead, slices.Clone(it.Key()))
	}
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}
	old, err := loadChunks(nil, it, chunkRead{span: all, now: now, eventBucket: sealed.AllEventBuckets, rollup: rollup, extras: rollup})
	if err != nil {
		return rep, fmt.Errorf("embedded: seal: %w", err)
	}
	// Each partition's rows are ascending; a time is in one partition only.
	slices.SortFunc(rows, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	points := sealed.MergePoints(old, rows)
	first, _ := slices.BinarySearchFunc(points, sealed.Oldest(now, retention), func(r tiers.Row, t int64) int { return cmp.Compare(r.T, t) })
	points = points[first:]
	var chunks []sealed.Chunk
	if rollup {
		chunks, err = sealed.EncodeRollup(points)
	} else {
		chunks, err = sealed.Encode(points, eventBuckets)
	}
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
