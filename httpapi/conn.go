package httpapi

// Connection bounds: how long a client may take to send a request, how
// long an answer may stall because the client stopped reading, how many
// connections are open at once, and shutting down without waiting for
// uploads that have stalled.

import (
	"github.com/tsgate/tsgate/problem"

	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPServer is the server of the gateway's handler under its limits.
type HTTPServer struct {
	*http.Server
	conns *connGuard
}

// NewHTTPServer returns the server for handler under the limits: header
// and body read deadlines, a write deadline that moves forward as the
// answer makes progress, uploads cut when the server shuts down, and the
// bounds of open connections (connGuard).
func NewHTTPServer(l Limits, handler http.Handler, log *slog.Logger, m *Metrics) *HTTPServer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	up := &uploads{active: map[*http.ResponseController]struct{}{}}
	g := newConnGuard(l, m)
	srv := &http.Server{
		Handler:           connBounds(l, up, m, handler),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         g.track,
	}
	// Shutdown waits for active connections; an upload that stalled would
	// hold it until its body deadline. Cutting the reads lets the handler
	// fail at once, while answers being written still finish.
	srv.RegisterOnShutdown(up.cut)
	return &HTTPServer{Server: srv, conns: g}
}

// Serve accepts connections on ln within the connection bounds.
func (s *HTTPServer) Serve(ln net.Listener) error {
	return s.Server.Serve(guardedListener{Listener: ln, g: s.conns})
}

// connGuard bounds open connections so that no client, however many
// connections it opens and leaves idle or half-sent, keeps the others
// out: at most MaxConnectionsPerClient from one address (more are closed
// on arrival), and at most MaxConnections in all. At that cap a new
// connection makes room: an idle keep-alive connection is closed first
// (the oldest), else the oldest connection still sending its first
// request from the address that holds the most; only when every open
// connection is serving a request does the new one wait for one to end.
type connGuard struct {
	max, perClient int
	m              *Metrics

	mu       sync.Mutex
	freed    *sync.Cond
	conns    map[net.Conn]*connEntry
	byClient map[string]int
}

type connEntry struct {
	client string
	state  http.ConnState
	since  time.Time
}

func newConnGuard(l Limits, m *Metrics) *connGuard {
	g := &connGuard{max: l.MaxConnections, perClient: l.MaxConnectionsPerClient, m: m,
		conns: map[net.Conn]*connEntry{}, byClient: map[string]int{}}
	g.freed = sync.NewCond(&g.mu)
	return g
}

// clientOf is the address a connection comes from, without its port.
func clientOf(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// admit registers c, making room or waiting for it; false means c is
// refused and must be closed.
func (g *connGuard) admit(c net.Conn) bool {
	client := clientOf(c)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perClient > 0 && g.byClient[client] >= g.perClient {
		g.m.refuse(refusedConnections)
		return false
	}
	for g.max > 0 && len(g.conns) >= g.max {
		if victim := g.victim(); victim != nil {
			g.forget(victim)
			g.m.refuse(refusedConnectionClosed)
			// Closing an idle or half-sent connection only ends the
			// server's read of it.
			_ = victim.Close()
			break
		}
		g.freed.Wait()
	}
	g.conns[c] = &connEntry{client: client, state: http.StateNew, since: time.Now()}
	g.byClient[client]++
	return true
}

// victim is the connection to close to make room, or nil.
func (g *connGuard) victim() net.Conn {
	var idle, waiting net.Conn
	var idleSince, waitingSince time.Time
	most := 0
	for c, e := range g.conns {
		switch e.state {
		case http.StateIdle:
			if idle == nil || e.since.Before(idleSince) {
				idle, idleSince = c, e.since
			}
		case http.StateNew:
			n := g.byClient[e.client]
			if waiting == nil || n > most || (n == most && e.since.Before(waitingSince)) {
				waiting, waitingSince, most = c, e.since, n
			}
		}
	}
	if idle != nil {
		return idle
	}
	return waiting
}

func (g *connGuard) forget(c net.Conn) {
	e, ok := g.conns[c]
	if !ok {
		return
	}
	delete(g.conns, c)
	if g.byClient[e.client]--; g.byClient[e.client] <= 0 {
		delete(g.byClient, e.client)
	}
	g.freed.Signal()
}

// track follows each connection's state (http.Server.ConnState).
func (g *connGuard) track(c net.Conn, state http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		g.forget(c)
	default:
		if e, ok := g.conns[c]; ok {
			e.state, e.since = state, time.Now()
			if state == http.StateIdle {
				// An accept waiting at the cap may close it now.
				g.freed.Signal()
			}
		}
	}
}

// guardedListener admits the connections it accepts through its guard.
type guardedListener struct {
	net.Listener
	g *connGuard
}

func (l guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.admit(c) {
			return c, nil
		}
		_ = c.Close()
	}
}

// uploads are the requests whose body is being read.
type uploads struct {
	mu     sync.Mutex
	active map[*http.ResponseController]struct{}
	closed bool
}

func (u *uploads) add(rc *http.ResponseController) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.active[rc] = struct{}{}
	return true
}

func (u *uploads) remove(rc *http.ResponseController) {
	u.mu.Lock()
	delete(u.active, rc)
	u.mu.Unlock()
}

func (u *uploads) cut() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for rc := range u.active {
		_ = rc.SetReadDeadline(time.Now())
	}
}

// connBounds sets the body's read deadline and the answer's write
// deadline of every request.
func connBounds(l Limits, up *uploads, m *Metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		pw := &progressWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout, m: m}
		pw.extend(time.Now())
		// A request without a body has the server reading the connection
		// in the background already (to notice the client leaving); a
		// deadline would end that read and cancel the request.
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			if !up.add(rc) {
				w.Header().Set("Connection", "close")
				problem.Write(w, &Problem{Type: problem.Type("overloaded"), Title: "Shutting down", Status: http.StatusServiceUnavailable,
					Detail: "the gateway is shutting down; retry on another instance"})
				return
			}
			defer up.remove(rc)
			_ = rc.SetReadDeadline(time.Now().Add(l.BodyTimeout))
			body := &deadlineBody{ReadCloser: r.Body, rc: rc, up: up, m: m}
			pw.body = body
			// The server decides whether the connection can carry another
			// request by looking at the body it made: the handler gets a
			// copy of the request, so that what it wraps around the body
			// never hides that body from the server.
			r = r.WithContext(r.Context())
			r.Body = body
		}
		next.ServeHTTP(pw, r)
		// What the handler wrote may still sit in buffers the server
		// flushes after it returns: that gets a full timeout too.
		pw.last = time.Time{}
		pw.extend(time.Now())
	})
}

// deadlineBody clears the read deadline once the body is read whole, so
// that the server's background read of the connection, which starts then,
// does not time out and cancel a request still being served.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
	up *uploads
	m  *Metrics
	// done is set once the body was read to its end; the answer's
	// header, written perhaps by another goroutine, reads it.
	done    atomic.Bool
	counted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done.Load():
		b.done.Store(true)
		b.up.remove(b.rc)
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !b.counted:
		b.counted = true
		b.m.refuse(refusedBodyTimeout)
	}
	return n, err
}

// progressWriter moves the write deadline forward as the answer is
// written: a client reading slowly is served, one that stopped reading is
// cut off WriteTimeout after its last progress. It also closes the
// connection after an answer sent before the request's body was read to
// its end: whatever is left of that body must never be parsed as the next
// request (request smuggling), whichever reader stopped early.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	m       *Metrics
	last    time.Time
	failed  bool
	// body is the request's body, nil when it has none.
	body        *deadlineBody
	wroteHeader bool
}

// WriteHeader sends the status, closing the connection after the answer
// when the body was not read to its end.
func (w *progressWriter) WriteHeader(code int) {
	if code >= 200 && !w.wroteHeader {
		w.wroteHeader = true
		if w.body != nil && !w.body.done.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// extend moves the deadline, at most once a second (or a sixteenth of the
// timeout, when shorter): a write of a few bytes must not cost a timer
// update each.
func (w *progressWriter) extend(now time.Time) {
	if now.Sub(w.last) < min(time.Second, w.timeout/16) {
		return
	}
	w.last = now
	_ = w.rc.SetWriteDeadline(now.Add(w.timeout))
}

func (w *progressWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.extend(time.Now())
	n, err := w.ResponseWriter.Write(b)
	if err != nil && !w.failed && errors.Is(err, os.ErrDeadlineExceeded) {
		w.failed = true
		w.m.refuse(refusedWriteProgress)
	}
	return n, err
}

func (w *progressWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.extend(time.Now())
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
