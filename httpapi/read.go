package httpapi

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
)

// readRequest parses a read's query parameters into a typed request and
// lets the engine check it; it answers the problem itself when anything is
// wrong. The series is the path's {id}, and is named so in errors.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (query.Request, bool) {
	f, errs := queryFields(r.URL.Query())
	req, perrs := f.request(chi.URLParam(r, "id"), keep)
	errs = append(errs, perrs...)
	if len(errs) == 0 {
		errs = params.List(s.deps.Engine.Check(req))
	}
	if len(errs) > 0 {
		s.writeProblem(w, r, params.Rename(errs, pathParam))
		return req, false
	}
	return req, true
}

// pathParam names the series parameter as the REST routes have it.
func pathParam(p string) string {
	if p == "series" {
		return "id"
	}
	return p
}

func (s *Server) readPoints(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	res, err := s.deps.Engine.Query(r.Context(), req)
	if err != nil {
		s.writeProblem(w, r, params.Rename(err, pathParam))
		return
	}
	defer res.Close()
	sp := newSpool(r, w, s.cfg.SpoolBytes, req.Deny)
	defer sp.release()
	if err := sp.meter.Track(r.Context(), cap(sp.buf)); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	sp.buf = appendAnswerHead(sp.buf, res.Head())
	sp.buf, err = appendItems(sp.buf, res, s.cfg.SpoolBytes, sp.flushed)
	if err != nil {
		if !sp.committed {
			// The memory budget ran out for an answer held whole.
			s.writeProblem(w, r, err)
		}
		return // or the client went away
	}
	tr := res.Trailer()
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
	r         *http.Request
	buf       []byte
	size      int
	holdAll   bool
	committed bool
	// meter counts the buffer into the request's memory budget.
	meter membudget.Meter
}

func newSpool(r *http.Request, w http.ResponseWriter, size int, holdAll bool) *spool {
	want := size + size/4
	sp := &spool{w: w, r: r, size: size, holdAll: holdAll, meter: membudget.From(r.Context()).Meter()}
	if p, ok := spoolBuffers.Get().(*[]byte); ok && cap(*p) >= want {
		sp.buf = (*p)[:0]
	} else {
		sp.buf = make([]byte, 0, want)
	}
	return sp
}

// spoolBuffers keeps answer buffers for the next answers: a fresh one is
// tens of kilobytes to clear, for reads that take less than a millisecond
// when their buckets are cached.
var spoolBuffers sync.Pool

// release gives the buffer back once the answer is written, unless it grew
// far past its size (an all-or-nothing answer held whole).
func (s *spool) release() {
	if c := cap(s.buf); c > 0 && c <= 1<<20 {
		b := s.buf[:0]
		spoolBuffers.Put(&b)
	}
	s.buf = nil
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

// flushed is flush for a buffer that appendItems is filling. An answer
// held whole counts its growth into the memory budget instead.
func (s *spool) flushed(b []byte) ([]byte, int, error) {
	s.buf = b
	if s.holdAll {
		return b, len(b) + s.size, s.meter.Track(s.r.Context(), cap(b))
	}
	err := s.flush()
	return s.buf, s.size, err
}

func (s *spool) finish() error {
	if !s.committed {
		// The whole answer is here: sent with its length, in one write,
		// rather than as chunks, which cost the client a parse each and
		// the connection a write per chunk boundary.
		s.w.Header().Set("Content-Length", strconv.Itoa(len(s.buf)))
	}
	s.commit()
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

// appendAnswerHead writes the members known before any point.
func appendAnswerHead(b []byte, res *query.Head) []byte {
	b = append(b, '{')
	b = jsonenc.AppendKey(b, "series")
	b = jsonenc.AppendString(b, res.Series)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "from")
	b = jsonenc.AppendInt(b, res.Span.From)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "to")
	b = jsonenc.AppendInt(b, res.Span.To)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "tier")
	b = jsonenc.AppendString(b, res.Plan.TierName)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "resolution_ms")
	b = jsonenc.AppendInt(b, res.Plan.Step)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "order")
	if res.Desc {
		b = jsonenc.AppendString(b, "desc")
	} else {
		b = jsonenc.AppendString(b, "asc")
	}
	b = append(b, ',')
	b = appendColumns(b, res)
	b = append(b, ',')
	b = appendWarnings(b, res.Warnings)
	b = appendSegments(b, res.Plan.Segments)
	b = jsonenc.AppendKey(b, "points")
	return append(b, '[')
}

// appendColumns writes the columns member: t and v for raw points, t and
// the aggregates for windows.
func appendColumns(b []byte, h *query.Head) []byte {
	b = jsonenc.AppendKey(b, "columns")
	b = append(b, `["t"`...)
	if h.Plan.Step == 0 {
		b = append(b, `,"v"`...)
	} else {
		for _, a := range h.Aggs {
			b = append(b, ',')
			b = jsonenc.AppendString(b, a.String())
		}
	}
	return append(b, ']')
}

// sortedNames is the keys of m, ascending.
func sortedNames(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// appendItems writes the items of a page separated by commas, and calls
// flush with b whenever it holds more than flushAt bytes, going on with the
// buffer and the next flushAt flush returns. Items the result hands over in batches (runs of
// raw points or of one-row windows, cached or merged in one pass) are
// copied a batch at a time.
func appendItems(b []byte, res query.Result, flushAt int, flush func([]byte) ([]byte, int, error)) ([]byte, error) {
	h := res.Head()
	// A batch fills the buffer up to flushAt, as far as the bytes of the
	// items batched so far tell; at most 4,096 items, at least 16.
	perItem, batched, batchedBytes := 32, 0, 0
	first := true
	for {
		limit := min(4096, max(16, (flushAt-len(b))/perItem))
		if batch, ok := res.NextBatch(limit); ok {
			if !first {
				b = append(b, ',')
			}
			first = false
			n := len(b)
			b = batch.AppendJSON(b)
			batched, batchedBytes = batched+batch.Len(), batchedBytes+len(b)-n
			perItem = max(1, batchedBytes/batched)
		} else if res.Next() {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = h.AppendItem(b, res.Item())
		} else {
			return b, nil
		}
		if len(b) >= flushAt {
			var err error
			if b, flushAt, err = flush(b); err != nil {
				return b, err
			}
		}
	}
}

// appendAnswerTail closes the points and writes what is known at the end.
func appendAnswerTail(b []byte, tr query.Trailer) []byte {
	b = append(b, ']', ',')
	b = jsonenc.AppendKey(b, "partial")
	if tr.Partial {
		b = append(b, "true,"...)
		b = jsonenc.AppendKey(b, "partial_reason")
		b = jsonenc.AppendString(b, tr.Reason)
	} else {
		b = append(b, "false"...)
	}
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "covered")
	b = append(b, '[')
	b = jsonenc.AppendInt(b, tr.Covered.From)
	b = append(b, ',')
	b = jsonenc.AppendInt(b, tr.Covered.To)
	b = append(b, ']', ',')
	if tr.NextCursor != "" {
		b = jsonenc.AppendKey(b, "next_cursor")
		b = jsonenc.AppendString(b, tr.NextCursor)
		b = append(b, ',')
	}
	b = jsonenc.AppendKey(b, "stats")
	b = append(b, `{"buckets":`...)
	b = jsonenc.AppendInt(b, tr.Stats.Buckets)
	b = append(b, `,"partitions":`...)
	b = jsonenc.AppendInt(b, tr.Stats.Partitions)
	b = append(b, `,"rows_read":`...)
	b = jsonenc.AppendInt(b, tr.Stats.RowsRead)
	b = append(b, `,"cache_hits":`...)
	b = jsonenc.AppendInt(b, tr.Stats.CacheHits)
	b = append(b, `,"elapsed_ms":`...)
	b = jsonenc.AppendFloat(b, float64(tr.Stats.Elapsed.Microseconds())/1000)
	return append(b, '}', '}')
}

// appendWarnings writes the warnings member and its comma, when there are
// warnings.
func appendWarnings(b []byte, warnings []string) []byte {
	if len(warnings) == 0 {
		return b
	}
	b = jsonenc.AppendKey(b, "warnings")
	b = append(b, '[')
	for i, w := range warnings {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, w)
	}
	return append(b, ']', ',')
}

// appendSegments writes the segments member and its comma.
func appendSegments(b []byte, segs []query.Segment) []byte {
	b = jsonenc.AppendKey(b, "segments")
	b = append(b, '[')
	for i, seg := range segs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"from":`...)
		b = jsonenc.AppendInt(b, seg.Span.From)
		b = append(b, `,"to":`...)
		b = jsonenc.AppendInt(b, seg.Span.To)
		b = append(b, `,"tier":`...)
		b = jsonenc.AppendString(b, seg.TierName)
		b = append(b, '}')
	}
	return append(b, ']', ',')
}
