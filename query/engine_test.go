package query_test

import (
	"context"
	"testing"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

func TestEngineOnEmbeddedStore(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	querytest.Run(t, store)
}

// A read of a range longer than a tier's retention only touches buckets that
// can still hold rows, however old the series is.
func TestExpiredBucketsAreNotRead(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(t, store, store)
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	if err := store.NoteSeries(ctx, []tiers.SeriesInfo{{ID: "old", First: now - 400*tiers.Day, Last: now}}); err != nil {
		t.Fatal(err)
	}
	p, err := env.Read(ctx, query.Request{Series: "old", Span: tiers.Span{From: now - 365*tiers.Day, To: now},
		Resolution: router.Resolution{Kind: router.RawPoints}, Limit: 10})
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
