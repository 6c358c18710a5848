//go:build integration

package integration

import (
	"testing"

	"github.com/tsgate/tsgate/testkit/promtest"
	"github.com/tsgate/tsgate/tiers"
)

// BenchmarkRemoteWriteOnCassandra is promapi's BenchmarkRemoteWrite over a
// Cassandra node: the same 10,000 points a request by Prometheus remote
// write and by POST /v1/points, points/s for each. Run it with a
// benchtime of its own (each request is one batch):
//
//	scripts/cassandra.sh run go test -tags integration -run '^$' -bench RemoteWriteOnCassandra -benchtime 20x -count 3 ./integration/
func BenchmarkRemoteWriteOnCassandra(b *testing.B) {
	store, _, _ := freshStore(b, tiers.DefaultPyramid())
	promtest.BenchRemoteWrite(b, store)
}
