package httpapi

// Reads of many series by selector: GET /v1/points?match=..., its plan,
// and the match items of a batch.

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
)

// groupBy reads the group_by parameter: absent, no groups; present, even
// empty (one group of all), the comma list of label names.
func groupBy(values []string, present bool) (bool, []string) {
	if !present {
		return false, nil
	}
	var names []string
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, name)
			}
		}
	}
	return true, names
}

// manyRequest parses the query string of a read by selector.
func manyRequest(q url.Values) (query.ManyRequest, error) {
	f, errs := queryFields(q)
	req, perrs := f.request("selector", keep)
	errs = append(errs, perrs...)
	sels, err := index.Parse("match", q["match"])
	errs = append(errs, params.List(err)...)
	grouped, by := groupBy(q["group_by"], q.Has("group_by"))
	if len(errs) > 0 {
		return query.ManyRequest{}, errs
	}
	return query.ManyRequest{Request: req, Match: sels, Grouped: grouped, GroupBy: by, Param: "match"}, nil
}

// readMatch answers GET /v1/points?match=...: every series the
// selectors match, one result per series or per group.
func (s *Server) readMatch(w http.ResponseWriter, r *http.Request) {
	req, err := manyRequest(r.URL.Query())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ans, err := s.deps.Many.Read(r.Context(), req)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, append(appendManyAnswer(make([]byte, 0, manyAnswerSizeHint(ans)), ans), '\n'))
}

// appendManyAnswer writes a many-series answer: its results, then what a
// single answer says at its end (partial, covered, next_cursor, stats).
// manyAnswerSizeHint is about the length of ans encoded: a time and a
// value or two of some 20 bytes each per item, and a few hundred bytes a
// result. Writing into a buffer of that size spares the copies of one
// grown through doublings (an answer of 14,400 windows is half a
// megabyte).
func manyAnswerSizeHint(ans *query.ManyAnswer) int {
	n := 512
	for _, res := range ans.Results {
		n += 256 + len(res.Items)*(16+20*max(len(res.Head.Aggs), 1))
	}
	return n
}

func appendManyAnswer(b []byte, ans *query.ManyAnswer) []byte {
	b = append(b, `{"results":[`...)
	for i, res := range ans.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendManyResult(b, res)
	}
	b = append(b, "],"...)
	if len(ans.Warnings) > 0 {
		b = appendWarnings(b, ans.Warnings)
	}
	// The tail of a single answer, without its points' closing bracket.
	tail := appendAnswerTail(nil, ans.Trailer)
	b = append(b, tail[2:]...)
	return b
}

// appendManyResult writes one result: the series and its labels, or the
// group, its values and its number of series; then the fields of a
// single answer.
func appendManyResult(b []byte, res query.ManyResult) []byte {
	h := res.Head
	b = append(b, '{')
	if res.Group != nil {
		b = jsonenc.AppendKey(b, "group")
		b = appendLabels(b, res.Group)
		b = append(b, ',')
		b = jsonenc.AppendKey(b, "series_count")
		b = jsonenc.AppendInt(b, int64(res.SeriesCount))
	} else {
		b = jsonenc.AppendKey(b, "series")
		b = jsonenc.AppendString(b, res.Series)
		b = append(b, ',')
		b = jsonenc.AppendKey(b, "labels")
		b = appendLabels(b, labelsOf(res.Labels))
	}
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "tier")
	b = jsonenc.AppendString(b, h.Plan.TierName)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "resolution_ms")
	b = jsonenc.AppendInt(b, h.Plan.Step)
	b = append(b, ',')
	b = jsonenc.AppendKey(b, "order")
	if h.Desc {
		b = jsonenc.AppendString(b, "desc")
	} else {
		b = jsonenc.AppendString(b, "asc")
	}
	b = append(b, ',')
	b = appendColumns(b, h)
	b = append(b, ',')
	b = appendSegments(b, h.Plan.Segments)
	b = jsonenc.AppendKey(b, "points")
	b = append(b, '[')
	for i, it := range res.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = h.AppendItem(b, it)
	}
	return append(b, ']', '}')
}

// appendLabels writes labels as a JSON object, names in order.
func appendLabels(b []byte, l map[string]string) []byte {
	b = append(b, '{')
	first := true
	for _, name := range sortedNames(l) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonenc.AppendKey(b, name)
		b = jsonenc.AppendString(b, l[name])
	}
	return append(b, '}')
}

// planMatch answers GET /v1/plan?match=...: the series a read by selector
// would read and the partitions each tier would serve, reading no point.
func (s *Server) planMatch(w http.ResponseWriter, r *http.Request) {
	req, err := manyRequest(r.URL.Query())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ex, err := s.deps.Many.Explain(r.Context(), req)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	type tierCount struct {
		Tier       string `json:"tier"`
		Partitions int    `json:"partitions"`
	}
	out := struct {
		Series       int         `json:"series"`
		Tier         string      `json:"tier,omitempty"`
		ResolutionMs int64       `json:"resolution_ms"`
		Reason       string      `json:"reason,omitempty"`
		Partitions   int         `json:"partitions"`
		Tiers        []tierCount `json:"tiers"`
	}{Series: ex.Series, Tier: ex.Plan.TierName, ResolutionMs: ex.Plan.Step, Reason: ex.Plan.Reason, Tiers: []tierCount{}}
	for _, t := range ex.Tiers {
		out.Tiers = append(out.Tiers, tierCount{t.Name, t.Partitions})
		out.Partitions += t.Partitions
	}
	writeValue(w, http.StatusOK, out)
}
