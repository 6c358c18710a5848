package httpapi_test

import (
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// TestEndToEnd runs the end-to-end suite on in-memory embedded stores, one
// per scenario. The integration tests run it on Cassandra.
func TestEndToEnd(t *testing.T) {
	apitest.Run(t, func(t *testing.T) tiers.Store { return newMemStore(t, querytest.Start) })
}

func newMemStore(t *testing.T, now func() time.Time) *embedded.Store {
	return apitest.NewMemStore(t, now)
}

// testServer is the API over an in-memory embedded store, every answer
// checked against the contract (see apitest.Server).
type testServer struct {
	*apitest.Server
	t *testing.T
}

func newTestServer(t *testing.T) *testServer {
	return &testServer{Server: apitest.NewMemServer(t), t: t}
}

// q encodes a query string of key, value pairs.
func q(kv ...string) string { return apitest.Query(kv...) }
