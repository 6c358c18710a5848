package embedded

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

func TestSweepRemovesExpired(t *testing.T) {
	ctx := context.Background()
	start := int64(1_700_000_000_000)
	clk := newClock(start)
	s, err := OpenInMemory(Options{Now: clk.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)

	base := tiers.AlignDown(start, tiers.Hour)
	rows := func(from, n int64) []tiers.Row {
		var out []tiers.Row
		for i := range n {
			out = append(out, tiers.PointRow(from+i*tiers.Second, float64(i)))
		}
		return out
	}
	old := tiers.PartitionKey{Table: tiers.TableRaw, Series: "a", Bucket: base - tiers.Hour}
	mixed := tiers.PartitionKey{Table: tiers.TableRaw, Series: "b", Bucket: base}
	forever := tiers.PartitionKey{Table: tiers.RollupTable(tiers.Day), Series: "a", Bucket: base}
	if err := s.Write(ctx, []tiers.PartitionWrite{
		// A whole partition that expires: one range deletion.
		{Key: old, Retention: tiers.Day, Rows: rows(old.Bucket, 1000)},
		// Rows that expire interleaved with rows that stay: point deletions.
		{Key: mixed, Retention: tiers.Day, Rows: rows(base, 3)},
		{Key: mixed, Retention: tiers.Week, Rows: rows(base+3*tiers.Second, 1)},
		{Key: mixed, Retention: tiers.Day, Rows: rows(base+4*tiers.Second, 1)},
		{Key: mixed, Retention: tiers.Week, Rows: rows(base+5*tiers.Second, 1)},
		{Key: forever, Rows: []tiers.Row{{T: base, Min: 1, Max: 2, Sum: 3, Count: 2}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLate(ctx, []tiers.LateMark{
		{Series: "a", Bucket: base - tiers.Hour, Retention: tiers.Day},
		{Series: "a", Bucket: base, Retention: tiers.Week},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDirty(ctx, base, tiers.Day, []tiers.DirtyWindow{{Series: "a", Window: base}}); err != nil {
		t.Fatal(err)
	}

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before anything expired deleted %d, %v", n, err)
	}
	clk.advance(2 * tiers.Day)
	// Expired rows are invisible before the sweep ...
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}
	if got := readAll(t, s, tiers.ReadRequest{Key: old, Span: all, PageSize: 100}); len(got) != 0 {
		t.Fatalf("expired partition still reads %d rows", len(got))
	}
	// ... and gone after it.
	n, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1000 + 4 + 1 + 1; n != want {
		t.Errorf("sweep deleted %d records, want %d", n, want)
	}
	if got := countKeys(t, s, kindRaw); got != 2 {
		t.Errorf("%d raw rows stored after the sweep, want 2", got)
	}
	if got := countKeys(t, s, kindDay); got != 1 {
		t.Errorf("%d day rows stored after the sweep, want 1", got)
	}
	if got := countKeys(t, s, kindLateMark); got != 1 {
		t.Errorf("%d late marks stored after the sweep, want 1", got)
	}
	if got := countKeys(t, s, kindDirty); got != 0 {
		t.Errorf("%d dirty windows stored after the sweep, want 0", got)
	}
	want := []tiers.Row{tiers.PointRow(base+3*tiers.Second, 0), tiers.PointRow(base+5*tiers.Second, 0)}
	if got := readAll(t, s, tiers.ReadRequest{Key: mixed, Span: all, PageSize: 100}); !slices.Equal(got, want) {
		t.Errorf("rows left in the mixed partition: %v, want %v", got, want)
	}
	// The registry-like records never expire.
	if v, ok, err := s.OldestDirtySlot(ctx); err != nil || !ok || v != base {
		t.Errorf("oldest dirty slot after the sweep: %d, %v, %v", v, ok, err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("second sweep deleted %d, %v", n, err)
	}
}

// A sweep spanning many steps, with runs crossing step boundaries.
func TestSweepManySteps(t *testing.T) {
	ctx := context.Background()
	start := int64(1_700_000_000_000)
	clk := newClock(start)
	s, err := OpenInMemory(Options{Now: clk.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "wide", Bucket: start}
	var short, long []tiers.Row
	for i := range int64(3 * sweepChunk) {
		r := tiers.PointRow(start+i, float64(i))
		if i%1000 < 990 {
			short = append(short, r)
		} else {
			long = append(long, r)
		}
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{
		{Key: key, Retention: tiers.Hour, Rows: short},
		{Key: key, Retention: tiers.Week, Rows: long},
	}); err != nil {
		t.Fatal(err)
	}
	clk.advance(tiers.Day)
	n, err := s.Sweep(ctx)
	if err != nil || n != len(short) {
		t.Fatalf("sweep deleted %d, %v; want %d", n, err, len(short))
	}
	got := readAll(t, s, tiers.ReadRequest{Key: key, Span: tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, PageSize: 1000})
	if !slices.Equal(got, long) || countKeys(t, s, kindRaw) != len(long) {
		t.Fatalf("after the sweep %d rows read, %d stored; want %d", len(got), countKeys(t, s, kindRaw), len(long))
	}
}

func TestBackgroundSweeper(t *testing.T) {
	ctx := context.Background()
	start := int64(1_700_000_000_000)
	clk := newClock(start)
	s, err := OpenInMemory(Options{Now: clk.Now, SweepInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	key := tiers.PartitionKey{Table: tiers.RollupTable(tiers.Minute), Series: "m", Bucket: start}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Hour, Rows: []tiers.Row{{T: start, Min: 1, Max: 1, Sum: 1, Count: 1}}}}); err != nil {
		t.Fatal(err)
	}
	clk.advance(tiers.Day)
	deadline := time.Now().Add(10 * time.Second)
	for countKeys(t, s, kindMinute) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background sweeper did not delete the expired row")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Rows rewritten with a longer retention while a sweep runs must survive
// it, whichever of the two gets to a row first.
func TestSweepKeepsRowsRewrittenDuringSweep(t *testing.T) {
	ctx := context.Background()
	start := int64(1_700_000_000_000)
	clk := newClock(start)
	s, err := OpenInMemory(Options{Now: clk.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "revived", Bucket: start}
	const n = 4 * sweepChunk
	rows := make([]tiers.Row, n)
	for i := range rows {
		rows[i] = tiers.PointRow(start+int64(i), float64(i))
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Hour, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	clk.advance(tiers.Day)
	done := make(chan error)
	go func() {
		_, err := s.Sweep(ctx)
		done <- err
	}()
	// Rewrite from the end backwards, so the writer and the sweeper meet.
	for end := n; end > 0; end -= 100 {
		if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Week, Rows: rows[max(0, end-100):end]}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, tiers.ReadRequest{Key: key, Span: tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, PageSize: 1000})
	if !slices.Equal(got, rows) {
		t.Fatalf("%d of %d rewritten rows survived the sweep", len(got), n)
	}
}
