package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/problem"
)

func (s *Server) writePoints(w http.ResponseWriter, r *http.Request) {
	var decode func(io.Reader, int64) ([]ingest.Point, error)
	switch mediaType(r) {
	case "application/json":
		decode = ingest.DecodeJSON
	case "application/x-ndjson":
		decode = ingest.DecodeNDJSON
	default:
		s.deps.Metrics.refuse(refusedMediaType)
		s.writeProblem(w, r, unsupportedMedia("send points as application/json or application/x-ndjson", r.Header.Get("Content-Type")))
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	points, err := decode(body, s.deps.Now().UnixMilli())
	if err != nil {
		var ve *ingest.ValidationError
		if errors.As(err, &ve) {
			s.deps.Writer.Check(ve)
		}
		s.writeProblem(w, r, err)
		return
	}
	if !s.checkNewSeries(w, r, points) {
		return
	}
	res, err := s.deps.Writer.Write(r.Context(), points)
	if err != nil {
		var ve *ingest.ValidationError
		if !errors.As(err, &ve) {
			err = problem.Unavailable(err)
		}
		s.writeProblem(w, r, err)
		return
	}
	if s.deps.Metrics != nil {
		s.deps.Metrics.points.Add(float64(res.Accepted))
		s.deps.Metrics.late.Add(float64(res.Late))
	}
	b, _ := json.Marshal(struct {
		Accepted int `json:"accepted"`
		Late     int `json:"late,omitempty"`
	}{res.Accepted, res.Late})
	writeJSON(w, http.StatusOK, append(b, '\n'))
}
