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

	"golang.org/x/net/netutil"
)

// NewHTTPServer returns the server for handler under the limits: header
// and body read deadlines, a write deadline that moves forward as the
// answer makes progress, and uploads cut when the server shuts down.
func NewHTTPServer(l Limits, handler http.Handler, log *slog.Logger, m *Metrics) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	up := &uploads{active: map[*http.ResponseController]struct{}{}}
	srv := &http.Server{
		Handler:           connBounds(l, up, m, handler),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for active connections; an upload that stalled would
	// hold it until its body deadline. Cutting the reads lets the handler
	// fail at once, while answers being written still finish.
	srv.RegisterOnShutdown(up.cut)
	return srv
}

// Listener bounds ln to MaxConnections open connections; those beyond
// wait in the kernel's backlog until one closes.
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConnections <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, l.MaxConnections)
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
