package cache

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/jsonenc"

	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/tiers"
)

// bucketGroup is the group of the raw bucket [start, start+width) over
// span, with events event-bucket partitions.
func bucketGroup(start, width int64, events int, span tiers.Span) partial.Group {
	g := partial.Group{Span: span, Bucket: tiers.Bucket{Start: start, End: start + width, EventBuckets: events}}
	for eb := range events {
		g.Reads = append(g.Reads, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: start, EventBucket: eb}, Span: span, PageSize: 7})
	}
	return g
}

// eventReader serves raw points spread over event buckets by time.
type eventReader struct {
	countingReader
	events int
}

func (r *eventReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	r.reads.Add(1)
	var rows []tiers.Row
	for _, row := range r.rows {
		if req.Span.Contains(row.T) && tiers.EventBucket(row.T, r.events) == req.Key.EventBucket {
			rows = append(rows, row)
		}
	}
	r.rowsRead.Add(int64(len(rows)))
	return &slicePages{rows: rows, size: req.PageSize}
}

func TestBucketsServeAnySubSpanFromOneEntry(t *testing.T) {
	var rows []tiers.Row
	for ts := int64(0); ts < 1000; ts += 3 {
		rows = append(rows, tiers.PointRow(ts, float64(ts)/2))
	}
	store := &eventReader{countingReader: countingReader{rows: rows}, events: 4}
	b := NewBuckets(store, func(tiers.ReadRequest) bool { return true }, 1<<20)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		from := r.Int64N(1000)
		span := tiers.Span{From: from, To: from + 1 + r.Int64N(1000-from)}
		br := b.Bucket(bucketGroup(0, 1000, 4, span))
		run := br.Run
		if i == 0 {
			if run != nil || br.Load == nil {
				t.Fatal("the first read of a bucket found it cached")
			}
			var err error
			if run, err = br.Load(ctx); err != nil {
				t.Fatal(err)
			}
		} else if run == nil {
			t.Fatalf("read %d of span %+v missed the cached bucket", i, span)
		}
		lo, hi := run.Range(span)
		var got []tiers.Row
		for j := lo; j < hi; j++ {
			got = append(got, run.Row(j))
		}
		want := slices.DeleteFunc(slices.Clone(rows), func(row tiers.Row) bool { return !span.Contains(row.T) })
		if !slices.Equal(got, want) {
			t.Fatalf("span %+v: %d rows, want %d", span, len(got), len(want))
		}
		for _, desc := range []bool{false, true} {
			var enc []byte
			for k := range want {
				r := want[k]
				if desc {
					r = want[len(want)-1-k]
				}
				if k > 0 {
					enc = append(enc, ',')
				}
				enc = jsonenc.AppendPoint(enc, r.T, r.Value())
			}
			if got := run.AppendJSON(nil, lo, hi, desc); string(got) != string(enc) {
				t.Fatalf("span %+v desc %v: JSON %.80q, want %.80q", span, desc, got, enc)
			}
		}
	}
	if n := store.reads.Load(); n != 4 {
		t.Fatalf("%d partition reads reached the store, want the bucket's 4 once", n)
	}
	if h, m := b.Stats(); h != 49 || m != 1 {
		t.Fatalf("hits %d misses %d, want 49 and 1", h, m)
	}
	// 16 bytes a point, its JSON with a comma, and the offset of its end.
	size := int64(len(rows)) * (16 + 4)
	for _, r := range rows {
		size += int64(len(jsonenc.AppendPoint(nil, r.T, r.Value())) + 1)
	}
	if got := b.Bytes(); got < size || got > size+size/8+1024 {
		t.Fatalf("a bucket of %d points takes %d bytes, want %d", len(rows), got, size)
	}
}

func TestBucketsOnlyWholeFinalBucketsUnderTheirLayout(t *testing.T) {
	store := &eventReader{countingReader: countingReader{rows: rowsUpTo(100)}, events: 2}
	final := func(req tiers.ReadRequest) bool { return req.Span.To <= 200 }
	b := NewBuckets(store, final, 1<<20)
	if br := b.Bucket(bucketGroup(200, 100, 2, tiers.Span{From: 200, To: 210})); br.Load != nil || br.Run != nil {
		t.Fatal("a bucket that is not final is cacheable")
	}
	if _, err := b.Bucket(bucketGroup(0, 100, 2, tiers.Span{From: 0, To: 10})).Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.Bucket(bucketGroup(0, 100, 2, tiers.Span{From: 50, To: 60})).Run == nil {
		t.Fatal("another part of a cached bucket missed")
	}
	// The same start under another layout is another bucket.
	if b.Bucket(bucketGroup(0, 100, 4, tiers.Span{From: 50, To: 60})).Run != nil {
		t.Fatal("a bucket split into 4 partitions was served from the run of the one split into 2")
	}
	if b.Bucket(bucketGroup(0, 50, 2, tiers.Span{From: 10, To: 20})).Run != nil {
		t.Fatal("a bucket of another width was served from the same entry")
	}
}

func TestBucketsBoundedInBytes(t *testing.T) {
	var rows []tiers.Row
	for ts := range int64(10000) {
		rows = append(rows, tiers.PointRow(ts, 1))
	}
	store := &eventReader{countingReader: countingReader{rows: rows}, events: 1}
	const max = 16 * 1000 * 16 // an entry holds up to 1000 points
	b := NewBuckets(store, func(tiers.ReadRequest) bool { return true }, max)
	ctx := context.Background()
	for start := int64(0); start < 10000; start += 500 {
		g := bucketGroup(start, 500, 1, tiers.Span{From: start, To: start + 500})
		run, err := b.Bucket(g).Load(ctx)
		if err != nil || run.Len() != 500 {
			t.Fatalf("load: %v, %d rows", err, run.Len())
		}
		if b.Bytes() > max {
			t.Fatalf("%d bytes cached, bound %d", b.Bytes(), max)
		}
	}
	// A bucket larger than an entry is served once, then read directly.
	g := bucketGroup(0, 10000, 1, tiers.Span{From: 0, To: 10})
	run, err := b.Bucket(g).Load(ctx)
	if err != nil || run.Len() != 10000 {
		t.Fatalf("load of a large bucket: %v", err)
	}
	if br := b.Bucket(g); br.Run != nil || br.Load != nil {
		t.Fatal("a bucket larger than an entry is loaded again")
	}
}

func TestBucketsKeepRollupRowsWhole(t *testing.T) {
	var rows []tiers.Row
	for ts := int64(0); ts < 100; ts += 10 {
		rows = append(rows, tiers.Row{T: ts, Min: -1, Max: float64(ts), Sum: 3, Count: 7})
	}
	store := &eventReader{countingReader: countingReader{rows: rows}, events: 1}
	b := NewBuckets(store, func(tiers.ReadRequest) bool { return true }, 1<<20)
	run, err := b.Bucket(bucketGroup(0, 100, 1, tiers.Span{From: 0, To: 100})).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []tiers.Row
	for i := range run.Len() {
		got = append(got, run.Row(i))
	}
	if !slices.Equal(got, rows) {
		t.Fatalf("rollup rows came back as %v", got)
	}
}

// tableReader serves rows by table.
type tableReader map[tiers.Table][]tiers.Row

func (r tableReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	var rows []tiers.Row
	for _, row := range r[req.Key.Table] {
		if req.Span.Contains(row.T) {
			rows = append(rows, row)
		}
	}
	return &slicePages{rows: rows, size: req.PageSize}
}

func TestBucketsMergeAFinalLatePartitionLastAndLeaveAnotherToTheRead(t *testing.T) {
	store := tableReader{
		tiers.TableRaw:  {tiers.PointRow(1, 1), tiers.PointRow(5, 5), tiers.PointRow(9, 9)},
		tiers.TableLate: {tiers.PointRow(3, 30), tiers.PointRow(5, 50)},
	}
	g := bucketGroup(0, 10, 1, tiers.Span{From: 2, To: 10})
	g.Reads = append(g.Reads, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableLate, Series: "s", Bucket: 0}, Span: g.Span, PageSize: 7})
	for _, lateFinal := range []bool{false, true} {
		b := NewBuckets(store, func(r tiers.ReadRequest) bool { return r.Key.Table != tiers.TableLate || lateFinal }, 1<<20)
		br := b.Bucket(g)
		run, err := br.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []tiers.Row
		for i := range run.Len() {
			got = append(got, run.Row(i))
		}
		want := store[tiers.TableRaw]
		if lateFinal {
			want = []tiers.Row{tiers.PointRow(1, 1), tiers.PointRow(3, 30), tiers.PointRow(5, 50), tiers.PointRow(9, 9)}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("late final %v: run %v, want %v", lateFinal, got, want)
		}
		if lateFinal != (len(br.Rest) == 0) || br.Covered != 1+len(g.Reads)-1-len(br.Rest) {
			t.Fatalf("late final %v: rest %v, covered %d", lateFinal, br.Rest, br.Covered)
		}
	}
}

func TestBucketsInvalidateASeries(t *testing.T) {
	store := &eventReader{countingReader: countingReader{rows: rowsUpTo(100)}, events: 1}
	b := NewBuckets(store, func(tiers.ReadRequest) bool { return true }, 1<<20)
	g := bucketGroup(0, 100, 1, tiers.Span{From: 0, To: 100})
	if _, err := b.Bucket(g).Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.Invalidate("other")
	if b.Bucket(g).Run == nil {
		t.Fatal("invalidating another series dropped this one's bucket")
	}
	b.Invalidate("s")
	if br := b.Bucket(g); br.Run != nil || br.Load == nil {
		t.Fatal("a bucket of an invalidated series was served from memory")
	}
}

// The encodings a cached rollup run keeps (its rows' pieces, made on the
// first read that copies them, and windows of them) count against the
// budget: a load alone encodes nothing, the cache's bytes grow by what a
// read made, older entries make room, and a run that is no longer cached
// keeps none.
func TestBucketsChargeKeptWindows(t *testing.T) {
	var rows []tiers.Row
	for ts := int64(0); ts < 40000; ts += 10 {
		rows = append(rows, tiers.Row{T: ts, Min: -1.5, Max: float64(ts), Sum: 3, Count: 7})
	}
	store := &eventReader{countingReader: countingReader{rows: rows}, events: 1}
	const budget = 512 << 10 // entries up to 32 KiB
	b := NewBuckets(store, func(tiers.ReadRequest) bool { return true }, budget)
	ctx := context.Background()
	load := func(start int64) *partial.Run {
		run, err := b.Bucket(bucketGroup(start, 1000, 1, tiers.Span{From: start, To: start + 1000})).Load(ctx)
		if err != nil || run.Len() != 100 {
			t.Fatalf("load at %d: %v", start, err)
		}
		return run
	}
	first := load(0)
	before := b.Bytes()
	if loaded := first.Bytes() + 160 + int64(len("s")+len(tiers.TableRaw)); before != loaded {
		t.Fatalf("a load alone cached %d bytes, the rows are %d", before, loaded)
	}
	fields := []int{partial.FieldMin, partial.FieldMax, partial.FieldMean, partial.FieldCount}
	out := first.AppendRows(nil, 0, 100, false, fields)
	grown := b.Bytes() - before
	// The pieces of 100 rows of six numbers, then the windows of four.
	if grown < 2*int64(len(out)) || grown > 4*int64(len(out))+2048 {
		t.Fatalf("keeping %d bytes of windows grew the cache by %d", len(out), grown)
	}
	if first.Bytes()+160+int64(len("s")+len(tiers.TableRaw)) != before {
		t.Fatalf("what the cache charged for encodings is counted in the run's size too: %d, was %d", first.Bytes(), before)
	}
	// Fill the budget: the oldest entries go, and what is cached stays
	// within it whatever the runs keep.
	runs := []*partial.Run{first}
	for start := int64(1000); start < 40000; start += 1000 {
		run := load(start)
		run.AppendRows(nil, 0, 100, false, fields)
		runs = append(runs, run)
		if b.Bytes() > budget {
			t.Fatalf("%d bytes cached, budget %d", b.Bytes(), budget)
		}
	}
	for _, run := range runs[len(runs)-10:] {
		run.AppendRows(nil, 0, 100, true, []int{partial.FieldMax, partial.FieldSum})
		if b.Bytes() > budget {
			t.Fatalf("%d bytes cached with a second list of fields kept, budget %d", b.Bytes(), budget)
		}
	}
	// A run the cache let go keeps nothing more.
	b.Invalidate("s")
	for start := int64(0); start < 40000; start += 1000 {
		load(start)
	}
	before = b.Bytes()
	first.AppendRows(nil, 0, 100, false, []int{partial.FieldSum})
	if b.Bytes() != before {
		t.Fatalf("a run no longer cached charged %d bytes", b.Bytes()-before)
	}
}

// The settled start of a bucket that is not final grows minute by minute:
// each entry is the last one's rows and the minute's, read from the store
// (never the whole start again), the older entry is dropped, and the rows
// after the settled time are left to the read.
func TestBucketsSettledStartGrowsAndReplacesItself(t *testing.T) {
	const width = tiers.Hour
	var rows []tiers.Row
	for ts := int64(0); ts < width; ts += 10 * tiers.Second {
		rows = append(rows, tiers.PointRow(ts, float64(ts)/7))
	}
	store := &eventReader{countingReader: countingReader{rows: rows}, events: 4}
	b := NewBuckets(store, func(tiers.ReadRequest) bool { return false }, 64<<20)
	settled := int64(0)
	b.SettleRaw(func() int64 { return settled })
	ctx := context.Background()
	span := tiers.Span{From: 0, To: width}
	if br := b.Bucket(bucketGroup(0, width, 4, span)); br.Run != nil || br.Load != nil {
		t.Fatal("a bucket with nothing settled was served from the cache")
	}
	var sizes []int64
	for minute := int64(1); minute < 60; minute++ {
		settled = minute*tiers.Minute + 30*tiers.Second
		upTo := minute * tiers.Minute
		br := b.Bucket(bucketGroup(0, width, 4, span))
		if br.Load == nil {
			t.Fatalf("minute %d: no settled start to load", minute)
		}
		if len(br.Rest) != 4 || br.Rest[0].Span != (tiers.Span{From: upTo, To: width}) {
			t.Fatalf("minute %d: the read is left %d partitions over %+v, want 4 over [%d, %d)", minute, len(br.Rest), br.Rest[0].Span, upTo, width)
		}
		before := store.rowsRead.Load()
		run, err := br.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc(slices.Clone(rows), func(r tiers.Row) bool { return r.T >= upTo })
		var got []tiers.Row
		for i := range run.Len() {
			got = append(got, run.Row(i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("minute %d: the settled start holds %d rows, want %d", minute, len(got), len(want))
		}
		if n := store.rowsRead.Load() - before; minute > 1 && n != 6 {
			t.Fatalf("minute %d: %d rows read from the store to extend the start, want the minute's 6", minute, n)
		}
		if again := b.Bucket(bucketGroup(0, width, 4, span)); again.Run != run {
			t.Fatalf("minute %d: a second read missed the entry", minute)
		}
		sizes = append(sizes, b.Bytes())
	}
	if hits := b.SettledHits(); hits != 59 {
		t.Fatalf("%d settled hits, want 59", hits)
	}
	// One entry at a time: the cache holds the latest start only.
	if last, full := sizes[len(sizes)-1], int64(len(rows))*16; last > 2*full {
		t.Fatalf("the cache holds %d bytes after an hour of settled starts of %d points", last, len(rows))
	}
}
