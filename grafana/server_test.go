package grafana_test

import (
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
)

// testServer is the gateway over an in-memory embedded store, every answer
// checked against the contract (see apitest.Server).
type testServer struct {
	*apitest.Server
	t *testing.T
}

func newTestServer(t *testing.T) *testServer {
	return &testServer{Server: apitest.NewMemServer(t), t: t}
}
