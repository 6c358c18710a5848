//go:build integration

package integration

import (
	"testing"

	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// freshStore creates a keyspace with a unique name and the gateway's
// schema for p, and opens the Cassandra store on it; the store is closed
// and the keyspace dropped when the test ends. It also returns the session
// (for checks below the store) and the store's configuration, which
// configure may adjust first.
func freshStore(t testing.TB, p tiers.Pyramid, configure ...func(*cassandra.Config)) (*cassandra.Store, *gocql.Session, cassandra.Config) {
	t.Helper()
	s := newSession(t)
	ks := newKeyspace(t, s)
	cfg := storeConfig(t, s, ks)
	for _, c := range configure {
		c(&cfg)
	}
	ctx := testContext(t)
	if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	store, err := cassandra.Open(ctx, cfg, p, storeLogger())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return store, s, cfg
}

// openStore is a fresh store with the default tiers.
func openStore(t *testing.T) *cassandra.Store {
	t.Helper()
	store, _, _ := freshStore(t, tiers.DefaultPyramid())
	return store
}

// TestQueryBehaviourOnCassandra runs the read and write paths' behavioural
// suite — the one the embedded store passes — on Cassandra: answers of
// every tier and step equal brute force after late data and a rollup run,
// and the paging law holds under limits, budgets and store failures.
func TestQueryBehaviourOnCassandra(t *testing.T) {
	store := openStore(t)
	start := time.Now()
	querytest.Run(t, store, tiers.DefaultPyramid())
	t.Logf("behavioural suite ran in %s", time.Since(start).Round(time.Millisecond))
}

// TestFiveTierPyramidOnCassandra runs the conformance suite and the read
// paths' suite on a pyramid with a 10s tier under the minute tier: its
// table is created by the schema the pyramid implies, and every answer
// still equals brute force.
func TestFiveTierPyramidOnCassandra(t *testing.T) {
	p := storetest.FiveTiers()
	store, _, _ := freshStore(t, p)
	t.Run("Conformance", func(t *testing.T) { storetest.Run(t, store, p) })
	t.Run("Queries", func(t *testing.T) { querytest.Run(t, store, p) })
}
