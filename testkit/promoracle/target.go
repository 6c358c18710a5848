package promoracle

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Target is a server that takes remote write and answers the Prometheus
// HTTP API: a Prometheus server, or the gateway.
type Target struct {
	// Name names the target in messages.
	Name string
	// API is the URL the HTTP API's /api/v1/... paths hang under:
	// http://127.0.0.1:9490 for a Prometheus server,
	// http://127.0.0.1:8080/prometheus for the gateway.
	API string
	// Write is the remote-write URL: API + /api/v1/write on both.
	Write string
	// Header is added to every request (an Authorization header).
	Header http.Header
	// Client sends the requests; a client with a 60 s timeout when nil.
	Client *http.Client

	mu  sync.Mutex
	api v1.API
}

// Prometheus is the target of a Prometheus server at url.
func Prometheus(name, url string) *Target {
	url = strings.TrimSuffix(url, "/")
	return &Target{Name: name, API: url, Write: url + "/api/v1/write"}
}

// Gateway is the target of a gateway at url.
func Gateway(name, url string) *Target {
	url = strings.TrimSuffix(url, "/") + "/prometheus"
	return &Target{Name: name, API: url, Write: url + "/api/v1/write"}
}

func (t *Target) client() *http.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clientLocked()
}

func (t *Target) clientLocked() *http.Client {
	if t.Client == nil {
		t.Client = &http.Client{Timeout: 60 * time.Second}
	}
	return t.Client
}

// v1 is the Prometheus Go client's API of the target: queries go as POST
// forms (falling back to GET on 405), label values as GET.
func (t *Target) v1() v1.API {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.api == nil {
		hc := t.clientLocked()
		c, err := promclient.NewClient(promclient.Config{Address: t.API, Client: &http.Client{
			Timeout:   hc.Timeout,
			Transport: headerTransport{header: t.Header, next: hc.Transport},
		}})
		if err != nil {
			// Only a URL that does not parse fails here: a broken test.
			panic(fmt.Sprintf("target %s: %v", t.Name, err))
		}
		t.api = v1.NewAPI(c)
	}
	return t.api
}

// headerTransport adds a target's headers to each request.
type headerTransport struct {
	header http.Header
	next   http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.header) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.header {
			r.Header[k] = v
		}
	}
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// Send writes the sample set to the target.
func (t *Target) Send(ctx context.Context, s *Set) error {
	if err := s.Send(ctx, t.client(), t.Write, t.Header); err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	return nil
}

// Query is an instant query at at.
func (t *Target) Query(ctx context.Context, expr string, at time.Time) (model.Value, error) {
	v, _, _, err := t.v1().Query(ctx, expr, at)
	return v, err
}

// QueryRange is a range query.
func (t *Target) QueryRange(ctx context.Context, expr string, r v1.Range) (model.Value, error) {
	v, _, _, err := t.v1().QueryRange(ctx, expr, r)
	return v, err
}

// Series lists the label sets of the series matching any of matches in
// [start, end] (zero times: unbounded).
func (t *Target) Series(ctx context.Context, matches []string, start, end time.Time) ([]model.LabelSet, error) {
	v, _, _, err := t.v1().Series(ctx, matches, start, end)
	return v, err
}

// LabelNames lists the label names of the series matching matches (all
// series when there are none).
func (t *Target) LabelNames(ctx context.Context, matches []string, start, end time.Time) ([]string, error) {
	v, _, _, err := t.v1().LabelNames(ctx, matches, start, end)
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = string(n)
	}
	return out, err
}

// LabelValues lists the values of label name on the series matching
// matches.
func (t *Target) LabelValues(ctx context.Context, name string, matches []string, start, end time.Time) ([]string, error) {
	v, _, _, err := t.v1().LabelValues(ctx, name, matches, start, end)
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = string(n)
	}
	return out, err
}

// Place returns the instant to place a sample set by on the Prometheus
// server ref: want, unless the server already holds samples that recent
// (a server left running by an earlier run, which would refuse samples
// older than its newest by more than its head's hour as out of bounds);
// then a day after the newest sample it holds plus the set's span, so
// that no range of the expressions reaches the earlier samples.
func Place(ctx context.Context, ref *Target, want time.Time) (time.Time, error) {
	st, err := ref.v1().TSDB(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: TSDB status: %w", ref.Name, err)
	}
	if st.HeadStats.NumSeries == 0 {
		return want, nil
	}
	newest := time.UnixMilli(int64(st.HeadStats.MaxTime))
	if newest.Before(want.Add(-Span - 2*time.Hour)) {
		return want, nil
	}
	return newest.Add(Span + 24*time.Hour).Truncate(time.Minute), nil
}
