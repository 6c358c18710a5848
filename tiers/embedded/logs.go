package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/tiers"
)

// MarkLate sets one key per (series, bucket) and kind of mark holding the
// mark's expiry and a new version; a repeated mark overwrites both, as a
// Cassandra upsert would. A rewrite mark's key is the late mark's with a
// byte more, so one ordered scan finds both marks of a bucket side by side.
// Versions are taken and committed in one step (commitVersioned), so the
// last commit's version is the largest.
func (s *Store) MarkLate(ctx context.Context, marks []tiers.LateMark) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, m := range marks {
		if !validID(m.Series) {
			return errBadID
		}
		if m.Retention < 0 {
			return fmt.Errorf("embedded: negative retention %d", m.Retention)
		}
	}
	now := s.nowMs()
	return s.commitVersioned(true, func(b *pebble.Batch, version int64) error {
		for _, m := range marks {
			exp := expiry(m.Bucket, m.Retention)
			if expired(exp, now) {
				continue
			}
			key := appendTime(lateMarkPrefix(m.Series), m.Bucket)
			if m.Rewrite {
				key = append(key, rewriteMarkSuffix)
			}
			v := binary.LittleEndian.AppendUint64(int64Value(exp), uint64(version))
			if err := b.Set(key, v, nil); err != nil {
				return fmt.Errorf("embedded: mark late: %w", err)
			}
		}
		return nil
	})
}

// commitVersioned takes a new version and commits what fill writes with it
// in one step under versionMu, so that the versions stored never go back.
// Records that expire are committed as commitExpiring does.
func (s *Store) commitVersioned(expiring bool, fill func(b *pebble.Batch, version int64) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	s.versionMu.Lock()
	defer s.versionMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	if err := fill(b, tiers.NewVersion()); err != nil {
		return err
	}
	if expiring {
		return s.commitExpiring(b)
	}
	return s.commit(b)
}

// LateBucketsOf is LateBuckets for each of the series
// (tiers.LateIndexBatch): a scan of each one's marks, which in Pebble is
// as cheap as one scan of them all.
func (s *Store) LateBucketsOf(ctx context.Context, series []string, span tiers.Span) (map[string][]tiers.LateBucket, error) {
	out := make(map[string][]tiers.LateBucket, len(series))
	for _, id := range series {
		marks, err := s.LateBuckets(ctx, id, span)
		if err != nil {
			return nil, err
		}
		if len(marks) > 0 {
			out[id] = marks
		}
	}
	return out, nil
}

// LateBuckets scans the series' marks between the span's bounds, a
// bucket's late mark and rewrite mark next to each other. A late mark
// written before marks had versions reads as version 1, which the next
// mark of its bucket replaces.
func (s *Store) LateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !validID(series) || span.Empty() {
		return nil, nil
	}
	prefix := lateMarkPrefix(series)
	lower := appendTime(bytes.Clone(prefix), span.From)
	upper := appendTime(bytes.Clone(prefix), span.To)
	var out []tiers.LateBucket
	err := s.scan(ctx, lower, upper, func(key, v []byte, now int64) error {
		rest := key[len(prefix):]
		rewrite := len(rest) == timeLen+1 && rest[timeLen] == rewriteMarkSuffix
		if (len(rest) != timeLen && !rewrite) || (len(v) != expiryLen && len(v) != expiryLen+8) {
			return fmt.Errorf("embedded: corrupt late mark %x", key)
		}
		if expired(getExpiry(v), now) {
			return nil
		}
		version := int64(1)
		if len(v) == expiryLen+8 {
			version = int64(binary.LittleEndian.Uint64(v[expiryLen:]))
		}
		bucket := getTime(rest[:timeLen])
		if n := len(out); n == 0 || out[n-1].Bucket != bucket {
			out = append(out, tiers.LateBucket{Bucket: bucket})
		}
		if rewrite {
			out[len(out)-1].Rewritten = version
		} else {
			out[len(out)-1].Version = version
		}
		return nil
	})
	return out, err
}

// MarkDirty files each window under (slot, series, window), plus a merge
// operand that keeps the oldest slot. Entries expire retention after they
// are written, as a Cassandra TTL counts from the write.
func (s *Store) MarkDirty(ctx context.Context, slot, retention int64, windows []tiers.DirtyWindow) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if retention < 0 {
		return fmt.Errorf("embedded: negative retention %d", retention)
	}
	for _, w := range windows {
		if !validID(w.Series) {
			return errBadID
		}
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	exp := int64Value(expiry(s.nowMs(), retention))
	b := s.db.NewBatch()
	defer b.Close()
	prefix := dirtyPrefix(slot)
	var key []byte
	for _, w := range windows {
		key = appendTime(appendID(append(key[:0], prefix...), w.Series), w.Window)
		if err := b.Set(key, exp, nil); err != nil {
			return fmt.Errorf("embedded: mark dirty: %w", err)
		}
	}
	if err := b.Merge(oldestKey, int64Value(slot), nil); err != nil {
		return fmt.Errorf("embedded: mark dirty: %w", err)
	}
	return s.commitExpiring(b)
}

// DirtyWindows scans the slot's entries; keys are unique per (series,
// window), so each window comes once.
func (s *Store) DirtyWindows(ctx context.Context, slot int64) ([]tiers.DirtyWindow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prefix := dirtyPrefix(slot)
	var out []tiers.DirtyWindow
	err := s.scan(ctx, prefix, prefixEnd(prefix), func(key, v []byte, now int64) error {
		id, rest, ok := splitID(key[len(prefix):])
		if !ok || len(rest) != timeLen || len(v) != expiryLen {
			return fmt.Errorf("embedded: corrupt dirty window %x", key)
		}
		if !expired(getExpiry(v), now) {
			out = append(out, tiers.DirtyWindow{Series: id, Window: getTime(rest)})
		}
		return nil
	})
	return out, err
}

// OldestDirtySlot reads the min-merged slot.
func (s *Store) OldestDirtySlot(ctx context.Context) (int64, bool, error) {
	return s.getInt64(ctx, oldestKey)
}

// Checkpoint reads the max-merged checkpoint.
func (s *Store) Checkpoint(ctx context.Context, name string) (int64, bool, error) {
	return s.getInt64(ctx, namedKey(kindCheckpoint, name))
}

// AdvanceCheckpoint writes a merge operand; the merger keeps the largest, so
// concurrent workers need not read first.
func (s *Store) AdvanceCheckpoint(ctx context.Context, name string, to int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.db.Merge(namedKey(kindCheckpoint, name), int64Value(to), pebble.Sync); err != nil {
		return fmt.Errorf("embedded: advance checkpoint %s: %w", name, err)
	}
	return nil
}

// Secret returns the named secret, creating it under a mutex so that every
// caller in the process gets the value stored first.
func (s *Store) Secret(ctx context.Context, name string, generate func() ([]byte, error)) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	s.secretMu.Lock()
	defer s.secretMu.Unlock()
	key := namedKey(kindSecret, name)
	v, closer, err := s.db.Get(key)
	if err == nil {
		out := bytes.Clone(v)
		closer.Close()
		return out, nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("embedded: secret %s: %w", name, err)
	}
	v, err = generate()
	if err != nil {
		return nil, err
	}
	if err := s.db.Set(key, v, pebble.Sync); err != nil {
		return nil, fmt.Errorf("embedded: secret %s: %w", name, err)
	}
	return bytes.Clone(v), nil
}

// getInt64 reads a merged int64 record.
func (s *Store) getInt64(ctx context.Context, key []byte) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := s.enter(); err != nil {
		return 0, false, err
	}
	defer s.mu.RUnlock()
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("embedded: get %x: %w", key, err)
	}
	defer closer.Close()
	if len(v) != int64ValLen {
		return 0, false, fmt.Errorf("embedded: corrupt record %x", key)
	}
	return getInt64(v), true, nil
}

// commitExpiring commits a batch of expiring records, excluding the
// sweeper's delete of a key this batch revives.
func (s *Store) commitExpiring(b *pebble.Batch) error {
	s.sweepMu.RLock()
	defer s.sweepMu.RUnlock()
	return s.commit(b)
}

// scan calls fn for each record in [lower, upper), with the clock reading
// to judge expiry by.
func (s *Store) scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte, now int64) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("embedded: scan: %w", err)
	}
	defer it.Close()
	now := s.nowMs()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("embedded: scan: %w", err)
		}
		if err := fn(it.Key(), v, now); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("embedded: scan: %w", err)
	}
	return nil
}
