package cache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// countingReader serves a fixed partition and counts the reads that reach
// it; gate, when set, holds every read until closed.
type countingReader struct {
	rows  []tiers.Row
	reads atomic.Int64
	gate  chan struct{}
}

type slicePages struct {
	rows []tiers.Row
	size int
}

func (p *slicePages) Next() ([]tiers.Row, error) {
	if len(p.rows) == 0 {
		return nil, tiers.ErrDone
	}
	n := min(p.size, len(p.rows))
	page := slices.Clone(p.rows[:n])
	p.rows = p.rows[n:]
	return page, nil
}
func (p *slicePages) Close() error { return nil }

func (r *countingReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	r.reads.Add(1)
	if r.gate != nil {
		<-r.gate
	}
	var rows []tiers.Row
	for _, row := range r.rows {
		if req.Span.Contains(row.T) {
			rows = append(rows, row)
		}
	}
	if req.Desc {
		slices.Reverse(rows)
	}
	return &slicePages{rows: rows, size: req.PageSize}
}

func drain(t *testing.T, p tiers.RowPages) []tiers.Row {
	t.Helper()
	var out []tiers.Row
	for {
		page, err := p.Next()
		if errors.Is(err, tiers.ErrDone) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
	}
}

func rowsUpTo(n int) []tiers.Row {
	rows := make([]tiers.Row, n)
	for i := range rows {
		rows[i] = tiers.PointRow(int64(i), float64(i))
	}
	return rows
}

func req(from, to int64, desc bool) tiers.ReadRequest {
	return tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: 0}, Span: tiers.Span{From: from, To: to}, Desc: desc, PageSize: 7}
}

func TestPartitionsServeFinalReadsFromCache(t *testing.T) {
	next := &countingReader{rows: rowsUpTo(100)}
	final := func(r tiers.ReadRequest) bool { return r.Span.To <= 50 }
	c := NewPartitions(next, final, 1<<20)
	ctx := context.Background()
	for range 3 {
		for _, desc := range []bool{false, true} {
			got := drain(t, c.Read(ctx, req(10, 50, desc)))
			want := slices.Clone(next.rows[10:50])
			if desc {
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("desc %v: got %v", desc, got)
			}
		}
	}
	if n := next.reads.Load(); n != 1 {
		t.Fatalf("a final span was read %d times from the store, want once", n)
	}
	if hits, misses := c.Stats(); hits != 5 || misses != 1 {
		t.Fatalf("hits %d misses %d", hits, misses)
	}
	// A span that can still change is always read from the store.
	for range 3 {
		drain(t, c.Read(ctx, req(40, 60, false)))
	}
	if n := next.reads.Load(); n != 4 {
		t.Fatalf("mutable span: %d store reads, want every read to reach the store", n)
	}
	// A different span of the same partition is a different key.
	drain(t, c.Read(ctx, req(10, 40, false)))
	if n := next.reads.Load(); n != 5 {
		t.Fatalf("another span was served from the cache")
	}
}

func TestPartitionsCoalesceConcurrentMisses(t *testing.T) {
	next := &countingReader{rows: rowsUpTo(100), gate: make(chan struct{})}
	c := NewPartitions(next, func(tiers.ReadRequest) bool { return true }, 1<<20)
	var wg sync.WaitGroup
	results := make([][]tiers.Row, 8)
	for i := range results {
		wg.Go(func() { results[i] = drain(t, c.Read(context.Background(), req(0, 100, false))) })
	}
	time.Sleep(50 * time.Millisecond) // let the readers pile up on the miss
	close(next.gate)
	wg.Wait()
	if n := next.reads.Load(); n != 1 {
		t.Fatalf("%d concurrent misses reached the store, want 1", n)
	}
	for _, r := range results {
		if !slices.Equal(r, next.rows) {
			t.Fatal("a coalesced reader got different rows")
		}
	}
}

func TestPartitionsBoundedInBytes(t *testing.T) {
	next := &countingReader{rows: rowsUpTo(1000)}
	const budget = 16 * 100 * rowBytes // an entry may hold 100 rows
	c := NewPartitions(next, func(tiers.ReadRequest) bool { return true }, budget)
	for i := range int64(40) {
		drain(t, c.Read(context.Background(), req(i*10, i*10+50, false)))
	}
	if c.bytes > budget {
		t.Fatalf("cache holds %d bytes, budget %d", c.bytes, budget)
	}
	// Too large for one entry: served, never cached.
	before := next.reads.Load()
	for range 2 {
		if got := drain(t, c.Read(context.Background(), req(0, 1000, false))); len(got) != 1000 {
			t.Fatalf("oversized read returned %d rows", len(got))
		}
	}
	if next.reads.Load()-before < 2 {
		t.Fatal("an oversized partition was cached")
	}
}

type fakeRegistry struct {
	infos   map[string]tiers.SeriesInfo
	lookups atomic.Int64
}

func (f *fakeRegistry) LookupSeries(_ context.Context, id string) (tiers.SeriesInfo, error) {
	f.lookups.Add(1)
	info, ok := f.infos[id]
	if !ok {
		return info, tiers.ErrNotFound
	}
	return info, nil
}

func (f *fakeRegistry) NoteSeries(_ context.Context, spans []tiers.SeriesInfo) error {
	for _, s := range spans {
		info, ok := f.infos[s.ID]
		if !ok {
			f.infos[s.ID] = s
			continue
		}
		info.First, info.Last = min(info.First, s.First), max(info.Last, s.Last)
		f.infos[s.ID] = info
	}
	return nil
}

func TestSeriesCacheWidensOnLocalWrites(t *testing.T) {
	reg := &fakeRegistry{infos: map[string]tiers.SeriesInfo{"a": {ID: "a", First: 10, Last: 20}}}
	clock := time.Unix(0, 0)
	c := NewSeries(reg, 10, time.Second, time.Minute, func() time.Time { return clock })
	ctx := context.Background()
	if _, err := c.LookupSeries(ctx, "b"); !errors.Is(err, tiers.ErrNotFound) {
		t.Fatalf("unknown series: %v", err)
	}
	if info, _ := c.LookupSeries(ctx, "a"); info.Last != 20 {
		t.Fatalf("info %+v", info)
	}
	if err := c.NoteSeries(ctx, []tiers.SeriesInfo{{ID: "a", First: 15, Last: 30}, {ID: "b", First: 5, Last: 6}}); err != nil {
		t.Fatal(err)
	}
	lookups := reg.lookups.Load()
	if info, _ := c.LookupSeries(ctx, "a"); info.First != 10 || info.Last != 30 {
		t.Fatalf("after a local write: %+v", info)
	}
	if info, err := c.LookupSeries(ctx, "b"); err != nil || info.First != 5 {
		t.Fatalf("a series created by a local write: %+v %v", info, err)
	}
	if reg.lookups.Load() != lookups {
		t.Fatal("widening went back to the registry")
	}
	// Past the info TTL the registry is asked again; the layout is still
	// fresh.
	clock = clock.Add(2 * time.Second)
	if _, err := c.Layout(ctx, "a"); err != nil || reg.lookups.Load() != lookups {
		t.Fatal("layout lookup within its TTL reached the registry")
	}
	c.LookupSeries(ctx, "a")
	if reg.lookups.Load() != lookups+1 {
		t.Fatal("an expired entry was not refreshed")
	}
}

// A late partition's version and a series' invalidation are part of the
// key: a read under another version, or after Invalidate, goes to the
// store and sees what it holds now.
func TestPartitionsKeyOnVersionAndGeneration(t *testing.T) {
	next := &countingReader{rows: rowsUpTo(100)}
	c := NewPartitions(next, func(tiers.ReadRequest) bool { return true }, 1<<20)
	ctx := context.Background()
	read := func(version int64) []tiers.Row {
		r := req(0, 50, false)
		r.Version = version
		return drain(t, c.Read(ctx, r))
	}
	read(1)
	read(1)
	if n := next.reads.Load(); n != 1 {
		t.Fatalf("%d store reads of one version, want 1", n)
	}
	next.rows[3].Sum = 1000 // the store changes, and so does the version
	if got := read(2); got[3].Sum != 1000 {
		t.Fatalf("read under a new version served the old rows: %v", got[3])
	}
	next.rows[4].Sum = 2000 // the store changes under the same version, then the series is invalidated
	c.Invalidate("other")
	if got := read(2); got[4].Sum == 2000 {
		t.Fatal("invalidating another series dropped this one's entries")
	}
	c.Invalidate("s")
	if got := read(2); got[4].Sum != 2000 {
		t.Fatalf("read after Invalidate served the old rows: %v", got[4])
	}
}
