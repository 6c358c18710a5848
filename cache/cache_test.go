package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// rowsRead counts the rows eventReader returned.
	rowsRead atomic.Int64
	gate     chan struct{}
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

func rowsUpTo(n int) []tiers.Row {
	rows := make([]tiers.Row, n)
	for i := range rows {
		rows[i] = tiers.PointRow(int64(i), float64(i))
	}
	return rows
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

func (f *fakeRegistry) MarkRewritten(_ context.Context, ids []string) error {
	for _, id := range ids {
		if info, ok := f.infos[id]; ok {
			info.Generation++
			f.infos[id] = info
		}
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
	if reg.lookups.Load() != lookups {
		t.Fatal("widening went back to the registry")
	}
	// A series a local write created is read from the registry once,
	// whole: its labels and layout are more than the write's span.
	if info, err := c.LookupSeries(ctx, "b"); err != nil || info.First != 5 {
		t.Fatalf("a series created by a local write: %+v %v", info, err)
	}
	if reg.lookups.Load() != lookups+1 {
		t.Fatalf("a new series was looked up %d times, want once", reg.lookups.Load()-lookups)
	}
	lookups++
	// Past the info TTL the registry is asked again; the layout is still
	// fresh.
	clock = clock.Add(2 * time.Second)
	if _, err := c.Layout(ctx, "a"); err != nil || reg.lookups.Load() != lookups {
		t.Fatal("layout lookup within its TTL reached the registry")
	}
	if _, err := c.LookupSeries(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if reg.lookups.Load() != lookups+1 {
		t.Fatal("an expired entry was not refreshed")
	}
}

// batchRegistry looks many series up at once, and counts it.
type batchRegistry struct {
	fakeRegistry
	batches atomic.Int64
	fail    error
}

func (b *batchRegistry) LookupSeriesOf(_ context.Context, ids []string) (map[string]tiers.SeriesInfo, error) {
	b.batches.Add(1)
	if b.fail != nil {
		return nil, b.fail
	}
	out := map[string]tiers.SeriesInfo{}
	for _, id := range ids {
		if info, ok := b.infos[id]; ok {
			out[id] = info
		}
	}
	return out, nil
}

// Many series are looked up with one lookup of the registry for those the
// cache lacks or holds stale; the cache then answers them, the missing
// ones as missing, until the TTL; a failed batch falls back to one
// lookup each.
func TestSeriesCacheLooksManyUpAtOnce(t *testing.T) {
	reg := &batchRegistry{fakeRegistry: fakeRegistry{infos: map[string]tiers.SeriesInfo{}}}
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("s%02d", i)
		ids = append(ids, id)
		if i%4 != 0 {
			reg.infos[id] = tiers.SeriesInfo{ID: id, First: int64(i), Last: int64(100 + i), Generation: int64(i % 3)}
		}
	}
	clock := time.Unix(0, 0)
	c := NewSeries(reg, 100, time.Second, time.Minute, func() time.Time { return clock })
	ctx := context.Background()
	check := func(got map[string]tiers.SeriesInfo) {
		t.Helper()
		if len(got) != 15 {
			t.Fatalf("%d series found, want 15", len(got))
		}
		for _, id := range ids {
			want, ok := reg.infos[id]
			if g, found := got[id]; found != ok || g.ID != want.ID || g.First != want.First || g.Last != want.Last || g.Generation != want.Generation {
				t.Fatalf("series %s: %+v (found %v), want %+v (found %v)", id, g, found, want, ok)
			}
		}
	}
	// One cached already: the batch asks for the other nineteen.
	if _, err := c.LookupSeries(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	got, err := c.LookupSeriesOf(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	check(got)
	if reg.batches.Load() != 1 || reg.lookups.Load() != 1 {
		t.Fatalf("%d batches and %d lookups, want 1 and the 1 before", reg.batches.Load(), reg.lookups.Load())
	}
	for _, id := range ids {
		if _, err := c.LookupSeries(ctx, id); err != nil && !errors.Is(err, tiers.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if got, _ := c.LookupSeriesOf(ctx, ids); reg.batches.Load() != 1 || reg.lookups.Load() != 1 {
		t.Fatalf("within the TTL the registry was asked again: %d batches, %d lookups", reg.batches.Load(), reg.lookups.Load())
	} else {
		check(got)
	}
	// Past the TTL, and the batch fails: one lookup each.
	clock = clock.Add(2 * time.Second)
	reg.fail = errors.New("node down")
	got, err = c.LookupSeriesOf(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	check(got)
	if reg.batches.Load() != 2 || reg.lookups.Load() != 21 {
		t.Fatalf("%d batches and %d lookups after a failed batch, want 2 and 21", reg.batches.Load(), reg.lookups.Load())
	}
}
