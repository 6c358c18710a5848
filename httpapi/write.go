package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/tsgate/tsgate/ingest"
)

func (s *Server) writePoints(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(ct)
	var decode func(io.Reader, int64) ([]ingest.Point, error)
	switch {
	case err != nil: // missing or malformed: no decoder
	case mediaType == "application/json":
		decode = ingest.DecodeJSON
	case mediaType == "application/x-ndjson":
		decode = ingest.DecodeNDJSON
	}
	if decode == nil {
		s.refuseProblem(w, r, &Problem{
			Type: problemType("unsupported-media-type"), Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
			Detail: "send points as application/json or application/x-ndjson (Content-Type was " + quoteOrMissing(ct) + ")",
		})
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	points, err := decode(body, s.deps.Now().UnixMilli())
	if err != nil {
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
			err = storeError{err}
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

func quoteOrMissing(s string) string {
	if s == "" {
		return "missing"
	}
	return `"` + s + `"`
}
