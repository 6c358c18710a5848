package embedded

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/sealed"
)

// Sealed points expire as their rows would have: a chunk outlives its
// first points by up to its length, and reads drop them all the same; the
// sweeper deletes a chunk once its last point has expired.
func TestSealedPointsExpireLikeRows(t *testing.T) {
	const retention = tiers.Day
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour) - tiers.Hour
	c := newClock(base + tiers.Hour)
	s, err := OpenInMemory(Options{Now: c.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	ctx := context.Background()
	rowsKey := tiers.PartitionKey{Table: tiers.TableRaw, Series: "rows", Bucket: base}
	sealedKey := tiers.PartitionKey{Table: tiers.TableRaw, Series: "sealed", Bucket: base}
	var rows []tiers.Row
	for ts := base; ts < base+tiers.Hour; ts += 10 * tiers.Second {
		rows = append(rows, tiers.PointRow(ts, float64(ts%7)))
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: rowsKey, Retention: retention, Rows: rows}, {Key: sealedKey, Retention: retention, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.SealBucket(ctx, sealedKey.Series, sealedKey.Bucket, 1, retention)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Points != len(rows) || rep.Rows != len(rows) || rep.Chunks != (len(rows)+sealed.MaxSamples-1)/sealed.MaxSamples {
		t.Fatalf("seal: %+v", rep)
	}
	read := func(k tiers.PartitionKey) []tiers.Row {
		got, _, err := storetest.ReadAll(s.Read(ctx, tiers.ReadRequest{Key: k, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 100}))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, at := range []int64{base + retention - 1, base + retention, base + retention + 25*tiers.Minute + 3, base + retention + tiers.Hour} {
		c.ms.Store(at)
		want, got := read(rowsKey), read(sealedKey)
		if len(got) != len(want) || (len(want) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
			t.Fatalf("at %d: %d sealed points, %d rows", at-base, len(got), len(want))
		}
	}
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	lower, _ := chunkBounds(sealedKey, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("the sweeper left the expired chunk %x", it.Key())
	}
}
