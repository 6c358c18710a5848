package promapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/grafana"
	"github.com/tsgate/tsgate/problem"
)

// Every kind of failure goes through every renderer of the gateway — the
// v1 API's problem+json, Grafana's envelope, Prometheus' — with the status
// of the one table, and each renderer's own shape. A kind added to package
// failure without a row here fails the test.
func TestEveryKindThroughEveryRenderer(t *testing.T) {
	want := map[failure.Kind]struct {
		status  int
		slug    string
		promTyp errorType
	}{
		failure.Internal:         {500, "internal", errInternal},
		failure.BadInput:         {400, "invalid-parameter", errBadData},
		failure.NotFound:         {404, "series-not-found", errNotFound},
		failure.Unauthorized:     {401, "unauthorized", errBadData},
		failure.Forbidden:        {403, "forbidden", errBadData},
		failure.Blocked:          {403, "series-blocked", errBadData},
		failure.TooLarge:         {413, "body-too-large", errBadData},
		failure.UnsupportedMedia: {415, "unsupported-media-type", errBadData},
		failure.TooManyRequests:  {429, "new-series-rate", errUnavailable},
		failure.Overloaded:       {503, "overloaded", errUnavailable},
		failure.BudgetExceeded:   {504, "budget-exceeded", errTimeout},
		failure.Unavailable:      {503, "store-unavailable", errUnavailable},
		failure.Canceled:         {499, "canceled", errCanceled},
	}
	for _, k := range failure.Kinds {
		w, ok := want[k]
		if !ok {
			t.Errorf("kind %v has no row", k)
			continue
		}
		err := failure.New(k, "what happened")
		p := problem.From(err)
		if p.Status != w.status || problem.Slug(p.Type) != w.slug {
			t.Errorf("%v: problem %d %s, want %d %s", k, p.Status, p.Type, w.status, w.slug)
		}
		if p.Kind() != k && !(k == failure.Canceled || k == failure.Internal) {
			t.Errorf("%v: the problem says its kind is %v", k, p.Kind())
		}

		rec := httptest.NewRecorder()
		grafana.WriteRefusal(rec, p)
		var env struct{ Message, Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Message == "" || env.Error == "" {
			t.Errorf("%v: Grafana's envelope %s", k, rec.Body)
		}
		if gs := rec.Code; gs != w.status && !(w.status == 401 && gs == 400) {
			t.Errorf("%v: Grafana's status %d, want %d", k, gs, w.status)
		}

		rec = httptest.NewRecorder()
		writeError(rec, err)
		var prom struct{ Status, ErrorType, Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &prom); err != nil || prom.Status != "error" || prom.Error == "" {
			t.Errorf("%v: Prometheus' envelope %s", k, rec.Body)
		}
		if rec.Code != w.status || errorType(prom.ErrorType) != w.promTyp {
			t.Errorf("%v: Prometheus %d %s, want %d %s", k, rec.Code, prom.ErrorType, w.status, w.promTyp)
		}
	}
}
