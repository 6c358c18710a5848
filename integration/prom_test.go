//go:build integration

package integration

import (
	"testing"

	"github.com/tsgate/tsgate/testkit/promtest"
)

// TestPrometheusAPIOnCassandra runs the Prometheus API's behavioural
// suite — the one the embedded store passes — on Cassandra: every answer,
// read through the Prometheus Go client, equals brute force.
func TestPrometheusAPIOnCassandra(t *testing.T) {
	promtest.Run(t, openStore(t))
}
