package grafana

// Selector targets: a target that reads every series a PromQL selector
// matches (cpu{dc="eu"}), through query.Many.Read, the engine's one read
// of many series, and answers one time series per series, or per group of
// the payload's group_by. The selector is the target's text, or the
// payload's match; Grafana's ad hoc filters narrow it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// grafanaSelection is the read of a selector target.
type grafanaSelection struct {
	req query.ManyRequest
	// name names the element of one group of all, and the element that
	// says why a read failed: the target's text, else its selectors.
	name string
	// where starts the target's error messages ("query B: ").
	where string
}

// isSelectorTarget tells a target's text that is a selector from one of
// series ids: no id, nor Grafana's (a|b) alternatives of ids, holds a
// brace, and every selector but a bare metric name (which is an id, and
// stays one) does.
func isSelectorTarget(text string) bool { return strings.Contains(text, "{") }

// grafanaSelectorJob plans a selector target: the selectors of
// payload.match, or else the target's text; the payload's agg,
// resolution and group_by; the request's range and hints (base); and the
// ad hoc filters as matchers added to every selector.
func (s *Server) grafanaSelectorJob(t grafanaTarget, text string, match []string, base query.Request, filters func() ([]*labels.Matcher, error)) (*grafanaJob, error) {
	where := grafanaWhere(t.RefID, "")
	bad := func(err error) error { return grafanaBad(where + err.Error()) }
	param, texts := "payload.match", match
	if texts == nil {
		param, texts = "target", []string{text}
	}
	sels, err := index.Parse(param, texts)
	if err != nil {
		return nil, bad(firstParam(err))
	}
	payload := grafanaPayload(t.Payload)
	grouped, by, err := payloadGroupBy(payload)
	if err != nil {
		return nil, bad(err)
	}
	req, err := grafanaRequest(t.Payload, base)
	if err != nil {
		return nil, bad(err)
	}
	if grouped && req.Resolution == query.Raw {
		return nil, bad(errors.New("payload.group_by: groups aggregate windows of their series' points; resolution raw has no windows (leave it auto, or give a window such as 1m)"))
	}
	for _, name := range by {
		if name == tiers.SeriesLabel {
			continue
		}
		if err := params.LabelName(name); err != nil {
			return nil, bad(fmt.Errorf("payload.group_by: %w", err))
		}
	}
	req.Series = "selector" // a valid id: the shared parameters alone are checked
	if err := s.check(req); err != nil {
		return nil, bad(err)
	}
	req.Series = ""
	ms, err := filters()
	if err != nil {
		return nil, err
	}
	if len(ms) > 0 {
		for i := range sels {
			sels[i].Matchers = append(slices.Clone(sels[i].Matchers), ms...)
			sels[i].Text += " " + matchersText(ms)
		}
	}
	name := text
	if name == "" {
		name = strings.Join(texts, " or ")
	}
	return &grafanaJob{refID: t.RefID, series: name, table: jsonString(t.Type) == "table", sel: &grafanaSelection{
		req:  query.ManyRequest{Request: req, Match: sels, Grouped: grouped, GroupBy: by, Param: param, Rename: grafanaParam},
		name: name, where: where,
	}}, nil
}

// firstParam is the first parameter error of err as "param: message",
// or err.
func firstParam(err error) error {
	if errs := params.List(err); len(errs) > 0 {
		return errors.New(errs[0].Param + ": " + errs[0].Message)
	}
	return err
}

// matchersText writes ad hoc filters as the selector they add,
// {dc="eu",host!="a"}: for the answer's binding, never shown.
func matchersText(ms []*labels.Matcher) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// grafanaSelect reads a selector target and renders its elements. Bad
// parameters the read finds (too many series, a group_by of raw points)
// and a spent memory budget fail the whole request; a read the store or
// the budget cut short becomes an element that says so, as for a series
// named by id.
func (s *Server) grafanaSelect(r *http.Request, j *grafanaJob, start time.Time) ([]byte, error) {
	req := j.sel.req
	req.Start = start
	ans, err := s.deps.Many.Read(r.Context(), req)
	if err != nil {
		switch failure.Of(err) {
		case failure.BadInput:
			return nil, grafanaBad(j.sel.where + firstParam(err).Error())
		case failure.Overloaded, failure.Canceled:
			return nil, err
		}
		return s.grafanaFailed(r, j, err), nil
	}
	return s.grafanaManyAnswer(r, j, ans)
}

// grafanaManyAnswer encodes the results of a selector target, one element
// after the other, comma-separated: per series named by its labels, per
// group by the group's labels (see grafanaNames), each with its labels as
// tags and its name as title, so that Grafana's legend shows the name and
// overrides and transformations can use the labels. The elements are
// counted into the request's memory budget as they grow, as those of a
// series read by id are.
func (s *Server) grafanaManyAnswer(r *http.Request, j *grafanaJob, ans *query.ManyAnswer) ([]byte, error) {
	ctx := r.Context()
	meter := membudget.From(ctx).Meter()
	names := grafanaNames(ans.Results, j.sel)
	var b []byte
	for i, res := range ans.Results {
		if i > 0 {
			b = append(b, ',')
		}
		el := grafanaJob{refID: j.refID, series: names[i], table: j.table}
		h := res.Head
		agg := h.Aggs[0]
		b = el.head(b)
		for n, it := range res.Items {
			if n > 0 {
				b = append(b, ',')
				if n%4096 == 0 {
					if err := meter.Track(ctx, cap(b)); err != nil {
						return nil, err
					}
				}
			}
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
		b = append(b, ']', ',')
		if !j.table {
			b = jsonenc.AppendKey(b, "title")
			b = jsonenc.AppendString(b, names[i])
			b = append(b, ',')
			b = jsonenc.AppendKey(b, "tags")
			b = appendTags(b, resultTags(res))
			b = append(b, ',')
		}
		meta := grafanaMetaOf(h, ans.Trailer)
		if res.Group != nil {
			meta.Custom.SeriesCount = res.SeriesCount
		} else {
			meta.Custom.Series = res.Series
		}
		b = jsonenc.AppendKey(b, "meta")
		b = append(b, mustJSON(meta)...)
		b = append(b, '}')
		if err := meter.Track(ctx, cap(b)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// grafanaNames names the results of a selector target as Prometheus
// writes series: a series by its labels (cpu{dc="eu",host="a"}), or by
// its id when it has none; when two series of the answer have the same
// labels, each name adds the series' id (series="..."). A group is named
// by its values of the group_by labels, empty ones included ({dc=""} is
// the group of the series without dc), and one group of all by the
// target (its text, else its selectors).
func grafanaNames(results []query.ManyResult, sel *grafanaSelection) []string {
	names := make([]string, len(results))
	count := map[string]int{}
	for i, res := range results {
		switch {
		case res.Group != nil && len(sel.req.GroupBy) == 0:
			names[i] = sel.name
		case res.Group != nil:
			names[i] = groupName(res.Group)
		case len(res.Labels.Stored()) == 0:
			names[i] = res.Series
		default:
			names[i] = params.CanonicalLabels(res.Labels)
		}
		count[names[i]]++
	}
	for i, res := range results {
		if res.Group == nil && len(res.Labels.Stored()) > 0 && count[names[i]] > 1 {
			l := tiers.Labels{tiers.SeriesLabel: res.Series}
			for k, v := range res.Labels {
				l[k] = v
			}
			names[i] = params.CanonicalLabels(l)
		}
	}
	return names
}

// groupName writes a group as a selector of its labels, values that are
// empty included: name{a="1",b=""}.
func groupName(group tiers.Labels) string {
	var b strings.Builder
	b.WriteString(group[params.MetricName])
	b.WriteByte('{')
	first := true
	for _, name := range group.Names() {
		if name == params.MetricName && group[name] != "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(group[name]))
	}
	b.WriteByte('}')
	return b.String()
}

// resultTags are the labels of a result, as the element's tags: a
// series' labels and its id (series), or a group's values.
func resultTags(res query.ManyResult) tiers.Labels {
	if res.Group != nil {
		return res.Group
	}
	tags := tiers.Labels{tiers.SeriesLabel: res.Series}
	for k, v := range res.Labels {
		if v != "" {
			tags[k] = v
		}
	}
	return tags
}

// appendTags writes labels as a JSON object, names in order.
func appendTags(b []byte, l tiers.Labels) []byte {
	b = append(b, '{')
	for i, name := range l.Names() {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendKey(b, name)
		b = jsonenc.AppendString(b, l[name])
	}
	return append(b, '}')
}

// payloadList returns the payload member key as a list of texts: one
// string, or an array of strings (several selectors, a builder's
// multi-select). Empty texts are left out; nil means none (absent, null,
// or only empty texts).
func payloadList(payload map[string]json.RawMessage, key string) ([]string, error) {
	raw := bytes.TrimSpace(payload[key])
	items := []json.RawMessage{raw}
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, errors.New("payload." + key + " is not a valid array")
		}
	}
	var out []string
	for _, item := range items {
		text, ok := jsonenc.ScalarText(item)
		if !ok {
			return nil, errors.New("payload." + key + " must be a string or a list of strings")
		}
		if text = strings.TrimSpace(text); text != "" {
			out = append(out, text)
		}
	}
	return out, nil
}

// payloadGroupBy reads payload.group_by as the REST API reads group_by:
// absent (or null, or an empty list, which is what the builder's
// multi-select sends once cleared), no groups; text, even empty (one
// group of all series), a comma list of label names; a list of such
// texts, all their names.
func payloadGroupBy(payload map[string]json.RawMessage) (grouped bool, by []string, err error) {
	raw := bytes.TrimSpace(payload["group_by"])
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil, nil
	}
	items := []json.RawMessage{raw}
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return false, nil, errors.New("payload.group_by is not a valid array")
		}
		if len(items) == 0 {
			return false, nil, nil
		}
	}
	for _, item := range items {
		text, ok := jsonenc.ScalarText(item)
		if !ok {
			return false, nil, errors.New("payload.group_by must be a comma list of label names, or a list of them")
		}
		for name := range strings.SplitSeq(text, ",") {
			if name = strings.TrimSpace(name); name != "" && !slices.Contains(by, name) {
				by = append(by, name)
			}
		}
	}
	return true, by, nil
}

// grafanaFilter is one ad hoc filter: key, operator and value, or
// Grafana's one-of operators (=| and !=|) with values.
type grafanaFilter struct {
	Key      json.RawMessage   `json:"key"`
	Operator json.RawMessage   `json:"operator"`
	Value    json.RawMessage   `json:"value"`
	Values   []json.RawMessage `json:"values"`
}

// grafanaFilters reads the envelope's ad hoc filters as label matchers:
// filters, as the plugin sends them since v0.6.4 (and Grafana's scenes
// with them), or else adhocFilters, as older versions and the simple-json
// plugin do (both carry the same filters when both are sent). Labels
// are compared as strings: = != =~ !~ as in a selector, =| and !=| as
// one of (or none of) values; < and > compare numbers, which label values
// are not, and are refused with the other operators this datasource
// does not know.
func grafanaFilters(filters, adhoc json.RawMessage) ([]*labels.Matcher, error) {
	member, raw := "filters", bytes.TrimSpace(filters)
	if len(raw) == 0 || string(raw) == "null" {
		member, raw = "adhocFilters", bytes.TrimSpace(adhoc)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, grafanaBad(member + " must be a list of ad hoc filters {key, operator, value}")
	}
	ms := make([]*labels.Matcher, 0, len(list))
	for i, item := range list {
		where := fmt.Sprintf("%s[%d]", member, i)
		var f grafanaFilter
		if json.Unmarshal(item, &f) != nil {
			return nil, grafanaBad(where + " must be an ad hoc filter {key, operator, value}")
		}
		m, err := f.matcher()
		if err != nil {
			return nil, grafanaBad(where + "." + err.Error())
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// matcher is the filter as a label matcher; its errors start with the
// member they are about.
func (f grafanaFilter) matcher() (*labels.Matcher, error) {
	key, ok := jsonenc.ScalarText(f.Key)
	if !ok || key == "" {
		return nil, errors.New("key must be a label name")
	}
	if key != tiers.SeriesLabel {
		if err := params.LabelName(key); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
	}
	op, _ := jsonenc.ScalarText(f.Operator)
	value, ok := jsonenc.ScalarText(f.Value)
	if !ok {
		return nil, errors.New("value must be a string")
	}
	var t labels.MatchType
	switch op {
	case "=":
		t = labels.MatchEqual
	case "!=":
		t = labels.MatchNotEqual
	case "=~":
		t = labels.MatchRegexp
	case "!~":
		t = labels.MatchNotRegexp
	case "=|", "!=|":
		t = labels.MatchRegexp
		if op == "!=|" {
			t = labels.MatchNotRegexp
		}
		values := []string{value}
		if len(f.Values) > 0 {
			values = values[:0]
			for _, raw := range f.Values {
				v, ok := jsonenc.ScalarText(raw)
				if !ok {
					return nil, errors.New("values must be a list of strings")
				}
				values = append(values, regexp.QuoteMeta(v))
			}
		} else {
			values[0] = regexp.QuoteMeta(value)
		}
		value = strings.Join(values, "|")
	default:
		return nil, fmt.Errorf("operator: %q is not supported: label values are text, compared with =, !=, =~ or !~ (or Grafana's one-of =| and !=|)", op)
	}
	m, err := labels.NewMatcher(t, key, value)
	if err != nil {
		return nil, fmt.Errorf("value: %q is not a regular expression: %v", value, err)
	}
	return m, nil
}
