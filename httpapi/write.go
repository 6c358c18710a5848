package httpapi

import (
	"net/http"

	"github.com/tsgate/tsgate/ingest"
)

// writeDecoders are the media types POST /v1/points takes.
var writeDecoders = map[string]pointDecoder{
	"application/json":     ingest.DecodeJSON,
	"application/x-ndjson": ingest.DecodeNDJSON,
}

func (s *Server) writePoints(w http.ResponseWriter, r *http.Request) {
	batch, ok := s.decodePoints(w, r, writeDecoders, "send points as application/json or application/x-ndjson", s.deps.Writer.Check)
	if !ok {
		return
	}
	if !s.checkNewSeries(w, r, batch.Points) {
		return
	}
	res, err := s.deps.Writer.WriteBatch(r.Context(), batch)
	if err != nil {
		s.writeFailed(w, r, err)
		return
	}
	if s.deps.Metrics != nil {
		s.deps.Metrics.points.Add(float64(res.Accepted))
		s.deps.Metrics.late.Add(float64(res.Late))
	}
	writeValue(w, http.StatusOK, struct {
		Accepted int `json:"accepted"`
		Late     int `json:"late,omitempty"`
	}{res.Accepted, res.Late})
}
