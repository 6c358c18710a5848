package promoracle_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/promoracle"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// TestPromQLOracleOnTheEmbeddedStore is the oracle of the integration
// tests on the embedded store, with a Prometheus server of its own: the
// same samples by remote write to both, every expression at every
// evaluation time asked of both, the answers alike. The gateway and its
// store keep time by the instant the samples were placed by.
func TestPromQLOracleOnTheEmbeddedStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := promoracle.StartServer(t, promoracle.ServerOptions{})
	clock := querytest.NewClock(now)
	store, err := embedded.OpenInMemory(embedded.Options{Now: clock.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := querytest.NewEnv(t, store, querytest.Options{Clock: clock})
	srv := httptest.NewServer(env.Gateway.Handler())
	t.Cleanup(srv.Close)
	gw := promoracle.Gateway("gateway on the embedded store", srv.URL)

	set := promoracle.NewSet(now)
	for _, target := range []*promoracle.Target{ref, gw} {
		if err := target.Send(ctx, set); err != nil {
			t.Fatalf("remote write of the sample set: %v", err)
		}
	}
	if diffs := promoracle.SeriesIDs(ctx, http.DefaultClient, srv.URL, nil, set); len(diffs) > 0 {
		t.Errorf("series ids:\n  %s", strings.Join(diffs, "\n  "))
	}
	rep := promoracle.Compare(ctx, ref, gw, set)
	if rep.Failed() {
		t.Fatal(rep)
	}
	t.Log(rep)
}
