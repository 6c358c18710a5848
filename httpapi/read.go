package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
)

func (s *Server) readInput(r *http.Request) readInput {
	q := r.URL.Query()
	return readInput{
		Series: chi.URLParam(r, "id"), From: q.Get("from"), To: q.Get("to"), Resolution: q.Get("resolution"),
		MaxPoints: q.Get("max_points"), Agg: listParam(q, "agg"), Order: q.Get("order"), Limit: q.Get("limit"),
		Cursor: q.Get("cursor"), SLO: q.Get("slo"), Partial: q.Get("partial"),
	}
}

// readRequest parses a read's query parameters, answering the problem
// itself when any is wrong.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (query.Request, bool) {
	req, errs := s.parseRead(s.readInput(r), s.deps.Now())
	if len(errs) > 0 {
		s.writeProblem(w, r, badParams(errs[0].Param+": "+errs[0].Message, errs))
		return req, false
	}
	return req, true
}

func (s *Server) readPoints(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	res, err := s.deps.Engine.Query(r.Context(), req)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	defer res.Close()
	sp := newSpool(w, s.cfg.SpoolBytes, req.Deny)
	sp.buf = appendAnswerHead(sp.buf, res)
	first := true
	for res.Next() {
		if !first {
			sp.buf = append(sp.buf, ',')
		}
		first = false
		sp.buf = appendItem(sp.buf, res, res.Item())
		if len(sp.buf) >= s.cfg.SpoolBytes {
			if err := sp.flush(); err != nil {
				return // the client went away
			}
		}
	}
	tr := res.Trailer()
	s.deps.Metrics.observeRead(tr)
	if tr.Err != nil {
		// partial=deny: nothing was sent yet, so the whole answer becomes
		// the problem.
		s.writeProblem(w, r, tr.Err)
		return
	}
	sp.buf = appendAnswerTail(sp.buf, tr)
	sp.buf = append(sp.buf, '\n')
	_ = sp.finish()
}

// spool holds the start of an answer so that a failure early on can still
// be answered with a problem; once it holds more than its size (and the
// request did not ask for all-or-nothing), the status is sent and the rest
// streams.
type spool struct {
	w         http.ResponseWriter
	buf       []byte
	holdAll   bool
	committed bool
}

func newSpool(w http.ResponseWriter, size int, holdAll bool) *spool {
	return &spool{w: w, buf: make([]byte, 0, size+size/4), holdAll: holdAll}
}

func (s *spool) commit() {
	if s.committed {
		return
	}
	s.committed = true
	h := s.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	s.w.WriteHeader(http.StatusOK)
}

func (s *spool) flush() error {
	if s.holdAll {
		return nil
	}
	s.commit()
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

func (s *spool) finish() error {
	s.commit()
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

// appendAnswerHead writes the members known before any point.
func appendAnswerHead(b []byte, res *query.Result) []byte {
	b = append(b, '{')
	b = appendKey(b, "series")
	b = appendString(b, res.Series)
	b = append(b, ',')
	b = appendKey(b, "from")
	b = appendInt(b, res.Span.From)
	b = append(b, ',')
	b = appendKey(b, "to")
	b = appendInt(b, res.Span.To)
	b = append(b, ',')
	b = appendKey(b, "tier")
	b = appendString(b, tierName(res.Plan.Tier))
	b = append(b, ',')
	b = appendKey(b, "resolution_ms")
	b = appendInt(b, res.Plan.Step)
	b = append(b, ',')
	b = appendKey(b, "order")
	if res.Desc {
		b = appendString(b, "desc")
	} else {
		b = appendString(b, "asc")
	}
	b = append(b, ',')
	b = appendKey(b, "columns")
	b = append(b, `["t"`...)
	if res.Plan.Step == 0 {
		b = append(b, `,"v"`...)
	} else {
		for _, a := range res.Aggs {
			b = append(b, ',')
			b = appendString(b, a.String())
		}
	}
	b = append(b, ']', ',')
	b = appendWarnings(b, res.Warnings)
	b = appendSegments(b, res.Plan.Segments)
	b = appendKey(b, "points")
	return append(b, '[')
}

// appendItem writes one point or window as an array in column order.
func appendItem(b []byte, res *query.Result, it query.Item) []byte {
	b = append(b, '[')
	b = appendInt(b, it.T)
	if res.Plan.Step == 0 {
		b = append(b, ',')
		b = appendFloat(b, it.Row.Value())
	} else {
		for _, a := range res.Aggs {
			b = append(b, ',')
			if a == query.Count {
				b = appendInt(b, it.Row.Count)
			} else {
				b = appendFloat(b, a.Of(it.Row))
			}
		}
	}
	return append(b, ']')
}

// appendAnswerTail closes the points and writes what is known at the end.
func appendAnswerTail(b []byte, tr query.Trailer) []byte {
	b = append(b, ']', ',')
	b = appendKey(b, "partial")
	if tr.Partial {
		b = append(b, "true,"...)
		b = appendKey(b, "partial_reason")
		b = appendString(b, tr.Reason)
	} else {
		b = append(b, "false"...)
	}
	b = append(b, ',')
	b = appendKey(b, "covered")
	b = append(b, '[')
	b = appendInt(b, tr.Covered.From)
	b = append(b, ',')
	b = appendInt(b, tr.Covered.To)
	b = append(b, ']', ',')
	if tr.NextCursor != "" {
		b = appendKey(b, "next_cursor")
		b = appendString(b, tr.NextCursor)
		b = append(b, ',')
	}
	b = appendKey(b, "stats")
	b = append(b, `{"buckets":`...)
	b = appendInt(b, tr.Stats.Buckets)
	b = append(b, `,"partitions":`...)
	b = appendInt(b, tr.Stats.Partitions)
	b = append(b, `,"rows_read":`...)
	b = appendInt(b, tr.Stats.RowsRead)
	b = append(b, `,"cache_hits":`...)
	b = appendInt(b, tr.Stats.CacheHits)
	b = append(b, `,"elapsed_ms":`...)
	b = appendFloat(b, float64(tr.Stats.Elapsed.Microseconds())/1000)
	return append(b, '}', '}')
}

// appendWarnings writes the warnings member and its comma, when there are
// warnings.
func appendWarnings(b []byte, warnings []string) []byte {
	if len(warnings) == 0 {
		return b
	}
	b = appendKey(b, "warnings")
	b = append(b, '[')
	for i, w := range warnings {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, w)
	}
	return append(b, ']', ',')
}

// appendSegments writes the segments member and its comma.
func appendSegments(b []byte, segs []router.Segment) []byte {
	b = appendKey(b, "segments")
	b = append(b, '[')
	for i, seg := range segs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"from":`...)
		b = appendInt(b, seg.Span.From)
		b = append(b, `,"to":`...)
		b = appendInt(b, seg.Span.To)
		b = append(b, `,"tier":`...)
		b = appendString(b, tierName(seg.Tier))
		b = append(b, '}')
	}
	return append(b, ']', ',')
}
