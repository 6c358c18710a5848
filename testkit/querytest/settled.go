package querytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// cachedOpenBucketsStayCurrent: the settled start of raw buckets that are
// not final yet is cached (cache.Buckets.SettleRaw), and on-time points,
// late points and imports, written through either of two gateways and
// interleaved with cached reads while the clock moves on, never leave a
// stale point: every raw read of the caching gateway equals the other
// one's, which caches nothing, and brute force.
func cachedOpenBucketsStayCurrent(t *testing.T, store tiers.Store, base *Env) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(37, 41))
	clock := base.Clock
	cached := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: clock, Configure: func(c *gateway.Config) { c.CacheBytes = 64 << 20 }})
	plain := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: clock})
	writers := []*Env{cached, plain}
	series := fmt.Sprintf("qt%08x.open", rand.Uint32())
	truth := Truth{}

	now := clock.Now().UnixMilli()
	first := now - 4*tiers.Hour
	var pts []ingest.Point
	for ts := first; ts < now; ts += 10_000 + r.Int64N(20_000) {
		pts = append(pts, cached.point(series, ts, r, truth))
	}
	if _, err := cached.Writer.Backfill(ctx, pts); err != nil {
		t.Fatal(err)
	}
	write := func(w *Env, from, to int64, n int, backfill bool) {
		t.Helper()
		var pts []ingest.Point
		for range n {
			// Whole seconds: later writes overwrite earlier ones.
			ts := from + r.Int64N(to-from)/1000*1000
			pts = append(pts, w.point(series, max(ts, first+1), r, truth))
		}
		var err error
		if backfill {
			_, err = w.Writer.Backfill(ctx, pts)
		} else {
			_, err = w.Writer.Write(ctx, pts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(env *Env, span tiers.Span, step int) {
		t.Helper()
		got, _, err := env.ReadAll(ctx, env.Req(series, span, router.Resolution{Kind: router.RawPoints}), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffPoints(got, truth.Points(span)); d != "" {
			t.Fatalf("step %d, span %+v, at %s: %s", step, span, clock.Now().UTC().Format(time.RFC3339), d)
		}
	}
	for step := range 60 {
		clock.Advance(time.Duration(5+r.IntN(180)) * time.Second)
		now := clock.Now().UnixMilli()
		w := writers[r.IntN(2)]
		// On time, up to now.
		write(w, now-20*tiers.Second, now+1, 1+r.IntN(4), false)
		switch r.IntN(5) {
		case 0:
			// Late: older than the lateness, into the settled starts and
			// just after them.
			write(w, now-3*tiers.Hour, now-15*tiers.Minute, 1+r.IntN(5), false)
			write(w, now-17*tiers.Minute, now-15*tiers.Minute, 1+r.IntN(3), false)
		case 1:
			// Late rewrites of points written on time.
			var old []int64
			for ts := range truth {
				if ts >= now-3*tiers.Hour && ts < now-15*tiers.Minute {
					old = append(old, ts)
				}
			}
			slices.Sort(old)
			var pts []ingest.Point
			for range 1 + r.IntN(4) {
				pts = append(pts, w.point(series, old[r.IntN(len(old))], r, truth))
			}
			if _, err := w.Writer.Write(ctx, pts); err != nil {
				t.Fatal(err)
			}
		case 2:
			// An import into the buckets the cache holds settled starts of.
			write(w, now-2*tiers.Hour, now-15*tiers.Minute, 1+r.IntN(5), true)
		}
		last := tiers.Span{From: now - tiers.Hour, To: now + 1}
		a, b := now-3*tiers.Hour+r.Int64N(3*tiers.Hour), now-3*tiers.Hour+r.Int64N(3*tiers.Hour)
		for _, span := range []tiers.Span{last, {From: min(a, b), To: max(a, b) + 1}} {
			check(cached, span, step)
			check(cached, span, step) // from the entries the first loaded
			check(plain, span, step)
		}
	}
	if cached.Counter(t, "tsgate_cache_settled_hits_total") == 0 {
		t.Fatal("no read found a settled bucket start in the cache")
	}
}

// diffPoints says how raw answer items differ from brute force ("" when
// they do not).
func diffPoints(got []query.Item, want []tiers.Row) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d points, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].T != want[i].T || got[i].Row.Value() != want[i].Value() {
			return fmt.Sprintf("point %d = (%d, %v), want (%d, %v)", i, got[i].T, got[i].Row.Value(), want[i].T, want[i].Value())
		}
	}
	return ""
}

// Counter reads a counter of the gateway's metrics (one without
// labels), failing the test when there is none.
func (e *Env) Counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := e.Gateway.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s metric", name)
	return 0
}
