package cache

import (
	"context"
	"errors"
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
