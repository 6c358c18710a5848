package grafana

// POST /grafana/query: the panels' reads. Grafana posts its whole
// DataQueryRequest; only range, maxDataPoints, intervalMs, the targets and
// the ad hoc filters (filters, or adhocFilters from older plugins) matter
// here, and every other member (panelId as a number or a string,
// scopedVars, requestId, …) is ignored.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/problem"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

const (
	// grafanaDefaultRange is the window of a query without a range (the
	// minimal body Infinity and hand-made clients send): the last 6 hours,
	// like Grafana's default time picker.
	grafanaDefaultRange = 6 * tiers.Hour
	// grafanaDefaultMaxDataPoints stands in for a missing or zero
	// maxDataPoints, which Grafana never sends but other clients may.
	grafanaDefaultMaxDataPoints = 1000
	// grafanaMaxInterval bounds intervalMs, so that no arithmetic on it
	// overflows; a longer window than ten years means nothing anyway.
	grafanaMaxInterval = 3650 * tiers.Day
)

type grafanaRange struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

type grafanaTarget struct {
	RefID   string          `json:"refId"`
	Target  json.RawMessage `json:"target"`
	Hide    json.RawMessage `json:"hide"`
	Payload json.RawMessage `json:"payload"`
	// Type is the legacy simple-json plugin's "timeserie" or "table". It is
	// raw because targets keep the leftovers of other datasources, whose
	// type may be anything.
	Type json.RawMessage `json:"type"`
}

type grafanaQueryBody struct {
	Range         *grafanaRange              `json:"range"`
	IntervalMs    json.RawMessage            `json:"intervalMs"`
	MaxDataPoints json.RawMessage            `json:"maxDataPoints"`
	Targets       []grafanaTarget            `json:"targets"`
	ScopedVars    map[string]json.RawMessage `json:"scopedVars"`
	DataQueryKind json.RawMessage            `json:"dataQueryKind"`
	// Filters are the dashboard's ad hoc filters as the plugin sends them
	// since v0.6.4; AdhocFilters as older versions and the simple-json
	// plugin do. They are read only when a selector target needs them.
	Filters      json.RawMessage `json:"filters"`
	AdhocFilters json.RawMessage `json:"adhocFilters"`
}

// grafanaJob is one part of the answer: the read of one series for one
// target, the read of a selector target (sel set: one element per series
// or group it answers), or an element known without reading (out set
// from the start).
type grafanaJob struct {
	refID, series string
	table         bool
	req           query.Request
	sel           *grafanaSelection
	// out is the part's elements, comma-separated (none for a selector
	// that matched nothing); err a failure that fails the whole request,
	// found while reading.
	out []byte
	err error
}

func (s *Server) grafanaQuery(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	var body grafanaQueryBody
	if err := decodeGrafana(w, r, &body); err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	jobs, err := s.grafanaJobs(&body, s.deps.Now())
	if err != nil {
		s.writeGrafanaError(w, r, err)
		return
	}
	// The reads run side by side like a batch's, as one answer: one
	// budget, the server's default SLO, in wall-clock time from the
	// request's arrival (whatever the clock that decides which data is
	// current says); the answer's points shared among them (each read's
	// meta says when it was cut); its memory reserved. Each selector
	// target is one read of many series of its own, beside them.
	var reads []int
	var reqs []query.Request
	var wg sync.WaitGroup
	for i, j := range jobs {
		switch {
		case j.sel != nil:
			wg.Go(func() { j.out, j.err = s.grafanaSelect(r, j, arrival) })
		case j.out == nil:
			reads = append(reads, i)
			reqs = append(reqs, j.req)
		}
	}
	err = s.deps.Many.Each(r.Context(), arrival, reqs, func(i int, res query.Result, err error) error {
		j := jobs[reads[i]]
		if err != nil {
			j.out = s.grafanaFailed(r, j, err)
			return nil
		}
		j.out, err = s.grafanaAnswer(r, j, res)
		return err
	})
	wg.Wait()
	for _, j := range jobs {
		if err == nil {
			err = j.err
		}
	}
	if err != nil {
		// A selector target's bad parameters, or an answer that could not
		// be held within the memory budget.
		s.writeGrafanaError(w, r, err)
		return
	}
	// The elements are written one after the other rather than copied
	// into one buffer, which would hold the answer twice.
	size, parts := 3, 0
	for _, j := range jobs {
		if len(j.out) > 0 {
			size += len(j.out)
			parts++
		}
	}
	size += max(0, parts-1)
	h := w.Header()
	h.Set("Content-Type", grafanaContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "[")
	first := true
	for _, j := range jobs {
		if len(j.out) == 0 {
			continue
		}
		if !first {
			_, _ = io.WriteString(w, ",")
		}
		first = false
		_, _ = w.Write(j.out)
		j.out = nil
	}
	_, _ = io.WriteString(w, "]\n")
}

// grafanaJobs turns the envelope into the answer's elements, one per
// series of each target, in the order of the targets; any target it cannot
// read fails the whole request, naming the target.
func (s *Server) grafanaJobs(body *grafanaQueryBody, now time.Time) ([]*grafanaJob, error) {
	span, err := grafanaSpan(body.Range, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	maxDataPoints, err := grafanaHint(body.MaxDataPoints, "maxDataPoints")
	if err != nil {
		return nil, err
	}
	if maxDataPoints == 0 {
		maxDataPoints = grafanaDefaultMaxDataPoints
	}
	intervalMs, err := grafanaHint(body.IntervalMs, "intervalMs")
	if err != nil {
		return nil, err
	}
	// What resolution auto means here, the same for every target: the
	// router's max_points rule, with Grafana's interval as the narrowest
	// window, and the window holding the range start read whole, so that
	// charts have no gap at their left edge.
	base := query.Request{
		From: params.At(span.From), To: params.At(span.To), Limit: s.deps.MaxLimit,
		MaxPoints: min(maxDataPoints, query.MaxMaxPoints), MinWindow: min(intervalMs, grafanaMaxInterval),
		WholeFirstWindow: true,
	}
	annotations := body.ScopedVars["__annotation"] != nil || jsonString(body.DataQueryKind) == "annotations"
	filters := sync.OnceValues(func() ([]*labels.Matcher, error) { return grafanaFilters(body.Filters, body.AdhocFilters) })
	var jobs []*grafanaJob
	series := 0
	for _, t := range body.Targets {
		if isJSONTrue(t.Hide) {
			continue // Grafana drops hidden queries itself; older versions did not
		}
		text, ok := jsonenc.ScalarText(t.Target)
		if !ok {
			return nil, grafanaBad(grafanaWhere(t.RefID, "") + "target must be a string: a series id or a selector")
		}
		text = strings.TrimSpace(text)
		match, matchErr := payloadList(grafanaPayload(t.Payload), "match")
		switch {
		case text == "" && match == nil && matchErr == nil:
			// A placeholder; the plugin drops targets without one itself.
		case annotations || t.RefID == "Anno":
			jobs = append(jobs, &grafanaJob{refID: t.RefID, out: grafanaAnnotationFrame(t.RefID)})
		case matchErr != nil:
			return nil, grafanaBad(grafanaWhere(t.RefID, "") + matchErr.Error())
		case match != nil || isSelectorTarget(text):
			j, err := s.grafanaSelectorJob(t, text, match, base, filters)
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, j)
		default:
			tj, err := s.grafanaTargetJobs(t, text, base)
			if err != nil {
				return nil, grafanaBad(grafanaWhere(t.RefID, text) + err.Error())
			}
			if series += len(tj); series > s.deps.MaxSeries {
				return nil, grafanaBad(fmt.Sprintf("the targets name more than %d series; one query reads at most %d", s.deps.MaxSeries, s.deps.MaxSeries))
			}
			jobs = append(jobs, tj...)
		}
	}
	return jobs, nil
}

// grafanaTargetJobs plans the reads of one target: its series, each read
// over the request's range (base) with the payload's agg and resolution,
// auto meaning what Grafana's hints ask for.
func (s *Server) grafanaTargetJobs(t grafanaTarget, text string, base query.Request) ([]*grafanaJob, error) {
	ids, err := grafanaTargetIDs(text, s.deps.MaxSeries)
	if err != nil {
		return nil, err
	}
	if grouped, _, err := payloadGroupBy(grafanaPayload(t.Payload)); err != nil || grouped {
		return nil, errors.New("payload.group_by groups the series of a selector (in the target, or in payload.match), not series named by id")
	}
	req, err := grafanaRequest(t.Payload, base)
	if err != nil {
		return nil, err
	}
	table := jsonString(t.Type) == "table"
	jobs := make([]*grafanaJob, 0, len(ids))
	for _, id := range ids {
		req.Series = id
		if err := s.check(req); err != nil {
			return nil, err
		}
		jobs = append(jobs, &grafanaJob{refID: t.RefID, series: id, table: table, req: req})
	}
	return jobs, nil
}

// grafanaRequest is base read with a target's payload: its agg, and its
// resolution where it is not auto (then Grafana's hints do not apply).
func grafanaRequest(payload json.RawMessage, base query.Request) (query.Request, error) {
	agg, resolution, err := grafanaOptions(payload)
	if err != nil {
		return query.Request{}, err
	}
	req := base
	req.Aggs = []query.Agg{agg}
	if resolution != "" && resolution != "auto" {
		res, err := query.ParseResolution(resolution)
		if err != nil {
			return query.Request{}, errors.New("payload.resolution: " + err.Error())
		}
		req.Resolution, req.MaxPoints, req.MinWindow = res, 0, 0
	}
	return req, nil
}

// check validates req as the engine will, naming a bad parameter as the
// target's: payload.agg, payload.resolution, target (the series id).
func (s *Server) check(req query.Request) error {
	err := s.deps.Engine.Check(req)
	if err == nil {
		return nil
	}
	errs := params.List(err)
	if errs == nil {
		return err
	}
	return errors.New(grafanaParam(errs[0].Param) + ": " + errs[0].Message)
}

// grafanaParam names a parameter of the engine's request as the part of
// Grafana's envelope it comes from.
func grafanaParam(param string) string {
	switch param {
	case "resolution", "agg", "group_by":
		return "payload." + param
	case "series":
		return "target"
	case "from", "to":
		return "range." + param
	}
	return param
}

// grafanaWhere starts an error message with the target it is about.
func grafanaWhere(refID, target string) string {
	var b strings.Builder
	if refID != "" {
		b.WriteString("query " + refID + ": ")
	}
	if target != "" {
		b.WriteString("target " + strconv.Quote(target) + ": ")
	}
	return b.String()
}

// grafanaSpan is the read's range: range.from and range.to, the only times
// of the envelope to trust (raw and rangeRaw hold expressions like now-6h,
// for display). RFC 3339 as Grafana sends them; Unix milliseconds and
// now-<duration> too, for other clients. Without a range, the last 6 hours.
func grafanaSpan(rg *grafanaRange, now int64) (tiers.Span, error) {
	var fromText, toText string
	if rg != nil {
		var ok bool
		if fromText, ok = jsonenc.ScalarText(rg.From); !ok {
			return tiers.Span{}, grafanaBad("range.from must be a time (RFC 3339 or Unix milliseconds)")
		}
		if toText, ok = jsonenc.ScalarText(rg.To); !ok {
			return tiers.Span{}, grafanaBad("range.to must be a time (RFC 3339 or Unix milliseconds)")
		}
	}
	span := tiers.Span{To: now}
	if toText != "" {
		t, err := params.Time(toText, now)
		if err != nil {
			return tiers.Span{}, grafanaBad("range.to: " + err.Error())
		}
		span.To = t
	}
	span.From = max(span.To-grafanaDefaultRange, tiers.MinTime)
	if fromText != "" {
		t, err := params.Time(fromText, now)
		if err != nil {
			return tiers.Span{}, grafanaBad("range.from: " + err.Error())
		}
		span.From = t
	}
	if span.Empty() {
		return tiers.Span{}, grafanaBad("range: from must be before to")
	}
	return span, nil
}

// grafanaHint reads maxDataPoints or intervalMs: a number (numeric text is
// taken too). Absent, zero and negative mean absent; fractions are cut.
func grafanaHint(raw json.RawMessage, name string) (int64, error) {
	text, ok := jsonenc.ScalarText(raw)
	if !ok {
		return 0, grafanaBad(name + " must be a number")
	}
	if text == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) {
		return 0, grafanaBad(name + " must be a number")
	}
	if f < 1 {
		return 0, nil
	}
	return int64(min(f, float64(tiers.MaxTime))), nil
}

// grafanaOptions reads a target's payload: agg (one aggregate, avg by
// default) and resolution (auto by default, raw, or a window). The
// builder regex-escapes payload values (1\.5h), so they are unescaped.
func grafanaOptions(raw json.RawMessage) (agg query.Agg, resolution string, err error) {
	payload := grafanaPayload(raw)
	text, err := payloadString(payload, "agg")
	if err != nil {
		return 0, "", err
	}
	text = regexUnescape(text)
	if text == "" {
		text = "avg"
	}
	aggs, err := query.ParseAggs(text)
	if err != nil || len(aggs) != 1 {
		return 0, "", fmt.Errorf("payload.agg must be one of min, max, sum, count, avg, or a percentile p50, p90, p95, p99, p999 or pNN.N (above 0, below 100, at most three decimals) (got %q)", text)
	}
	if resolution, err = payloadString(payload, "resolution"); err != nil {
		return 0, "", err
	}
	return aggs[0], regexUnescape(resolution), nil
}

// grafanaTargetIDs resolves a target as Grafana's template engine leaves
// it in the regex format: variable values regex-escaped (s\.42), a
// multi-value variable as (a|b|c), "All" as the list of every value. A
// group expands to one id per alternative, around any literal text
// (room\.(a|b) is room.a and room.b); groups do not nest. Nothing else of
// regular expressions is understood: what remains must be series ids.
func grafanaTargetIDs(target string, maxIDs int) ([]string, error) {
	ids := []string{""}
	var cur strings.Builder
	var alts []string
	inGroup := false
	for i := 0; i < len(target); i++ {
		switch c := target[i]; c {
		case '\\':
			if i+1 == len(target) {
				return nil, errors.New("ends in a lone backslash")
			}
			i++
			cur.WriteByte(target[i])
		case '(':
			if inGroup {
				return nil, errors.New("groups do not nest; alternatives are written (a|b)")
			}
			for k := range ids {
				ids[k] += cur.String()
			}
			cur.Reset()
			alts, inGroup = alts[:0], true
		case '|':
			if !inGroup {
				return nil, errors.New("| separates alternatives only inside a group: (a|b)")
			}
			alts = append(alts, cur.String())
			cur.Reset()
		case ')':
			if !inGroup {
				return nil, errors.New(") closes no group")
			}
			alts = append(alts, cur.String())
			cur.Reset()
			inGroup = false
			if len(ids)*len(alts) > maxIDs {
				return nil, fmt.Errorf("expands to more than %d series", maxIDs)
			}
			next := make([]string, 0, len(ids)*len(alts))
			for _, id := range ids {
				for _, a := range alts {
					next = append(next, id+a)
				}
			}
			ids = next
		default:
			cur.WriteByte(c)
		}
	}
	if inGroup {
		return nil, errors.New("a group is not closed")
	}
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		id += cur.String()
		if err := params.SeriesID(id); err != nil {
			return nil, fmt.Errorf("%q is not a series id (%v); a target is a series id, Grafana's regex-escaped variable values or (a|b) alternatives, not a regular expression", id, err)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// grafanaAnswer encodes the page of one series as a time series element
// (value first: [[value, ms], ...]), or as a table for the legacy plugin's
// table targets. Failures other than a bad request become the element's
// notice, so that the panel still shows the other series.
func (s *Server) grafanaAnswer(r *http.Request, j *grafanaJob, res query.Result) ([]byte, error) {
	b := j.head(make([]byte, 0, 4096))
	h := res.Head()
	agg := h.Aggs[0]
	// What the element holds is counted into the request's memory budget
	// as it grows.
	meter := membudget.From(r.Context()).Meter()
	for n := 0; res.Next(); n++ {
		if n > 0 {
			b = append(b, ',')
			if n%4096 == 0 {
				if err := meter.Track(r.Context(), cap(b)); err != nil {
					return nil, err
				}
			}
		}
		it := res.Item()
		b = append(b, '[')
		if j.table {
			b = jsonenc.AppendInt(b, it.T)
			b = append(b, ',')
			b = appendGrafanaValue(b, h.Plan.Step, agg, it.Row)
		} else {
			b = appendGrafanaValue(b, h.Plan.Step, agg, it.Row)
			b = append(b, ',')
			b = jsonenc.AppendInt(b, it.T)
		}
		b = append(b, ']')
	}
	tr := res.Trailer()
	if tr.Err != nil {
		// Only partial=deny turns a cut into an error, and Grafana reads
		// allow partial answers; kept for safety.
		return s.grafanaFailed(r, j, tr.Err), nil
	}
	b = append(b, ']', ',')
	b = jsonenc.AppendKey(b, "meta")
	b = append(b, mustJSON(grafanaMetaOf(h, tr))...)
	b = append(b, '}')
	return b, meter.Track(r.Context(), cap(b))
}

// head opens the element up to its first point.
func (j *grafanaJob) head(b []byte) []byte {
	if j.table {
		b = append(b, `{"type":"table","name":`...)
		b = jsonenc.AppendString(b, j.series)
		b = append(b, `,"refId":`...)
		b = jsonenc.AppendString(b, j.refID)
		b = append(b, `,"columns":[{"text":"Time","type":"time"},{"text":`...)
		b = jsonenc.AppendString(b, j.series)
		return append(b, `,"type":"number"}],"rows":[`...)
	}
	b = append(b, `{"target":`...)
	b = jsonenc.AppendString(b, j.series)
	b = append(b, `,"refId":`...)
	b = jsonenc.AppendString(b, j.refID)
	return append(b, `,"datapoints":[`...)
}

// appendGrafanaValue writes a point's value, or a window's aggregate.
func appendGrafanaValue(b []byte, step int64, agg query.Agg, row tiers.Row) []byte {
	switch {
	case step == 0:
		return jsonenc.AppendFloat(b, row.Value())
	case agg == query.Count:
		return jsonenc.AppendInt(b, row.Count)
	default:
		return jsonenc.AppendFloat(b, agg.Of(row))
	}
}

// grafanaFailed is the element of a series that could not be read: no
// points, and the reason as an error notice.
func (s *Server) grafanaFailed(r *http.Request, j *grafanaJob, err error) []byte {
	p := problem.From(err)
	text := p.Detail
	if errors.Is(err, query.ErrSeriesNotFound) {
		text = "no series " + j.series + "; /grafana/metrics lists the series ids"
	} else if p.Status >= 500 {
		s.logger(r).Warn("grafana read failed", "series", j.series, "status", p.Status, "err", err)
	}
	b := j.head(nil)
	b = append(b, ']', ',')
	b = jsonenc.AppendKey(b, "meta")
	b = append(b, mustJSON(grafanaMeta{Notices: []grafanaNotice{{Severity: "error", Text: text}}})...)
	return append(b, '}')
}

// grafanaMeta is an element's frame meta. Grafana's toDataFrame copies the
// meta of a time series or table element to the frame it makes, and
// panels show the frame's notices in their header, so a partial answer is
// visible where the data is; custom says how the answer was read.
type grafanaMeta struct {
	Notices []grafanaNotice `json:"notices,omitempty"`
	Custom  *grafanaCustom  `json:"custom,omitempty"`
}

type grafanaNotice struct {
	Severity string `json:"severity"`
	Text     string `json:"text"`
}

type grafanaCustom struct {
	Tier          string   `json:"tier"`
	StepMs        int64    `json:"stepMs"`
	Agg           string   `json:"agg,omitempty"`
	Partial       bool     `json:"partial"`
	PartialReason string   `json:"partialReason,omitempty"`
	Covered       [2]int64 `json:"covered"`
	// Series is the id of a selector target's series, SeriesCount how
	// many series a group of a selector target folds.
	Series      string `json:"series,omitempty"`
	SeriesCount int    `json:"seriesCount,omitempty"`
}

func grafanaMetaOf(res *query.Head, tr query.Trailer) grafanaMeta {
	limit := res.Limit
	m := grafanaMeta{Custom: &grafanaCustom{
		Tier: res.Plan.TierName, StepMs: res.Plan.Step,
		Partial: tr.Partial, PartialReason: tr.Reason, Covered: [2]int64{tr.Covered.From, tr.Covered.To},
	}}
	if res.Plan.Step > 0 {
		m.Custom.Agg = res.Aggs[0].String()
	}
	for _, w := range res.Warnings {
		m.Notices = append(m.Notices, grafanaNotice{Severity: "warning", Text: w})
	}
	covered := "covered " + grafanaTime(tr.Covered.From) + " to " + grafanaTime(tr.Covered.To)
	switch {
	case tr.Partial:
		m.Notices = append(m.Notices, grafanaNotice{Severity: "warning",
			Text: "partial answer (" + tr.Reason + "): " + covered})
	case tr.NextCursor != "":
		// Grafana cannot page: one answer is all it reads.
		m.Notices = append(m.Notices, grafanaNotice{Severity: "warning",
			Text: fmt.Sprintf("answer cut at %d points: %s; narrow the time range or choose a coarser resolution", limit, covered)})
	}
	return m
}

func grafanaTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// grafanaAnnotationFrame answers an annotation query. Grafana maps the
// fields of annotation frames by name: time and text are required,
// timeEnd, title and tags optional. The gateway keeps no events, so the
// frame has those fields and no rows: the annotation query succeeds and
// marks nothing, where a series' answer would make a marker of every point.
func grafanaAnnotationFrame(refID string) []byte {
	b := append([]byte(nil), `{"type":"table","refId":`...)
	b = jsonenc.AppendString(b, refID)
	return append(b, `,"columns":[{"text":"time","type":"time"},{"text":"timeEnd","type":"time"},`+
		`{"text":"title","type":"string"},{"text":"text","type":"string"},{"text":"tags","type":"string"}],"rows":[]}`...)
}

func isJSONTrue(raw json.RawMessage) bool {
	v := string(bytes.TrimSpace(raw))
	return v == "true" || v == `"true"`
}

// jsonString is raw's value if it is a JSON string, else "".
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
