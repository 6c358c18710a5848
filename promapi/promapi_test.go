package promapi_test

import (
	"testing"
	"time"

	"github.com/tsgate/tsgate/promapi/promtest"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// TestSuite runs the behavioural suite on an in-memory embedded store;
// the integration tests run it on Cassandra.
func TestSuite(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: time.Now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	promtest.Run(t, store)
}
