package ingest_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

func importEnv(t *testing.T, p tiers.Pyramid) (*querytest.Env, *ingest.Importer) {
	t.Helper()
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := querytest.NewEnv(t, store, querytest.Options{Pyramid: p})
	return env, env.Gateway.Importer
}

// expectedLevel is where a point at t belongs, stated the other way round
// from the importer: the finest tier from which every coarser window that
// contains t can be rolled up while its rows are kept (a margin inside the
// retention), or -1 when the coarsest tier does not keep t's window.
func expectedLevel(p tiers.Pyramid, t, now, margin int64) tiers.Level {
	kept := func(l tiers.Level, from int64) bool {
		r := p.Tier(l).Retention
		return r == 0 || from >= now-r+margin
	}
	levels := p.Levels()
	last := levels[len(levels)-1]
	if !kept(last, tiers.AlignDown(t, p.Tier(last).Step)) {
		return -1
	}
next:
	for _, l := range levels {
		for _, k := range levels[l+1:] {
			if !kept(k-1, tiers.AlignDown(t, p.Tier(k).Step)) {
				continue next
			}
		}
		return l
	}
	return last
}

// tierRows reads every row of a rollup tier of the series over span,
// straight from the store.
func tierRows(t *testing.T, env *querytest.Env, l tiers.Level, series string, span tiers.Span) map[int64]tiers.Row {
	t.Helper()
	tier := env.Pyramid.Tier(l)
	out := map[int64]tiers.Row{}
	for b := range tier.DefaultLayout().Buckets(span, false) {
		rows, _, err := storetest.ReadAll(env.Store.Read(context.Background(), tiers.ReadRequest{
			Key: tiers.PartitionKey{Table: tier.Table, Series: series, Bucket: b.Start}, Span: b.Span(), PageSize: 5000}))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out[r.T] = r
		}
	}
	return out
}

// History of any age lands where the tiers still keep it: every raw point
// the raw tier keeps is readable as written, and every rollup tier holds
// exactly the brute-force aggregates of the windows it can hold, whether
// built from points, recomputed from finer rows at import, or rolled up by
// the worker afterwards; points no tier keeps are dropped and counted.
func TestImportLandsHistoryInTheTiersThatKeepIt(t *testing.T) {
	finite := tiers.DefaultPyramid()
	finite[finite.Coarsest()].Retention = 2 * 365 * tiers.Day
	for name, p := range map[string]tiers.Pyramid{"default": tiers.DefaultPyramid(), "finite": finite} {
		t.Run(name, func(t *testing.T) {
			env, im := importEnv(t, p)
			ctx := context.Background()
			now := env.Clock.Now().UnixMilli()
			margin := ingest.DefaultImportConfig().Margin.Milliseconds()
			r := rand.New(rand.NewPCG(3, uint64(len(name))))
			const series = "hist.a"
			// Dense runs around each tier's retention edge, sparse points
			// over three years, integer values so that sums are exact.
			var pts []ingest.Point
			add := func(ts int64) {
				pts = append(pts, ingest.Point{Series: series, T: ts, V: float64(r.IntN(2001) - 1000)})
			}
			for _, l := range p.Levels() {
				if ret := p.Tier(l).Retention; ret > 0 {
					for range 600 {
						add(now - ret + margin - 3*tiers.Day + r.Int64N(6*tiers.Day))
					}
				}
			}
			for range 3000 {
				add(now - r.Int64N(3*365*tiers.Day))
			}
			for range 300 { // rewrites: the last value of a (series, t) wins
				add(pts[r.IntN(len(pts))].T)
			}
			// Windows of history are written whole from one call: shuffle
			// within the call to show order does not matter.
			r.Shuffle(len(pts), func(i, j int) { pts[i], pts[j] = pts[j], pts[i] })
			res, err := im.Import(ctx, pts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
				t.Fatal(err)
			}

			truth := querytest.Truth{}
			level := map[int64]tiers.Level{}
			wantRaw, wantDropped, wantAgg := 0, 0, map[string]int{}
			for _, pt := range pts {
				l := expectedLevel(env.Pyramid, pt.T, now, margin)
				switch {
				case l < 0:
					wantDropped++
					continue
				case l == tiers.LevelRaw:
					wantRaw++
				default:
					wantAgg[env.Pyramid.Tier(l).Name]++
				}
				truth[pt.T] = pt.V
				level[pt.T] = l
			}
			if res.Points != len(pts) || res.Raw != wantRaw || res.Dropped != wantDropped {
				t.Fatalf("result %+v, want %d points, %d raw, %d dropped", res, len(pts), wantRaw, wantDropped)
			}
			for tier, n := range wantAgg {
				if res.Aggregated[tier] != n {
					t.Fatalf("result %+v: %d points aggregated into %s, want %d", res, res.Aggregated[tier], tier, n)
				}
			}
			if name == "finite" && wantDropped == 0 || len(wantAgg) != 3 {
				t.Fatalf("the input reaches no dropped points or not every tier: %+v", res)
			}

			// Raw points, through the engine.
			rawSpan := tiers.Span{From: now - p.Tier(tiers.LevelRaw).Retention, To: now + 1}
			req := env.Req(series, rawSpan, router.Resolution{Kind: router.RawPoints})
			got, _, err := env.ReadAll(ctx, req, 10)
			if err != nil {
				t.Fatal(err)
			}
			var want []tiers.Row
			for _, row := range truth.Points(rawSpan) {
				if level[row.T] == tiers.LevelRaw {
					want = append(want, row)
				}
			}
			gotRows := make([]tiers.Row, len(got))
			for i, it := range got {
				gotRows[i] = it.Row
			}
			if !slices.Equal(gotRows, want) {
				t.Fatalf("raw: %d points, want %d", len(gotRows), len(want))
			}

			// Every rollup tier, straight from the store.
			for _, l := range p.Levels()[1:] {
				tier := p.Tier(l)
				span := tiers.Span{From: tiers.AlignDown(now-3*365*tiers.Day, tier.Step), To: now + 1}
				if tier.Retention > 0 {
					span.From = max(span.From, tiers.AlignUp(now-tier.Retention, tier.Step))
				}
				wantRows := map[int64]tiers.Row{}
				for ts, v := range truth {
					w := tiers.AlignDown(ts, tier.Step)
					if !span.Contains(w) || level[ts] > l {
						continue
					}
					row := wantRows[w]
					row.Add(tiers.PointRow(w, v))
					row.T = w
					wantRows[w] = row
				}
				gotRows := tierRows(t, env, l, series, span)
				if len(gotRows) != len(wantRows) {
					t.Fatalf("%s tier: %d windows, want %d", tier.Name, len(gotRows), len(wantRows))
				}
				for w, want := range wantRows {
					if got := gotRows[w]; got != want {
						t.Fatalf("%s window %d = %+v, want %+v", tier.Name, w, got, want)
					}
				}
				if len(wantRows) == 0 {
					t.Fatalf("%s tier: the test expects no rows at all", tier.Name)
				}
			}
		})
	}
}
