package promapi_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/promtest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// TestSuite runs the behavioural suite on an in-memory embedded store;
// the integration tests run it on Cassandra.
func TestSuite(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	promtest.Run(t, store)
}

// TestPartitionBound checks that the engine's --max-partitions refusal
// reaches a Prometheus client as bad_data that says what to change.
func TestPartitionBound(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := promtest.NewServerWith(t, store, querytest.Options{Configure: func(c *gateway.Config) { c.Query.MaxPartitions = 50 }})
	s.Load(t, "bound", rand.New(rand.NewPCG(3, 4)))
	now := s.Env.Clock.Now()
	rng := v1.Range{Start: now.Add(-23 * time.Hour), End: now.Add(-2 * time.Hour), Step: 5 * time.Minute}
	// Raw points of 21 hourly buckets, 4 partitions each: refused.
	_, _, _, err = s.API.QueryRange(context.Background(), `tsgate{series="bound.plain.a"}`, rng)
	var e *v1.Error
	if !errors.As(err, &e) || e.Type != v1.ErrBadData || !strings.Contains(e.Msg, "partitions") {
		t.Fatalf("err = %v, want bad_data about partitions", err)
	}
}
