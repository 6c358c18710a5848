package query_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

func TestEngineOnEmbeddedStore(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	querytest.Run(t, store, tiers.DefaultPyramid())
}

// The read path's whole suite — answers equal brute force from every tier,
// the paging law with limits, budgets and failing partitions — holds on a
// configured pyramid with a 10s tier under the minute tier.
func TestEngineOnFiveTierPyramid(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	querytest.Run(t, store, storetest.FiveTiers())
}

// A read of a range longer than a tier's retention only touches buckets that
// can still hold rows, however old the series is.
func TestExpiredBucketsAreNotRead(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(t, store, querytest.Options{})
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	if err := store.NoteSeries(ctx, []tiers.SeriesInfo{{ID: "old", First: now - 400*tiers.Day, Last: now}}); err != nil {
		t.Fatal(err)
	}
	req := env.Req("old", tiers.Span{From: now - 365*tiers.Day, To: now}, router.Resolution{Kind: router.RawPoints})
	req.Limit = 10
	p, err := env.Read(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	maxBuckets := int64(7*24 + 2) // the raw tier keeps 7 days of 1 h buckets
	if p.Trailer.Stats.Buckets > maxBuckets || p.Trailer.Partial {
		t.Fatalf("a year of raw range read %d buckets (%+v); at most %d can hold points", p.Trailer.Stats.Buckets, p.Trailer, maxBuckets)
	}
	if len(p.Plan.Warnings) != 1 {
		t.Fatalf("warnings %v, want the retention warning", p.Plan.Warnings)
	}
}

// A page that would plan more partitions than the bound is refused before
// any read, naming the parameter and a resolution that fits; /plan still
// shows the count.
func TestMaxPartitions(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(t, store, querytest.Options{Configure: func(c *gateway.Config) { c.Query.MaxPartitions = 100 }})
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	var pts []ingest.Point
	for ts := now - 6*tiers.Day; ts < now; ts += tiers.Hour {
		pts = append(pts, ingest.Point{Series: "wide", T: ts, V: 1})
	}
	if _, err := env.Writer.Backfill(ctx, pts); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	req := env.Req("wide", tiers.Span{From: now - 6*tiers.Day, To: now}, router.Resolution{Kind: router.RawPoints})
	_, err = env.Read(ctx, req)
	var pe *params.Error
	if !errors.Is(err, query.ErrTooManyPartitions) || !errors.As(err, &pe) || pe.Param != "resolution" || !strings.Contains(pe.Message, "limit of 100") || !strings.Contains(pe.Message, "resolution=1m") {
		t.Fatalf("6 days raw (576 partitions) with a bound of 100: %v", err)
	}
	ex, err := env.Engine.Explain(ctx, req)
	if err != nil {
		t.Fatalf("plan of the same read: %v", err)
	}
	n := 0
	for b := range ex.Buckets {
		n += b.Partitions
	}
	if n != 6*24*4 && n != 6*24*4+4 {
		t.Fatalf("the plan counts %d partitions", n)
	}
	req.Resolution = router.Resolution{Kind: router.Window, Window: tiers.Minute}
	if _, err := env.Read(ctx, req); err != nil {
		t.Fatalf("the suggested resolution: %v", err)
	}
}

// Windows that are one rollup row each — the minute and hour tiers read at
// their own steps — come from cached buckets in batches, and every page
// equals the same read without the cache: any limit, either order, any
// aggregates, cursors followed.
func TestCachedRollupRowsAnswerTheSame(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 60 * tiers.Day
	p[1].Retention = 120 * tiers.Day
	cold := querytest.NewEnv(t, store, querytest.Options{Pyramid: p})
	warm := querytest.NewEnv(t, store, querytest.Options{Pyramid: p, Clock: cold.Clock, Configure: func(c *gateway.Config) { c.CacheBytes = 64 << 20 }})
	ctx := context.Background()
	end := tiers.AlignDown(cold.Clock.Now().UnixMilli(), p[2].BucketWidth)
	span := tiers.Span{From: end - 10*tiers.Day, To: end}
	r := rand.New(rand.NewPCG(5, 6))
	var batch []ingest.Point
	for t := span.From; t < span.To; t += tiers.Minute {
		// Values with long decimals, and gaps: some windows are missing.
		if r.IntN(50) > 0 {
			batch = append(batch, ingest.Point{Series: "rows", T: t + r.Int64N(tiers.Minute), V: r.Float64() * 1000})
		}
	}
	if _, err := cold.Writer.Backfill(ctx, batch); err != nil {
		t.Fatal(err)
	}
	cold.Clock.Advance(5 * time.Minute)
	if _, err := cold.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	// Past the raw retention no late point can correct a rollup row: their
	// buckets are final, and cacheable.
	cold.Clock.Advance(61 * 24 * time.Hour)
	compared := 0
	aggSets := [][]query.Agg{{query.Avg}, {query.Min, query.Max, query.Avg, query.Count}, {query.Count, query.Sum}}
	for i := range 40 {
		step := []int64{tiers.Minute, tiers.Hour}[i%2]
		a, b := span.From+r.Int64N(10*tiers.Day), span.From+r.Int64N(10*tiers.Day)
		req := cold.Req("rows", tiers.Span{From: min(a, b), To: max(a, b) + 1}, router.Resolution{Kind: router.Window, Window: step})
		req.Desc, req.Limit, req.Aggs = r.IntN(2) == 0, []int{7, 500, 100000}[r.IntN(3)], aggSets[r.IntN(len(aggSets))]
		want, _, err := cold.ReadAll(ctx, req, 100000)
		if err != nil {
			t.Fatal(err)
		}
		compared += len(want)
		for range 2 { // loads the buckets, then reads them from memory
			got, _, err := warm.ReadAll(ctx, req, 100000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, limit %d, desc %v, aggs %v: %d windows from the cache, want %d", step, req.Limit, req.Desc, req.Aggs, len(got), len(want))
			}
		}
	}
	if compared == 0 {
		t.Fatal("every read was empty")
	}
	if n := warm.WindowBatches(); n < int64(compared) {
		t.Fatalf("%d windows of one rollup row were handed over in batches, of the %d compared twice", n, compared)
	}
}
