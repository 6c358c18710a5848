//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// openStore creates a fresh keyspace with the gateway's schema and opens
// the Cassandra store on it.
func openStore(t *testing.T) *cassandra.Store {
	t.Helper()
	s := newSession(t)
	ks := newKeyspace(t, s)
	cfg := storeConfig(t, s, ks)
	p := tiers.DefaultPyramid()
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
	return store
}

// TestQueryBehaviourOnCassandra runs the read and write paths' behavioural
// suite — the one the embedded store passes — on Cassandra: answers of
// every tier and step equal brute force after late data and a rollup run,
// and the paging law holds under limits, budgets and store failures.
func TestQueryBehaviourOnCassandra(t *testing.T) {
	store := openStore(t)
	start := time.Now()
	querytest.Run(t, store)
	t.Logf("behavioural suite ran in %s", time.Since(start).Round(time.Millisecond))
}
