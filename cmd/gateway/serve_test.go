package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/tiers"
)

// gatedStore is a store that does not answer until opened: Ping fails
// with errUnreachable before, as a Cassandra store's does while no node
// is up.
type gatedStore struct {
	tiers.Store
	open *atomic.Bool
}

var errUnreachable = errors.New("cassandra: not connected: dial tcp 127.0.0.1:1: connection refused")

func (s gatedStore) Ping(ctx context.Context) error {
	if !s.open.Load() {
		return errUnreachable
	}
	return s.Store.Ping(ctx)
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fresh sends one request on a connection of its own: every connection the
// listener accepts must be served, not only the ones a kept-alive client
// happens to reuse.
func fresh(method, url, body string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// A gateway started before its store answers probes, then, once the store
// answers, serves every connection with the assembled gateway, and stops
// promptly and cleanly on the signal.
func TestServeOnceTheStoreComesUp(t *testing.T) {
	var up atomic.Bool
	addr := freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	now := testClock()
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }, Now: testClock,
		openStore: func(ctx context.Context, c gateway.Config, o gateway.Options) (tiers.Store, error) {
			s, err := gateway.OpenStore(ctx, c, o)
			if err != nil {
				return nil, err
			}
			return gatedStore{s, &up}, nil
		}}
	code := make(chan int, 1)
	go func() {
		code <- m.Run(ctx, []string{"serve", "--addr", addr, "--data-dir", t.TempDir(), "--rollup-interval", "0", "--log-level", "error"})
	}()
	waitUntil(t, code, out, "/healthz to answer", func() error {
		status, body, err := fresh("GET", base+"/healthz", "")
		if err == nil && status != 200 {
			t.Fatalf("/healthz while the store is down: %d %s", status, body)
		}
		return err
	})
	if status, body, err := fresh("GET", base+"/readyz", ""); err != nil || status != 503 || !strings.Contains(body, errUnreachable.Error()) {
		t.Fatalf("/readyz while the store is down: %d %s %v", status, body, err)
	}

	up.Store(true)
	waitUntil(t, code, out, "/readyz to say ready", func() error {
		status, body, err := fresh("GET", base+"/readyz", "")
		if err != nil {
			t.Fatalf("/readyz after the store came up: %v\n%s", err, out.String())
		}
		if status != 200 {
			return fmt.Errorf("%d %s", status, body)
		}
		return nil
	})
	at := now.Add(-time.Minute).UnixMilli()
	if status, body, err := fresh("POST", base+"/v1/points", fmt.Sprintf(`{"points":[{"series":"late.start","t":%d,"v":7}]}`, at)); err != nil || status != 200 {
		t.Fatalf("write: %d %s %v", status, body, err)
	}
	// Several connections each: a listener still shared with a server of
	// the starting phase would hand some of them to it.
	for i := range 8 {
		for _, path := range []string{"/healthz", "/readyz", "/metrics",
			fmt.Sprintf("/v1/series/late.start/points?from=%d&to=%d&resolution=raw", at, at+1)} {
			status, body, err := fresh("GET", base+path, "")
			if err != nil || status != 200 {
				t.Fatalf("GET %s (#%d): %d %s %v", path, i, status, body, err)
			}
			if strings.Contains(path, "points") && !strings.Contains(body, fmt.Sprintf("[%d,7]", at)) {
				t.Fatalf("GET %s: %s, want the point written", path, body)
			}
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("serve exited with %d:\n%s", c, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not stop within 10 s of the signal:\n%s", out.String())
	}
}

// waitUntil polls check until it succeeds, failing when serve exits first
// or after 30 s.
func waitUntil(t *testing.T, code <-chan int, out *lockedBuffer, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d while waiting for %s:\n%s", c, what, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s: %v\n%s", what, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// While the gateway is being assembled (here: loading the demo series) the
// server answers probes, and the signal stops it cleanly.
func TestServeStopsWhileAssembling(t *testing.T) {
	addr := freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }, Now: testClock}
	code := make(chan int, 1)
	go func() {
		code <- m.Run(ctx, []string{"serve", "--addr", addr, "--data-dir", t.TempDir(), "--demo", "--rollup-interval", "0", "--log-level", "error"})
	}()
	waitUntil(t, code, out, "the demo series to be loading", func() error {
		if !strings.Contains(out.String(), "demo: loading points") {
			return errors.New("not loading yet")
		}
		return nil
	})
	if status, body, err := fresh("GET", base+"/healthz", ""); err != nil || status != 200 {
		t.Fatalf("/healthz while assembling: %d %s %v", status, body, err)
	}
	if status, body, err := fresh("GET", base+"/readyz", ""); err != nil || status != 503 || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz while assembling: %d %s %v", status, body, err)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 || strings.Contains(out.String(), "serving on") {
			t.Fatalf("serve exited with %d, want 0 before serving:\n%s", c, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not stop within 10 s of the signal:\n%s", out.String())
	}
}

// While the store is unavailable, what needs no store is served: probes,
// metrics, the dashboard, the API reference and the contract. What needs
// the store is the store-unavailable problem with the reason and when to
// retry.
func TestServeWithoutItsStore(t *testing.T) {
	var up atomic.Bool
	addr := freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false },
		openStore: func(ctx context.Context, c gateway.Config, o gateway.Options) (tiers.Store, error) {
			s, err := gateway.OpenStore(ctx, c, o)
			if err != nil {
				return nil, err
			}
			return gatedStore{s, &up}, nil
		}}
	code := make(chan int, 1)
	go func() {
		code <- m.Run(ctx, []string{"serve", "--addr", addr, "--data-dir", t.TempDir(), "--log-level", "error"})
	}()
	waitUntil(t, code, out, "/healthz to answer", func() error {
		_, _, err := fresh("GET", base+"/healthz", "")
		return err
	})
	for _, c := range []struct {
		path, contentType, fragment string
	}{
		{"/healthz", "application/json", `"ok"`},
		{"/metrics", "text/plain", `tsgate_build_info{goversion="go`},
		{"/", "text/html", "<html"},
		{"/docs", "text/html", "store-unavailable"},
		{"/openapi.yaml", "application/yaml", "openapi: 3"},
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(string(b), c.fragment) {
			t.Errorf("GET %s while the store is down: %d %s, want 200 %s with %q:\n%.300s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contentType, c.fragment, b)
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/readyz", ""}, {"GET", "/v1/series", ""}, {"GET", "/v1/series/a/points?from=now-1h", ""},
		{"POST", "/v1/points", `{"points":[{"series":"a","t":1,"v":1}]}`}, {"GET", "/grafana/", ""},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(b), "/docs#problem/store-unavailable") || !strings.Contains(string(b), errUnreachable.Error()) {
			t.Errorf("%s %s while the store is down: %d %s", c.method, c.path, resp.StatusCode, b)
		}
		if ra := resp.Header.Get("Retry-After"); ra == "" || strings.Trim(ra, "0123456789") != "" {
			t.Errorf("%s %s while the store is down: Retry-After %q, want seconds", c.method, c.path, ra)
		}
	}
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("serve exited with %d:\n%s", c, out.String())
	}
}

// With --kafka-brokers where no broker answers, serve still serves:
// /readyz says whether the store answers, the consumer's metrics are on
// /metrics, HTTP writes work, and the signal stops it promptly (the
// consumer leaves no goroutine waiting for a broker).
func TestServeWithUnreachableKafka(t *testing.T) {
	addr, nowhere := freeAddr(t), freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	now := testClock()
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }, Now: testClock}
	code := make(chan int, 1)
	go func() {
		code <- m.Run(ctx, []string{"serve", "--addr", addr, "--data-dir", t.TempDir(), "--rollup-interval", "0", "--log-level", "error",
			"--kafka-brokers", nowhere, "--kafka-topic", "points"})
	}()
	waitUntil(t, code, out, "/readyz to say ready", func() error {
		status, body, err := fresh("GET", base+"/readyz", "")
		if err == nil && status != 200 {
			return fmt.Errorf("%d %s", status, body)
		}
		return err
	})
	at := now.Add(-time.Minute).UnixMilli()
	if status, body, err := fresh("POST", base+"/v1/points", fmt.Sprintf(`{"points":[{"series":"k","t":%d,"v":1}]}`, at)); err != nil || status != 200 {
		t.Fatalf("write: %d %s %v", status, body, err)
	}
	status, body, err := fresh("GET", base+"/metrics", "")
	if err != nil || status != 200 || !strings.Contains(body, "tsgate_kafka_records_total 0") || !strings.Contains(body, "tsgate_kafka_queued_bytes 0") {
		t.Fatalf("/metrics: %d %v, want the consumer's metrics", status, err)
	}
	if !strings.Contains(out.String(), "consuming points from Kafka topic points (group tsgate)") {
		t.Fatalf("serve does not say it consumes:\n%s", out.String())
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("serve exited with %d:\n%s", c, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not stop within 15 s of the signal:\n%s", out.String())
	}
}

// A Kafka setting that cannot work stops serve before it listens, naming
// the flag.
func TestServeRefusesBadKafkaSettings(t *testing.T) {
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(k string) (string, bool) {
		if k == "GATEWAY_KAFKA_START" {
			return "middle", true
		}
		return "", false
	}, Now: testClock}
	c := m.Run(context.Background(), []string{"serve", "--addr", freeAddr(t), "--data-dir", t.TempDir(), "--kafka-brokers", "k:9092", "--kafka-topic", "points"})
	if c != 1 || !strings.Contains(out.String(), "--kafka-start must be earliest or latest") {
		t.Fatalf("exit %d:\n%s", c, out.String())
	}
}
