//go:build integration

package integration

import (
	"context"
	"encoding/binary"
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

// A read of a sealed partition reads its chunks alone unless a write
// since the seal left a mark: a correction written to a sealed raw
// bucket or rollup partition is read at once, beside the chunks, and the
// seal that folds it in (or finds it folded in already) removes the mark,
// so that the next read is one query again. A write that says its
// partition is open leaves no mark. Chunks sealed before the keyspace
// kept marks are read with their rows, which an older gateway may have
// written without one.
func TestSealedPartitionReadsSkipTheRows(t *testing.T) {
	p := tiers.DefaultPyramid()
	store, s, cfg := freshStore(t, p, func(c *cassandra.Config) { c.SealedRowsGrace = 0 })
	ctx := testContext(t)
	raw, minute := p.Raw(), p.Tier(p.Rollups()[0])
	// The store's clock (storeConfig), which its TTLs, seals and marks go by.
	now := storetest.Start().UnixMilli()
	const ebs = 4
	rawBucket := tiers.AlignDown(now-3*tiers.Hour, raw.BucketWidth)
	rollupKey := tiers.PartitionKey{Table: minute.Table, Series: "marked", Bucket: tiers.AlignDown(now-3*tiers.Day, minute.BucketWidth)}
	rawKey := func(eb int) tiers.PartitionKey {
		return tiers.PartitionKey{Table: raw.Table, Series: "marked", Bucket: rawBucket, EventBucket: eb}
	}
	points := make([][]tiers.Row, ebs)
	for i := range 400 {
		r := tiers.PointRow(rawBucket+int64(i)*9*tiers.Second, float64(i%89)/8)
		eb := tiers.EventBucket(r.T, ebs)
		points[eb] = append(points[eb], r)
	}
	var rollups []tiers.Row
	for i := range 200 {
		v := float64(i) * 0.5
		rollups = append(rollups, tiers.Row{T: rollupKey.Bucket + int64(i)*tiers.Minute, Min: v, Max: v + 2, Sum: 6*v + 6, Count: 6})
	}
	write := func(open bool, ws ...tiers.PartitionWrite) {
		t.Helper()
		for i := range ws {
			ws[i].Open = open
		}
		if err := store.Write(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	rawWrite := func(eb int, rows ...tiers.Row) tiers.PartitionWrite {
		return tiers.PartitionWrite{Key: rawKey(eb), Retention: raw.Retention, Rows: rows}
	}
	rollupWrite := func(rows ...tiers.Row) tiers.PartitionWrite {
		return tiers.PartitionWrite{Key: rollupKey, Retention: minute.Retention, Rows: rows}
	}
	marks := func(key tiers.PartitionKey) int {
		t.Helper()
		q := "SELECT count(*) FROM " + cfg.Keyspace + "." + string(key.Table) + "_chunks WHERE series = ? AND bucket = ?"
		args := []any{key.Series, key.Bucket}
		if key.Table == tiers.TableRaw {
			q = "SELECT count(*) FROM " + cfg.Keyspace + ".points_raw_chunks WHERE series = ? AND bucket = ? AND eb = 0"
		}
		var n int
		if err := s.Query(q+" AND first = ?", append(args, tiers.MinTime-1)...).ScanContext(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// check reads every partition through st and wants the rows read
	// beside the chunks of the partitions in withRows only.
	check := func(when string, st *cassandra.Store, withRows ...tiers.Table) {
		t.Helper()
		before := st.RowReadsSkipped()
		skipped := int64(0)
		type read struct {
			key  tiers.PartitionKey
			want []tiers.Row
		}
		var reads []read
		for eb := range ebs {
			reads = append(reads, read{rawKey(eb), points[eb]})
		}
		reads = append(reads, read{rollupKey, rollups})
		for _, r := range reads {
			if !slices.Contains(withRows, r.key.Table) {
				skipped++
			}
			for _, desc := range []bool{false, true} {
				got, _, err := storetest.ReadAll(st.Read(ctx, tiers.ReadRequest{Key: r.key, Span: tiers.Span{From: r.key.Bucket, To: tiers.MaxTime}, Desc: desc, PageSize: 64}))
				if err != nil {
					t.Fatal(err)
				}
				want := slices.Clone(r.want)
				if desc {
					slices.Reverse(want)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %s/%d reads %d rows, want %d", when, r.key.Table, r.key.EventBucket, len(got), len(want))
				}
				for i := range got {
					if !tiers.SameRow(got[i], want[i]) || got[i].Sum != want[i].Sum {
						t.Fatalf("%s: %s/%d row %d is %+v, want %+v", when, r.key.Table, r.key.EventBucket, i, got[i], want[i])
					}
				}
			}
		}
		if got := st.RowReadsSkipped() - before; got != 2*skipped {
			t.Fatalf("%s: %d reads skipped the rows, want %d", when, got, 2*skipped)
		}
	}
	seal := func(when string, rawRows, rollupRows int) {
		t.Helper()
		if rep, err := store.SealBucket(ctx, "marked", rawBucket, ebs, raw.Retention); err != nil || rep.Rows != rawRows {
			t.Fatalf("%s: seal the raw bucket: %+v, %v; want %d rows folded in", when, rep, err, rawRows)
		}
		if rep, err := store.SealRollup(ctx, rollupKey, minute.Retention); err != nil || rep.Rows != rollupRows {
			t.Fatalf("%s: seal the rollup partition: %+v, %v; want %d rows folded in", when, rep, err, rollupRows)
		}
		if n := marks(rawKey(0)) + marks(rollupKey); n != 0 {
			t.Fatalf("%s: %d marks left after the seal", when, n)
		}
	}

	// Written open: no mark, and no chunks yet, so the rows are read.
	for eb := range ebs {
		write(true, rawWrite(eb, points[eb]...))
	}
	write(true, rollupWrite(rollups...))
	if n := marks(rawKey(0)) + marks(rollupKey); n != 0 {
		t.Fatalf("open writes left %d marks", n)
	}
	check("before the seal", store, raw.Table, minute.Table)
	seal("first seal", 400, 200)
	check("after the seal", store)

	// Corrections after the seal: a new point in one event bucket, a
	// changed rollup row.
	extra := tiers.PointRow(rawBucket+tiers.Hour-tiers.Second, 42)
	eb := tiers.EventBucket(extra.T, ebs)
	points[eb] = append(points[eb], extra)
	rollups[7] = tiers.Row{T: rollups[7].T, Min: -1, Max: 9, Sum: 20, Count: 5}
	write(false, rawWrite(eb, extra), rollupWrite(rollups[7]))
	if n := marks(rawKey(0)) + marks(rollupKey); n != 2 {
		t.Fatalf("corrections left %d marks, want 2", n)
	}
	check("after the corrections", store, raw.Table, minute.Table)
	seal("the corrections folded in", 1, 1)
	check("after the second seal", store)

	// A correction equal to what the chunks hold: the seal rewrites
	// nothing but still clears the mark.
	write(false, rollupWrite(rollups[7]))
	check("after a correction of nothing", store, minute.Table)
	seal("nothing new", 0, 0)
	check("after the third seal", store)

	// An older gateway wrote rows to sealed partitions without a mark:
	// a store opened after chunk_marks_since was set later than the
	// chunks' seal reads them beside the chunks.
	rollups[9] = tiers.Row{T: rollups[9].T, Min: -3, Max: 3, Sum: 0, Count: 2}
	write(true, rollupWrite(rollups[9]))
	// A read that knows its partition ends after now reads its rows
	// alone, whatever the mark says: no seal can have come before the
	// bucket's end (this partition's seals were forced), so the chunks
	// are not asked for.
	before := store.RowReadsSkipped()
	got, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: rollupKey, Span: tiers.Span{From: rollupKey.Bucket, To: tiers.MaxTime}, End: now + tiers.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !tiers.SameRow(got[0], rollups[9]) || store.RowReadsSkipped() != before {
		t.Fatalf("a read of a partition ending after now: %d rows (%+v), %d reads skipped the rows; want its one row %+v, none",
			len(got), got, store.RowReadsSkipped()-before, rollups[9])
	}
	since := binaryTime(now + tiers.Hour)
	if err := s.Query("UPDATE "+cfg.Keyspace+".gateway_meta SET value = ? WHERE name = 'chunk_marks_since'", since).ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	upgraded, err := cassandra.Open(ctx, cfg, p, storeLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = upgraded.Close() }()
	check("sealed before the keyspace kept marks", upgraded, raw.Table, minute.Table)
}

// binaryTime is a time as the meta table keeps it.
func binaryTime(ms int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(ms)) }
