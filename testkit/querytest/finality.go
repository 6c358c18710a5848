package querytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// cachedRollupsStayCurrent: rollup rows are cached as soon as they are
// rolled up, and late points and imports interleaved with cached reads
// never leave a stale window. Two gateways share the store, one caching
// final buckets and complete windows of answers and one caching nothing; every answer of the caching one equals the
// other's, at every step, and brute force once rollups have caught up.
func cachedRollupsStayCurrent(t *testing.T, store tiers.Store, base *Env) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(29, 31))
	clock := base.Clock
	cached := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: clock, Configure: func(c *gateway.Config) {
		c.CacheBytes, c.ResultsCacheBytes = 64<<20, 64<<20
	}})
	plain := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: clock})
	series := fmt.Sprintf("qt%08x.fin", rand.Uint32())
	hist := series + ".hist"
	truth, histTruth := Truth{}, Truth{}
	now := clock.Now().UnixMilli()

	// Two days of points about a minute apart, within the raw tier. The
	// first and last are never rewritten, so that no later write widens
	// the series' span (readers cache it for --series-ttl).
	span := tiers.Span{From: tiers.AlignDown(now-2*tiers.Day, tiers.Hour), To: tiers.AlignDown(now-3*tiers.Hour, tiers.Hour)}
	var pts []ingest.Point
	for ts := span.From; ts < span.To-1; ts += tiers.Minute/2 + r.Int64N(tiers.Minute) {
		pts = append(pts, cached.point(series, ts, r, truth))
	}
	pts = append(pts, cached.point(series, span.To-1, r, truth))
	if _, err := cached.Writer.Backfill(ctx, pts); err != nil {
		t.Fatal(err)
	}
	// History older than the finer tiers keep, imported into the hour
	// tier.
	h0 := tiers.AlignDown(now-100*tiers.Day, tiers.Day)
	histSpan := tiers.Span{From: h0, To: h0 + 2*tiers.Day}
	// An import writes each hour window it touches whole, from its own
	// points: what the window held before is replaced.
	importHist := func(ts ...int64) {
		t.Helper()
		for _, at := range ts {
			w := tiers.AlignDown(at, tiers.Hour)
			for old := range histTruth {
				if tiers.AlignDown(old, tiers.Hour) == w {
					delete(histTruth, old)
				}
			}
		}
		var pts []ingest.Point
		for _, at := range ts {
			pts = append(pts, cached.point(hist, at, r, histTruth))
		}
		res, err := cached.Gateway.Importer.Import(ctx, pts)
		if err != nil || res.Raw != 0 || res.Dropped != 0 {
			t.Fatalf("import of history: %+v, %v", res, err)
		}
	}
	importHist(histSpan.From, histSpan.To-1)
	rollups := func(force bool) {
		t.Helper()
		if _, err := cached.Rollups.RunOnce(ctx, force); err != nil {
			t.Fatalf("rollups: %v", err)
		}
	}
	rollups(true)

	var rollupHits int64
	read := func(e *Env, req query.Request) Page {
		t.Helper()
		p, err := e.Read(ctx, req)
		if err != nil || p.Trailer.Err != nil || p.Trailer.NextCursor != "" {
			t.Fatalf("read %+v: %v %+v", req, err, p.Trailer)
		}
		return p
	}
	windows := []int64{tiers.Minute, 5 * tiers.Minute, tiers.Hour, tiers.Day}
	compare := func(when string, exact bool) {
		t.Helper()
		// The watermarks each gateway caches for a few seconds expire.
		clock.Advance(6 * time.Second)
		for range 6 {
			s, tr := span, truth
			if r.IntN(3) == 0 {
				s, tr = histSpan, histTruth
			}
			from := s.From + r.Int64N(s.To-s.From)
			sub := tiers.Span{From: from, To: from + 1 + r.Int64N(s.To-from)}
			if r.IntN(2) == 0 {
				sub = s
			}
			step := windows[r.IntN(len(windows))]
			if s == histSpan {
				step = windows[2+r.IntN(2)]
			}
			id := series
			if s == histSpan {
				id = hist
			}
			req := cached.Req(id, sub, router.Resolution{Kind: router.Window, Window: step})
			req.Aggs = []query.Agg{query.Min, query.Max, query.Sum, query.Count}
			got := read(cached, req)
			if got.Plan.Tier != tiers.LevelRaw {
				rollupHits += got.Trailer.Stats.CacheHits
			}
			if d := diff(got.Items, read(plain, req).Items); d != "" {
				t.Fatalf("%s: %s %+v at %s: the caching gateway differs from the store: %s", when, id, sub, tiers.FormatDuration(step), d)
			}
			if exact {
				if d := diff(got.Items, tr.Windows(sub, step)); d != "" {
					t.Fatalf("%s: %s %+v at %s: %s", when, id, sub, tiers.FormatDuration(step), d)
				}
			}
		}
	}
	compare("after the load", true)
	for step := range 40 {
		switch r.IntN(4) {
		case 0: // late points, into windows the rollups completed
			var late []ingest.Point
			for range 1 + r.IntN(5) {
				late = append(late, cached.point(series, span.From+1+r.Int64N(span.To-span.From-2), r, truth))
			}
			res, err := cached.Writer.Write(ctx, late)
			if err != nil || res.Late != len(late) {
				t.Fatalf("late write: %+v, %v", res, err)
			}
		case 1: // an import into complete hour windows of history
			var ts []int64
			for range 1 + r.IntN(5) {
				ts = append(ts, histSpan.From+1+r.Int64N(histSpan.To-histSpan.From-2))
			}
			importHist(ts...)
		case 2:
			rollups(r.IntN(2) == 0)
		}
		compare(fmt.Sprintf("step %d", step), false)
	}
	rollups(true)
	compare("once rollups caught up", true)
	if rollupHits == 0 {
		t.Fatal("no read of a rollup tier was served from the cache: the test shows nothing")
	}
	if _, _, served := cached.Gateway.Results.Stats(); served == 0 {
		t.Fatal("no window was served from the results cache: the test shows nothing")
	}
}
