package promapi

// Remote write: a Prometheus server (or an agent) as a source.

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/problem"
)

// remoteWrite answers POST /api/v1/write: 204 once every sample is
// durable. Bad input (a body that is not a WriteRequest, native
// histograms, labels the gateway refuses, samples older than the raw
// tier keeps or too far in the future) is a 400 problem saying how many
// and why, with nothing written: Prometheus drops such a batch rather
// than retrying it. A store that does not answer is a 503 and an
// overloaded gateway a 429 (new series rate) or 503: Prometheus retries
// those.
func (a *API) remoteWrite(w http.ResponseWriter, r *http.Request) {
	if a.deps.Writer == nil {
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "this gateway takes no remote writes"))
		return
	}
	rw, err := ingest.DecodeRemoteWrite(http.MaxBytesReader(w, r.Body, ingest.MaxRemoteWriteBytes))
	if err != nil {
		a.writeFailed(w, err)
		return
	}
	if a.deps.NewSeries != nil {
		if err := a.deps.NewSeries.Check(r.Context(), a.deps.Registry, rw.Points, a.deps.Now()); err != nil {
			var ns *ingest.NewSeriesError
			if errors.As(err, &ns) {
				k := failure.BadInput
				if ns.PerMinute {
					k = failure.TooManyRequests
				}
				err = failure.Mark(err, k)
			}
			a.writeFailed(w, err)
			return
		}
	}
	res, err := a.deps.Writer.WriteBatch(r.Context(), rw.Batch)
	if err != nil {
		a.writeFailed(w, err)
		return
	}
	if m := a.deps.Metrics; m != nil {
		m.samples.Add(float64(res.Accepted))
		m.dropped.Add(float64(rw.Dropped))
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeFailed answers a refused or failed remote write as a problem whose
// status tells Prometheus whether to retry.
func (a *API) writeFailed(w http.ResponseWriter, err error) {
	var ve *ingest.ValidationError
	switch {
	case errors.As(err, &ve):
		p := problem.From(err)
		if len(ve.Errors) > 0 {
			p.Detail = fmt.Sprintf("%s; first: %s: %s", ve.Error(), ve.Errors[0].Param, ve.Errors[0].Message)
		}
		problem.Write(w, p)
		return
	case failure.Of(err) == failure.Internal:
		err = failure.Mark(err, failure.Unavailable)
	}
	p := problem.From(err)
	if p.Status >= 500 {
		a.deps.Logger.Warn("remote write failed", "status", p.Status, "err", err)
	}
	problem.Write(w, p)
}
