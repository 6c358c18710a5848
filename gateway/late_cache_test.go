package gateway_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// lateReads counts the late-partition reads that reach the store.
type lateReads struct {
	tiers.Store
	n atomic.Int64
}

func (r *lateReads) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	if req.Key.Table == tiers.TableLate {
		r.n.Add(1)
	}
	return r.Store.Read(ctx, req)
}

// Late partitions are cached like final raw buckets, yet a late write
// after a cached read is in the very next read: the write gives the
// bucket's late mark a new version, which the next read's cache key
// carries.
func TestLateWritesAfterCachedReadsAreSeen(t *testing.T) {
	store, err := embedded.Open(t.TempDir(), embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	counted := &lateReads{Store: store}
	// The gateway as serve assembles it, partition cache and its finality
	// included.
	env := querytest.NewEnv(t, counted, querytest.Options{Configure: func(c *gateway.Config) { c.CacheBytes = 64 << 20 }})
	ctx := context.Background()

	now := env.Clock.Now().UnixMilli()
	span := tiers.Span{From: tiers.AlignDown(now, tiers.Hour) - 6*tiers.Hour, To: tiers.AlignDown(now, tiers.Hour) - 2*tiers.Hour}
	truth := querytest.Truth{}
	r := rand.New(rand.NewPCG(7, 8))
	write := func(n int) {
		t.Helper()
		var pts []ingest.Point
		for range n {
			// Few distinct timestamps, so later writes overwrite earlier ones.
			ts := span.From + r.Int64N(span.To-span.From)/60000*60000
			pts = append(pts, ingest.Point{Series: "late.cached", T: ts, V: float64(r.IntN(1000))})
		}
		res, err := env.Writer.Write(ctx, pts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Late == 0 {
			t.Fatal("no point went to the late table; the test needs them there")
		}
		for _, pt := range pts {
			truth[pt.T] = pt.V
		}
	}
	read := func() []query.Item {
		t.Helper()
		req := env.Req("late.cached", span, router.Resolution{Kind: router.RawPoints})
		got, _, err := env.ReadAll(ctx, req, 10)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(got []query.Item, when string) {
		t.Helper()
		want := truth.Points(span)
		if len(got) != len(want) {
			t.Fatalf("%s: %d points, want %d", when, len(got), len(want))
		}
		for i := range want {
			if got[i].T != want[i].T || got[i].Row.Value() != want[i].Value() {
				t.Fatalf("%s: point %d = (%d, %v), want (%d, %v)", when, i, got[i].T, got[i].Row.Value(), want[i].T, want[i].Value())
			}
		}
	}

	write(50)
	for round := range 20 {
		check(read(), "first read")
		before := counted.n.Load()
		check(read(), "repeated read")
		if after := counted.n.Load(); after != before {
			t.Fatalf("round %d: a repeated read made %d late-partition reads of the store; they should come from the cache", round, after-before)
		}
		write(1 + r.IntN(5))
		check(read(), "read after a late write")
	}
	if env.Counter(t, "tsgate_cache_hits_total") == 0 {
		t.Fatal("no read was served from the cache")
	}
}
