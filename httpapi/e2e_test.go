package httpapi_test

import (
	"testing"
	"time"

	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/httpapi/apitest"
	"github.com/tsgate/tsgate/query/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// TestEndToEnd runs the end-to-end suite on in-memory embedded stores, one
// per scenario. The integration tests run it on Cassandra.
func TestEndToEnd(t *testing.T) {
	apitest.Run(t, func(t *testing.T) tiers.Store { return newMemStore(t, time.Now) })
}

// newMemStore opens an in-memory embedded store that decides expiry by
// now and closes with the test.
func newMemStore(t *testing.T, now func() time.Time) *embedded.Store {
	t.Helper()
	store, err := embedded.OpenInMemory(embedded.Options{Now: now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// testServer is the API over an in-memory embedded store, every answer
// checked against the contract (see apitest.Server).
type testServer struct {
	*apitest.Server
	t *testing.T
}

// newTestServer serves the API over a fresh in-memory embedded store that
// keeps time by the server's clock, so that a test may set it to a fixed
// time, in the past or not.
func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerWith(t, nil)
}

// newTestServerWith is newTestServer with its dependencies and
// configuration adjusted (tokens, limits).
func newTestServerWith(t *testing.T, adjust func(*httpapi.Deps, *httpapi.Config)) *testServer {
	t.Helper()
	var env *querytest.Env
	store := newMemStore(t, func() time.Time {
		if env == nil {
			return time.Now()
		}
		return env.Clock.Now()
	})
	s := apitest.ServeWith(t, querytest.NewEnv(t, store, store), adjust)
	env = s.Env
	return &testServer{Server: s, t: t}
}

// q encodes a query string of key, value pairs.
func q(kv ...string) string { return apitest.Query(kv...) }
