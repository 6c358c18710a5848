package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/grafana"
	"github.com/tsgate/tsgate/rollup"
)

// Every route passes through exactly one role guard, and the role it
// declares is the one the contract names (x-role, or no security for the
// open ones). A route added without a role fails here.
func TestEveryRouteDeclaresARole(t *testing.T) {
	s := New(Deps{Gatherer: prometheus.NewRegistry(), Mounts: []Mount{{Prefix: "/grafana", Handler: grafana.New(grafana.Deps{}).Handler(), Role: auth.Read, Refuse: grafana.WriteRefusal}}}, DefaultConfig())
	c, err := newContract(0)
	if err != nil {
		t.Fatal(err)
	}
	routes := 0
	err = chi.Walk(s.Handler().(chi.Routes), func(method, route string, h http.Handler, mws ...func(http.Handler) http.Handler) error {
		routes++
		var guards []*roleGuard
		for _, mw := range mws {
			if g, ok := mw(http.NotFoundHandler()).(*roleGuard); ok {
				guards = append(guards, g)
			}
		}
		if len(guards) != 1 {
			t.Errorf("%s %s passes %d role guards, want 1", method, route, len(guards))
			return nil
		}
		specPath := strings.TrimSuffix(route, "*")
		if route != "/grafana/*" {
			specPath = strings.TrimSuffix(specPath, "/")
		}
		if specPath == "" {
			specPath = "/"
		}
		op := c.ops[method+" "+specPath]
		if op == nil {
			if strings.HasPrefix(route, "/assets/") || method == http.MethodHead {
				if guards[0].role != auth.Open {
					t.Errorf("%s %s needs %s; the dashboard's files are open", method, route, guards[0].role)
				}
				return nil
			}
			t.Errorf("%s %s: no operation %s %s in the contract", method, route, method, specPath)
			return nil
		}
		want := auth.Open
		if v, ok := op.Operation.Extensions["x-role"]; ok {
			want, _ = auth.ParseRole(fmt.Sprint(v))
		}
		if route == "/metrics" {
			want = auth.Open // read with --auth-metrics; TestAuthMetrics
		}
		if guards[0].role != want {
			t.Errorf("%s %s needs %s, the contract says %s", method, route, guards[0].role, want)
		}
		if secured := op.Operation.Security != nil && len(*op.Operation.Security) > 0; secured != (want != auth.Open || route == "/metrics") {
			t.Errorf("%s %s: the contract's security does not match the role %s", method, route, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if routes < 20 {
		t.Fatalf("walked %d routes", routes)
	}
}

// A request that finds no slot within the queue wait is refused at once
// with 503 overloaded and Retry-After, without reaching the handler;
// probes and metrics are never refused; a slot freed in time is taken.
func TestOverloadSheds(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := New(Deps{Metrics: m, Mounts: []Mount{{Prefix: "/grafana", Role: auth.Read, Refuse: grafana.WriteRefusal}}}, DefaultConfig())
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	reached := 0
	var mu sync.Mutex
	h := s.limit(&limiter{slots: make(chan struct{}, 2), wait: 50 * time.Millisecond})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached++
		mu.Unlock()
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
	}))
	serve := func(path string) *http.Response {
		rec := &recordWriter{header: http.Header{}}
		h.ServeHTTP(rec, mustRequest(path))
		return &http.Response{StatusCode: rec.status(), Header: rec.header, Body: io.NopCloser(strings.NewReader(rec.body.String()))}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { serve("/slow") })
	}
	<-entered
	<-entered
	start := time.Now()
	resp := serve("/v1/series")
	defer resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
		t.Fatalf("a third request: %d %v", resp.StatusCode, resp.Header)
	}
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), `"type":"/docs#problem/overloaded"`) {
		t.Fatalf("body %s", b)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused after %v", d)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp := serve(p); resp.StatusCode != 200 {
			t.Errorf("%s under overload: %d", p, resp.StatusCode)
		}
	}
	if g := serve("/grafana/query"); g.StatusCode != 503 || !strings.HasPrefix(g.Header.Get("Content-Type"), "application/json") {
		t.Errorf("/grafana under overload: %d %v", g.StatusCode, g.Header)
	}
	mu.Lock()
	if reached != 5 { // two slow, three never-shed
		t.Errorf("the handler ran %d times, want 5", reached)
	}
	mu.Unlock()
	// A slot freed while a request waits is taken.
	done := make(chan int)
	go func() { done <- serve("/v1/series").StatusCode }()
	time.Sleep(10 * time.Millisecond)
	close(release)
	if st := <-done; st != 200 {
		t.Errorf("a request that waited for a freed slot: %d", st)
	}
	wg.Wait()
	if got := testutil.ToFloat64(m.guard.refused.WithLabelValues(refusedOverloaded)); got != 2 {
		t.Errorf("overloaded refusals counted %v, want 2", got)
	}
}

func mustRequest(path string) *http.Request {
	r, _ := http.NewRequest("GET", "http://gw"+path, nil)
	return r
}

type recordWriter struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recordWriter) Header() http.Header { return r.header }
func (r *recordWriter) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recordWriter) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.WriteString(string(b))
}
func (r *recordWriter) status() int {
	if r.code == 0 {
		return 200
	}
	return r.code
}

// startServer serves h under the limits on a loopback port.
func startServer(t *testing.T, l Limits, h http.Handler, m *Metrics) (*HTTPServer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(l, h, nil, m)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, ln.Addr().String()
}

// A client that sends its body too slowly is cut off at the body
// deadline; one that sends it in time is served even when the handler
// outlasts that deadline.
func TestBodyDeadline(t *testing.T) {
	l := DefaultLimits()
	l.BodyTimeout = 300 * time.Millisecond
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	readErr := make(chan error, 4)
	_, addr := startServer(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err == nil {
			select {
			case <-time.After(600 * time.Millisecond): // past the body deadline
			case <-r.Context().Done():
				readErr <- errors.New("the request was cancelled after its body was read")
				return
			}
			_, _ = w.Write([]byte("ok"))
		}
	}), m)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\nonly part")
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("a stalled body was read whole")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled body was not cut off")
	}

	resp, err := http.Post("http://"+addr+"/x", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := <-readErr; err != nil || string(b) != "ok" {
		t.Fatalf("a prompt body: %v %q", err, b)
	}
	select {
	case err := <-readErr:
		t.Fatal(err)
	default:
	}
	if got := testutil.ToFloat64(m.guard.refused.WithLabelValues(refusedBodyTimeout)); got != 1 {
		t.Errorf("body timeouts counted %v, want 1", got)
	}
}

// An answer to a client that stops reading fails after the write timeout
// of no progress; one that reads slowly but steadily is served whole.
func TestWriteProgressDeadline(t *testing.T) {
	l := DefaultLimits()
	l.WriteTimeout = 1500 * time.Millisecond
	writeErr := make(chan error, 2)
	chunk := strings.Repeat("x", 64<<10)
	_, addr := startServer(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		for i := 0; i < 1024 && err == nil; i++ { // 64 MiB, far beyond the socket buffers
			_, err = w.Write([]byte(chunk))
		}
		writeErr <- err
	}), nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /big HTTP/1.1\r\nHost: gw\r\n\r\n")
	start := time.Now()
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("64 MiB written to a client that reads nothing")
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("cut off after %v, before the timeout", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a client that stopped reading was not cut off")
	}

	// A slow reader: 16 MiB read in small steps, over more than the timeout.
	l.WriteTimeout = 2 * time.Second
	_, addr = startServer(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		for i := 0; i < 256 && err == nil; i++ {
			_, err = w.Write([]byte(chunk))
		}
		writeErr <- err
	}), nil)
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprintf(conn2, "GET /big HTTP/1.1\r\nHost: gw\r\n\r\n")
	br := bufio.NewReader(conn2)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 64 KiB every 10 ms: 6.4 MB/s, steady, for about 2.5 s (the socket
	// buffers hold about 4 MiB of it).
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := io.ReadFull(resp.Body, buf)
		n += k
		if err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-writeErr; err != nil || n != 256*len(chunk) {
		t.Fatalf("a slow reader: %v, %d bytes", err, n)
	}
}

// Shutdown does not wait for an upload that stalled: its read is cut and
// the server stops at once, while a request being answered finishes.
func TestShutdownCutsStalledUploads(t *testing.T) {
	l := DefaultLimits()
	l.BodyTimeout = time.Hour
	readErr := make(chan error, 1)
	srv, addr := startServer(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}), nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\npart")
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v after %v", err, time.Since(start))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if err := <-readErr; err == nil {
		t.Error("the stalled upload was read whole")
	}
}

// --max-connections bounds open connections: at the cap, an idle
// keep-alive connection is closed to make room for a new one; when every
// connection is serving a request, a new one waits until one ends.
func TestMaxConnections(t *testing.T) {
	l := DefaultLimits()
	l.MaxConnections = 1
	release := make(chan struct{})
	_, addr := startServer(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	}), nil)
	get := func(conn net.Conn, path string) chan error {
		got := make(chan error, 1)
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: gw\r\n\r\n", path)
		go func() {
			_, err := http.ReadResponse(bufio.NewReader(conn), nil)
			got <- err
		}()
		return got
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := dial()
	if err := <-get(first, "/"); err != nil {
		t.Fatal(err)
	}
	// The first connection is idle (keep-alive): it makes room.
	second := dial()
	select {
	case err := <-get(second, "/hold"):
		t.Fatalf("the held request answered early: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := first.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection was not closed to make room")
	}
	// The second is busy: a third waits for it.
	third := dial()
	got := get(third, "/")
	select {
	case err := <-got:
		t.Fatalf("a third connection was served while the only one was busy: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not served once the second freed")
	}
}

// One client that opens connections and leaves them idle or half-sent
// (slowloris) keeps nobody out: its connections beyond
// --max-connections-per-client are closed on arrival, and at
// --max-connections its idle and half-sent ones make room for others.
func TestConnectionFloodFromOneClient(t *testing.T) {
	l := DefaultLimits()
	l.MaxConnections, l.MaxConnectionsPerClient = 64, 48
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	_, addr := startServer(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }), m)
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	// Idle keep-alives: a request answered, then nothing.
	for range 40 {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
	}
	// Slowloris: headers begun, never finished.
	for range 200 {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: gw\r\nX-Slow: ")
	}
	time.Sleep(200 * time.Millisecond)
	// Other clients, each on its own connections, are served at once.
	others := []net.Dialer{{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}, {LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}}
	for i := range 30 {
		d := others[i%2]
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d of another client during the flood: %v", i, err)
		}
	}
	if got := testutil.ToFloat64(m.guard.refused.WithLabelValues(refusedConnections)); got < 240-48 {
		t.Errorf("%v connections refused for the per-client bound, want at least %d", got, 240-48)
	}
}

// slowRollups is a rollup worker whose run takes until released.
type slowRollups struct {
	release chan struct{}
	mu      sync.Mutex
	done    int
}

func (s *slowRollups) RunOnce(ctx context.Context, all bool) (rollup.Report, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return rollup.Report{}, ctx.Err()
	}
	s.mu.Lock()
	s.done++
	s.mu.Unlock()
	return rollup.Report{Slots: 7, Windows: map[string]int64{"minute": 1}}, nil
}

// A rollup run goes on when its client leaves, and its outcome is read at
// the run's address; wait=false answers 202 at once.
func TestRollupRunOutlivesItsClient(t *testing.T) {
	work := &slowRollups{release: make(chan struct{})}
	s := New(Deps{Rollups: work, Gatherer: prometheus.NewRegistry()}, DefaultConfig())
	h := s.Handler()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "/v1/admin/rollups/run", nil)
	left := make(chan struct{})
	go func() {
		h.ServeHTTP(&recordWriter{header: http.Header{}}, req)
		close(left)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel() // the client leaves
	<-left
	rec := &recordWriter{header: http.Header{}}
	h.ServeHTTP(rec, httpRequest("POST", "/v1/admin/rollups/run?wait=false"))
	if rec.status() != 202 || rec.header.Get("Location") != "/v1/admin/rollups/runs/2" || !strings.Contains(rec.body.String(), `"state":"running"`) {
		t.Fatalf("wait=false: %d %v %s", rec.status(), rec.header, rec.body.String())
	}
	close(work.release)
	for _, id := range []string{"1", "2"} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			rec := &recordWriter{header: http.Header{}}
			h.ServeHTTP(rec, httpRequest("GET", "/v1/admin/rollups/runs/"+id))
			if rec.status() == 200 && strings.Contains(rec.body.String(), `"state":"done"`) && strings.Contains(rec.body.String(), `"slots":7`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s: %d %s", id, rec.status(), rec.body.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	rec = &recordWriter{header: http.Header{}}
	h.ServeHTTP(rec, httpRequest("GET", "/v1/admin/rollups/runs/99"))
	if rec.status() != 404 {
		t.Errorf("an unknown run: %d", rec.status())
	}
	work.mu.Lock()
	defer work.mu.Unlock()
	if work.done != 2 {
		t.Errorf("%d runs completed, want 2", work.done)
	}
}

func httpRequest(method, path string) *http.Request {
	r, _ := http.NewRequest(method, path, nil)
	return r
}
