package cache_test

import (
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers/embedded"
)

type testClock struct{ t atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.UnixMilli(c.t.Load()) }
func (c *testClock) Advance(d time.Duration) { c.t.Add(d.Milliseconds()) }

// memStore is an embedded store in memory on clock, which expires late
// marks.
func memStore(t *testing.T, clock *testClock) *embedded.Store {
	t.Helper()
	s, err := embedded.OpenInMemory(embedded.Options{Now: clock.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// throughAndAround drives a property test of answers held for ttl: random
// writes through the cache (this gateway) and around it (another
// gateway), clock advances and reads, 1000 steps. A read answers what the
// cache says and what the store says: after a write through the cache,
// and once ttl has passed since the last write around it, they must be
// equal. Some reads must be answered without the store (storeReads does
// not move), or the test shows nothing.
func throughAndAround(t *testing.T, r *rand.Rand, clock *testClock, ttl time.Duration, storeReads func() int64,
	through, around func(), read func() (got, want any, what string)) {
	t.Helper()
	lastAround := time.Time{}
	cached := 0
	for step := range 1000 {
		switch op := r.IntN(20); {
		case op < 1:
			through()
		case op < 3:
			around()
			lastAround = clock.Now()
		case op < 8:
			clock.Advance(time.Duration(r.IntN(1500)) * time.Millisecond)
		default:
			before := storeReads()
			got, want, what := read()
			if storeReads() == before {
				cached++
			}
			if fresh := lastAround.IsZero() || clock.Now().Sub(lastAround) >= ttl; fresh && !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, %s: the cache answers\n%v\nthe store\n%v", step, what, got, want)
			}
		}
	}
	if cached == 0 {
		t.Fatal("no read was answered from what the cache held: the test shows nothing")
	}
	t.Logf("%d reads answered without the store", cached)
}
