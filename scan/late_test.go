package scan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// lateStore is a late index of marks by series that counts its reads,
// one series at a time and (batchStore) many at once.
type lateStore struct {
	tiers.PartitionReader
	marks      map[string][]tiers.LateBucket
	batchErr   error
	one, batch atomic.Int64
}

// batchStore is a lateStore that reads many series at once.
type batchStore struct{ *lateStore }

func (s *lateStore) MarkLate(context.Context, []tiers.LateMark) error { return nil }

func (s *lateStore) LateBuckets(_ context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	s.one.Add(1)
	var out []tiers.LateBucket
	for _, m := range s.marks[series] {
		if span.Contains(m.Bucket) {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s batchStore) LateBucketsOf(ctx context.Context, series []string, span tiers.Span) (map[string][]tiers.LateBucket, error) {
	s.batch.Add(1)
	if s.batchErr != nil {
		return nil, s.batchErr
	}
	out := map[string][]tiers.LateBucket{}
	for _, id := range series {
		marks, _ := s.LateBuckets(ctx, id, span)
		s.one.Add(-1)
		if len(marks) > 0 {
			out[id] = marks
		}
	}
	return out, nil
}

// The scans of one request's series read their late index with one
// read of the store; a series outside the batch, a span outside the
// first one's, a store that cannot batch or a batch that failed read on
// their own; every answer is the store's answer for the series.
func TestLateIndexReadOnceForTheSeriesOfARequest(t *testing.T) {
	var ids []string
	marks := map[string][]tiers.LateBucket{}
	for i := range 20 {
		id := fmt.Sprintf("s%02d", i)
		ids = append(ids, id)
		for b := range i % 4 {
			marks[id] = append(marks[id], tiers.LateBucket{Bucket: int64(b+i) * tiers.Hour, Version: int64(7 + b), Rewritten: int64(b)})
		}
	}
	span := tiers.Span{From: 0, To: 20 * tiers.Hour}
	cases := []struct {
		name             string
		batchable        bool
		batchErr         error
		batched          bool
		ask              []string
		spans            []tiers.Span
		wantOne, wantAll int64
	}{
		{name: "one batch", batchable: true, batched: true, ask: ids, wantOne: 0, wantAll: 1},
		{name: "a series outside the batch", batchable: true, batched: true, ask: append(slices.Clone(ids[:5]), "other"), wantOne: 1, wantAll: 1},
		{name: "a wider span", batchable: true, batched: true, ask: ids[:3], spans: []tiers.Span{span, span, {From: 0, To: 30 * tiers.Hour}}, wantOne: 1, wantAll: 1},
		{name: "a store that cannot batch", batchable: false, batched: true, ask: ids, wantOne: 20},
		{name: "a failed batch", batchable: true, batchErr: errors.New("node down"), batched: true, ask: ids, wantOne: 20, wantAll: 1},
		{name: "no batch", batchable: true, ask: ids, wantOne: 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &lateStore{marks: marks, batchErr: c.batchErr}
			var scanned Store = store
			if c.batchable {
				scanned = batchStore{store}
			}
			sc := New(scanned, tiers.DefaultPyramid(), Config{Parallelism: 4, PageSize: 100, Lookahead: 1}, time.Now)
			ctx := context.Background()
			if c.batched {
				ctx = WithRequestSeries(ctx, ids)
			}
			// The last read after the others, so that the batch is read
			// over the others' span.
			var wg sync.WaitGroup
			for i, id := range c.ask {
				sp := span
				if c.spans != nil {
					sp = c.spans[i]
				}
				if i == len(c.ask)-1 {
					wg.Wait()
				}
				wg.Go(func() {
					got, err := sc.lateBuckets(ctx, id, sp)
					if err != nil {
						t.Error(err)
						return
					}
					var want []tiers.LateBucket
					for _, m := range marks[id] {
						if sp.Contains(m.Bucket) {
							want = append(want, m)
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("series %s: %v, want %v", id, got, want)
					}
				})
			}
			wg.Wait()
			if one, all := store.one.Load(), store.batch.Load(); one != c.wantOne || all != c.wantAll {
				t.Fatalf("%d reads of one series and %d of many, want %d and %d", one, all, c.wantOne, c.wantAll)
			}
		})
	}
}
