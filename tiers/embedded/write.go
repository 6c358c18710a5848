package embedded

import (
	"context"
	"fmt"

	"github.com/tsgate/tsgate/tiers"
)

// Write upserts the rows of all writes in one batch, synced to the log before
// it returns; Pebble groups concurrent syncs into one. Rows already expired
// are dropped, as Cassandra drops a cell written with its TTL run out. An
// invalid partition key fails the whole call before anything is written.
func (s *Store) Write(ctx context.Context, writes []tiers.PartitionWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	codes := make([]tableCode, len(writes))
	size := 0
	for i, w := range writes {
		code, err := checkPartition(w.Key)
		if err != nil {
			return err
		}
		if w.Retention < 0 {
			return fmt.Errorf("embedded: negative retention %d", w.Retention)
		}
		codes[i] = code
		// A batch record is a kind byte, two length varints, key and value
		// (and a rollup row's extras, which vary).
		size += len(w.Rows) * (4 + len(code.prefix) + len(w.Key.Series) + 12 + timeLen + rowValueLen(code))
		if !code.raw {
			for _, r := range w.Rows {
				if r.X != nil {
					size += 64
				}
			}
		}
	}
	if size == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()

	now := s.nowMs()
	b := s.db.NewBatchWithSize(size + 12)
	defer b.Close()
	var prefix, value []byte
	for i, w := range writes {
		code := codes[i]
		prefix = appendPartition(prefix[:0], code, w.Key)
		vlen := rowValueLen(code)
		for _, r := range w.Rows {
			exp := expiry(r.T, w.Retention)
			if expired(exp, now) {
				continue
			}
			if r.X != nil && !code.raw {
				// Extras vary in length: encoded first, then copied.
				if cap(value) < vlen {
					value = make([]byte, vlen, vlen+tiers.MaxExtrasLen)
				}
				value = putRow(value[:vlen], code, r, exp)
				op := b.SetDeferred(len(prefix)+timeLen, len(value))
				copy(op.Key, prefix)
				putTime(op.Key[len(prefix):], r.T)
				copy(op.Value, value)
				if err := op.Finish(); err != nil {
					return fmt.Errorf("embedded: write: %w", err)
				}
				continue
			}
			// Encode straight into the batch: no per-row key or value buffer.
			op := b.SetDeferred(len(prefix)+timeLen, vlen)
			copy(op.Key, prefix)
			putTime(op.Key[len(prefix):], r.T)
			putRow(op.Value, code, r, exp) // no extras to append
			if err := op.Finish(); err != nil {
				return fmt.Errorf("embedded: write: %w", err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commitExpiring(b)
}
