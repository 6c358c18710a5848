package httpapi

import (
	"errors"
	"net/http"

	"github.com/tsgate/tsgate/ingest"
)

// importDecoders are the media types POST /v1/import takes.
var importDecoders = map[string]pointDecoder{
	"application/x-ndjson": ingest.DecodeNDJSON,
	"text/csv":             ingest.DecodeCSV,
}

// importPoints writes history through the importer: raw partitions for
// what the raw tier keeps, rollup rows for what only coarser tiers keep.
func (s *Server) importPoints(w http.ResponseWriter, r *http.Request) {
	if s.deps.Importer == nil {
		s.writeProblem(w, r, errors.New("this server has no importer"))
		return
	}
	batch, ok := s.decodePoints(w, r, importDecoders, "send history as application/x-ndjson or text/csv", s.deps.Importer.Check)
	if !ok {
		return
	}
	res, err := s.deps.Importer.ImportBatch(r.Context(), batch)
	if err != nil {
		s.writeFailed(w, r, err)
		return
	}
	if m := s.deps.Metrics; m != nil {
		m.imported.WithLabelValues("raw").Add(float64(res.Raw))
		for tier, n := range res.Aggregated {
			m.imported.WithLabelValues(tier).Add(float64(n))
		}
		m.imported.WithLabelValues("dropped").Add(float64(res.Dropped))
	}
	writeValue(w, http.StatusOK, struct {
		Points     int              `json:"points"`
		Raw        int              `json:"raw"`
		Aggregated map[string]int   `json:"aggregated"`
		Windows    map[string]int64 `json:"windows"`
		Dropped    int              `json:"dropped"`
	}{res.Points, res.Raw, res.Aggregated, res.Windows, res.Dropped})
}
