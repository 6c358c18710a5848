package embedded

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/tiers"
)

// Blocked series are records kindBlocked+id → since (8 bytes) + reason.
// Ids hold no NUL, so the ids under the kind sort in id order.

// Block stores the series' block, replacing any earlier one.
func (s *Store) Block(ctx context.Context, b tiers.BlockedSeries) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(b.Series) {
		return errBadID
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	v := make([]byte, 8, 8+len(b.Reason))
	putInt64(v, b.Since)
	v = append(v, b.Reason...)
	if err := s.db.Set(namedKey(kindBlocked, b.Series), v, pebble.Sync); err != nil {
		return fmt.Errorf("embedded: block %s: %w", b.Series, err)
	}
	return nil
}

// Unblock deletes the series' block.
func (s *Store) Unblock(ctx context.Context, series string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(series) {
		return errBadID
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.db.Delete(namedKey(kindBlocked, series), pebble.Sync); err != nil {
		return fmt.Errorf("embedded: unblock %s: %w", series, err)
	}
	return nil
}

// ListBlocked scans the blocked records in key (id) order.
func (s *Store) ListBlocked(ctx context.Context) ([]tiers.BlockedSeries, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	prefix := []byte{kindBlocked}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("embedded: list blocked series: %w", err)
	}
	defer it.Close()
	var out []tiers.BlockedSeries
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("embedded: list blocked series: %w", err)
		}
		b, ok := decodeBlock(string(it.Key()[1:]), v)
		if !ok {
			return nil, fmt.Errorf("embedded: corrupt block record %x", it.Key())
		}
		out = append(out, b)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("embedded: list blocked series: %w", err)
	}
	return out, nil
}

// IsBlocked reads one series' block.
func (s *Store) IsBlocked(ctx context.Context, series string) (tiers.BlockedSeries, bool, error) {
	if err := ctx.Err(); err != nil {
		return tiers.BlockedSeries{}, false, err
	}
	if !validID(series) {
		return tiers.BlockedSeries{}, false, nil
	}
	if err := s.enter(); err != nil {
		return tiers.BlockedSeries{}, false, err
	}
	defer s.mu.RUnlock()
	v, closer, err := s.db.Get(namedKey(kindBlocked, series))
	if errors.Is(err, pebble.ErrNotFound) {
		return tiers.BlockedSeries{}, false, nil
	}
	if err != nil {
		return tiers.BlockedSeries{}, false, fmt.Errorf("embedded: is %s blocked: %w", series, err)
	}
	defer closer.Close()
	b, ok := decodeBlock(series, v)
	if !ok {
		return tiers.BlockedSeries{}, false, fmt.Errorf("embedded: corrupt block record of %s", series)
	}
	return b, true, nil
}

func decodeBlock(id string, v []byte) (tiers.BlockedSeries, bool) {
	if len(v) < 8 {
		return tiers.BlockedSeries{}, false
	}
	return tiers.BlockedSeries{Series: id, Since: getInt64(v), Reason: string(v[8:])}, true
}
