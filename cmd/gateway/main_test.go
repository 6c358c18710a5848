package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects a command's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve runs `gateway serve` with args until the returned stop is called;
// stop returns the exit code and the output.
func serve(t *testing.T, env map[string]string, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	addr := make(chan string, 1)
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Ready: func(a string) { addr <- a }}
	code := make(chan int, 1)
	go func() { code <- m.Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)) }()
	select {
	case a := <-addr:
		base = "http://" + a
	case c := <-code:
		t.Fatalf("serve exited with %d before listening:\n%s", c, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start:\n%s", out.String())
	}
	return base, func() (int, string) {
		cancel()
		select {
		case c := <-code:
			return c, out.String()
		case <-time.After(60 * time.Second):
			t.Fatalf("serve did not shut down:\n%s", out.String())
			return 0, ""
		}
	}
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The wired server answers every route it offers, shuts down cleanly on
// the signal, and what it acknowledged is there after a restart.
func TestServeWiresEverythingAndShutsDownCleanly(t *testing.T) {
	dir := t.TempDir()
	base, stop := serve(t, map[string]string{"GATEWAY_DATA_DIR": dir, "GATEWAY_ROLLUP_INTERVAL": "0"})
	now := time.Now().UnixMilli()
	status, body := httpDo(t, "POST", base+"/v1/points", fmt.Sprintf(`{"points":[{"series":"kept","t":%d,"v":42}]}`, now-1000))
	if status != 200 {
		t.Fatalf("write: %d %s", status, body)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}, {"GET", "/v1/series"},
		{"GET", "/v1/series/kept"}, {"GET", "/v1/series/kept/points?from=now-1h"},
		{"GET", "/v1/series/kept/plan?from=now-1h"}, {"POST", "/v1/admin/rollups/run"},
	} {
		if status, body := httpDo(t, c.method, base+c.path, ""); status != 200 {
			t.Errorf("%s %s: %d %s", c.method, c.path, status, body)
		}
	}
	_, metrics := httpDo(t, "GET", base+"/metrics", "")
	for _, name := range []string{"tsgate_http_requests_total", "tsgate_rollup_windows_recomputed_total", "tsgate_cache_hits_total", "go_goroutines"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code, out := stop(); code != 0 {
		t.Fatalf("serve exited with %d:\n%s", code, out)
	}
	base, stop = serve(t, map[string]string{"GATEWAY_DATA_DIR": dir})
	defer stop()
	if status, body := httpDo(t, "GET", base+"/v1/series/kept/points?from=now-1h&resolution=raw", ""); status != 200 || !strings.Contains(body, ",42]") {
		t.Fatalf("after a restart: %d %s", status, body)
	}
}

func TestServeRefusesAChangedLayout(t *testing.T) {
	dir := t.TempDir()
	_, stop := serve(t, map[string]string{"GATEWAY_DATA_DIR": dir})
	stop()
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	code := m.Run(context.Background(), []string{"serve", "--data-dir", dir, "--raw-bucket", "30m", "--addr", "127.0.0.1:0"})
	if code == 0 || !strings.Contains(out.String(), "raw: stored bucket 1h") {
		t.Fatalf("exit %d, output:\n%s", code, out.String())
	}
}

func TestBadConfigurationIsExplained(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", "sqlite"}, "--store must be embedded or cassandra"},
		{[]string{"serve", "--raw-retention", "soon"}, "raw-retention"},
		{[]string{"serve", "--read-parallelism", "0"}, "read parallelism"},
		{[]string{"nonsense"}, "unknown command"},
	} {
		out := &lockedBuffer{}
		m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
		if code := m.Run(context.Background(), c.args); code == 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: exit %d, output %q, want it to mention %q", c.args, code, out.String(), c.want)
		}
	}
}

func TestSchemaPrintsCQL(t *testing.T) {
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Run(context.Background(), []string{"schema", "--keyspace", "metrics"}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"CREATE KEYSPACE IF NOT EXISTS metrics", "metrics.points_raw", "TimeWindowCompactionStrategy", "metrics.rollup_1d"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("schema output lacks %q:\n%s", want, out.String())
		}
	}
}
