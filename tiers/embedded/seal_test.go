package embedded

import (
	"cmp"
	"context"
	"math"
	"slices"
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
	lower, _ := chunkBounds(knownTables[tiers.TableRaw], sealedKey, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("the sweeper left the expired chunk %x", it.Key())
	}
}

// TestReadsChunksSealedBeforeDecimalChunks opens a store sealed by the
// build before decimal chunks (testdata/before-decimal-chunks: an hour of
// 10 s gauges with three decimals in two event buckets, sealed as XOR
// chunks of the values scaled to integers, and the same with a stale
// marker, sealed as XOR chunks of the values as they are): every point
// reads back bit for bit; a point written into a bucket afterwards and a
// new seal turn the bucket into decimal chunks that read the same plus
// that point.
func TestReadsChunksSealedBeforeDecimalChunks(t *testing.T) {
	ctx := context.Background()
	s, _ := openEarlierStore(t, "before-decimal-chunks")
	defer closeStore(t, s)
	// A format 2 store, stamped with the current format once opened.
	if v := formatStamp(t, s); v != formatVersion {
		t.Fatalf("format stamp %d after opening a format 2 store", v)
	}
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour) - 2*tiers.Hour
	const retention, ebs = 100 * tiers.Day, 2
	// The points the store was written with, by the generator that wrote
	// them.
	want := func(series string) []tiers.Row {
		var rows []tiers.Row
		for i := range 360 {
			v := math.Round((50+3*math.Sin(float64(i)/10)+float64(i%7)*0.013)*1000) / 1000
			if series == "old.stale" && i == 100 {
				v = math.Float64frombits(tiers.StaleNaN)
			}
			rows = append(rows, tiers.PointRow(base+int64(i)*10*tiers.Second, v))
		}
		return rows
	}
	read := func(series string) []tiers.Row {
		var got []tiers.Row
		for eb := range ebs {
			got = append(got, readAll(t, s, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: base, EventBucket: eb}, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 50})...)
		}
		slices.SortFunc(got, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
		return got
	}
	same := func(what string, got, want []tiers.Row) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d points, want %d", what, len(got), len(want))
		}
		for i := range want {
			if got[i].T != want[i].T || math.Float64bits(got[i].Sum) != math.Float64bits(want[i].Sum) {
				t.Fatalf("%s: point %d is %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	for _, series := range []string{"old.gauge", "old.stale"} {
		same(series, read(series), want(series))
		// Nothing is left to seal: the points are in the old chunks.
		if rep, err := s.SealBucket(ctx, series, base, ebs, retention); err != nil || rep.Rows != 0 {
			t.Fatalf("%s: seal %+v, %v", series, rep, err)
		}
		extra := tiers.PointRow(base+5*tiers.Second, 7.25)
		if err := s.Write(ctx, []tiers.PartitionWrite{{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: base, EventBucket: tiers.EventBucket(extra.T, ebs)}, Retention: retention, Rows: []tiers.Row{extra}}}); err != nil {
			t.Fatal(err)
		}
		if rep, err := s.SealBucket(ctx, series, base, ebs, retention); err != nil || rep.Rows != 1 {
			t.Fatalf("%s: reseal %+v, %v", series, rep, err)
		}
		w := want(series)
		w = slices.Insert(w, 1, extra)
		same(series+" resealed", read(series), w)
	}
}
