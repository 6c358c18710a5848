package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/problem"
)

// writeProblem answers with the problem for err, logging server-side
// failures with the request's logger. A request that breaks the contract
// is answered like any other bad parameter.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if ce, ok := err.(contractError); ok && !errors.As(err, &mbe) {
		err = contractParamErrors(ce)
	}
	p := problem.From(err)
	switch {
	case p.Status == http.StatusRequestEntityTooLarge:
		s.deps.Metrics.refuse(refusedBodyTooLarge)
	case errors.Is(err, membudget.ErrExhausted):
		s.deps.Metrics.refuse(refusedAnswerMemory)
	}
	if p.Status >= 500 {
		level := slog.LevelWarn
		if p.Status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		s.logger(r).Log(r.Context(), level, "request failed", "status", p.Status, "err", err)
	}
	problem.Write(w, p)
}
