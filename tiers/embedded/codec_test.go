package embedded

import (
	"bytes"
	"cmp"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// FuzzKeyEncoding checks that row keys decode to what was encoded and sort
// as the (table, series, bucket, event bucket, t) tuples they encode.
func FuzzKeyEncoding(f *testing.F) {
	f.Add(uint8(0), "a", int64(0), uint16(0), int64(0), uint8(0), "a.b", int64(0), uint16(0), int64(-1))
	f.Add(uint8(0), "cpu", int64(-3600000), uint16(3), int64(-1), uint8(0), "cpu", int64(3600000), uint16(1), int64(1))
	f.Add(uint8(1), "x:y", tiers.MinTime, uint16(63), tiers.MaxTime, uint8(4), "x-y", int64(-1), uint16(0), int64(1)<<62)
	f.Add(uint8(2), "ab", int64(1), uint16(1), int64(1), uint8(2), "a", int64(1), uint16(1), int64(1))
	f.Add(uint8(5), "a", int64(1), uint16(0), int64(1), uint8(6), "a", int64(1), uint16(0), int64(1))
	tables := []tiers.Table{tiers.TableRaw, tiers.TableLate, "rollup_1m", "rollup_1h", "rollup_1d", "rollup_10s", "rollup_2m"}
	f.Fuzz(func(t *testing.T, ta uint8, sa string, ba int64, ea uint16, tsa int64, tb uint8, sb string, bb int64, eb uint16, tsb int64) {
		if !validID(sa) || !validID(sb) {
			t.Skip()
		}
		ea, eb = ea%tiers.MaxEventBuckets, eb%tiers.MaxEventBuckets
		ka := tiers.PartitionKey{Table: tables[int(ta)%len(tables)], Series: sa, Bucket: ba, EventBucket: int(ea)}
		kb := tiers.PartitionKey{Table: tables[int(tb)%len(tables)], Series: sb, Bucket: bb, EventBucket: int(eb)}
		// Only raw partitions have an event bucket.
		if ka.Table != tiers.TableRaw {
			ka.EventBucket, ea = 0, 0
		}
		if kb.Table != tiers.TableRaw {
			kb.EventBucket, eb = 0, 0
		}
		enc := func(k tiers.PartitionKey, ts int64) []byte {
			code, err := checkPartition(k)
			if err != nil {
				t.Fatal(err)
			}
			key := appendRowKey(nil, code, k, ts)
			gk, gt, ok := decodeRowKey(key)
			if !ok || gk != k || gt != ts {
				t.Fatalf("%+v at %d encoded as %x decodes to %+v at %d (ok %v)", k, ts, key, gk, gt, ok)
			}
			return key
		}
		a, b := enc(ka, tsa), enc(kb, tsb)
		codeA, _ := tableCodeOf(ka.Table)
		codeB, _ := tableCodeOf(kb.Table)
		want := cmp.Or(
			bytes.Compare(codeA.prefix, codeB.prefix),
			cmp.Compare(sa, sb),
			cmp.Compare(ba, bb),
			cmp.Compare(ea, eb),
			cmp.Compare(tsa, tsb),
		)
		if got := bytes.Compare(a, b); got != want {
			t.Fatalf("keys %x and %x compare %d, tuples compare %d", a, b, got, want)
		}
	})
}

// FuzzPostingKeys checks that posting keys decode to the pair and series
// they encode and sort as the (name, value, series) tuples do, NULs in
// values included, and that a pair's prefix starts no other pair's keys.
func FuzzPostingKeys(f *testing.F) {
	f.Add("job", "a", "s1", "job", "a\x00", "s0")
	f.Add("job", "a\x00b", "s", "job", "ab", "s")
	f.Add("a", "\x00", "x", "a", "\x00\x00", "x")
	f.Add("a", "\x00\xff", "x", "a", "\x00\x01", "x")
	f.Add("host", "a", "s.b", "hostname", "a", "s")
	f.Add("n", "ünïcödé", "日本", "n", "🙂", "a:b")
	f.Fuzz(func(t *testing.T, na, va, ia, nb, vb, ib string) {
		if strings.IndexByte(na, 0) >= 0 || strings.IndexByte(nb, 0) >= 0 || !validID(ia) || !validID(ib) {
			t.Skip()
		}
		enc := func(n, v, id string) []byte {
			key := postingKey(n, v, id)
			rest, ok := bytes.CutPrefix(key, append([]byte{kindPosting}, n...))
			if !ok || len(rest) == 0 || rest[0] != 0 {
				t.Fatalf("posting key %x does not start with its name %q", key, n)
			}
			gv, rest, ok := splitValue(rest[1:])
			if !ok || gv != v {
				t.Fatalf("posting key %x holds value %q (ok %v), want %q", key, gv, ok, v)
			}
			gid, rest, ok := splitID(rest)
			if !ok || gid != id || len(rest) != 0 {
				t.Fatalf("posting key %x holds series %q (ok %v, %x after), want %q", key, gid, ok, rest, id)
			}
			if !bytes.HasPrefix(labelValueKey(n, v)[1:], postingPrefix(n, v)[1:]) || !bytes.HasPrefix(postingPrefix(n, v)[1:], labelValueKey(n, v)[1:]) {
				t.Fatalf("the value entry of %s=%q is not keyed as its postings are", n, v)
			}
			return key
		}
		a, b := enc(na, va, ia), enc(nb, vb, ib)
		want := cmp.Or(cmp.Compare(na, nb), cmp.Compare(va, vb), cmp.Compare(ia, ib))
		if got := bytes.Compare(a, b); got != want {
			t.Fatalf("keys %x and %x compare %d, (name, value, series) compare %d", a, b, got, want)
		}
		if (na != nb || va != vb) && bytes.HasPrefix(b, postingPrefix(na, va)) {
			t.Fatalf("the postings of %s=%q start with the prefix of %s=%q", nb, vb, na, va)
		}
	})
}

// FuzzLabelsRecord: a labels record decodes to what was encoded, and
// decoding any bytes either fails or gives labels that encode back to
// them.
func FuzzLabelsRecord(f *testing.F) {
	f.Add([]byte(nil), "a", "1", "b", "\x00")
	f.Add([]byte{1, 'a', 1, '1'}, "__name__", "cpu", "host", strings.Repeat("h", 300))
	f.Add([]byte{0xff, 0xff}, "", "", "x", "")
	f.Fuzz(func(t *testing.T, raw []byte, n1, v1, n2, v2 string) {
		l := tiers.Labels{n1: v1, n2: v2}
		got, ok := decodeLabels(encodeLabels(l))
		if !ok || !got.Equal(l) {
			t.Fatalf("%q encodes to a record that decodes to %q (ok %v)", l, got, ok)
		}
		d, ok := decodeLabels(raw)
		if !ok {
			return
		}
		// A record with a name twice decodes to the last value; encoding
		// writes each name once, so only records without repeats return.
		if again := encodeLabels(d); len(d) > 0 && !bytes.Equal(again, raw) {
			if back, _ := decodeLabels(again); !back.Equal(d) {
				t.Fatalf("%x decodes to %q, which encodes to %x, which decodes to %q", raw, d, again, back)
			}
		}
	})
}

func TestLabelValuesSortAsStrings(t *testing.T) {
	values := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "a\x00\x00", "a\x00b", "a\x01", "ab", "b", "ü", "\xff"}
	for i, a := range values {
		for _, b := range values[i+1:] {
			if ka, kb := labelValueKey("n", a), labelValueKey("n", b); bytes.Compare(ka, kb) >= 0 {
				t.Errorf("value %q sorts at or after %q: %x, %x", a, b, ka, kb)
			}
		}
	}
}
