//go:build cluster

// Package cluster holds the tests of the gateway on a real three-node
// Cassandra cluster: nodes killed under load, too few replicas, a slow or
// unreachable node, a gateway started before its cluster, and several
// gateways on one keyspace. Each scenario serves the HTTP API over the
// Cassandra store (testkit/apitest, every answer checked against the
// contract) and faults the cluster for real: nodes are killed with
// SIGKILL and restarted by scripts/cassandra.sh, and network faults are
// injected by Toxiproxy, run as a library in the test process, with the
// store's address translation routing a node through it.
//
// The tests are built only with the "cluster" tag and need
// CASSANDRA_CLUSTER_HOSTS, the native addresses of the nodes in order (node
// i at 127.0.0.i); "make cluster-test" starts a cluster with
// `scripts/cassandra.sh cluster run` and sets it. Without a reachable
// cluster they fail, they never skip. The tests kill and restart nodes, so
// they run one after another and leave every node running when they end.
package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	assembly "github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

var (
	// nodes are the native addresses of the nodes, node i at nodes[i-1].
	nodes []string
	// keyspace is the keyspace most tests share, replicated to every node.
	keyspace string
	script   string
)

func TestMain(m *testing.M) {
	for _, h := range strings.Split(os.Getenv("CASSANDRA_CLUSTER_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			nodes = append(nodes, h)
		}
	}
	if len(nodes) < 3 {
		fmt.Fprintln(os.Stderr, "cluster: CASSANDRA_CLUSTER_HOSTS must name the three nodes of a cluster; run `make cluster-test` or `scripts/cassandra.sh cluster run go test -tags cluster ./integration/cluster/`")
		os.Exit(1)
	}
	abs, err := filepath.Abs("../../scripts/cassandra.sh")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	script = abs
	ks, err := createKeyspace()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
	keyspace = ks
	code := m.Run()
	if err := dropKeyspace(ks); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: drop keyspace %s: %v\n", ks, err)
	}
	os.Exit(code)
}

// baseConfig is the store's configuration for keyspace ks: every node a
// contact point, LOCAL_QUORUM, three replicas in datacenter1.
func baseConfig(ks string) cassandra.Config {
	cfg := cassandra.DefaultConfig()
	cfg.Hosts = nodes
	cfg.Keyspace = ks
	cfg.Consistency = "LOCAL_QUORUM"
	cfg.LocalDC = "datacenter1"
	cfg.Replication = "datacenter1:3"
	cfg.Timeout = 5 * time.Second
	cfg.ReconnectInterval = time.Second
	// Expiry is decided by the clock the tests place their data by.
	cfg.Now = storetest.Start
	return cfg
}

// createKeyspace creates a keyspace with the gateway's schema the way
// `gateway schema --apply --cassandra-replication datacenter1:3` does, and
// checks that it is replicated three times by NetworkTopologyStrategy.
func createKeyspace() (string, error) {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	ks := "cl_" + hex.EncodeToString(b)
	cfg := baseConfig(ks)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if err := cassandra.ApplySchema(ctx, cfg, tiers.DefaultPyramid()); err != nil {
		return "", fmt.Errorf("apply schema: %w", err)
	}
	s, err := session()
	if err != nil {
		return "", err
	}
	defer s.Close()
	var repl map[string]string
	if err := s.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).ScanContext(ctx, &repl); err != nil {
		return "", err
	}
	if repl["class"] != "org.apache.cassandra.locator.NetworkTopologyStrategy" || repl["datacenter1"] != "3" || len(repl) != 2 {
		return "", fmt.Errorf("keyspace %s has replication %v, want NetworkTopologyStrategy with datacenter1: 3", ks, repl)
	}
	fmt.Fprintf(os.Stderr, "cluster: keyspace %s (datacenter1: 3) created in %s\n", ks, time.Since(start).Round(time.Millisecond))
	return ks, nil
}

func dropKeyspace(ks string) error {
	s, err := session()
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.Query("DROP KEYSPACE IF EXISTS " + ks).ExecContext(ctx)
}

// session is a plain driver session on the cluster, for checks below the
// store.
func session() (*gocql.Session, error) {
	c := gocql.NewCluster(nodes...)
	c.Consistency = gocql.LocalQuorum
	// Schema changes on a shared, loaded machine can take a while.
	c.Timeout = 30 * time.Second
	c.ConnectTimeout = 5 * time.Second
	return c.CreateSession()
}

// logger logs the store's warnings to stderr; not through t.Log, since the
// driver may still log from its goroutines after a test has ended.
func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openStore opens the store with cfg and closes it when the test ends.
func openStore(t *testing.T, cfg cassandra.Config) *cassandra.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := cassandra.Open(ctx, cfg, tiers.DefaultPyramid(), logger())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// gateway serves the HTTP API over a store opened with cfg, with its clock
// at now; configure, if given, adjusts the gateway's configuration.
func gateway(t *testing.T, cfg cassandra.Config, now time.Time, configure ...func(*assembly.Config)) *apitest.Server {
	t.Helper()
	store := openStore(t, cfg)
	opts := querytest.Options{}
	if len(configure) > 0 {
		opts.Configure = configure[0]
	}
	srv := apitest.Serve(t, querytest.NewEnv(t, store, opts))
	srv.SetClock(now)
	return srv
}

// killed remembers the nodes a test killed, to restart them at its end.
var (
	killedMu sync.Mutex
	killed   = map[int]bool{}
)

// clusterCmd runs scripts/cassandra.sh cluster ARGS.
func clusterCmd(t *testing.T, args ...string) {
	t.Helper()
	if err := runCluster(t, args...); err != nil {
		t.Fatal(err)
	}
}

// runCluster runs scripts/cassandra.sh cluster ARGS; it may be called from
// any goroutine.
func runCluster(t *testing.T, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(script, append([]string{"cluster"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cassandra.sh cluster %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("cluster %s (%s): %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), strings.TrimSpace(out.String()))
	return nil
}

// kill kills node n with SIGKILL; it is restarted when the test ends.
func kill(t *testing.T, n int) {
	t.Helper()
	killedMu.Lock()
	first := len(killed) == 0
	killed[n] = true
	killedMu.Unlock()
	if first {
		t.Cleanup(func() { restartKilled(t) })
	}
	clusterCmd(t, "kill", fmt.Sprint(n))
}

// restart restarts killed nodes, all at once, and waits until they answer
// CQL.
func restart(t *testing.T, ns ...int) {
	t.Helper()
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = runCluster(t, "restart", fmt.Sprint(n)) })
	}
	wg.Wait()
	for i, n := range ns {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		killedMu.Lock()
		delete(killed, n)
		killedMu.Unlock()
	}
}

func restartKilled(t *testing.T) {
	killedMu.Lock()
	var ns []int
	for n := range killed {
		ns = append(ns, n)
	}
	killedMu.Unlock()
	restart(t, ns...)
	// The next test starts with every node up and seen up by the others.
	waitFor(t, 60*time.Second, "every node to serve quorum reads", func() error {
		return quorumEverywhere()
	})
}

// quorumEverywhere reads at QUORUM through each node as coordinator.
func quorumEverywhere() error {
	for _, n := range nodes {
		c := gocql.NewCluster(n)
		c.HostFilter = gocql.WhiteListHostFilter(n)
		c.Consistency = gocql.Quorum
		c.Timeout = 3 * time.Second
		c.ConnectTimeout = 3 * time.Second
		s, err := c.CreateSession()
		if err != nil {
			return err
		}
		var v []byte
		err = s.Query("SELECT value FROM " + keyspace + ".gateway_meta WHERE name = 'probe'").Scan(&v)
		s.Close()
		if err != nil && err != gocql.ErrNotFound {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

// waitFor polls check until it succeeds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("waited %s for %s: %v", limit, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
