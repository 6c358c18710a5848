//go:build integration

package integration

import (
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// TestLayoutAdministrationOnCassandra runs the suite of layout changes,
// auto-split and blocked series — the one the embedded store passes — on
// Cassandra, each scenario on a fresh keyspace: a read across a layout
// change equals brute force, paged or not, on two instances; a split keeps
// later partitions under the limit; a blocked series never reaches its
// partitions.
func TestLayoutAdministrationOnCassandra(t *testing.T) {
	apitest.RunLayouts(t, func(t *testing.T) tiers.Store { return openStore(t) })
}
