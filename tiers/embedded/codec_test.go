package embedded

import (
	"bytes"
	"cmp"
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
