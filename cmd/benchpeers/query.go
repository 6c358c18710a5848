package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// side is one way of asking for a panel.
type side int

const (
	gwNative   side = iota // the gateway's own API
	gwPromQL               // the gateway's PromQL API
	victoria               // VictoriaMetrics single-node
	prometheus             // Prometheus' TSDB
	nSides
)

var sideNames = [nSides]string{"gateway", "gateway PromQL", "VictoriaMetrics", "Prometheus"}

// panel is one chart of a dashboard: the last rng before its end, at
// about maxPoints windows (raw: the points themselves), of one series or
// of all.
type panel struct {
	name   string
	rng    time.Duration
	raw    bool
	all    bool
	series int // of all: how many there are
}

const maxPoints = 1000

// step is the panel's window: the raw interval for a raw panel, else the
// smallest round step of the gateway's ladder (the one Grafana users see)
// giving at most maxPoints windows.
func (p panel) step() time.Duration {
	if p.raw {
		return interval
	}
	return roundStep(p.rng / maxPoints)
}

// roundStep is the smallest step of the ladder 1s 2s 5s 10s 15s 30s 1m 2m
// 5m 10m 15m 30m 1h 2h 3h 6h 12h 1d 2d 7d, then of whole weeks, that is
// at least need.
func roundStep(need time.Duration) time.Duration {
	const day = 24 * time.Hour
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, day, 2 * day, 7 * day} {
		if s >= need {
			return s
		}
	}
	w := 7 * day
	return (need + w - 1) / w * w
}

func (p panel) label() string {
	if p.all {
		return fmt.Sprintf("%s, %d series", p.name, p.series)
	}
	return p.name + ", 1 series"
}

// win is one window of an answer, labelled by its start (Unix ms).
type win struct {
	t int64
	v float64
}

// answer is a panel's windows by series (the host label).
type answer map[string][]win

// endpoints are the base URLs of the sides.
type endpoints [nSides]string

// request is the GET a side is asked for panel p over [from, to) with
// aggregate agg (avg, min or max; a raw panel ignores it on the gateway's
// API). nocache asks VictoriaMetrics to skip its result cache.
func (e endpoints) request(s side, p panel, from, to int64, agg string, nocache bool) string {
	step := p.step()
	if s == gwNative {
		q := url.Values{"from": {ms(from)}, "to": {ms(to)}}
		if p.raw {
			q.Set("resolution", "raw")
		} else {
			q.Set("max_points", strconv.Itoa(maxPoints))
			q.Set("agg", agg)
		}
		if p.all {
			q.Set("match", metric)
			return e[s] + "/v1/points?" + q.Encode()
		}
		return e[s] + "/v1/series/" + url.PathEscape(seriesID(0)) + "/points?" + q.Encode()
	}
	sel := metric
	if !p.all {
		sel = fmt.Sprintf("%s{host=%q}", metric, host(0))
	}
	// PromQL's value at T covers (T-step, T]: the gateway's window
	// [t, t+step) is the value at T = t + step (no point lies on a
	// boundary), so the range of evaluation instants is shifted by a step.
	q := url.Values{
		"query": {fmt.Sprintf("%s_over_time(%s[%s])", agg, sel, promDuration(step))},
		"start": {seconds(from + step.Milliseconds())},
		"end":   {seconds(to)},
		"step":  {promDuration(step)},
	}
	if s == victoria && nocache {
		q.Set("nocache", "1")
	}
	return e[s] + "/api/v1/query_range?" + q.Encode()
}

func ms(t int64) string { return strconv.FormatInt(t, 10) }

func seconds(t int64) string { return strconv.FormatFloat(float64(t)/1000, 'f', -1, 64) }

func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// gatewayResult is one series of a native answer.
type gatewayResult struct {
	Series       string            `json:"series"`
	Labels       map[string]string `json:"labels"`
	ResolutionMs int64             `json:"resolution_ms"`
	Columns      []string          `json:"columns"`
	Points       [][]float64       `json:"points"`
	Error        json.RawMessage   `json:"error"`
}

type gatewayAnswer struct {
	gatewayResult
	Results    []gatewayResult `json:"results"`
	Partial    bool            `json:"partial"`
	NextCursor string          `json:"next_cursor"`
}

// decodeGateway reads a native answer of panel p: raw points are labelled
// by the start of the interval that holds them, aggregated windows by
// their start, as the gateway labels them.
func decodeGateway(body []byte, p panel) (answer, error) {
	var a gatewayAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("gateway answer: %w", err)
	}
	if a.Partial || a.NextCursor != "" {
		return nil, fmt.Errorf("gateway answer is partial or paged (partial %v, next_cursor %q)", a.Partial, a.NextCursor)
	}
	results := a.Results
	if !p.all {
		a.Labels = map[string]string{"host": host(0)}
		results = []gatewayResult{a.gatewayResult}
	}
	out := answer{}
	step := p.step().Milliseconds()
	for _, r := range results {
		if r.Error != nil {
			return nil, fmt.Errorf("gateway answer for %s: %s", r.Series, r.Error)
		}
		if !p.raw && r.ResolutionMs != step {
			return nil, fmt.Errorf("gateway answered %s at %d ms windows, not %d", r.Series, r.ResolutionMs, step)
		}
		if len(r.Columns) != 2 {
			return nil, fmt.Errorf("gateway answer for %s has columns %v", r.Series, r.Columns)
		}
		ws := make([]win, 0, len(r.Points))
		for _, pt := range r.Points {
			t := int64(pt[0])
			if p.raw {
				t -= t % step
			}
			ws = append(ws, win{t, pt[1]})
		}
		out[r.Labels["host"]] = ws
	}
	return out, nil
}

type promAnswer struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// decodePromQL reads a query_range answer of panel p: the value at T is
// the window that starts at T - step.
func decodePromQL(body []byte, p panel) (answer, error) {
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("PromQL answer: %w", err)
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("PromQL answer: %s %s", a.Status, a.Error)
	}
	step := p.step().Milliseconds()
	out := answer{}
	for _, r := range a.Data.Result {
		ws := make([]win, 0, len(r.Values))
		for _, tv := range r.Values {
			sec, ok1 := tv[0].(float64)
			s, ok2 := tv[1].(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("PromQL answer: sample %v", tv)
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("PromQL answer: %w", err)
			}
			ws = append(ws, win{int64(math.Round(sec*1000)) - step, v})
		}
		out[r.Metric["host"]] = ws
	}
	return out, nil
}

// compare says how got differs from want: the same series, the same
// windows, min and max equal, avg within 1e-9 relative (sums added in
// another order).
func compare(got, want answer, agg string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d series, want %d", len(got), len(want))
	}
	hosts := make([]string, 0, len(want))
	for h := range want {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		g, ok := got[h]
		w := want[h]
		if !ok {
			return fmt.Errorf("no series %s", h)
		}
		if len(g) != len(w) {
			return fmt.Errorf("%s: %d windows, want %d (first %v / %v, last %v / %v)", h, len(g), len(w), first(g), first(w), last(g), last(w))
		}
		for i := range w {
			if g[i].t != w[i].t {
				return fmt.Errorf("%s: window %d starts at %d, want %d", h, i, g[i].t, w[i].t)
			}
			if !near(g[i].v, w[i].v, agg) {
				return fmt.Errorf("%s: window %d (%d) %s %v, want %v", h, i, w[i].t, agg, g[i].v, w[i].v)
			}
		}
	}
	return nil
}

func near(a, b float64, agg string) bool {
	if agg != "avg" {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func first(ws []win) any {
	if len(ws) == 0 {
		return nil
	}
	return ws[0]
}

func last(ws []win) any {
	if len(ws) == 0 {
		return nil
	}
	return ws[len(ws)-1]
}

// windows counts the windows of an answer.
func (a answer) windows() int {
	n := 0
	for _, ws := range a {
		n += len(ws)
	}
	return n
}

// fetch GETs u and returns the body and the time from sending the request
// to the last byte of the answer.
func fetch(c *http.Client, u string) ([]byte, time.Duration, error) {
	t0 := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		return nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	_ = resp.Body.Close()
	if err != nil {
		return nil, d, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, d, fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
	}
	return body, d, nil
}
