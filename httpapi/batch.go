package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tsgate/tsgate/query"
)

// MaxBatchQueries bounds the series of one POST /v1/query.
const MaxBatchQueries = 100

// maxBatchBodyBytes bounds the body of one POST /v1/query.
const maxBatchBodyBytes = 1 << 20

// batchParallelism is how many series of one batch are read at once; each
// also fans out over its partitions.
const batchParallelism = 4

// batchFields are the read parameters a batch sets for all its queries and
// each query may override. Times and numbers may be JSON strings or numbers.
type batchFields struct {
	From       json.RawMessage `json:"from"`
	To         json.RawMessage `json:"to"`
	Resolution json.RawMessage `json:"resolution"`
	MaxPoints  json.RawMessage `json:"max_points"`
	Agg        json.RawMessage `json:"agg"`
	Order      json.RawMessage `json:"order"`
	Limit      json.RawMessage `json:"limit"`
	Partial    json.RawMessage `json:"partial"`
}

type batchQuery struct {
	Series string          `json:"series"`
	Cursor json.RawMessage `json:"cursor"`
	batchFields
}

type batchRequest struct {
	SLO     json.RawMessage `json:"slo"`
	Queries []batchQuery    `json:"queries"`
	batchFields
}

// scalarText turns a JSON string or number into the text a query parameter
// would carry; param names it in errors.
func scalarText(raw json.RawMessage, param string) (string, *ParamError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &ParamError{Param: param, Message: "not a valid string"}
		}
		return s, nil
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return string(raw), nil
	}
	return "", &ParamError{Param: param, Message: "must be a string or a number"}
}

func (s *Server) batchQuery(w http.ResponseWriter, r *http.Request) {
	if mt := r.Header.Get("Content-Type"); !strings.HasPrefix(mt, "application/json") {
		writeJSONProblem(w, &Problem{
			Type: problemType("unsupported-media-type"), Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType,
			Detail: "send the batch as application/json (Content-Type was " + quoteOrMissing(mt) + ")",
		})
		return
	}
	var body batchRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBatchBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.writeProblem(w, r, err)
			return
		}
		s.writeProblem(w, r, badParam("body", "not a valid batch: "+err.Error()))
		return
	}
	if len(body.Queries) == 0 {
		s.writeProblem(w, r, badParam("queries", "must hold at least one query"))
		return
	}
	if len(body.Queries) > MaxBatchQueries {
		s.writeProblem(w, r, badParam("queries", fmt.Sprintf("at most %d queries per batch", MaxBatchQueries)))
		return
	}
	now, arrival := s.deps.Now(), time.Now()
	var errs []ParamError
	var fromQuery map[string]bool // parameters the current query sets itself
	pick := func(i int, name string, own, shared json.RawMessage) string {
		param := fmt.Sprintf("queries[%d].%s", i, name)
		if len(bytes.TrimSpace(own)) == 0 || string(bytes.TrimSpace(own)) == "null" {
			own, param = shared, name
		} else {
			fromQuery[name] = true
		}
		text, perr := scalarText(own, param)
		if perr != nil {
			errs = append(errs, *perr)
		}
		return text
	}
	sloText, perr := scalarText(body.SLO, "slo")
	if perr != nil {
		errs = append(errs, *perr)
	}
	reqs := make([]query.Request, len(body.Queries))
	for i, q := range body.Queries {
		fromQuery = map[string]bool{"series": true, "id": true, "cursor": true}
		in := readInput{
			Series:     q.Series,
			From:       pick(i, "from", q.From, body.From),
			To:         pick(i, "to", q.To, body.To),
			Resolution: pick(i, "resolution", q.Resolution, body.Resolution),
			MaxPoints:  pick(i, "max_points", q.MaxPoints, body.MaxPoints),
			Agg:        pick(i, "agg", aggListJSON(q.Agg), aggListJSON(body.Agg)),
			Order:      pick(i, "order", q.Order, body.Order),
			Limit:      pick(i, "limit", q.Limit, body.Limit),
			Partial:    pick(i, "partial", q.Partial, body.Partial),
			Cursor:     pick(i, "cursor", q.Cursor, nil),
			SLO:        sloText,
		}
		req, perrs := s.parseRead(in, now)
		for _, pe := range perrs {
			if pe.Param == "id" {
				pe.Param = "series"
			}
			if fromQuery[pe.Param] {
				pe.Param = fmt.Sprintf("queries[%d].%s", i, pe.Param)
			}
			errs = append(errs, pe)
		}
		req.Start = arrival // one budget for the whole batch
		reqs[i] = req
	}
	if len(errs) > 0 {
		errs = dedupParamErrors(errs)
		s.writeProblem(w, r, badParams(errs[0].Param+": "+errs[0].Message, errs))
		return
	}
	// Every query shares the budget, which runs from the request's arrival.
	results := make([][]byte, len(reqs))
	forEachParallel(len(reqs), func(i int) { results[i] = s.answerOne(r, reqs[i]) })
	b := make([]byte, 0, 64)
	b = append(b, `{"results":[`...)
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, res...)
	}
	b = append(b, ']', '}', '\n')
	writeJSON(w, http.StatusOK, b)
}

// answerOne produces one result of a batch: the answer object, or an object
// with the series and an error member.
func (s *Server) answerOne(r *http.Request, req query.Request) []byte {
	res, err := s.deps.Engine.Query(r.Context(), req)
	if err != nil {
		return s.errorResult(r, req.Series, err)
	}
	defer res.Close()
	b := appendAnswerHead(nil, res)
	first := true
	for res.Next() {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendItem(b, res, res.Item())
	}
	tr := res.Trailer()
	s.deps.Metrics.observeRead(tr)
	if tr.Err != nil {
		return s.errorResult(r, req.Series, tr.Err)
	}
	return appendAnswerTail(b, tr)
}

func (s *Server) errorResult(r *http.Request, series string, err error) []byte {
	p := toProblem(err)
	if p.Status >= 500 {
		s.logger(r).Warn("batch query failed", "series", series, "status", p.Status, "err", err)
	}
	pb, _ := json.Marshal(p)
	b := []byte(`{"series":`)
	b = appendString(b, series)
	b = append(b, `,"error":`...)
	b = append(b, pb...)
	return append(b, '}')
}

func dedupParamErrors(errs []ParamError) []ParamError {
	seen := map[ParamError]bool{}
	out := errs[:0]
	for _, e := range errs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// forEachParallel calls fn for 0 … n-1, batchParallelism calls at a time,
// and returns once all have returned. The reads it runs share one budget
// because each request carries the same arrival time (Start), so running
// them side by side is what lets many series fit in one budget.
func forEachParallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, batchParallelism)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
