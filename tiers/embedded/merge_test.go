package embedded

import (
	"math/rand/v2"
	"testing"
)

// fold merges operands the way Pebble may: starting from any one of them
// and adding the rest as newer or older.
func fold(t *testing.T, key []byte, ops [][]byte, older bool) []byte {
	t.Helper()
	m, err := merger.Merge(key, ops[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops[1:] {
		if older {
			err = m.MergeOlder(op)
		} else {
			err = m.MergeNewer(op)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	v, closer, err := m.Finish(false)
	if err != nil {
		t.Fatal(err)
	}
	if closer != nil {
		t.Fatal("merger returned a closer")
	}
	return v
}

func TestMergerCommutes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var spans, ints [][]byte
	first, last := int64(1<<62), int64(-1<<62)
	lo, hi := int64(1<<62), int64(-1<<62)
	for range 20 {
		a, b := r.Int64N(1e6)-5e5, r.Int64N(1e6)-5e5
		a, b = min(a, b), max(a, b)
		first, last = min(first, a), max(last, b)
		spans = append(spans, spanValue(a, b))
		x := r.Int64N(1e6) - 5e5
		lo, hi = min(lo, x), max(hi, x)
		ints = append(ints, int64Value(x))
	}
	for _, older := range []bool{false, true} {
		r.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		r.Shuffle(len(ints), func(i, j int) { ints[i], ints[j] = ints[j], ints[i] })
		if v := fold(t, seriesKey("s"), spans, older); getInt64(v) != first || getInt64(v[8:]) != last {
			t.Errorf("registry merge = %d..%d, want %d..%d", getInt64(v), getInt64(v[8:]), first, last)
		}
		if v := fold(t, oldestKey, ints, older); getInt64(v) != lo {
			t.Errorf("oldest slot merge = %d, want %d", getInt64(v), lo)
		}
		if v := fold(t, namedKey(kindCheckpoint, "c"), ints, older); getInt64(v) != hi {
			t.Errorf("checkpoint merge = %d, want %d", getInt64(v), hi)
		}
	}
}

func TestMergerRejectsForeignKeys(t *testing.T) {
	if _, err := merger.Merge([]byte{kindRaw, 'x'}, int64Value(1)); err == nil {
		t.Error("merge of a row key was accepted")
	}
	if _, err := merger.Merge(seriesKey("s"), int64Value(1)); err == nil {
		t.Error("registry operand of the wrong size was accepted")
	}
}
