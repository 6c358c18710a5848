package query_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
	"github.com/tsgate/tsgate/tiers/storetest"
)

func TestEngineOnEmbeddedStore(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{})
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
	store, err := embedded.OpenInMemory(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	querytest.Run(t, store, storetest.FiveTiers())
}

// A read of a range longer than a tier's retention only touches buckets that
// can still hold rows, however old the series is.
func TestExpiredBucketsAreNotRead(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{})
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
	store, err := embedded.OpenInMemory(embedded.Options{})
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
