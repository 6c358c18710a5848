package cache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/cache"
	"github.com/tsgate/tsgate/tiers"
)

// countedLate counts the late-index reads that reach the store; hold,
// when set, is called inside LateBuckets after the store answered.
type countedLate struct {
	cache.LateIndex
	reads atomic.Int64
	hold  func()
}

func (c *countedLate) LateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	c.reads.Add(1)
	marks, err := c.LateIndex.LateBuckets(ctx, series, span)
	if c.hold != nil {
		c.hold()
	}
	return marks, err
}

func (c *countedLate) LateBucketsOf(ctx context.Context, series []string, span tiers.Span) (map[string][]tiers.LateBucket, error) {
	c.reads.Add(1)
	return c.LateIndex.LateBucketsOf(ctx, series, span)
}

// Random late marks, through the cache (this gateway) and around it
// (another gateway), between reads of random spans, one series at a time
// and many: every read after a mark through the cache, and every read
// once the TTL has passed since the last mark around it, equals the
// store's answer; reads in between repeat what the cache held.
func TestLateMarksSeeLocalMarksAtOnceAndOthersWithinTheTTL(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	clock.Advance(1000 * time.Hour)
	store := memStore(t, clock)
	counted := &countedLate{LateIndex: store}
	const ttl = 2 * time.Second
	held := cache.NewLateMarks(counted, 100, ttl, clock.Now)

	r := rand.New(rand.NewPCG(5, 6))
	ids := []string{"a", "b", "c", "d"}
	bucket := func() int64 { return int64(r.IntN(24)) * tiers.Hour }
	marks := func() []tiers.LateMark {
		var ms []tiers.LateMark
		for range 1 + r.IntN(3) {
			ms = append(ms, tiers.LateMark{Series: ids[r.IntN(len(ids))], Bucket: bucket(), Retention: 10000 * tiers.Hour, Rewrite: r.IntN(3) == 0})
		}
		return ms
	}
	// Reads cover a whole day or a part of it, so that spans held cover
	// some later reads and not others.
	span := func() tiers.Span {
		if r.IntN(2) == 0 {
			return tiers.Span{From: 0, To: 24 * tiers.Hour}
		}
		from := bucket()
		return tiers.Span{From: from, To: from + int64(1+r.IntN(6))*tiers.Hour}
	}
	ask := func(ix cache.LateIndex, sp tiers.Span) map[string][]tiers.LateBucket {
		t.Helper()
		out := map[string][]tiers.LateBucket{}
		if r.IntN(2) == 0 {
			m, err := ix.LateBucketsOf(ctx, ids, sp)
			if err != nil {
				t.Fatal(err)
			}
			for id, ms := range m {
				out[id] = append([]tiers.LateBucket(nil), ms...)
				if len(ms) > 0 {
					ms[0].Version = -1 // what the caller does changes no later answer
				}
			}
			return out
		}
		for _, id := range ids {
			ms, err := ix.LateBuckets(ctx, id, sp)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) > 0 {
				out[id] = append([]tiers.LateBucket(nil), ms...)
				ms[0].Version = -1
			}
		}
		return out
	}
	throughAndAround(t, r, clock, ttl, counted.reads.Load,
		func() {
			if err := held.MarkLate(ctx, marks()); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if err := store.MarkLate(ctx, marks()); err != nil {
				t.Fatal(err)
			}
		},
		func() (got, want any, what string) {
			sp := span()
			// The same choice of batch or single reads on both sides.
			seed := r.Uint64()
			r = rand.New(rand.NewPCG(seed, 1))
			got = ask(held, sp)
			r = rand.New(rand.NewPCG(seed, 1))
			return got, ask(store, sp), fmt.Sprintf("marks over %v", sp)
		})
}

// Marks read while this gateway marks a bucket are not held: they may
// predate the mark.
func TestLateMarksDropMarksFetchedDuringALocalMark(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	clock.Advance(1000 * time.Hour)
	store := memStore(t, clock)
	counted := &countedLate{LateIndex: store}
	held := cache.NewLateMarks(counted, 100, time.Minute, clock.Now)
	day := tiers.Span{From: 0, To: 24 * tiers.Hour}
	mark := func(b int64) {
		t.Helper()
		if err := held.MarkLate(ctx, []tiers.LateMark{{Series: "a", Bucket: b, Retention: 10000 * tiers.Hour}}); err != nil {
			t.Fatal(err)
		}
	}
	mark(0)
	counted.hold = func() {
		counted.hold = nil
		mark(tiers.Hour)
	}
	if ms, err := held.LateBuckets(ctx, "a", day); err != nil || len(ms) != 1 {
		t.Fatalf("racing read: %v, %v", ms, err)
	}
	ms, err := held.LateBuckets(ctx, "a", day)
	if err != nil || len(ms) != 2 {
		t.Fatalf("read after the mark: %v, %v; want both buckets", ms, err)
	}
	// And once held, a repeat does not ask the store.
	before := counted.reads.Load()
	if again, err := held.LateBuckets(ctx, "a", day); err != nil || !reflect.DeepEqual(again, ms) || counted.reads.Load() != before {
		t.Fatalf("repeat: %v, %v, %d store reads", again, err, counted.reads.Load()-before)
	}
}
