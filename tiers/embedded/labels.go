package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/tiers"
)

// The label index is four record kinds (see the package doc): each series'
// labels beside its registry entry, a posting per (name, value, series),
// an entry per (name, value) some series has and one per name. Postings,
// values and names are keys with empty values, so each listing is one
// prefix scan in the order it is returned.

// seriesLockStripes is how many mutexes order SetLabels calls: calls for
// one series take the same one, so that each reads the labels the one
// before it left.
const seriesLockStripes = 64

// seriesLock returns the mutex of the series' stripe.
func (s *Store) seriesLock(id string) *labelStripe {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &s.labelStripes[h.Sum32()%seriesLockStripes]
}

// SetLabels replaces the series' labels in one atomic batch: its postings,
// value and name entries, the labels record, and the deletion of the
// postings of the pairs it lost. Writes of the entries of its pairs are
// idempotent sets, so nothing is read but the old record.
//
// A value entry goes when no series holds its pair any more, and a name
// entry when its name has no value left. Whether that is so is read from
// the batch itself (an indexed batch: the database as this batch leaves
// it), under labelsMu held exclusively; every call that adds entries
// holds it shared. So a call that removes a value's last posting and one
// that adds a posting of it see each other's batch whole: the value entry
// is deleted exactly when no posting is left, by whichever commits last.
func (s *Store) SetLabels(ctx context.Context, id string, labels tiers.Labels) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validID(id) {
		return errBadID
	}
	if err := labels.CheckStorable(); err != nil {
		return fmt.Errorf("embedded: labels of %s: %w", id, err)
	}
	labels = labels.Stored()
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	stripe := s.seriesLock(id)
	stripe.Lock()
	defer stripe.Unlock()

	old, err := s.seriesLabels(id)
	if err != nil {
		return err
	}
	if old.Equal(labels) {
		return nil // the batch that wrote old wrote its entries too
	}
	_, lost := tiers.Diff(old, labels)
	var b *pebble.Batch
	if len(lost) == 0 {
		s.labelsMu.RLock()
		defer s.labelsMu.RUnlock()
		b = s.db.NewBatch()
	} else {
		s.labelsMu.Lock()
		defer s.labelsMu.Unlock()
		b = s.db.NewIndexedBatch()
	}
	defer b.Close()
	fail := func(err error) error { return fmt.Errorf("embedded: set labels of %s: %w", id, err) }
	for _, name := range labels.Names() {
		value := labels[name]
		for _, key := range [][]byte{postingKey(name, value, id), labelValueKey(name, value), labelNameKey(name)} {
			if err := b.Set(key, nil, nil); err != nil {
				return fail(err)
			}
		}
	}
	if labels == nil {
		err = b.Delete(labelsKey(id), nil)
	} else {
		err = b.Set(labelsKey(id), encodeLabels(labels), nil)
	}
	if err != nil {
		return fail(err)
	}
	for _, l := range lost {
		if err := b.Delete(postingKey(l.Name, l.Value, id), nil); err != nil {
			return fail(err)
		}
	}
	for _, l := range lost {
		held, err := anyKey(b, postingPrefix(l.Name, l.Value))
		if err != nil {
			return fail(err)
		}
		if held {
			continue
		}
		if err := b.Delete(labelValueKey(l.Name, l.Value), nil); err != nil {
			return fail(err)
		}
		if _, kept := labels[l.Name]; kept {
			continue // the name has its new value
		}
		named, err := anyKey(b, labelValuePrefix(l.Name))
		if err != nil {
			return fail(err)
		}
		if !named {
			if err := b.Delete(labelNameKey(l.Name), nil); err != nil {
				return fail(err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commit(b)
}

// anyKey reports whether the indexed batch, read through to the database,
// holds a key that starts with prefix.
func anyKey(b *pebble.Batch, prefix []byte) (bool, error) {
	it, err := b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, errors.Join(it.Error(), it.Close())
}

// seriesLabels reads one series' labels record; the caller has entered.
func (s *Store) seriesLabels(id string) (tiers.Labels, error) {
	v, closer, err := s.db.Get(labelsKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: labels of %s: %w", id, err)
	}
	defer closer.Close()
	l, ok := decodeLabels(v)
	if !ok {
		return nil, fmt.Errorf("embedded: corrupt labels record of %s", id)
	}
	return l, nil
}

// SeriesLabels reads the records of the ids in key order with one
// iterator, each seek starting from where the last one ended.
func (s *Store) SeriesLabels(ctx context.Context, ids []string) (map[string]tiers.Labels, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sorted := make([]string, 0, len(ids))
	for _, id := range ids {
		if validID(id) {
			sorted = append(sorted, id)
		}
	}
	// Key order is id order: the NUL terminator sorts below every id byte.
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := make(map[string]tiers.Labels)
	if len(sorted) == 0 {
		return out, nil
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: labelsKey(sorted[0]), UpperBound: []byte{kindLabels + 1}})
	if err != nil {
		return nil, fmt.Errorf("embedded: series labels: %w", err)
	}
	defer it.Close()
	var key []byte
	for i, id := range sorted {
		if i%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		key = appendID(append(key[:0], kindLabels), id)
		if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
			continue
		}
		l, err := decodeLabelsAt(it)
		if err != nil {
			return nil, err
		}
		out[id] = l
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("embedded: series labels: %w", err)
	}
	return out, nil
}

// decodeLabelsAt decodes the labels record the iterator is at.
func decodeLabelsAt(it *pebble.Iterator) (tiers.Labels, error) {
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("embedded: labels record %x: %w", it.Key(), err)
	}
	l, ok := decodeLabels(v)
	if !ok {
		return nil, fmt.Errorf("embedded: corrupt labels record %x", it.Key())
	}
	return l, nil
}

// Postings scans the pair's postings, which sort by series id.
func (s *Store) Postings(ctx context.Context, name, value string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if (tiers.Labels{name: value}).CheckStorable() != nil || value == "" {
		return nil, nil // no series can have it
	}
	prefix := postingPrefix(name, value)
	var out []string
	err := s.scanKeys(ctx, prefix, func(rest []byte) error {
		id, tail, ok := splitID(rest)
		if !ok || len(tail) != 0 {
			return fmt.Errorf("embedded: corrupt posting %x%x", prefix, rest)
		}
		out = append(out, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: postings of %s=%q: %w", name, value, err)
	}
	return out, nil
}

// LabelValues scans the name's value entries, which sort by value.
func (s *Store) LabelValues(ctx context.Context, name string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if (tiers.Labels{name: ""}).CheckStorable() != nil {
		return nil, nil
	}
	prefix := labelValuePrefix(name)
	var out []string
	err := s.scanKeys(ctx, prefix, func(rest []byte) error {
		v, tail, ok := splitValue(rest)
		if !ok || len(tail) != 0 {
			return fmt.Errorf("embedded: corrupt label value entry %x%x", prefix, rest)
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: values of label %s: %w", name, err)
	}
	return out, nil
}

// LabelNames scans the name entries, which sort by name.
func (s *Store) LabelNames(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := s.scanKeys(ctx, []byte{kindLabelName}, func(rest []byte) error {
		out = append(out, string(rest))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: label names: %w", err)
	}
	return out, nil
}

// scanKeys calls fn with the rest of each key that starts with prefix, in
// key order. fn must not keep rest.
func (s *Store) scanKeys(ctx context.Context, prefix []byte, fn func(rest []byte) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(it.Key()[len(prefix):]); err != nil {
			return err
		}
	}
	return it.Error()
}

// fillLabels sets the Labels of each listed series (ascending ids) from
// their records, one forward pass of an iterator; the caller has entered.
func (s *Store) fillLabels(ctx context.Context, infos []tiers.SeriesInfo) error {
	if len(infos) == 0 {
		return nil
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: labelsKey(infos[0].ID), UpperBound: []byte{kindLabels + 1}})
	if err != nil {
		return fmt.Errorf("embedded: list series labels: %w", err)
	}
	defer it.Close()
	var key []byte
	for i := range infos {
		key = appendID(append(key[:0], kindLabels), infos[i].ID)
		if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
			continue
		}
		if infos[i].Labels, err = decodeLabelsAt(it); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("embedded: list series labels: %w", err)
	}
	return nil
}
