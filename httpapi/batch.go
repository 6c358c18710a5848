package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/query"
)

// DefaultMaxQueries bounds the series of one POST /v1/query, and of one
// Grafana query, unless configured otherwise.
const DefaultMaxQueries = 100

// maxBatchBodyBytes bounds the body of one POST /v1/query.
const maxBatchBodyBytes = 1 << 20

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
	// Match (a selector, or an array of them) reads every series it
	// matches instead of one; GroupBy (a comma list or an array) groups
	// them.
	Match   json.RawMessage `json:"match"`
	GroupBy json.RawMessage `json:"group_by"`
	batchFields
}

type batchRequest struct {
	SLO     json.RawMessage `json:"slo"`
	Queries []batchQuery    `json:"queries"`
	batchFields
}

// aggText reads the agg member: a comma list in a string, or an array of
// names (what generated clients send), as the values of the agg parameter.
func aggText(raw json.RawMessage, param string) ([]string, *params.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, params.Bad(param, "must be a comma list of aggregates or an array of their names")
		}
		if len(list) == 0 {
			return nil, params.Bad(param, "must name at least one aggregate")
		}
		return list, nil
	}
	text, ok := jsonenc.ScalarText(raw)
	if !ok {
		return nil, params.Bad(param, "must be a comma list of aggregates or an array of their names")
	}
	if text == "" {
		return nil, nil
	}
	return []string{text}, nil
}

func (s *Server) batchQuery(w http.ResponseWriter, r *http.Request) {
	if !hasMediaType(r, "application/json") {
		s.deps.Metrics.refuse(refusedMediaType)
		s.writeProblem(w, r, unsupportedMedia("send the batch as application/json", r.Header.Get("Content-Type")))
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
		s.writeProblem(w, r, params.Bad("body", "not a valid batch: %s", jsonProblem(err)))
		return
	}
	// Decode stops after the first value; a body is that value alone.
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.writeProblem(w, r, err)
			return
		}
		s.writeProblem(w, r, params.Bad("body", "unexpected data after the JSON object"))
		return
	}
	if len(body.Queries) == 0 {
		s.writeProblem(w, r, params.Bad("queries", "must hold at least one query"))
		return
	}
	if max := s.maxQueries(); len(body.Queries) > max {
		s.deps.Metrics.refuse(refusedTooMany)
		s.writeProblem(w, r, params.Bad("queries", "at most %d queries per batch (--max-queries); this one has %d", max, len(body.Queries)))
		return
	}
	arrival := time.Now()
	var errs params.Errors
	scalar := func(raw json.RawMessage, param string) string {
		text, ok := jsonenc.ScalarText(raw)
		if !ok {
			errs.Add(param, "must be a string or a number")
		}
		return text
	}
	set := func(raw json.RawMessage) bool {
		raw = bytes.TrimSpace(raw)
		return len(raw) > 0 && string(raw) != "null"
	}
	sloText := scalar(body.SLO, "slo")
	reqs := make([]query.Request, len(body.Queries))
	matches := map[int]query.ManyRequest{}
	for i, q := range body.Queries {
		// A parameter the query sets itself is named queries[i].x in
		// errors; one it takes from the batch is named x.
		own := map[string]bool{"series": true, "cursor": true}
		pick := func(name string, mine, shared json.RawMessage) string {
			if set(mine) {
				own[name] = true
				return scalar(mine, fmt.Sprintf("queries[%d].%s", i, name))
			}
			return scalar(shared, name)
		}
		name := func(p string) string {
			if own[p] {
				return fmt.Sprintf("queries[%d].%s", i, p)
			}
			return p
		}
		f := readFields{
			From:       pick("from", q.From, body.From),
			To:         pick("to", q.To, body.To),
			Resolution: pick("resolution", q.Resolution, body.Resolution),
			MaxPoints:  pick("max_points", q.MaxPoints, body.MaxPoints),
			Order:      pick("order", q.Order, body.Order),
			Limit:      pick("limit", q.Limit, body.Limit),
			Partial:    pick("partial", q.Partial, body.Partial),
			Cursor:     pick("cursor", q.Cursor, nil),
			SLO:        sloText,
		}
		aggRaw, aggParam := body.Agg, "agg"
		if set(q.Agg) {
			own["agg"] = true
			aggRaw, aggParam = q.Agg, fmt.Sprintf("queries[%d].agg", i)
		}
		aggs, perr := aggText(aggRaw, aggParam)
		if perr != nil {
			errs = append(errs, perr)
		}
		f.Agg = aggs
		if set(q.Match) {
			mr, perrs := s.batchMatch(i, q, f, name)
			errs = append(errs, perrs...)
			mr.Start = arrival
			matches[i] = mr
			continue
		}
		if q.Series == "" {
			errs.Add(fmt.Sprintf("queries[%d].series", i), "required: a series id, or match with a selector")
			continue
		}
		req, perrs := f.request(q.Series, name)
		errs = append(errs, perrs...)
		if len(perrs) == 0 {
			// The engine checks the rest, the cursor included: a forged
			// cursor refuses the batch like any other bad parameter.
			errs = append(errs, params.List(params.Rename(s.deps.Engine.Check(req), name))...)
		}
		req.Start = arrival // one budget for the whole batch
		reqs[i] = req
	}
	if len(errs) > 0 {
		s.writeProblem(w, r, errs)
		return
	}
	// The queries are read side by side under one budget, which runs
	// from the request's arrival, as one answer: the engine shares its
	// points and reserves its memory. The reads by selector go beside
	// them, each as one answer of its own.
	results := make([][]byte, len(reqs))
	var singles []query.Request
	var at []int
	for i, req := range reqs {
		if _, ok := matches[i]; !ok {
			singles = append(singles, req)
			at = append(at, i)
		}
	}
	var wg sync.WaitGroup
	for i, mr := range matches {
		wg.Go(func() {
			ans, err := s.deps.Many.Read(r.Context(), mr)
			if err != nil {
				results[i] = s.errorResult(r, "", err)
				return
			}
			results[i] = appendManyAnswer(nil, ans)
		})
	}
	err := s.deps.Many.Each(r.Context(), arrival, singles, func(k int, res query.Result, err error) error {
		i := at[k]
		if err != nil {
			results[i] = s.errorResult(r, reqs[i].Series, err)
			return nil
		}
		results[i], err = s.answerOne(r, reqs[i], res)
		return err
	})
	wg.Wait()
	if err != nil {
		// The answer could not be held within the memory budget: the
		// whole request is overloaded, not one of its series.
		s.writeProblem(w, r, err)
		return
	}
	// The parts are written one after the other rather than copied into
	// one buffer, which would hold the answer twice.
	size := len(`{"results":[]}`) + 1 + max(0, len(results)-1)
	for _, res := range results {
		size += len(res)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"results":[`)
	for i, res := range results {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		_, _ = w.Write(res)
		results[i] = nil
	}
	_, _ = io.WriteString(w, "]}\n")
}

// answerOne renders one result of a batch: the answer object, or an
// object with the series and an error member. It fails only when the
// memory budget for answers could not hold the result.
func (s *Server) answerOne(r *http.Request, req query.Request, res query.Result) ([]byte, error) {
	b := appendAnswerHead(nil, res.Head())
	// The batch's answer is built whole: what it holds is counted into the
	// request's memory budget as it grows.
	meter := membudget.From(r.Context()).Meter()
	b, err := appendItems(b, res, membudget.Chunk, func(b []byte) ([]byte, int, error) {
		return b, len(b) + membudget.Chunk, meter.Track(r.Context(), cap(b))
	})
	if err != nil {
		return nil, err
	}
	tr := res.Trailer()
	if tr.Err != nil {
		return s.errorResult(r, req.Series, tr.Err), nil
	}
	return appendAnswerTail(b, tr), meter.Track(r.Context(), cap(b))
}

// batchMatch reads a query of a batch that has match: its selectors and
// grouping, and the read parameters f.
func (s *Server) batchMatch(i int, q batchQuery, f readFields, name func(string) string) (query.ManyRequest, params.Errors) {
	param := fmt.Sprintf("queries[%d].match", i)
	var errs params.Errors
	if q.Series != "" {
		errs.Add(fmt.Sprintf("queries[%d].series", i), "a query reads one series or a selector (match), not both")
	}
	texts, ok := stringList(q.Match)
	if !ok || len(texts) == 0 {
		errs.Add(param, "must be a selector, or an array of selectors")
	}
	sels, err := index.Parse(param, texts)
	errs = append(errs, params.List(err)...)
	var by []string
	grouped := len(bytes.TrimSpace(q.GroupBy)) > 0 && string(bytes.TrimSpace(q.GroupBy)) != "null"
	if grouped {
		list, ok := stringList(q.GroupBy)
		if !ok {
			errs.Add(fmt.Sprintf("queries[%d].group_by", i), "must be a comma list of label names, or an array of them")
		}
		_, by = groupBy(list, true)
	}
	req, perrs := f.request("selector", name)
	errs = append(errs, perrs...)
	rename := func(p string) string {
		if p == "group_by" {
			return fmt.Sprintf("queries[%d].group_by", i)
		}
		return name(p)
	}
	return query.ManyRequest{Request: req, Match: sels, Grouped: grouped, GroupBy: by, Param: param, Rename: rename}, errs
}

// stringList reads a JSON string or array of strings.
func stringList(raw json.RawMessage) ([]string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, false
		}
		return list, true
	}
	var one string
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, false
	}
	return []string{one}, true
}

func (s *Server) errorResult(r *http.Request, series string, err error) []byte {
	p := problem.From(err)
	if p.Status >= 500 {
		s.logger(r).Warn("batch query failed", "series", series, "status", p.Status, "err", err)
	}
	pb, _ := json.Marshal(p)
	b := []byte(`{"series":`)
	b = jsonenc.AppendString(b, series)
	b = append(b, `,"error":`...)
	b = append(b, pb...)
	return append(b, '}')
}
