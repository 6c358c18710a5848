// Package grafana is the gateway's front end for Grafana's JSON datasource
// plugin: the protocol as the simpod-json-datasource plugin (v0.6) speaks
// it, plus the legacy simple-json plugin's /search and /annotations. It
// reads through the typed query boundary like every other front end: a
// target becomes a query.Request whose window Grafana's maxDataPoints and
// intervalMs choose through the router's max_points rule.
package grafana

// The datasource URL is http://HOST:PORT/grafana. The plugin appends the
// paths below. Every answer is JSON, every error is {"message", "error"}
// (the plugin shows message, else error) but the guards' 401 and 403,
// which are problem+json with those members too, and every
// POST takes whatever envelope Grafana sends: an empty body, {}, members
// added by newer Grafana releases.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// Lister lists series ids by prefix.
type Lister interface {
	ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error)
}

// LabelIndex lists the labels of the series (index.Index).
type LabelIndex interface {
	LabelNames(ctx context.Context, sels []index.Selector) ([]string, error)
	LabelValues(ctx context.Context, name string, sels []index.Selector) ([]string, error)
}

// Deps are what the Grafana front end reads.
type Deps struct {
	Engine query.Engine
	// Many reads the series of a query side by side, as one answer, and
	// the series of a selector target (with its selectors set up).
	Many   *query.Many
	Series Lister
	// Labels offers the label names and values as ad hoc filters' keys
	// and values; none when nil.
	Labels LabelIndex
	// MaxLimit is the page size of every read: Grafana cannot page, so it
	// gets the largest page there is.
	MaxLimit int
	// MaxSeries bounds the series one query reads, over all its targets.
	MaxSeries int
	Logger    *slog.Logger
	Now       func() time.Time
	// CORSOrigins are the origins a browser may call the datasource from
	// (the plugin's browser access mode); none when empty, "*" for any.
	CORSOrigins []string
}

// maxListed bounds a series listing for the query builder.
const maxListed = 10000

// Server serves the protocol.
type Server struct{ deps Deps }

// New returns the Grafana front end.
func New(deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Many == nil {
		deps.Many = query.NewMany(deps.Engine, query.Limits{DefaultLimit: deps.MaxLimit}, query.DefaultManyConfig())
	}
	return &Server{deps: deps}
}

// Handler returns the protocol's routes, to be mounted at /grafana.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	s.routes(r)
	return r
}

func (s *Server) logger(r *http.Request) *slog.Logger {
	return s.deps.Logger.With("request_id", middleware.GetReqID(r.Context()), "path", r.URL.Path)
}

// grafanaMaxBody bounds a Grafana request body. The query envelope carries
// every dashboard variable in scopedVars, so it is larger than a batch.
const grafanaMaxBody = 4 << 20

// grafanaContentType is the type of every Grafana answer, errors included.
const grafanaContentType = "application/json; charset=utf-8"

func (s *Server) routes(r chi.Router) {
	r.Use(s.grafanaHeaders)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeGrafanaError(w, r, problem.New(http.StatusNotFound, "not-found", "Not found", "no Grafana datasource endpoint "+r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeGrafanaError(w, r, problem.New(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", r.Method+" is not allowed on "+r.URL.Path))
	})
	// "Save & test" calls the URL as configured, with or without the
	// trailing slash; chi hands both to "/".
	r.Get("/", grafanaHealth)
	r.Post("/metrics", s.grafanaMetrics)
	r.Post("/metric-payload-options", s.grafanaPayloadOptions)
	r.Post("/query", s.grafanaQuery)
	r.Post("/variable", s.grafanaVariable)
	r.Post("/tag-keys", s.grafanaTagKeys)
	r.Post("/tag-values", s.grafanaTagValues)
	r.Post("/search", s.grafanaSearch)
	r.Post("/annotations", grafanaEmptyList)
}

// grafanaHeaders answers CORS preflights and marks every answer as JSON.
// The plugin's "Browser" access mode calls the gateway from the page's
// origin, so the browser asks first; the default "Server" mode goes through
// Grafana's proxy and never needs these headers. Only the origins of
// Deps.CORSOrigins are allowed: with a wildcard any page a user visits
// could read the series through the user's browser.
func (s *Server) grafanaHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", grafanaContentType)
		h.Add("Vary", "Origin")
		origin := s.corsOrigin(r.Header.Get("Origin"))
		if origin != "" {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if r.Method == http.MethodOptions {
			if origin != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Accept, Content-Type, Authorization")
				h.Set("Access-Control-Max-Age", "600")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// corsOrigin is the Access-Control-Allow-Origin for a request from origin:
// the origin itself when listed, "*" when the list holds "*", else none.
func (s *Server) corsOrigin(origin string) string {
	if origin == "" {
		return ""
	}
	for _, o := range s.deps.CORSOrigins {
		if o == "*" {
			return "*"
		}
		if strings.EqualFold(o, origin) {
			return origin
		}
	}
	return ""
}

func writeGrafana(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", grafanaContentType)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeGrafanaError is the one place a Grafana request fails: the problem
// the v1 API would answer, in the envelope the plugin shows.
func (s *Server) writeGrafanaError(w http.ResponseWriter, r *http.Request, err error) {
	p := problem.From(err)
	if p.Status >= 500 {
		level := slog.LevelWarn
		if p.Status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		s.logger(r).Log(r.Context(), level, "grafana request failed", "status", p.Status, "err", err)
	}
	WriteRefusal(w, p)
}

// WriteRefusal writes p in the envelope the plugin shows, {"message",
// "error"} (message, else error, is what a panel says), keeping its
// headers. A 401 of the datasource's own becomes a 400: Grafana's proxy
// replaces the body of a 401 with its own words. The gateway's guards
// answer a missing token with a problem+json 401, as on every route.
func WriteRefusal(w http.ResponseWriter, p *problem.Problem) {
	status := p.Status
	if status == http.StatusUnauthorized {
		status = http.StatusBadRequest
	}
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}{p.Detail, p.Title})
	for k, v := range p.Header {
		w.Header()[k] = v
	}
	writeGrafana(w, status, append(b, '\n'))
}

// grafanaBad is a request the gateway cannot answer as sent.
func grafanaBad(detail string) *problem.Problem {
	return problem.New(http.StatusBadRequest, "invalid-parameter", "Invalid request", detail)
}

// decodeGrafana reads a body the plugin sent into into. An empty body and
// null leave into as it is: the plugin posts no body at all when its
// caller passes none. Unknown members are ignored, since every Grafana
// release adds some.
func decodeGrafana(w http.ResponseWriter, r *http.Request, into any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, grafanaMaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return grafanaBad("could not read the body: " + err.Error())
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || string(body) == "null" {
		return nil
	}
	if body[0] != '{' {
		return grafanaBad("the body must be a JSON object")
	}
	if err := json.Unmarshal(body, into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return grafanaBad("the body's member " + te.Field + " holds a JSON " + te.Value + ", which this datasource does not expect there")
		}
		return grafanaBad("the body is not valid JSON: " + err.Error())
	}
	return nil
}

func grafanaHealth(w http.ResponseWriter, r *http.Request) {
	// Exactly 200: the plugin's "Save & test" reports any other status,
	// 204 included, as a failure.
	writeGrafana(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
}

// grafanaEmptyList answers the endpoints this gateway has nothing for: it
// keeps no annotation source.
func grafanaEmptyList(w http.ResponseWriter, r *http.Request) {
	writeGrafana(w, http.StatusOK, []byte("[]\n"))
}

// grafanaTagKeys offers the label names of the series as the keys of ad
// hoc filters: [{"type":"string","text":name}], from the label index.
// Whatever the body says (the filters already set, the time range) does
// not narrow them. The pseudo-label series (the id) is not listed, since
// its values are every series' id; a filter may still use it.
func (s *Server) grafanaTagKeys(w http.ResponseWriter, r *http.Request) {
	// Nothing the body says changes the answer, so a body that does not
	// decode still gets it.
	var body struct{}
	_ = decodeGrafana(w, r, &body)
	var names []string
	if s.deps.Labels != nil {
		var err error
		if names, err = s.deps.Labels.LabelNames(r.Context(), nil); err != nil {
			s.writeGrafanaError(w, r, err)
			return
		}
	}
	b := append(make([]byte, 0, 32*(len(names)+1)), '[')
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"string","text":`...)
		b = jsonenc.AppendString(b, name)
		b = append(b, '}')
	}
	writeGrafana(w, http.StatusOK, append(b, ']', '\n'))
}

// grafanaTagValues offers the values of the label named by the body's key
// as an ad hoc filter's values: [{"text":value}], from the label index,
// not narrowed by the other filters. For the pseudo-label series they are
// the series ids (at most 10 000); a key that is no label name has none.
func (s *Server) grafanaTagValues(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Key json.RawMessage `json:"key"`
	}
	if err := decodeGrafana(w, r, &body); err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	key, ok := jsonenc.ScalarText(body.Key)
	if !ok {
		s.writeGrafanaError(w, r, grafanaBad("key must be a string: the label whose values to list"))
		return
	}
	values, err := s.labelValues(r, key)
	if err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	b := append(make([]byte, 0, 24*(len(values)+1)), '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"text":`...)
		b = jsonenc.AppendString(b, v)
		b = append(b, '}')
	}
	writeGrafana(w, http.StatusOK, append(b, ']', '\n'))
}

// grafanaAggs and grafanaResolutions are the choices the query builder
// offers for a target's payload; code mode may set any aggregate of the
// API (any percentile pNN.N) and any window of at least 1s.
var (
	grafanaAggs = []grafanaOption{
		{"avg", "avg (mean, the default)"}, {"min", "min"}, {"max", "max"}, {"sum", "sum"}, {"count", "count"},
		{"p50", "p50 (median)"}, {"p90", "p90"}, {"p95", "p95"}, {"p99", "p99"}, {"p999", "p99.9"},
	}
	grafanaResolutions = []grafanaOption{
		{"auto", "auto (by the panel's width, the default)"}, {"raw", "raw points"},
		{"1s", "1s"}, {"10s", "10s"}, {"1m", "1m"}, {"5m", "5m"}, {"15m", "15m"},
		{"1h", "1h"}, {"6h", "6h"}, {"1d", "1d"}, {"7d", "7d"},
	}
)

type grafanaOption struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// grafanaPayloadConfig is what a listed series offers in the builder. The
// selects carry no options: the plugin asks /metric-payload-options when
// one opens, which keeps the series list small.
var grafanaPayloadConfig = mustJSON([]map[string]string{
	{"name": "agg", "label": "Aggregate", "type": "select", "placeholder": "avg"},
	{"name": "resolution", "label": "Resolution", "type": "select", "placeholder": "auto"},
})

// grafanaSelectorPayloadConfig is what a selector typed as the builder's
// metric offers: group_by too, whose options are the label names.
var grafanaSelectorPayloadConfig = mustJSON([]map[string]string{
	{"name": "agg", "label": "Aggregate", "type": "select", "placeholder": "avg"},
	{"name": "resolution", "label": "Resolution", "type": "select", "placeholder": "auto"},
	{"name": "group_by", "label": "Group by", "type": "multi-select", "placeholder": "one line per series"},
})

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// grafanaListBody is the body of /metrics, /search and /variable: the
// builder's current metric and payload, the legacy editor's target, or the
// variable's query under payload.
type grafanaListBody struct {
	Metric  json.RawMessage `json:"metric"`
	Target  json.RawMessage `json:"target"`
	Payload json.RawMessage `json:"payload"`
}

// grafanaMetrics lists the series for the query builder, each with the
// payload options it takes. The builder sends its current selection as
// metric; that is not a filter, or the list would shrink to the series
// already chosen. A payload member prefix narrows the list. When the
// current metric is a selector (typed as the drop-down's custom value),
// the list starts with it, offering group_by besides agg and resolution:
// the builder shows the payload options of the listed metric equal to its
// target.
func (s *Server) grafanaMetrics(w http.ResponseWriter, r *http.Request) {
	var body grafanaListBody
	if err := decodeGrafana(w, r, &body); err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	prefix, _ := payloadString(grafanaPayload(body.Payload), "prefix")
	ids, err := s.grafanaSeriesList(r, prefix)
	if err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	b := append(make([]byte, 0, 64*(len(ids)+2)), '[')
	if metric, ok := jsonenc.ScalarText(body.Metric); ok && isSelectorTarget(metric) {
		if _, err := index.Parse("metric", []string{metric}); err == nil {
			b = append(b, `{"value":`...)
			b = jsonenc.AppendString(b, metric)
			b = append(b, `,"payloads":`...)
			b = append(b, grafanaSelectorPayloadConfig...)
			b = append(b, '}')
			if len(ids) > 0 {
				b = append(b, ',')
			}
		}
	}
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"value":`...)
		b = jsonenc.AppendString(b, id)
		b = append(b, `,"payloads":`...)
		b = append(b, grafanaPayloadConfig...)
		b = append(b, '}')
	}
	writeGrafana(w, http.StatusOK, append(b, ']', '\n'))
}

// grafanaSearch is the legacy simple-json listing: the editor's text (or a
// variable's query) as target, answered with plain ids.
func (s *Server) grafanaSearch(w http.ResponseWriter, r *http.Request) {
	var body grafanaListBody
	if err := decodeGrafana(w, r, &body); err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	target, ok := jsonenc.ScalarText(body.Target)
	if !ok {
		s.writeGrafanaError(w, r, grafanaBad("target must be a string: the text to list series ids by"))
		return
	}
	ids, err := s.grafanaSeriesList(r, target)
	if err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	b, _ := json.Marshal(ids)
	writeGrafana(w, http.StatusOK, append(b, '\n'))
}

// grafanaVariable answers a dashboard variable of type Query with series
// ids. In the plugin's default string mode the query arrives as
// payload.target; in raw JSON mode payload is the user's own JSON, where
// target or prefix are honoured. A query label_values(name) (or, in raw
// JSON mode, {"label": name}) lists the values of a label instead, for
// selectors such as cpu{host=~"$host"}.
func (s *Server) grafanaVariable(w http.ResponseWriter, r *http.Request) {
	var body grafanaListBody
	if err := decodeGrafana(w, r, &body); err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	var query, label string
	if raw := bytes.TrimSpace(body.Payload); len(raw) > 0 && raw[0] == '"' {
		// The plugin's older variable editor sent the query text itself.
		_ = json.Unmarshal(raw, &query)
	} else {
		payload := grafanaPayload(raw)
		query, _ = payloadString(payload, "target")
		if query == "" {
			query, _ = payloadString(payload, "prefix")
		}
		label, _ = payloadString(payload, "label")
	}
	if name, ok := labelValuesQuery(query); ok {
		label = name
	}
	var values []string
	var err error
	if label != "" {
		values, err = s.labelValues(r, label)
	} else {
		values, err = s.grafanaSeriesList(r, query)
	}
	if err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	b := append(make([]byte, 0, 40*(len(values)+1)), '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"__text":`...)
		b = jsonenc.AppendString(b, v)
		b = append(b, `,"__value":`...)
		b = jsonenc.AppendString(b, v)
		b = append(b, '}')
	}
	writeGrafana(w, http.StatusOK, append(b, ']', '\n'))
}

// labelValuesQuery reads a variable's query label_values(name), as
// Grafana's Prometheus datasource writes it.
func labelValuesQuery(query string) (string, bool) {
	q := strings.TrimSpace(query)
	if !strings.HasPrefix(q, "label_values(") || !strings.HasSuffix(q, ")") {
		return "", false
	}
	return strings.TrimSpace(q[len("label_values(") : len(q)-1]), true
}

// labelValues lists the values of a label from the label index: the
// series ids for the pseudo-label series, none for a name that is no
// label's.
func (s *Server) labelValues(r *http.Request, name string) ([]string, error) {
	switch {
	case s.deps.Labels == nil || name == "":
		return nil, nil
	case name == tiers.SeriesLabel:
		return s.grafanaSeriesList(r, "")
	case params.LabelName(name) != nil:
		return nil, nil
	}
	return s.deps.Labels.LabelValues(r.Context(), name, nil)
}

// grafanaPayloadOptions answers the builder's selects: the aggregates,
// common windows, and for group_by the label names.
func (s *Server) grafanaPayloadOptions(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name json.RawMessage `json:"name"`
	}
	// The answer does not depend on anything else the body says, so a body
	// that does not decode still gets the options it can.
	_ = decodeGrafana(w, r, &body)
	name, _ := jsonenc.ScalarText(body.Name)
	opts := []grafanaOption{}
	switch name {
	case "agg":
		opts = grafanaAggs
	case "resolution":
		opts = grafanaResolutions
	case "group_by":
		if s.deps.Labels == nil {
			break
		}
		names, err := s.deps.Labels.LabelNames(r.Context(), nil)
		if err != nil {
			s.writeGrafanaError(w, r, err)
			return
		}
		for _, n := range names {
			opts = append(opts, grafanaOption{n, n})
		}
	}
	b, _ := json.Marshal(opts)
	writeGrafana(w, http.StatusOK, append(b, '\n'))
}

// grafanaSeriesList lists the series whose id starts with what query asks
// for; see grafanaPrefix.
func (s *Server) grafanaSeriesList(r *http.Request, query string) ([]string, error) {
	prefix, ok := grafanaPrefix(query)
	if !ok {
		return []string{}, nil
	}
	list, err := s.deps.Series.ListSeries(r.Context(), prefix, "", maxListed)
	if err != nil {
		return nil, failure.Mark(err, failure.Unavailable)
	}
	ids := make([]string, len(list))
	for i, info := range list {
		ids[i] = info.ID
	}
	return ids, nil
}

// grafanaPrefix reads a listing query as Grafana leaves it: regex-escaped
// (s\.4 means s.4), possibly a glob or regex for "everything" (*, .*), or
// an id prefix with a trailing * or .*. ok is false for text that no
// series id can start with, which lists nothing rather than everything.
func grafanaPrefix(query string) (prefix string, ok bool) {
	q := strings.TrimSpace(query)
	switch {
	case strings.HasSuffix(q, `.*`) && !strings.HasSuffix(q, `\.*`):
		q = strings.TrimSuffix(q, `.*`)
	case strings.HasSuffix(q, `*`) && !strings.HasSuffix(q, `\*`):
		q = strings.TrimSuffix(q, `*`)
	}
	q = regexUnescape(q)
	if q == "" {
		return "", true
	}
	if params.SeriesPrefix(q) != nil {
		return "", false
	}
	return q, true
}

// regexUnescape undoes Grafana's regex format for a single value: a
// backslash makes the next character literal.
func regexUnescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// grafanaPayload decodes a target's payload: an object (what the plugin
// sends since v0.6), a string holding one (queries saved by older
// versions), or anything else, which counts as empty, as the plugin itself
// treats a payload that is not valid JSON.
func grafanaPayload(raw json.RawMessage) map[string]json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		raw = []byte(s)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return obj
}

// payloadString returns the payload member key as text: a string or a
// number, or an array of one (the builder's multi-selects send arrays).
// Absent, null and empty members are "". The text is as Grafana left it:
// builder values are regex-escaped.
func payloadString(payload map[string]json.RawMessage, key string) (string, error) {
	raw := bytes.TrimSpace(payload[key])
	if len(raw) > 0 && raw[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return "", errors.New("payload." + key + " is not a valid array")
		}
		switch len(list) {
		case 0:
			return "", nil
		case 1:
			raw = list[0]
		default:
			return "", errors.New("payload." + key + " takes one value, not a list")
		}
	}
	text, ok := jsonenc.ScalarText(raw)
	if !ok {
		return "", errors.New("payload." + key + " must be a string")
	}
	return strings.TrimSpace(text), nil
}
