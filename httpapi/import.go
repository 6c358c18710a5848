package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/tsgate/tsgate/ingest"
)

// importPoints writes history through the importer: raw partitions for
// what the raw tier keeps, rollup rows for what only coarser tiers keep.
func (s *Server) importPoints(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(ct)
	var decode func(io.Reader, int64) ([]ingest.Point, error)
	switch {
	case err != nil: // missing or malformed: no decoder
	case mediaType == "application/x-ndjson":
		decode = ingest.DecodeNDJSON
	case mediaType == "text/csv":
		decode = ingest.DecodeCSV
	}
	if decode == nil {
		writeJSONProblem(w, &Problem{
			Type: problemType("unsupported-media-type"), Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
			Detail: "send history as application/x-ndjson or text/csv (Content-Type was " + quoteOrMissing(ct) + ")",
		})
		return
	}
	if s.deps.Importer == nil {
		s.writeProblem(w, r, errors.New("this server has no importer"))
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	points, err := decode(body, s.deps.Now().UnixMilli())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.deps.Importer.Import(r.Context(), points)
	if err != nil {
		var ve *ingest.ValidationError
		if !errors.As(err, &ve) {
			err = storeError{err}
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
