package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
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

// testClock is the clock of the commands the tests run: fixed at
// querytest.Start, so that where data lands in hours and days is the same
// on every run.
func testClock() time.Time { return querytest.Start() }

// serve runs `gateway serve` with args until the returned stop is called;
// stop returns the exit code and the output.
func serve(t *testing.T, env map[string]string, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	addr := make(chan string, 1)
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Ready: func(a string) { addr <- a }, Now: testClock}
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
	now := testClock().UnixMilli()
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
	for _, name := range []string{"tsgate_http_requests_total", "tsgate_rollup_windows_recomputed_total", "tsgate_cache_hits_total", "go_goroutines",
		`tsgate_build_info{goversion="go`, `tsgate_read_partitions_total{tier="raw"}`, `tsgate_read_page_seconds_count{tier="raw"}`,
		`tsgate_store_read_seconds_count{table="points_raw"}`, `tsgate_store_write_seconds_count{outcome="ok"}`} {
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
		{[]string{"serve", "--embedded-compression", "lz4"}, "--embedded-compression must be snappy or zstd"},
		{[]string{"serve", "--embedded-memtable-bytes", "1000"}, "--embedded-memtable-bytes must be between 1 MiB and 1 GiB"},
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

// fiveTiers is a pyramid with a 10s tier under the minute tier, as a
// --tiers value and as the YAML list of a config file.
const fiveTiers = "name=raw,bucket=1h,event-buckets=4,retention=7d,auto-max=1h;" +
	"name=10s,step=10s,bucket=6h,retention=14d,auto-max=1d;" +
	"name=minute,step=1m,bucket=1d,retention=30d,auto-max=7d;" +
	"name=hour,step=1h,bucket=30d,retention=365d,auto-max=90d;" +
	"name=day,step=1d,bucket=365d,retention=0"

const fiveTiersYAML = `tiers:
  - {name: raw, bucket: 1h, event-buckets: 4, retention: 7d, auto-max: 1h}
  - {name: 10s, step: 10s, bucket: 6h, retention: 14d, auto-max: 1d}
  - {name: minute, step: 1m, bucket: 1d, retention: 30d, auto-max: 7d}
  - {name: hour, step: 1h, bucket: 30d, retention: 365d, auto-max: 90d}
  - {name: day, step: 1d, bucket: 365d, retention: 0}
`

// Adding a tier is configuration: serve takes a five-tier pyramid from the
// flag or a config file, answers from the 10s tier with its name, pages
// through it with cursors, and a store written with it refuses another
// pyramid.
func TestServeConfiguredPyramid(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(fiveTiersYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	for run, args := range [][]string{{"--tiers", fiveTiers}, {"--config", cfg}} {
		series := fmt.Sprintf("five-%d", run)
		base, stop := serve(t, map[string]string{"GATEWAY_DATA_DIR": dir, "GATEWAY_ROLLUP_INTERVAL": "0"}, args...)
		now := testClock().UnixMilli()
		var pts []string
		for i := range 600 {
			pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%d}`, series, now-2*tiers.Hour+int64(i)*12*tiers.Second, i%7))
		}
		if status, body := httpDo(t, "POST", base+"/v1/points", `{"points":[`+strings.Join(pts, ",")+`]}`); status != 200 {
			t.Fatalf("%v: write: %d %s", args, status, body)
		}
		if status, body := httpDo(t, "POST", base+"/v1/admin/rollups/run", ""); status != 200 {
			t.Fatalf("%v: rollups: %d %s", args, status, body)
		}
		var a struct {
			Tier         string      `json:"tier"`
			ResolutionMs int64       `json:"resolution_ms"`
			Points       [][]float64 `json:"points"`
			NextCursor   string      `json:"next_cursor"`
			Segments     []struct {
				Tier string `json:"tier"`
			} `json:"segments"`
		}
		status, body := httpDo(t, "GET", base+"/v1/series/"+series+"/points?from=now-2h&agg=count&limit=100", "")
		if err := json.Unmarshal([]byte(body), &a); status != 200 || err != nil {
			t.Fatalf("%v: read: %d %s", args, status, body)
		}
		if a.Tier != "10s" || a.ResolutionMs != 10000 || len(a.Points) != 100 || a.NextCursor == "" || a.Segments[0].Tier != "10s" {
			t.Fatalf("%v: 2h at auto: tier %s step %d, %d points, segments %+v", args, a.Tier, a.ResolutionMs, len(a.Points), a.Segments)
		}
		total := len(a.Points)
		for a.NextCursor != "" {
			cursor := a.NextCursor
			a.NextCursor, a.Points = "", nil
			status, body = httpDo(t, "GET", base+"/v1/series/"+series+"/points?from=now-2h&agg=count&limit=100&cursor="+cursor, "")
			if err := json.Unmarshal([]byte(body), &a); status != 200 || err != nil {
				t.Fatalf("%v: page: %d %s", args, status, body)
			}
			total += len(a.Points)
		}
		if total < 590 || total > 601 {
			t.Fatalf("%v: paging the 10s windows gave %d windows for 600 points 12s apart", args, total)
		}
		if code, out := stop(); code != 0 {
			t.Fatalf("%v: exit %d:\n%s", args, code, out)
		}
	}
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Run(context.Background(), []string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0"}); code == 0 || !strings.Contains(out.String(), "the store has a tier day that is not configured") {
		t.Fatalf("the default pyramid on a five-tier store: exit %d, output:\n%s", code, out.String())
	}
	for _, c := range []struct{ args, want string }{
		{"name=raw,bucket=1h,retention=7d,auto-max=1h;name=7s,step=7s,bucket=1h,retention=14d", "tiers"},
		{"name=raw,bucket=1h,retention=7d,auto-max=1h;name=hour,step=1h,bucket=30d,retention=365d", "--hour-bucket"},
	} {
		args := []string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--tiers", c.args}
		if c.want == "--hour-bucket" {
			args = append(args, "--minute-bucket", "1d")
			c.want = "--minute-bucket: the pyramid has no minute tier"
		}
		out := &lockedBuffer{}
		m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
		if code := m.Run(context.Background(), args); code == 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("--tiers %s: exit %d, output %q, want it to mention %q", c.args, code, out.String(), c.want)
		}
	}
}

// A gateway whose Cassandra does not answer starts anyway: /healthz is ok,
// /readyz and the API answer 503 naming the reason, and a stop ends it
// cleanly.
func TestServeBeforeItsStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // free for the gateway
	ln.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := dead.Addr().String() // refuses connections
	dead.Close()

	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	code := make(chan int, 1)
	go func() {
		code <- m.Run(ctx, []string{"serve", "--addr", addr, "--store", "cassandra", "--cassandra-hosts", nowhere,
			"--cassandra-reconnect-interval", "100ms", "--log-level", "error"})
	}()
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("/healthz: %d", resp.StatusCode)
			}
			break
		}
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d:\n%s", c, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer /healthz: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, path := range []string{"/readyz", "/v1/series"} {
		status, body := httpDo(t, "GET", base+path, "")
		if status != 503 || !strings.Contains(body, "not ready: cassandra: not connected") || !strings.Contains(body, nowhere) {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("serve exited with %d:\n%s", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// Help that was asked for is printed on stdout and succeeds; a wrong flag
// fails on stderr saying how to get the help.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"--help"}, 0, "commands:", ""},
		{[]string{"help"}, 0, "commands:", ""},
		{[]string{"serve", "--help"}, 0, "-max-partitions", ""},
		{[]string{"serve", "-h"}, 0, "-tiers", ""},
		{[]string{"schema", "--help"}, 0, "-apply", ""},
		{[]string{"serve", "--no-such-flag"}, 2, "", "gateway serve -help"},
		{nil, 2, "", "commands:"},
	} {
		var stdout, stderr lockedBuffer
		m := Main{Stdout: &stdout, Stderr: &stderr, LookupEnv: func(string) (string, bool) { return "", false }}
		code := m.Run(context.Background(), c.args)
		if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.errs) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, stdout.String(), stderr.String())
		}
		if c.code == 0 && stderr.String() != "" {
			t.Errorf("%v: help wrote to stderr: %q", c.args, stderr.String())
		}
	}
}
