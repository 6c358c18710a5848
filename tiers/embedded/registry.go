package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/tiers"
)

// NoteSeries writes one merge operand per series; the merger widens the
// stored span when the operands meet, so nothing is read here.
func (s *Store) NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(spans) == 0 {
		return nil
	}
	for _, sp := range spans {
		if !validID(sp.ID) {
			return errBadID
		}
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	b := s.db.NewBatch()
	defer b.Close()
	for _, sp := range spans {
		op := b.MergeDeferred(len(sp.ID)+2, spanValueLen)
		op.Key[0] = kindSeries
		copy(op.Key[1:], sp.ID)
		op.Key[len(op.Key)-1] = 0
		putInt64(op.Value, sp.First)
		putInt64(op.Value[8:], sp.Last)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("embedded: note series: %w", err)
		}
	}
	return s.commit(b)
}

// MarkRewritten sets each series' generation to a new version (see
// commitVersioned).
func (s *Store) MarkRewritten(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if !validID(id) {
			return errBadID
		}
	}
	return s.commitVersioned(false, func(b *pebble.Batch, version int64) error {
		for _, id := range ids {
			if err := b.Set(generationKey(id), binary.LittleEndian.AppendUint64(nil, uint64(version)), nil); err != nil {
				return fmt.Errorf("embedded: mark rewritten: %w", err)
			}
		}
		return nil
	})
}

// LookupSeriesOf is LookupSeries for each of the ids
// (tiers.RegistryBatch): in Pebble a lookup each is as cheap as one scan.
func (s *Store) LookupSeriesOf(ctx context.Context, ids []string) (map[string]tiers.SeriesInfo, error) {
	return tiers.LookupEach(ctx, ids, s.LookupSeries)
}

// LookupSeries returns the series' span, its layout history and its
// labels.
func (s *Store) LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error) {
	if err := ctx.Err(); err != nil {
		return tiers.SeriesInfo{}, err
	}
	if !validID(id) {
		return tiers.SeriesInfo{}, tiers.ErrNotFound
	}
	if err := s.enter(); err != nil {
		return tiers.SeriesInfo{}, err
	}
	defer s.mu.RUnlock()
	v, closer, err := s.db.Get(seriesKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return tiers.SeriesInfo{}, tiers.ErrNotFound
	}
	if err != nil {
		return tiers.SeriesInfo{}, fmt.Errorf("embedded: lookup %s: %w", id, err)
	}
	info, ok := decodeSpan(id, v)
	closer.Close()
	if !ok {
		return tiers.SeriesInfo{}, fmt.Errorf("embedded: corrupt registry entry for %s", id)
	}
	g, closer, err := s.db.Get(generationKey(id))
	switch {
	case err == nil:
		if len(g) != 8 {
			closer.Close()
			return tiers.SeriesInfo{}, fmt.Errorf("embedded: corrupt generation of %s", id)
		}
		info.Generation = int64(binary.LittleEndian.Uint64(g))
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return tiers.SeriesInfo{}, fmt.Errorf("embedded: generation of %s: %w", id, err)
	}
	info.Layout, err = s.layout(id)
	if err != nil {
		return tiers.SeriesInfo{}, err
	}
	if info.Labels, err = s.seriesLabels(id); err != nil {
		return tiers.SeriesInfo{}, err
	}
	return info, nil
}

func decodeSpan(id string, v []byte) (tiers.SeriesInfo, bool) {
	if len(v) != spanValueLen {
		return tiers.SeriesInfo{}, false
	}
	return tiers.SeriesInfo{ID: id, First: getInt64(v), Last: getInt64(v[8:])}, true
}

// layout reads the series' layout entries, which sort by Since.
func (s *Store) layout(id string) (tiers.Layout, error) {
	prefix := layoutPrefix(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("embedded: layout of %s: %w", id, err)
	}
	defer it.Close()
	var layout tiers.Layout
	for valid := it.First(); valid; valid = it.Next() {
		key := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("embedded: layout of %s: %w", id, err)
		}
		if len(key) != len(prefix)+timeLen || len(v) != layoutValLen {
			return nil, fmt.Errorf("embedded: corrupt layout entry %x", key)
		}
		layout = append(layout, tiers.LayoutEntry{
			Since:        getTime(key[len(prefix):]),
			Width:        getInt64(v),
			EventBuckets: int(binary.LittleEndian.Uint16(v[8:])),
		})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("embedded: layout of %s: %w", id, err)
	}
	return layout, nil
}

// AppendLayout stores the entry under (series, Since), so entries read back
// in Since order whatever order they were appended in.
func (s *Store) AppendLayout(ctx context.Context, id string, entry tiers.LayoutEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(id) {
		return errBadID
	}
	if err := (tiers.Layout{entry}).Validate(); err != nil {
		return fmt.Errorf("embedded: append layout to %s: %w", id, err)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	key := appendTime(layoutPrefix(id), entry.Since)
	v := make([]byte, layoutValLen)
	putInt64(v, entry.Width)
	binary.LittleEndian.PutUint16(v[8:], uint16(entry.EventBuckets))
	if err := s.db.Set(key, v, pebble.Sync); err != nil {
		return fmt.Errorf("embedded: append layout to %s: %w", id, err)
	}
	return nil
}

// ListSeries scans the registry in key order, which is id order because the
// NUL terminator sorts below every id byte, and the labels records of the
// series it lists, which are in the same order.
func (s *Store) ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 || strings.IndexByte(prefix, 0) >= 0 {
		return nil, nil
	}
	lower := append([]byte{kindSeries}, prefix...)
	upper := prefixEnd(lower)
	if after != "" {
		// The smallest key after after's own key: ids that extend after sort
		// after it, and the key of after itself is excluded.
		if a := append(seriesKey(after), 0); bytes.Compare(a, lower) > 0 {
			lower = a
		}
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("embedded: list series: %w", err)
	}
	defer it.Close()
	var out []tiers.SeriesInfo
	for valid := it.First(); valid && len(out) < limit; valid = it.Next() {
		key := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("embedded: list series: %w", err)
		}
		id, rest, ok := splitID(key[1:])
		if !ok || len(rest) != 0 {
			return nil, fmt.Errorf("embedded: corrupt registry key %x", key)
		}
		info, ok := decodeSpan(id, v)
		if !ok {
			return nil, fmt.Errorf("embedded: corrupt registry entry for %s", id)
		}
		out = append(out, info)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("embedded: list series: %w", err)
	}
	if err := s.fillLabels(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}
