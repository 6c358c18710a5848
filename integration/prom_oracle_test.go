//go:build integration

package integration

// The PromQL oracle: the same samples go by remote write to a real
// Prometheus server and to the gateway on Cassandra, and every expression
// of the oracle's list must be answered alike by both (integration/
// promoracle). make integration-test runs these tests under
// scripts/prometheus.sh run, which sets PROMETHEUS_URL; without it they
// fail, they never skip.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/promoracle"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
)

// oracleContext ends with the test or after ten minutes.
func oracleContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestPromQLOracle sends the oracle's samples to the Prometheus server
// of PROMETHEUS_URL and to a gateway over a fresh keyspace, both by
// remote write, and compares their answers to every expression at every
// evaluation time, and the metadata endpoints. The gateway runs in this
// process with its clock at the instant the samples were placed by
// (storetest.Start, unless the server already holds samples that recent:
// then later), so that its retention and clock-skew checks take them as
// they are. It also checks the series ids the contract derives from the
// label sets.
func TestPromQLOracle(t *testing.T) {
	ctx := oracleContext(t)
	ref := promoracle.FromEnv(t)
	now, err := promoracle.Place(ctx, ref, storetest.Start())
	if err != nil {
		t.Fatal(err)
	}
	set := promoracle.NewSet(now)

	env := querytest.NewEnv(t, openStore(t), querytest.Options{Clock: querytest.NewClock(now)})
	srv := httptest.NewServer(env.Gateway.Handler())
	t.Cleanup(srv.Close)
	gw := promoracle.Gateway("gateway on Cassandra", srv.URL)

	start := time.Now()
	for _, target := range []*promoracle.Target{ref, gw} {
		if err := target.Send(ctx, set); err != nil {
			t.Fatalf("remote write of the sample set: %v", err)
		}
	}
	t.Logf("sent %d samples of %d series (placed by %s) to both in %s", set.Samples(), len(set.Series),
		now.Format(time.RFC3339), time.Since(start).Round(time.Millisecond))
	if diffs := promoracle.SeriesIDs(ctx, http.DefaultClient, srv.URL, nil, set); len(diffs) > 0 {
		t.Errorf("series ids:\n  %s", strings.Join(diffs, "\n  "))
	}

	start = time.Now()
	rep := promoracle.Compare(ctx, ref, gw, set)
	t.Logf("compared in %s", time.Since(start).Round(time.Millisecond))
	if rep.Failed() {
		t.Fatal(rep)
	}
	t.Log(rep)
}

// TestPromQLOracleAgainstPrometheus compares the Prometheus server of
// PROMETHEUS_URL with a second one started for the test, given the same
// samples: the case list must be answered alike by Prometheus and itself
// (no answer may depend on the order of ties or on timing), every case
// must find data, and the reference must take every expression. It keeps
// the oracle honest whatever the gateway does.
func TestPromQLOracleAgainstPrometheus(t *testing.T) {
	ctx := oracleContext(t)
	ref := promoracle.FromEnv(t)
	second := promoracle.StartServer(t, promoracle.ServerOptions{})
	now, err := promoracle.Place(ctx, ref, storetest.Start())
	if err != nil {
		t.Fatal(err)
	}
	set := promoracle.NewSet(now)
	for _, target := range []*promoracle.Target{ref, second} {
		if err := target.Send(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	rep := promoracle.Compare(ctx, ref, second, set)
	if rep.Failed() {
		t.Fatal(rep)
	}
	t.Log(rep)
}

// TestPrometheusScrapesTheGatewayOnCassandra runs the gateway binary on
// a fresh keyspace, as an operator runs it, and has a real Prometheus
// server scrape its /metrics and remote-write what it scrapes into it:
// the gateway's own metrics come back through its PromQL API, sample for
// sample as Prometheus holds them (promoracle.CheckScrape).
func TestPrometheusScrapesTheGatewayOnCassandra(t *testing.T) {
	_, flags := kafkaKeyspace(t)
	g := startGateway(t, buildGatewayBinary(t), "scraped", flags...)
	promoracle.CheckScrape(t, g.url)
}
