//go:build integration

// Package integration holds tests that run against a real Cassandra cluster.
//
// They are built only with the "integration" tag and need CASSANDRA_HOSTS
// (comma-separated host:port list); "make test" starts a local node with
// scripts/cassandra.sh and sets it. Without a reachable cluster the tests fail,
// they never skip.
package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// connectWait is how long TestMain keeps trying to reach the cluster.
const connectWait = 30 * time.Second

var hosts []string

func TestMain(m *testing.M) {
	for _, h := range strings.Split(os.Getenv("CASSANDRA_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		fmt.Fprintln(os.Stderr, "integration: CASSANDRA_HOSTS is not set; run `make test` or set it to host:port of a Cassandra cluster")
		os.Exit(1)
	}
	if ks := os.Getenv(sealCrashKeyspaceEnv); ks != "" {
		sealCrashChild(ks)
	}
	if err := waitForCluster(connectWait); err != nil {
		fmt.Fprintf(os.Stderr, "integration: Cassandra at %s is not reachable after %s: %v\n", strings.Join(hosts, ","), connectWait, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// waitForCluster retries connecting and querying until it works or wait elapses.
func waitForCluster(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := ping()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

func ping() error {
	s, err := newCluster().CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	var v string
	return s.Query("SELECT release_version FROM system.local").Scan(&v)
}

// newCluster returns the driver configuration shared by the integration tests.
func newCluster() *gocql.ClusterConfig {
	c := gocql.NewCluster(hosts...)
	c.Timeout = 10 * time.Second
	c.ConnectTimeout = 5 * time.Second
	c.Consistency = gocql.LocalQuorum
	c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy(), gocql.ShuffleReplicas())
	return c
}

// newSession connects to CASSANDRA_HOSTS and closes the session when the test ends.
func newSession(t testing.TB) *gocql.Session {
	t.Helper()
	s, err := newCluster().CreateSession()
	if err != nil {
		t.Fatalf("connect to %s: %v", strings.Join(hosts, ","), err)
	}
	t.Cleanup(s.Close)
	return s
}

// newKeyspace creates a keyspace with a unique name, replicated once in the
// data center of the coordinator (datacenter1 on the local test node), and
// drops it when the test ends.
func newKeyspace(t testing.TB, s *gocql.Session) string {
	t.Helper()
	ctx := testContext(t)
	var dc string
	if err := s.Query("SELECT data_center FROM system.local").ScanContext(ctx, &dc); err != nil {
		t.Fatalf("read local data center: %v", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	ks := "it_" + hex.EncodeToString(b)
	stmt := fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'NetworkTopologyStrategy', '%s': 1}", ks, dc)
	if err := schemaChange(ctx, s, stmt); err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	t.Cleanup(func() {
		// Dropping a keyspace flushes its tables, which can take longer
		// than the driver's request timeout on a busy machine; the drop
		// goes on on the server, and a retry finds it done. A keyspace
		// left behind costs disk, not correctness: its name is unique.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var err error
		for range 4 {
			if err = s.Query("DROP KEYSPACE IF EXISTS " + ks).ExecContext(ctx); err == nil {
				return
			}
		}
		t.Logf("drop keyspace %s: %v (left behind)", ks, err)
	})
	return ks
}

// schemaChange runs an idempotent schema statement (the keyspace's
// creation), again when the driver times out: on a loaded node a keyspace
// change can take longer than the driver's timeout while still being
// applied.
func schemaChange(ctx context.Context, s *gocql.Session, stmt string) error {
	var err error
	for range 4 {
		if err = s.Query(stmt).ExecContext(ctx); err == nil || !errors.Is(err, gocql.ErrTimeoutNoResponse) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// testContext returns a context that ends with the test or after two minutes.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
