package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// FuzzGateway is the whole gateway's handler over an in-memory store
// holding a few series with an hour of points each, for fuzz targets to
// send any request to without a network round trip.
type FuzzGateway struct {
	Handler http.Handler
	Env     *querytest.Env
}

// FuzzSeries are the series a FuzzGateway holds.
var FuzzSeries = []string{"s-1", "s-2", "s.3", "room.a.temp", "room.b.temp"}

// NewFuzzGateway assembles the gateway for f's fuzz target.
func NewFuzzGateway(f *testing.F) *FuzzGateway {
	f.Helper()
	store := NewMemStore(f, querytest.Start)
	env := querytest.NewEnv(f, store, querytest.Options{})
	now := env.Clock.Now().UnixMilli()
	var pts []ingest.Point
	for _, id := range FuzzSeries {
		for i := range 60 {
			pts = append(pts, ingest.Point{Series: id, T: now - tiers.Hour + int64(i)*tiers.Minute, V: float64(i)})
		}
	}
	if _, err := env.Writer.Write(context.Background(), pts); err != nil {
		f.Fatal(err)
	}
	return &FuzzGateway{Handler: env.Gateway.Handler(), Env: env}
}

// Do serves one request. target may hold any bytes: it is used as the
// request line's target is, unparsed.
func (g *FuzzGateway) Do(method, target, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/", bytes.NewReader(body))
	req.URL = &url.URL{Path: target}
	if path, query, ok := strings.Cut(target, "?"); ok {
		req.URL.Path, req.URL.RawQuery = path, query
	}
	req.RequestURI = target
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	g.Handler.ServeHTTP(rec, req)
	return rec
}

// CheckV1Answer asserts what every answer of the v1 API is, whatever the
// request: no 5xx; a 4xx is a problem+json of that status with a detail,
// and a 400 names each parameter it is about; a 200 is JSON.
func CheckV1Answer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	if rec.Code < 400 {
		if rec.Code != http.StatusOK || !json.Valid(body) {
			t.Fatalf("%s: %d with a body that is not JSON: %q", what, rec.Code, body)
		}
		return
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: %d of type %q: %s", what, rec.Code, ct, body)
	}
	var p problem.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Status != rec.Code || p.Detail == "" || p.Type == "" || p.Title == "" {
		t.Fatalf("%s: %d with problem %s (%v)", what, rec.Code, body, err)
	}
	if rec.Code == http.StatusBadRequest {
		if len(p.Errors) == 0 {
			t.Fatalf("%s: a 400 that names no parameter: %s", what, body)
		}
		for _, e := range p.Errors {
			if e.Param == "" || e.Message == "" {
				t.Fatalf("%s: a 400 with an unnamed error: %s", what, body)
			}
		}
	}
}

// CheckGrafanaAnswer asserts what every answer of the Grafana protocol
// is: no 5xx; JSON; a 4xx carries the message the plugin shows.
func CheckGrafanaAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	if !json.Valid(body) {
		t.Fatalf("%s: %d with a body that is not JSON: %q", what, rec.Code, body)
	}
	if rec.Code >= 400 {
		var e struct{ Message, Error string }
		if err := json.Unmarshal(body, &e); err != nil || e.Message == "" || e.Error == "" {
			t.Fatalf("%s: %d without a message: %s", what, rec.Code, body)
		}
	}
}
