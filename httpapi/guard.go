package httpapi

// The guards in front of the handlers: who may call a route (bearer tokens
// and roles), how many requests are served at once, which Host names and
// browser origins are answered, and the counting of every refusal. Each
// refusal is answered before anything is read from the body or the store.

import (
	"context"
	"errors"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/query"
)

// Refusal reasons, the values of tsgate_requests_refused_total's label.
const (
	refusedOverloaded    = "overloaded"
	refusedUnauthorized  = "unauthorized"
	refusedForbidden     = "forbidden"
	refusedTooMany       = "too_many_queries"
	refusedBodyTooLarge  = "body_too_large"
	refusedMediaType     = "unsupported_media_type"
	refusedHost          = "host_not_allowed"
	refusedNewSeries     = "too_many_new_series"
	refusedBodyTimeout   = "body_timeout"
	refusedWriteProgress = "write_timeout"
	refusedPartitions    = "too_many_partitions"
	refusedCrossOrigin   = "cross_origin"
	refusedAnswerMemory  = "answer_memory"
	// A connection refused for --max-connections-per-client, and one
	// closed to make room under --max-connections.
	refusedConnections      = "too_many_connections"
	refusedConnectionClosed = "connection_evicted"
)

var refusalReasons = []string{refusedOverloaded, refusedUnauthorized, refusedForbidden, refusedTooMany,
	refusedBodyTooLarge, refusedMediaType, refusedHost, refusedNewSeries, refusedBodyTimeout, refusedWriteProgress, refusedPartitions, refusedCrossOrigin, refusedAnswerMemory, refusedConnections, refusedConnectionClosed}

// guardMetrics count refusals, requests per token and requests in flight.
type guardMetrics struct {
	refused      *prometheus.CounterVec
	byToken      *prometheus.CounterVec
	inflight     prometheus.Gauge
	answerMemory prometheus.Gauge
}

func newGuardMetrics(reg prometheus.Registerer) *guardMetrics {
	g := &guardMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_requests_refused_total", Help: "Requests refused, or answers cut, by a limit or by authentication, by reason.",
		}, []string{"reason"}),
		byToken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tsgate_requests_by_token_total", Help: "Authenticated requests by the name of their token (never the token).",
		}, []string{"token"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tsgate_http_inflight_requests", Help: "Requests holding a slot of --max-inflight.",
		}),
		answerMemory: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tsgate_answer_memory_reserved_bytes", Help: "Memory reserved by the answers being built and sent (bounded by --answer-memory-bytes).",
		}),
	}
	for _, r := range refusalReasons {
		g.refused.WithLabelValues(r)
	}
	reg.MustRegister(g.refused, g.byToken, g.inflight, g.answerMemory)
	return g
}

// CountRefusals wraps e so that its refusals of reads that would plan too
// many partitions (--max-partitions) are counted among the gateway's
// refusals, whichever front end sent the read.
func (m *Metrics) CountRefusals(e query.Engine) query.Engine {
	return refusalCounter{Engine: e, m: m}
}

type refusalCounter struct {
	query.Engine
	m *Metrics
}

func (c refusalCounter) count(err error) error {
	if errors.Is(err, query.ErrTooManyPartitions) {
		c.m.refuse(refusedPartitions)
	}
	return err
}

func (c refusalCounter) Query(ctx context.Context, req query.Request) (query.Result, error) {
	res, err := c.Engine.Query(ctx, req)
	return res, c.count(err)
}

// refuse counts a refusal; the metrics may be absent.
func (m *Metrics) refuse(reason string) {
	if m != nil && m.guard != nil {
		m.guard.refused.WithLabelValues(reason).Inc()
	}
}

type tokenKey struct{}

// tokenName is the name of the token the request authenticated with, or "".
func tokenName(ctx context.Context) string {
	n, _ := ctx.Value(tokenKey{}).(string)
	return n
}

// roleGuard is the handler need wraps around a route. It is a type of its
// own so that a walk over the router can tell which role every route
// declares (TestEveryRouteDeclaresARole).
type roleGuard struct {
	role auth.Role
	s    *Server
	// mount is set for the routes of a mounted front end.
	mount *Mount
	next  http.Handler
}

// need declares the role a route requires; every route of Handler passes
// through one. With no tokens configured every route is open.
func (s *Server) need(role auth.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return &roleGuard{role: role, s: s, next: next} }
}

func (g *roleGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	toks := g.s.deps.Tokens
	if g.role == auth.Open || toks == nil || g.corsPreflight(r) {
		g.next.ServeHTTP(w, r)
		return
	}
	tok, ok := toks.Current().Lookup(bearer(r))
	if !ok {
		g.s.deps.Metrics.refuse(refusedUnauthorized)
		w.Header().Set("WWW-Authenticate", `Bearer realm="tsgate"`)
		g.refuse(w, &Problem{Type: problem.Type("unauthorized"), Title: "Unauthorized", Status: http.StatusUnauthorized,
			Detail: "send Authorization: Bearer <token> with a token of role " + g.role.String() + " or higher"})
		return
	}
	if m := g.s.deps.Metrics; m != nil && m.guard != nil {
		m.guard.byToken.WithLabelValues(tok.Name).Inc()
	}
	if tok.Role < g.role {
		g.s.deps.Metrics.refuse(refusedForbidden)
		g.s.logger(r).Info("request refused: role too low", "token", tok.Name, "role", tok.Role.String(), "needs", g.role.String())
		g.refuse(w, &Problem{Type: problem.Type("forbidden"), Title: "Forbidden", Status: http.StatusForbidden,
			Detail: "the token " + strconv.Quote(tok.Name) + " has role " + tok.Role.String() + "; " + r.Method + " " + r.URL.Path + " needs " + g.role.String()})
		return
	}
	g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok.Name)))
}

// corsPreflight tells a CORS preflight of a front end that --cors-origins
// opens: an OPTIONS that names an origin and the method it will send.
// Any other request, OPTIONS included, needs its role.
func (g *roleGuard) corsPreflight(r *http.Request) bool {
	return g.mount != nil && g.mount.CORS && len(g.s.cfg.Limits.CORSOrigins) > 0 &&
		r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// refuse answers a refusal of authentication: problem+json on every
// route, with the members the clients of a mounted front end show.
func (g *roleGuard) refuse(w http.ResponseWriter, p *Problem) {
	if g.mount != nil {
		p = problem.Shown(p)
	}
	problem.Write(w, p)
}

// bearer is the token of an Authorization: Bearer header, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// neverShed are the paths served whatever the load: probes and metrics
// must tell the truth about an overloaded gateway, not add to it.
var neverShed = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// limiter admits at most Limits.MaxInflight requests at once; a request
// waits up to MaxQueueWait for a slot and is refused as overloaded after
// that, before it reads anything.
type limiter struct {
	slots chan struct{}
	wait  time.Duration
}

func newLimiter(l Limits) *limiter {
	if l.MaxInflight < 1 {
		return nil
	}
	return &limiter{slots: make(chan struct{}, l.MaxInflight), wait: l.MaxQueueWait}
}

func (s *Server) limit(lim *limiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if lim == nil {
			return next
		}
		retryAfter := strconv.Itoa(int(max(1, math.Ceil(lim.wait.Seconds()))))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if neverShed[r.URL.Path] {
				next.ServeHTTP(w, r)
				return
			}
			overloaded := func() *Problem {
				s.deps.Metrics.refuse(refusedOverloaded)
				p := &Problem{Type: problem.Type("overloaded"), Title: "Overloaded", Status: http.StatusServiceUnavailable,
					Detail: "the gateway is serving as many requests as it may (--max-inflight); retry after " + retryAfter + "s"}
				p.Header = http.Header{"Retry-After": {retryAfter}}
				return p
			}
			sl := &slot{lim: lim, m: s.deps.Metrics}
			if !sl.take(r.Context()) {
				s.refuserOf(r.URL.Path)(w, overloaded())
				return
			}
			defer sl.give()
			if r.Body != nil && r.Body != http.NoBody {
				// The slot is for the work the request does, not for the
				// time its client takes to send the body: it is given back
				// while the handler waits for the body, and taken again
				// (or the read fails as overloaded) when bytes arrive.
				r = r.WithContext(r.Context())
				r.Body = &slotBody{ReadCloser: r.Body, slot: sl, ctx: r.Context(), overloaded: overloaded}
			}
			// What the answer holds is reserved from the memory budget as
			// it grows, and given back once the handler has written it.
			acct := s.budget.Account()
			defer acct.Release()
			next.ServeHTTP(w, r.WithContext(membudget.With(r.Context(), acct)))
		})
	}
}

// slot is one request's hold of a serving slot, which it may give back
// and take again while it waits for its client.
type slot struct {
	lim  *limiter
	m    *Metrics
	mu   sync.Mutex
	held bool
}

func (s *slot) take(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		return true
	}
	if !s.lim.acquire(ctx) {
		return false
	}
	s.held = true
	if s.m != nil && s.m.guard != nil {
		s.m.guard.inflight.Inc()
	}
	return true
}

func (s *slot) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		return
	}
	s.held = false
	<-s.lim.slots
	if s.m != nil && s.m.guard != nil {
		s.m.guard.inflight.Dec()
	}
}

// slotBody gives the request's slot back while a read of the body waits
// for the client, and takes it again before the bytes are handed to the
// handler: a client that trickles its body holds a connection, never a
// slot. When no slot frees up within --max-queue-wait the read fails with
// the overloaded problem, which the handler answers.
type slotBody struct {
	io.ReadCloser
	slot       *slot
	ctx        context.Context
	overloaded func() *Problem
}

func (b *slotBody) Read(p []byte) (int, error) {
	b.slot.give()
	n, err := b.ReadCloser.Read(p)
	if !b.slot.take(b.ctx) {
		return 0, b.overloaded()
	}
	return n, err
}

func (l *limiter) acquire(ctx context.Context) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	if l.wait <= 0 {
		return false
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// checkHost answers only the configured Host names, so that a page of
// another site whose name was re-pointed at this address (DNS rebinding)
// cannot read the API through the victim's browser. Without
// --allowed-hosts, a connection to a loopback address is answered only
// for loopback names (localhost, *.localhost, 127.0.0.0/8, ::1): a
// gateway on 127.0.0.1 is reachable only from pages of this machine, which
// is exactly what rebinding abuses. Probes pass: they answer nothing a
// page could use, and orchestrators call them by address.
func (s *Server) checkHost(next http.Handler) http.Handler {
	allowed := s.cfg.Limits.AllowedHosts
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		case len(allowed) > 0:
			if hostAllowed(r.Host, allowed) {
				break
			}
			s.refuseHost(w, r, "this gateway does not answer for Host "+strconv.Quote(r.Host)+" (--allowed-hosts)")
			return
		case onLoopback(r) && !loopbackName(r.Host):
			s.refuseHost(w, r, "this gateway listens on a loopback address and answers only loopback names (localhost, 127.0.0.1, [::1]), not Host "+
				strconv.Quote(r.Host)+"; list the names it may be called by in --allowed-hosts")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) refuseHost(w http.ResponseWriter, r *http.Request, detail string) {
	s.deps.Metrics.refuse(refusedHost)
	problem.Write(w, &Problem{Type: problem.Type("host-not-allowed"), Title: "Host not allowed", Status: http.StatusMisdirectedRequest, Detail: detail})
}

// onLoopback tells whether the request came in on a connection to a
// loopback address of this machine.
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// loopbackName tells whether host[:port] names this machine's loopback
// interface.
func loopbackName(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// crossOrigin refuses state-changing requests (POST, PUT, DELETE, …) that
// a browser sends from a page of another origin (Sec-Fetch-Site, else
// Origin against Host): a simple cross-site request — a form, or a fetch
// with no body and no content type — needs no preflight, so without this
// any page a user visits could run admin operations of a gateway without
// tokens. The origins of --cors-origins are trusted (Grafana's browser
// access mode posts its queries). Clients that are not browsers send
// neither header and pass.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range s.cfg.Limits.CORSOrigins {
		if o == "*" {
			// Any origin may read /grafana: it may post its queries too.
			cop.AddInsecureBypassPattern("/grafana/")
			continue
		}
		// Validate checked the form of each origin.
		_ = cop.AddTrustedOrigin(o)
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.deps.Metrics.refuse(refusedCrossOrigin)
		from := r.Header.Get("Origin")
		if from == "" {
			from = "another site (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
		}
		s.refuserOf(r.URL.Path)(w, &Problem{Type: problem.Type("cross-origin"), Title: "Cross-origin request refused", Status: http.StatusForbidden,
			Detail: r.Method + " " + r.URL.Path + " was sent by a page of " + from + "; browsers may change data only from the gateway's own pages or an origin listed in --cors-origins"})
	}))
	return cop.Handler(next)
}

// hostAllowed matches host[:port] against entries that are a name (any
// port) or a name:port, case-insensitively.
func hostAllowed(host string, allowed []string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	for _, a := range allowed {
		if strings.EqualFold(a, host) || strings.EqualFold(strings.Trim(a, "[]"), name) {
			return true
		}
	}
	return false
}

// jsonBodyOnly refuses a POST whose body is not declared as JSON: a
// browser sends text/plain, form and multipart bodies to any origin
// without asking first, so accepting only application/json makes every
// cross-origin write wait for a preflight the gateway can refuse. A POST
// without a Content-Type passes only when it has no body at all.
func jsonBodyOnly(onRefuse func(http.ResponseWriter, *http.Request, *Problem), also ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost && r.Method != http.MethodPut {
				next.ServeHTTP(w, r)
				return
			}
			ct := r.Header.Get("Content-Type")
			if ct == "" {
				if empty, body := bodyIsEmpty(r.Body); empty {
					r.Body = body
					next.ServeHTTP(w, r)
					return
				}
			} else if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == "application/json" || slices.Contains(also, mt)) {
				next.ServeHTTP(w, r)
				return
			}
			onRefuse(w, r, &Problem{Type: problem.Type("unsupported-media-type"), Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
				Detail: "send the body as application/json (Content-Type was " + quoteOrMissing(ct) + ")"})
		})
	}
}

// bodyIsEmpty reads at most one byte of body to tell whether it holds
// anything, and returns a body that still yields all of it.
func bodyIsEmpty(body io.ReadCloser) (bool, io.ReadCloser) {
	if body == nil || body == http.NoBody {
		return true, body
	}
	var one [1]byte
	n, _ := io.ReadFull(body, one[:])
	if n == 0 {
		return true, body
	}
	return false, struct {
		io.Reader
		io.Closer
	}{io.MultiReader(strings.NewReader(string(one[:n])), body), body}
}

// refuseProblem writes a refusal of the v1 API and counts it.
func (s *Server) refuseProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	s.deps.Metrics.refuse(refusalOf(p))
	problem.Write(w, p)
}

// refuserOf is how a refusal of a request for path is written: in the
// envelope of the front end mounted there, else as problem+json.
func (s *Server) refuserOf(path string) func(http.ResponseWriter, *Problem) {
	for i := range s.deps.Mounts {
		m := &s.deps.Mounts[i]
		if path == m.Prefix || strings.HasPrefix(path, m.Prefix+"/") {
			return m.refuse
		}
	}
	return problem.Write
}

// refuse writes a refusal of the mount's guards other than
// authentication's.
func (m *Mount) refuse(w http.ResponseWriter, p *Problem) {
	if m.Refuse != nil {
		m.Refuse(w, p)
		return
	}
	problem.Write(w, problem.Shown(p))
}

func refusalOf(p *Problem) string {
	switch p.Status {
	case http.StatusUnsupportedMediaType:
		return refusedMediaType
	case http.StatusRequestEntityTooLarge:
		return refusedBodyTooLarge
	}
	return problem.Slug(p.Type)
}

// The names this file and its neighbours use for the problem package's
// types and helpers.
type (
	Problem    = problem.Problem
	ParamError = problem.ParamError
)

func quoteOrMissing(s string) string {
	if s == "" {
		return "missing"
	}
	return strconv.Quote(s)
}

// guardMount puts a mounted front end behind the role it needs and the
// media types it takes.
func (s *Server) guardMount(m Mount) http.Handler {
	onRefuse := func(w http.ResponseWriter, r *http.Request, p *Problem) {
		s.deps.Metrics.refuse(refusalOf(p))
		m.refuse(w, p)
	}
	g := &roleGuard{role: m.Role, s: s, mount: &m, next: jsonBodyOnly(onRefuse, m.Bodies...)(m.Handler)}
	if sub, ok := m.Handler.(chi.Routes); ok {
		return &mountGuard{roleGuard: g, sub: sub}
	}
	return g
}

// mountGuard is a guarded front end that still shows its routes to
// chi.Walk, with the guard among their middlewares, so that the test that
// every route declares a role sees the mounted ones too.
type mountGuard struct {
	*roleGuard
	sub chi.Routes
}

func (m *mountGuard) Routes() []chi.Route { return m.sub.Routes() }
func (m *mountGuard) Middlewares() chi.Middlewares {
	g := m.roleGuard
	mark := func(next http.Handler) http.Handler {
		return &roleGuard{role: g.role, s: g.s, mount: g.mount, next: next}
	}
	return append(chi.Middlewares{mark}, m.sub.Middlewares()...)
}
func (m *mountGuard) Match(rctx *chi.Context, method, path string) bool {
	return m.sub.Match(rctx, method, path)
}
func (m *mountGuard) Find(rctx *chi.Context, method, path string) string {
	return m.sub.Find(rctx, method, path)
}
