package promoracle_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/promoracle"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// TestPrometheusScrapesTheGateway has a real Prometheus server (Debian's,
// through scripts/prometheus.sh) scrape the gateway's /metrics and
// remote-write what it scrapes into the same gateway, on the embedded
// store, and finds the gateway's own metrics through the gateway's PromQL
// API, sample for sample as Prometheus holds them. The gateway keeps the
// wall clock here: Prometheus stamps what it scrapes with it.
func TestPrometheusScrapesTheGateway(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := gateway.DefaultConfig()
	cfg.Rollup.Interval = 0
	g, err := gateway.New(context.Background(), store, cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	promoracle.CheckScrape(t, srv.URL)
}
