package httpapi_test

import (
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// TestLayoutAdministration runs the suite of layout changes, auto-split and
// blocked series on in-memory embedded stores; the integration tests run
// it on Cassandra.
func TestLayoutAdministration(t *testing.T) {
	apitest.RunLayouts(t, func(t *testing.T) tiers.Store { return newMemStore(t, querytest.Start) })
}
