package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/params"
)

// maxPlannedBuckets bounds the bucket list of a plan; the totals still count
// every bucket.
const maxPlannedBuckets = 1000

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	ex, err := s.deps.Engine.Explain(r.Context(), req)
	if err != nil {
		s.writeProblem(w, r, params.Rename(err, pathParam))
		return
	}
	b := make([]byte, 0, 4096)
	b = append(b, '{')
	b = jsonenc.AppendKey(b, "tier")
	b = jsonenc.AppendString(b, ex.Plan.TierName)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "resolution_ms")
	b = jsonenc.AppendInt(b, ex.Plan.Step)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "reason")
	b = jsonenc.AppendString(b, ex.Plan.Reason)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "read")
	b = append(b, '[')
	b = jsonenc.AppendInt(b, ex.Plan.Read.From)
	b = append(b, ',')
	b = jsonenc.AppendInt(b, ex.Plan.Read.To)
	b = append(b, ']', ',')
	b = appendSegments(b, ex.Plan.Segments)
	b = appendWarnings(b, ex.Plan.Warnings)
	b = jsonenc.AppendKey(b, "buckets")
	b = append(b, '[')
	var buckets, partitions int64
	for pb := range ex.Buckets {
		if buckets < maxPlannedBuckets {
			if buckets > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"start":`...)
			b = jsonenc.AppendInt(b, pb.Span.From)
			b = append(b, `,"end":`...)
			b = jsonenc.AppendInt(b, pb.Span.To)
			b = append(b, `,"tier":`...)
			b = jsonenc.AppendString(b, pb.TierName)
			b = append(b, `,"partitions":`...)
			b = jsonenc.AppendInt(b, int64(pb.Partitions))
			b = append(b, '}')
		}
		buckets++
		partitions += int64(pb.Partitions)
	}
	b = append(b, ']', ',')
	b = jsonenc.AppendKey(b, "bucket_count")
	b = jsonenc.AppendInt(b, buckets)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "buckets_truncated")
	if buckets > maxPlannedBuckets {
		b = append(b, "true"...)
	} else {
		b = append(b, "false"...)
	}
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "partitions")
	b = jsonenc.AppendInt(b, partitions)
	b = append(b, '}', '\n')
	writeJSON(w, http.StatusOK, b)
}

// writeValue answers v as JSON, one line.
func writeValue(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeJSON(w, status, append(b, '\n'))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
