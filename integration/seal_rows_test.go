//go:build integration

package integration

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// A seal keeps a partition's rows for the grace after it writes its
// chunks, and DeleteSealedRows deletes them once the grace is over,
// without another seal of the partition (an import seals history the
// worker never comes back to): the raw partition and the rollup partition
// lose the rows the seal folded in and keep a row written after it, and
// every read is the same before, during and after.
func TestSealedRowsDeletedAfterTheGrace(t *testing.T) {
	p := tiers.DefaultPyramid()
	var clock atomic.Int64
	clock.Store(storetest.Start().UnixMilli())
	store, s, cfg := freshStore(t, p, func(c *cassandra.Config) {
		c.SealedRowsGrace = 10 * time.Minute
		c.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
	})
	ctx := testContext(t)
	now := clock.Load()
	raw, minute := p.Raw(), p.Tier(p.Rollups()[0])
	rawKey := tiers.PartitionKey{Table: raw.Table, Series: "kept", Bucket: tiers.AlignDown(now-3*tiers.Hour, raw.BucketWidth)}
	rollupKey := tiers.PartitionKey{Table: minute.Table, Series: "kept", Bucket: tiers.AlignDown(now-3*tiers.Day, minute.BucketWidth)}
	var points, rollups []tiers.Row
	for i := range 200 {
		points = append(points, tiers.PointRow(rawKey.Bucket+int64(i)*10*tiers.Second, float64(i)/8))
	}
	for i := range 300 {
		v := float64(i) * 0.25
		rollups = append(rollups, tiers.Row{T: rollupKey.Bucket + int64(i)*tiers.Minute, Min: v, Max: v + 1, Sum: 6*v + 3, Count: 6})
	}
	write := func(key tiers.PartitionKey, retention int64, rows ...tiers.Row) {
		t.Helper()
		if err := store.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: retention, Rows: rows}}); err != nil {
			t.Fatal(err)
		}
	}
	write(rawKey, raw.Retention, points...)
	write(rollupKey, minute.Retention, rollups...)
	check := func(when string, rawRows, rollupRows int) {
		t.Helper()
		for _, c := range []struct {
			key  tiers.PartitionKey
			want []tiers.Row
			rows int
		}{{rawKey, points, rawRows}, {rollupKey, rollups, rollupRows}} {
			got, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: c.key, Span: tiers.Span{From: c.key.Bucket, To: tiers.MaxTime}, PageSize: 64}))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%s: %s reads %d rows, want %d", when, c.key.Table, len(got), len(c.want))
			}
			for i := range got {
				if !tiers.SameRow(got[i], c.want[i]) {
					t.Fatalf("%s: %s row %d is %+v, want %+v", when, c.key.Table, i, got[i], c.want[i])
				}
			}
			if n := countRows(t, s, cfg.Keyspace, c.key); n != c.rows {
				t.Fatalf("%s: %s holds %d rows, want %d", when, c.key.Table, n, c.rows)
			}
		}
	}
	check("before the seal", len(points), len(rollups))

	if rep, err := store.SealBucket(ctx, rawKey.Series, rawKey.Bucket, 1, raw.Retention); err != nil || rep.Rows != len(points) {
		t.Fatalf("seal the raw bucket: %+v, %v", rep, err)
	}
	if rep, err := store.SealRollup(ctx, rollupKey, minute.Retention); err != nil || rep.Rows != len(rollups) {
		t.Fatalf("seal the rollup partition: %+v, %v", rep, err)
	}
	check("after the seal", len(points), len(rollups))
	if n, err := store.DeleteSealedRows(ctx); err != nil || n != 0 {
		t.Fatalf("delete sealed rows within the grace: %d partitions, %v", n, err)
	}
	check("within the grace", len(points), len(rollups))

	// A row written after the seal has a later write time: it stays.
	late := tiers.PointRow(rawKey.Bucket+tiers.Hour-tiers.Second, 42)
	write(rawKey, raw.Retention, late)
	points = append(points, late)

	clock.Add((10*time.Minute + time.Second).Milliseconds())
	if n, err := store.DeleteSealedRows(ctx); err != nil || n != 2 {
		t.Fatalf("delete sealed rows after the grace: %d partitions, %v; want 2", n, err)
	}
	check("after the grace", 1, 0)
	if n, err := store.DeleteSealedRows(ctx); err != nil || n != 0 {
		t.Fatalf("delete sealed rows again: %d partitions, %v; want none left", n, err)
	}
	// The next seal folds the late row into new chunks, so the row waits
	// for the grace once more.
	if rep, err := store.SealBucket(ctx, rawKey.Series, rawKey.Bucket, 1, raw.Retention); err != nil || rep.Rows != 1 {
		t.Fatalf("seal the raw bucket again: %+v, %v", rep, err)
	}
	clock.Add((10*time.Minute + time.Second).Milliseconds())
	if n, err := store.DeleteSealedRows(ctx); err != nil || n != 1 {
		t.Fatalf("delete the late row's partition: %d partitions, %v; want 1", n, err)
	}
	check("after the second seal", 0, 0)
}

// countRows counts the rows a data partition holds, not its chunks.
func countRows(t *testing.T, s *gocql.Session, ks string, key tiers.PartitionKey) int {
	t.Helper()
	q := "SELECT count(*) FROM " + ks + "." + string(key.Table) + " WHERE series = ? AND bucket = ?"
	args := []any{key.Series, key.Bucket}
	if key.Table == tiers.TableRaw {
		q += " AND eb = ?"
		args = append(args, int16(key.EventBucket))
	}
	var n int
	if err := s.Query(q, args...).ScanContext(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The reads of a sealed raw bucket's event buckets share one query of its
// chunks when they run at once; each still gets exactly its own points,
// in either order.
func TestConcurrentEventBucketReadsOfASealedBucket(t *testing.T) {
	p := tiers.DefaultPyramid()
	store, _, _ := freshStore(t, p, func(c *cassandra.Config) { c.SealedRowsGrace = 0 })
	ctx := testContext(t)
	raw := p.Raw()
	now := storetest.Start().UnixMilli()
	const ebs = 4
	bucket := tiers.AlignDown(now-3*tiers.Hour, raw.BucketWidth)
	want := make([][]tiers.Row, ebs)
	var writes []tiers.PartitionWrite
	for i := range 1000 {
		r := tiers.PointRow(bucket+int64(i)*3*tiers.Second+int64(i%7), float64(i%97)/4)
		eb := tiers.EventBucket(r.T, ebs)
		want[eb] = append(want[eb], r)
	}
	for eb := range ebs {
		writes = append(writes, tiers.PartitionWrite{Key: tiers.PartitionKey{Table: raw.Table, Series: "shared", Bucket: bucket, EventBucket: eb},
			Retention: raw.Retention, Rows: want[eb]})
	}
	if err := store.Write(ctx, writes); err != nil {
		t.Fatal(err)
	}
	if rep, err := store.SealBucket(ctx, "shared", bucket, ebs, raw.Retention); err != nil || rep.Rows != 1000 {
		t.Fatalf("seal: %+v, %v", rep, err)
	}
	span := tiers.Span{From: bucket + 10*tiers.Minute, To: bucket + 50*tiers.Minute}
	for round := range 20 {
		desc := round%2 == 1
		var wg sync.WaitGroup
		errs := make([]error, ebs)
		got := make([][]tiers.Row, ebs)
		for eb := range ebs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := tiers.PartitionKey{Table: raw.Table, Series: "shared", Bucket: bucket, EventBucket: eb}
				got[eb], _, errs[eb] = storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: key, Span: span, Desc: desc, PageSize: 50}))
			}()
		}
		wg.Wait()
		for eb := range ebs {
			if errs[eb] != nil {
				t.Fatal(errs[eb])
			}
			var w []tiers.Row
			for _, r := range want[eb] {
				if r.T >= span.From && r.T < span.To {
					w = append(w, r)
				}
			}
			if desc {
				slices.Reverse(w)
			}
			if len(got[eb]) != len(w) {
				t.Fatalf("round %d: event bucket %d reads %d points, want %d", round, eb, len(got[eb]), len(w))
			}
			for i := range w {
				if !tiers.SameRow(got[eb][i], w[i]) {
					t.Fatalf("round %d: event bucket %d point %d is %+v, want %+v", round, eb, i, got[eb][i], w[i])
				}
			}
		}
	}
}
