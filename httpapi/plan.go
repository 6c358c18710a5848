package httpapi

import (
	"net/http"
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
		s.writeProblem(w, r, err)
		return
	}
	b := make([]byte, 0, 4096)
	b = append(b, '{')
	b = appendKey(b, "tier")
	b = appendString(b, tierName(ex.Plan.Tier))
	b = append(b, ',')
	b = appendKey(b, "resolution_ms")
	b = appendInt(b, ex.Plan.Step)
	b = append(b, ',')
	b = appendKey(b, "reason")
	b = appendString(b, ex.Plan.Reason)
	b = append(b, ',')
	b = appendKey(b, "read")
	b = append(b, '[')
	b = appendInt(b, ex.Plan.Read.From)
	b = append(b, ',')
	b = appendInt(b, ex.Plan.Read.To)
	b = append(b, ']', ',')
	b = appendSegments(b, ex.Plan.Segments)
	b = appendWarnings(b, ex.Plan.Warnings)
	b = appendKey(b, "buckets")
	b = append(b, '[')
	var buckets, partitions int64
	for pb := range ex.Buckets {
		if buckets < maxPlannedBuckets {
			if buckets > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"start":`...)
			b = appendInt(b, pb.Span.From)
			b = append(b, `,"end":`...)
			b = appendInt(b, pb.Span.To)
			b = append(b, `,"tier":`...)
			b = appendString(b, tierName(pb.Tier))
			b = append(b, `,"partitions":`...)
			b = appendInt(b, int64(pb.Partitions))
			b = append(b, '}')
		}
		buckets++
		partitions += int64(pb.Partitions)
	}
	b = append(b, ']', ',')
	b = appendKey(b, "bucket_count")
	b = appendInt(b, buckets)
	b = append(b, ',')
	b = appendKey(b, "buckets_truncated")
	if buckets > maxPlannedBuckets {
		b = append(b, "true"...)
	} else {
		b = append(b, "false"...)
	}
	b = append(b, ',')
	b = appendKey(b, "partitions")
	b = appendInt(b, partitions)
	b = append(b, '}', '\n')
	writeJSON(w, http.StatusOK, b)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
