//go:build cluster

package cluster

import (
	"bytes"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/apitest"
)

// buildGateway builds the gateway binary into a temporary directory.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/gateway")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGatewayBeforeCluster starts the gateway binary while no node of its
// cluster runs: it keeps running, /healthz is ok, /readyz and the API say
// why the store is not ready. The nodes are then started by
// scripts/cassandra.sh; the same process becomes ready and reads and writes
// through every connection, and SIGTERM stops it promptly with status 0.
func TestGatewayBeforeCluster(t *testing.T) {
	bin := buildGateway(t)
	for n := range nodes {
		kill(t, n+1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--store", "cassandra",
		"--cassandra-hosts", strings.Join(nodes, ","), "--keyspace", keyspace,
		"--cassandra-consistency", "LOCAL_QUORUM", "--cassandra-local-dc", "datacenter1",
		"--cassandra-reconnect-interval", "1s", "--rollup-interval", "0")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	gw := &apitest.Server{Server: &httptest.Server{URL: "http://" + addr}}
	begin := time.Now()
	waitFor(t, 60*time.Second, "/healthz to answer", func() error {
		select {
		case <-exited:
			t.Fatalf("the gateway exited with no node up: %v\n%s", waitErr, out.String())
		default:
		}
		status, body, err := call(gw, "GET", "/healthz", nil)
		if err == nil && status != 200 {
			t.Fatalf("/healthz with no node up: %d %s", status, body)
		}
		return err
	})
	t.Logf("gateway up %v after start with no node running", time.Since(begin).Round(time.Millisecond))
	status, body, err := call(gw, "GET", "/readyz", nil)
	expectProblem(t, "/readyz", status, body, err, 503, "not ready: cassandra: not connected", nodes[0])
	// The cause is the network's own word for a node that is not serving:
	// refused once the node's port is closed, reset when the connection
	// met a listener the kernel was still tearing down.
	if !strings.Contains(string(body), "connection refused") && !strings.Contains(string(body), "connection reset") {
		t.Fatalf("/readyz: %s does not say why no node could be reached", body)
	}
	status, body, err = call(gw, "GET", "/v1/series", nil)
	expectProblem(t, "list series", status, body, err, 503, "store-unavailable")
	// What needs no store is served meanwhile.
	for _, path := range []string{"/metrics", "/docs", "/openapi.yaml", "/"} {
		if status, body, err := call(gw, "GET", path, nil); err != nil || status != 200 {
			t.Fatalf("GET %s with no node up: %d %.200s %v", path, status, body, err)
		}
	}
	resp, err := httpClient.Get(gw.URL + "/v1/series")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET /v1/series with no node up: %d without Retry-After", resp.StatusCode)
	}
	s := uniq("early")
	now := time.Now().UnixMilli()
	status, body, err = call(gw, "POST", "/v1/points", writeBody(s, []point{{now - 1000, 1}}))
	expectProblem(t, "write", status, body, err, 503, "store-unavailable")

	// The seed first, then the others, as `cluster start` does.
	restart(t, 1)
	restart(t, 2, 3)
	waitFor(t, 60*time.Second, "every node to serve quorum reads", quorumEverywhere)
	d := waitFor(t, 60*time.Second, "/readyz to say ready", func() error {
		status, body, err := call(gw, "GET", "/readyz", nil)
		if err != nil {
			t.Fatalf("/readyz once the nodes run: %v\n%s", err, out.String())
		}
		if status != 200 {
			return fmt.Errorf("%d %s", status, body)
		}
		return nil
	})
	t.Logf("ready %v after the nodes ran", d.Round(time.Millisecond))

	// The gateway runs on the wall clock: the points are the last ten
	// minutes before now, read raw over a range that holds them whatever
	// hour, day or bucket now falls in.
	now = time.Now().UnixMilli()
	pts := sawtooth(now-600_000, 1000, 590)
	mustWrite(t, gw, s, pts)
	for range 5 {
		got := readAll(t, gwList(gw), s, params("from", ms(now-3_600_000), "to", ms(now), "resolution", "raw", "limit", "100"))
		sameRows(t, "once the nodes run", got, rawRows(pts))
		for _, path := range []string{"/healthz", "/readyz", "/v1/series?prefix=" + s} {
			if status, body, err := call(gw, "GET", path, nil); err != nil || status != 200 {
				t.Fatalf("GET %s once the nodes run: %d %s %v", path, status, body, err)
			}
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("the gateway exited with %v after SIGTERM:\n%s", waitErr, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the gateway did not exit within 15 s of SIGTERM:\n%s", out.String())
	}
}
