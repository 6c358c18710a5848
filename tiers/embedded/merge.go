package embedded

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// mergerName is persisted by Pebble, which refuses to open a store with a
// different merger: renaming it, or changing what an operand means, is a
// format change.
const mergerName = "tsgate.embedded.merge.v1"

// merger folds merge operands without reading them back at write time, which
// is what lets NoteSeries, MarkDirty and AdvanceCheckpoint commute across
// concurrent callers. One Pebble merger serves the whole store, so it picks
// the operation by the key's kind:
//
//   - series registry: (first, last) widened to (min first, max last)
//   - oldest dirty slot: min
//   - checkpoints: max
//
// min and max are associative and commutative, so operand order and partial
// merges during compaction (includesBase false) do not matter.
var merger = &pebble.Merger{
	Name: mergerName,
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		if len(key) == 0 {
			return nil, fmt.Errorf("embedded: merge of an empty key")
		}
		m := &valueMerger{kind: key[0]}
		switch m.kind {
		case kindSeries:
			m.size = spanValueLen
		case kindOldest, kindCheckpoint:
			m.size = int64ValLen
		default:
			return nil, fmt.Errorf("embedded: merge of key kind %#x", m.kind)
		}
		if err := m.decode(value); err != nil {
			return nil, err
		}
		m.a, m.b = m.opA, m.opB
		return m, nil
	},
}

type valueMerger struct {
	kind     byte
	size     int
	a, b     int64 // the merged value: (first, last) or the single int64 in a
	opA, opB int64 // the operand being folded in
	buf      [spanValueLen]byte
}

func (m *valueMerger) decode(v []byte) error {
	if len(v) != m.size {
		return fmt.Errorf("embedded: merge operand of %d bytes for key kind %#x, want %d", len(v), m.kind, m.size)
	}
	m.opA = getInt64(v)
	if m.size == spanValueLen {
		m.opB = getInt64(v[8:])
	}
	return nil
}

func (m *valueMerger) fold(v []byte) error {
	if err := m.decode(v); err != nil {
		return err
	}
	switch m.kind {
	case kindSeries:
		m.a, m.b = min(m.a, m.opA), max(m.b, m.opB)
	case kindOldest:
		m.a = min(m.a, m.opA)
	case kindCheckpoint:
		m.a = max(m.a, m.opA)
	}
	return nil
}

func (m *valueMerger) MergeNewer(value []byte) error { return m.fold(value) }

func (m *valueMerger) MergeOlder(value []byte) error { return m.fold(value) }

func (m *valueMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	putInt64(m.buf[:], m.a)
	if m.size == spanValueLen {
		putInt64(m.buf[8:], m.b)
	}
	return m.buf[:m.size], nil, nil
}

// spanValue encodes a registry operand.
func spanValue(first, last int64) []byte {
	v := make([]byte, spanValueLen)
	putInt64(v, first)
	putInt64(v[8:], last)
	return v
}

func int64Value(x int64) []byte {
	v := make([]byte, int64ValLen)
	putInt64(v, x)
	return v
}
