//go:build integration

package integration

import (
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// TestEndToEndOnCassandra runs the HTTP API's end-to-end suite — the one
// the embedded store passes — on Cassandra, each scenario on a fresh
// keyspace, every answer validated against the contract.
func TestEndToEndOnCassandra(t *testing.T) {
	apitest.Run(t, func(t *testing.T) tiers.Store { return openStore(t) })
}
