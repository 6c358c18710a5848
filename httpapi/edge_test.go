package httpapi_test

// Connection-level tests of the whole gateway as an attacker meets it: the
// real handler behind the real server (NewHTTPServer and its listener),
// spoken to over raw sockets, so that nothing a Go client does for its
// user hides what the server does.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
)

// edgeServer is the gateway over an in-memory store served as gateway
// serve serves it, on a loopback port.
type edgeServer struct {
	addr string
	api  *apitest.Server
}

func newEdgeServer(t *testing.T, configure func(*gateway.Config)) *edgeServer {
	t.Helper()
	api := apitest.NewMemServerWith(t, querytest.Options{Configure: configure})
	limits := api.Env.Gateway.Config.HTTP.Limits
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewHTTPServer(limits, api.Env.Gateway.Handler(), nil, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &edgeServer{addr: ln.Addr().String(), api: api}
}

// do sends a request to the edge server (not to the API's test server,
// which has limits of its own) and returns the status and body.
func (s *edgeServer) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
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

// rawResponses sends raw on one connection and reads every answer the
// server gives on it until it closes the connection or stays silent for
// a second; it reports whether the server closed it.
func rawResponses(t *testing.T, addr string, raw []byte) (answers []*http.Response, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() { _, _ = conn.Write(raw) }()
	br := bufio.NewReader(conn)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if ok := asNetError(err, &ne); ok && ne.Timeout() {
				return answers, false
			}
			return answers, true
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answers = append(answers, resp)
	}
}

func asNetError(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// A request hidden in the part of a body the gateway did not read is never
// executed: every answer that leaves a body unread closes the connection,
// whichever limit stopped the reading (the contract's 1 MiB cap of
// POST /v1/query, a 401 before the body, a 413 of a write).
func TestUnreadBodiesNeverCarryARequest(t *testing.T) {
	s := newEdgeServer(t, nil)
	smuggled := "PUT /v1/admin/series/victim/blocked HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 18\r\n\r\n{\"reason\":\"owned\"}"
	for _, c := range []struct {
		name, method, path, ct string
		before                 int // bytes of body before the hidden request
	}{
		// More than 256 KiB left unread: the server's own discard gives up.
		{"query over its cap, far", "POST", "/v1/query", "application/json", 1<<20 + 300<<10},
		// Less than that: the server would discard the rest by itself.
		{"query over its cap, near", "POST", "/v1/query", "application/json", 1<<20 + 1000},
		{"query, not json", "POST", "/v1/query", "text/plain", 600 << 10},
		{"admin put, over its cap", "PUT", "/v1/admin/series/x/blocked", "application/json", 1<<20 + 300<<10},
		{"write, wrong media type", "POST", "/v1/points", "text/csv", 600 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := append([]byte(`{"queries":[`), bytes.Repeat([]byte(" "), c.before-12)...)
			body = append(body, smuggled...)
			raw := fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", c.method, c.path, c.ct, len(body))
			raw = append(raw, body...)
			answers, closed := rawResponses(t, s.addr, raw)
			if len(answers) != 1 {
				t.Fatalf("%d answers on one connection, want 1: the rest of the body was read as a request", len(answers))
			}
			if answers[0].StatusCode < 400 {
				t.Fatalf("status %d, want a refusal", answers[0].StatusCode)
			}
			if !closed || !answers[0].Close {
				t.Fatalf("the connection stayed open after an answer that left the body unread (Connection: %q)", answers[0].Header.Get("Connection"))
			}
		})
	}
	var blocked struct {
		Blocked []any `json:"blocked"`
	}
	if status := s.api.Get("/v1/admin/blocked", &blocked); status != 200 || len(blocked.Blocked) != 0 {
		t.Fatalf("a hidden request was executed: %d %v", status, blocked.Blocked)
	}
}

// A body read to its end leaves the connection open for the next request:
// keep-alive still works for clients that send what they declare.
func TestReadBodiesKeepTheConnection(t *testing.T) {
	s := newEdgeServer(t, nil)
	body := `{"points":[{"series":"k","t":` + fmt.Sprint(s.api.Now()) + `,"v":1}]}`
	one := fmt.Sprintf("POST /v1/points HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	answers, closed := rawResponses(t, s.addr, []byte(strings.Repeat(one, 3)))
	if len(answers) != 3 || closed {
		t.Fatalf("%d answers, closed %v; want 3 on one open connection", len(answers), closed)
	}
	for _, a := range answers {
		if a.StatusCode != 200 {
			t.Fatalf("status %d", a.StatusCode)
		}
	}
}

// rawStatus sends one request with the given Host and headers on a fresh
// connection and returns the answer's status and problem type.
func rawStatus(t *testing.T, addr, method, path, host string, header map[string]string) (int, string) {
	t.Helper()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, host)
	for k, v := range header {
		req += k + ": " + v + "\r\n"
	}
	answers, _ := rawResponses(t, addr, []byte(req+"\r\n"))
	if len(answers) != 1 {
		t.Fatalf("%s %s (Host %s): %d answers", method, path, host, len(answers))
	}
	return answers[0].StatusCode, answers[0].Header.Get("Content-Type")
}

// Without --allowed-hosts, a gateway called on a loopback address answers
// only loopback names: a page whose name was rebound to 127.0.0.1 reads
// and writes nothing. Probes still answer whatever the name.
func TestLoopbackAnswersOnlyLoopbackNames(t *testing.T) {
	s := newEdgeServer(t, nil)
	_, port, _ := net.SplitHostPort(s.addr)
	for _, c := range []struct {
		method, path, host string
		want               int
	}{
		{"GET", "/v1/series", "attacker.example:" + port, 421},
		{"GET", "/v1/series", "attacker.example", 421},
		{"PUT", "/v1/admin/series/x/blocked", "rebound.example:" + port, 421},
		{"POST", "/v1/admin/rollups/run", "rebound.example", 421},
		{"GET", "/grafana", "rebound.example", 421},
		{"GET", "/prometheus/api/v1/labels", "rebound.example", 421},
		{"GET", "/v1/series", "127.0.0.1:" + port, 200},
		{"GET", "/v1/series", "localhost:" + port, 200},
		{"GET", "/v1/series", "LOCALHOST", 200},
		{"GET", "/v1/series", "gw.localhost:" + port, 200},
		{"GET", "/v1/series", "127.0.0.2", 200},
		{"GET", "/v1/series", "[::1]:" + port, 200},
		{"GET", "/healthz", "attacker.example", 200},
	} {
		if got, ct := rawStatus(t, s.addr, c.method, c.path, c.host, nil); got != c.want || (got == 421 && ct != "application/problem+json") {
			t.Errorf("%s %s with Host %s: %d %s, want %d", c.method, c.path, c.host, got, ct, c.want)
		}
	}
	// --allowed-hosts replaces the loopback rule.
	named := newEdgeServer(t, func(c *gateway.Config) { c.HTTP.Limits.AllowedHosts = []string{"tsgate.internal"} })
	for host, want := range map[string]int{"tsgate.internal": 200, "localhost": 421, "attacker.example": 421} {
		if got, _ := rawStatus(t, named.addr, "GET", "/v1/series", host, nil); got != want {
			t.Errorf("--allowed-hosts tsgate.internal, Host %s: %d, want %d", host, got, want)
		}
	}
}

// A browser page of another site cannot change anything, even with a
// simple request (no body, no content type, no preflight): admin POSTs,
// PUTs, DELETEs and writes from another origin are refused; clients that
// are not browsers, and the gateway's own pages, are not.
func TestCrossSiteRequestsChangeNothing(t *testing.T) {
	s := newEdgeServer(t, func(c *gateway.Config) { c.HTTP.Limits.CORSOrigins = []string{"https://grafana.example"} })
	self := "http://" + s.addr
	for _, c := range []struct {
		method, path string
		header       map[string]string
		want         int
	}{
		{"POST", "/v1/admin/rollups/run", map[string]string{"Origin": "https://evil.example"}, 403},
		{"POST", "/v1/admin/rollups/run", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"POST", "/v1/admin/rollups/run", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost"}, 403},
		{"DELETE", "/v1/admin/series/x/blocked", map[string]string{"Origin": "https://evil.example"}, 403},
		{"POST", "/v1/query", map[string]string{"Origin": "null"}, 403},
		{"POST", "/v1/admin/rollups/run", nil, 200},
		{"POST", "/v1/admin/rollups/run", map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}, 200},
		{"POST", "/v1/admin/rollups/run", map[string]string{"Origin": self}, 200},
		{"GET", "/v1/series", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 200},
		{"POST", "/grafana/query", map[string]string{"Origin": "https://grafana.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json", "Content-Length": "2"}, 200},
	} {
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", c.method, c.path, s.addr)
		body := ""
		for k, v := range c.header {
			req += k + ": " + v + "\r\n"
			if k == "Content-Length" {
				body = "{}"
			}
		}
		answers, _ := rawResponses(t, s.addr, []byte(req+"\r\n"+body))
		if len(answers) != 1 || answers[0].StatusCode != c.want {
			t.Errorf("%s %s with %v: %v, want %d", c.method, c.path, c.header, statuses(answers), c.want)
		}
	}
}

func statuses(rs []*http.Response) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.StatusCode)
	}
	return out
}

// Clients that trickle their bodies hold connections, not serving slots:
// with every slot's worth of uploads stalled, other clients are served,
// and a trickled body that finally arrives is written.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	s := newEdgeServer(t, func(c *gateway.Config) {
		c.HTTP.Limits.MaxInflight = 4
		c.HTTP.Limits.MaxQueueWait = 200 * time.Millisecond
	})
	now := s.api.Now()
	body := fmt.Sprintf(`{"points":[{"series":"slow","t":%d,"v":1}]}`, now)
	var stalled []net.Conn
	for range 30 {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/points HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:5])
		stalled = append(stalled, conn)
	}
	time.Sleep(300 * time.Millisecond) // every upload has reached its handler
	for i := range 3 {
		if st, b := s.do(t, "GET", "/v1/series", ""); st != 200 {
			t.Fatalf("a read while 30 uploads stall (round %d): %d %s", i, st, b)
		}
		if st, b := s.do(t, "POST", "/v1/points", fmt.Sprintf(`{"points":[{"series":"prompt","t":%d,"v":%d}]}`, now, i)); st != 200 {
			t.Fatalf("a write while 30 uploads stall (round %d): %d %s", i, st, b)
		}
	}
	// The stalled uploads still complete when their clients go on.
	for _, conn := range stalled[:3] {
		fmt.Fprint(conn, body[5:])
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a trickled upload that completed: %d", resp.StatusCode)
		}
	}
}
