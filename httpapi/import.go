package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/problem"
)

// importPoints writes history through the importer: raw partitions for
// what the raw tier keeps, rollup rows for what only coarser tiers keep.
func (s *Server) importPoints(w http.ResponseWriter, r *http.Request) {
	var decode func(io.Reader, int64) ([]ingest.Point, error)
	switch mediaType(r) {
	case "application/x-ndjson":
		decode = ingest.DecodeNDJSON
	case "text/csv":
		decode = ingest.DecodeCSV
	default:
		s.writeProblem(w, r, unsupportedMedia("send history as application/x-ndjson or text/csv", r.Header.Get("Content-Type")))
		return
	}
	if s.deps.Importer == nil {
		s.writeProblem(w, r, errors.New("this server has no importer"))
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	points, err := decode(body, s.deps.Now().UnixMilli())
	if err != nil {
		var ve *ingest.ValidationError
		if errors.As(err, &ve) {
			s.deps.Importer.Check(ve)
		}
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.deps.Importer.Import(r.Context(), points)
	if err != nil {
		var ve *ingest.ValidationError
		if !errors.As(err, &ve) {
			err = problem.Unavailable(err)
		}
		s.writeProblem(w, r, err)
		return
	}
	if m := s.deps.Metrics; m != nil {
		m.imported.WithLabelValues("raw").Add(float64(res.Raw))
		for tier, n := range res.Aggregated {
			m.imported.WithLabelValues(tier).Add(float64(n))
		}
		m.imported.WithLabelValues("dropped").Add(float64(res.Dropped))
	}
	b, _ := json.Marshal(struct {
		Points     int              `json:"points"`
		Raw        int              `json:"raw"`
		Aggregated map[string]int   `json:"aggregated"`
		Windows    map[string]int64 `json:"windows"`
		Dropped    int              `json:"dropped"`
	}{res.Points, res.Raw, res.Aggregated, res.Windows, res.Dropped})
	writeJSON(w, http.StatusOK, append(b, '\n'))
}
