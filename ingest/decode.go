package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Point is one point of a write.
type Point struct {
	Series string
	T      int64
	V      float64
}

// Batch is what a body holds: points, and the labels it gives series
// ("series_labels" in JSON, label lines in NDJSON), by series id.
type Batch struct {
	Points []Point
	Labels map[string]tiers.Labels
}

// MaxReportedErrors bounds the per-point errors of one rejected batch.
const MaxReportedErrors = 100

// ValidationError rejects a whole batch: nothing of it is written.
type ValidationError struct {
	// Errors holds at most MaxReportedErrors entries, in point order; each
	// names a part of the body, like "points[17].t".
	Errors []params.Error
	// Invalid counts every invalid point, reported or not.
	Invalid int
	// Total is the number of points in the batch, when known.
	Total int

	// points are the points of a rejected batch that did decode, and
	// decoded their positions in it.
	points  []Point
	decoded []int
}

func (e *ValidationError) Error() string {
	if e.Total > 0 {
		return fmt.Sprintf("%d of %d points are invalid; nothing was written", e.Invalid, e.Total)
	}
	if len(e.Errors) == 1 {
		return e.Errors[0].Param + ": " + e.Errors[0].Message
	}
	return fmt.Sprintf("%d errors; nothing was written", len(e.Errors))
}

// Kind says invalid points are bad input.
func (e *ValidationError) Kind() failure.Kind { return failure.BadInput }

// PointErrors names each bad point: the errors member of the answer.
func (e *ValidationError) PointErrors() []params.Error { return e.Errors }

func (e *ValidationError) add(param, msg string) {
	if len(e.Errors) < MaxReportedErrors {
		e.Errors = append(e.Errors, params.Error{Param: param, Message: msg})
	}
}

// rawPoint is a point as it arrives; fields stay raw so that each can be
// checked with a message of its own.
type rawPoint struct {
	Series *string          `json:"series"`
	T      json.RawMessage  `json:"t"`
	V      *json.RawMessage `json:"v"`
	// Labels makes an NDJSON line a label line: series and labels, no t,
	// no v.
	Labels json.RawMessage `json:"labels"`
}

// DecodeJSON reads a body of the form {"points": [{"series", "t", "v"},
// ...], "series_labels": {"<id>": {"<name>": "<value>", ...}, ...}}
// (series_labels optional).
// now resolves relative times. Syntax errors are reported against "body";
// invalid points against "points[i].field", all of them (up to
// MaxReportedErrors) rather than only the first.
//
// Bodies in the plain form clients send — no escapes, no duplicate or
// unknown members, every point valid — are decoded by a fast scanner; any
// other body, and every body with an error, by encoding/json, which makes
// the answer and the error report of every body what encoding/json makes
// of it.
func DecodeJSON(r io.Reader, now int64) (Batch, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		// The reader failed part way (a body over the size limit, a client
		// that went away): decode what was read, then fail as the reader
		// did, exactly as decoding the stream would have.
		return decodeJSONStream(io.MultiReader(bytes.NewReader(body), failingReader{err}), now)
	}
	if points, ok := decodeJSONFast(body, now); ok {
		return Batch{Points: points}, nil
	}
	return decodeJSONStream(bytes.NewReader(body), now)
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// decodeJSONStream is DecodeJSON with encoding/json, point by point.
func decodeJSONStream(r io.Reader, now int64) (Batch, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	verr := &ValidationError{}
	bodyErr := func(msg string) error {
		return &ValidationError{Errors: []params.Error{{Param: "body", Message: msg}}}
	}
	if tok, err := dec.Token(); err != nil {
		return Batch{}, syntaxError(err, bodyErr)
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Batch{}, bodyErr(`must be a JSON object like {"points": [...]}`)
	}
	var points []Point
	var labels map[string]tiers.Labels
	sawPoints := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Batch{}, syntaxError(err, bodyErr)
		}
		key, _ := tok.(string)
		if key == "series_labels" {
			if labels != nil {
				return Batch{}, bodyErr(`"series_labels" appears twice`)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return Batch{}, syntaxError(err, bodyErr)
			}
			if labels = seriesLabels(raw, verr); labels == nil {
				labels = map[string]tiers.Labels{}
			}
			continue
		}
		if key != "points" {
			return Batch{}, bodyErr(fmt.Sprintf("unknown member %q; the body holds \"points\" and \"series_labels\"", key))
		}
		if sawPoints {
			return Batch{}, bodyErr(`"points" appears twice`)
		}
		sawPoints = true
		if tok, err := dec.Token(); err != nil {
			return Batch{}, syntaxError(err, bodyErr)
		} else if d, ok := tok.(json.Delim); !ok || d != '[' {
			return Batch{}, &ValidationError{Errors: []params.Error{{Param: "points", Message: "must be an array of points"}}}
		}
		for i := 0; dec.More(); i++ {
			rp, err := decodePoint(dec)
			if err != nil {
				if isSyntax(err) {
					return Batch{}, syntaxError(err, bodyErr)
				}
				if !isShapeError(err) && !isRepeated(err) {
					return Batch{}, err // the body's reader failed: too large, or the client left
				}
				verr.Invalid++
				verr.add(pointShapeError(i, err))
				continue
			}
			if rp.Labels != nil {
				verr.Invalid++
				verr.add(fmt.Sprintf("points[%d].labels", i), `a point carries no labels: give them in "series_labels"`)
				continue
			}
			p, ok := checkPoint(rp, i, now, verr)
			if ok {
				points = append(points, p)
				verr.decoded = append(verr.decoded, i)
			}
		}
		if _, err := dec.Token(); err != nil {
			return Batch{}, syntaxError(err, bodyErr)
		}
	}
	if _, err := dec.Token(); err != nil {
		return Batch{}, syntaxError(err, bodyErr)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Batch{}, bodyErr("unexpected data after the JSON object")
	}
	return finish(points, labels, verr)
}

// DecodeNDJSON reads one point object per line; blank lines are skipped. A
// line {"series": "<id>", "labels": {...}} (no t, no v) gives the series
// its labels.
func DecodeNDJSON(r io.Reader, now int64) (Batch, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	verr := &ValidationError{}
	var points []Point
	var labels map[string]tiers.Labels
	var lines scanner // reused from line to line
	i := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		// Lines of the plain form, and valid, take the scanner; any other
		// line gets encoding/json's decoding and error report.
		if p, ok := ndjsonLineFast(&lines, line, i, now); ok {
			points = append(points, p)
			verr.decoded = append(verr.decoded, i)
			i++
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		// More is false before a closing bracket too, so what follows the
		// object is checked by its offset: nothing may.
		rp, err := decodePoint(dec)
		if err != nil || int(dec.InputOffset()) != len(line) {
			if err != nil && !isShapeError(err) && !isSyntax(err) && !isRepeated(err) {
				return Batch{}, err
			}
			verr.Invalid++
			if err != nil {
				verr.add(pointShapeError(i, err))
			} else {
				verr.add(fmt.Sprintf("points[%d]", i), "must be one JSON object per line")
			}
			i++
			continue
		}
		if rp.Labels != nil {
			if labels == nil {
				labels = map[string]tiers.Labels{}
			}
			labelLine(rp, i, labels, verr)
			i++
			continue
		}
		if p, ok := checkPoint(rp, i, now, verr); ok {
			points = append(points, p)
			verr.decoded = append(verr.decoded, i)
		}
		i++
	}
	if err := sc.Err(); err != nil {
		return Batch{}, lineError(err, i)
	}
	return finish(points, labels, verr)
}

// lineError is the failure of a line-by-line body at line i: a line over
// the scanner's bound is that point's error; anything else is the body's
// reader failing (too large, or the client went away).
func lineError(err error, i int) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return &ValidationError{Errors: []params.Error{{Param: fmt.Sprintf("points[%d]", i), Message: "line longer than 1 MiB"}}}
	}
	return err
}

func finish(points []Point, labels map[string]tiers.Labels, verr *ValidationError) (Batch, error) {
	if verr.Invalid > 0 {
		verr.Total = len(points) + verr.Invalid
		// The points that did decode still get their other checks (see
		// Writer.Check), so that one answer names every bad point.
		verr.points = points
		return Batch{}, verr
	}
	if len(points) == 0 {
		return Batch{}, &ValidationError{Errors: []params.Error{{Param: "points", Message: "must hold at least one point"}}}
	}
	return Batch{Points: points, Labels: labels}, nil
}

// seriesLabels reads the series_labels member: an object of series ids,
// each an object of label names and string values, no name twice. What
// is wrong is reported against series_labels.<id>.
func seriesLabels(raw json.RawMessage, verr *ValidationError) map[string]tiers.Labels {
	bad := func(param, msg string) {
		verr.Invalid++
		verr.add(param, msg)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		bad("series_labels", `must be an object of series ids, each an object of labels: {"sensor-1": {"host": "a"}}`)
		return nil
	}
	out := map[string]tiers.Labels{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			bad("series_labels", "not valid JSON")
			return out
		}
		id, _ := tok.(string)
		var obj json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			bad("series_labels", "not valid JSON")
			return out
		}
		param := "series_labels." + id
		if err := params.SeriesID(id); err != nil {
			bad(param, err.Error())
			continue
		}
		if _, dup := out[id]; dup {
			bad(param, "the series appears twice")
			continue
		}
		l, msg := labelObject(obj)
		if msg != "" {
			bad(param, msg)
			continue
		}
		out[id] = l
	}
	return out
}

// DecodeLabelLine reads one NDJSON line that may be a label line
// ({"series": "<id>", "labels": {...}}, no t, no v) and returns the labels
// it gives; nil and no error when the line is no label line (then it is a
// point, or an error the decoding of its batch reports). A label line
// alone is no batch (a batch holds at least one point), so a reader of a
// stream of lines, such as gateway import, takes it apart first.
func DecodeLabelLine(line []byte) (map[string]tiers.Labels, error) {
	line = bytes.TrimSpace(line)
	dec := json.NewDecoder(bytes.NewReader(line))
	rp, err := decodePoint(dec)
	if err != nil || int(dec.InputOffset()) != len(line) || rp.Labels == nil {
		return nil, nil
	}
	verr := &ValidationError{}
	labels := map[string]tiers.Labels{}
	labelLine(rp, 0, labels, verr)
	if verr.Invalid > 0 {
		verr.Total = verr.Invalid
		return nil, verr
	}
	return labels, nil
}

// labelLine reads an NDJSON label line into labels.
func labelLine(rp rawPoint, i int, labels map[string]tiers.Labels, verr *ValidationError) {
	bad := func(param, msg string) {
		verr.Invalid++
		verr.add(param, msg)
	}
	switch {
	case rp.Series == nil:
		bad(fmt.Sprintf("points[%d].series", i), "required: the series the labels are for")
		return
	case rp.T != nil || rp.V != nil:
		bad(fmt.Sprintf("points[%d]", i), "a label line holds series and labels only, no t or v")
		return
	}
	id := *rp.Series
	param := "series_labels." + id
	if err := params.SeriesID(id); err != nil {
		bad(fmt.Sprintf("points[%d].series", i), err.Error())
		return
	}
	l, msg := labelObject(rp.Labels)
	if msg != "" {
		bad(param, msg)
		return
	}
	if prev, ok := labels[id]; ok && !prev.Equal(l) {
		bad(param, "two label lines give the series different labels")
		return
	}
	labels[id] = l
}

// labelObject reads an object of label names and string values; msg says
// what is wrong with it, "" when nothing is. Names and values are checked
// against the API's rules by the writer.
func labelObject(raw json.RawMessage) (tiers.Labels, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, `must be an object of label names and string values: {"host": "a"}`
	}
	l := tiers.Labels{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "not valid JSON"
		}
		name, _ := tok.(string)
		tok, err = dec.Token()
		if err != nil {
			return nil, "not valid JSON"
		}
		value, ok := tok.(string)
		if !ok {
			return nil, fmt.Sprintf("the value of label %s must be a string", name)
		}
		if _, dup := l[name]; dup {
			return nil, fmt.Sprintf("label %s appears twice", name)
		}
		l[name] = value
	}
	return l, ""
}

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// decodePoint decodes the next value of dec as a point, as encoding/json
// decodes it, except that a member given twice is an error (a
// repeatedError) where encoding/json would keep the last value silently.
// Names are matched to members as encoding/json matches them, without
// regard to case: "v" and "V" are the same member.
func decodePoint(dec *json.Decoder) (rawPoint, error) {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return rawPoint{}, err
	}
	var rp rawPoint
	pd := json.NewDecoder(bytes.NewReader(raw))
	pd.DisallowUnknownFields()
	if err := pd.Decode(&rp); err != nil {
		return rawPoint{}, err
	}
	if m := repeatedMember(raw); m != "" {
		return rawPoint{}, repeatedError(m)
	}
	return rp, nil
}

// pointMembers are the members of a point, as its errors name them.
var pointMembers = [...]string{"series", "t", "v"}

// repeatedMember returns the member that the point object raw, which
// decoded, gives twice; "" when none is.
func repeatedMember(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "" // null: the missing members are reported
	}
	var seen [len(pointMembers)]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ""
		}
		for m, member := range pointMembers {
			if strings.EqualFold(name, member) {
				if seen[m] {
					return member
				}
				seen[m] = true
			}
		}
	}
	return ""
}

// repeatedError names a member a point gives twice.
type repeatedError string

func (e repeatedError) Error() string { return string(e) + " appears twice in the point" }

func isRepeated(err error) bool {
	var re repeatedError
	return errors.As(err, &re)
}

// syntaxError turns a decoder failure into a body error, passing through
// failures of the underlying reader (such as a body over the size limit).
func syntaxError(err error, bodyErr func(string) error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return bodyErr(fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se.Error()))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return bodyErr("ends before the JSON is complete")
	default:
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return bodyErr(err.Error())
		}
		return err
	}
}

// isShapeError reports whether a decode error is about the point's shape
// (a wrong type or an unknown member) rather than the body's reader.
func isShapeError(err error) bool {
	var ute *json.UnmarshalTypeError
	return errors.As(err, &ute) || strings.HasPrefix(err.Error(), "json: unknown field")
}

// pointShapeError names what is wrong with a point that did not decode.
func pointShapeError(i int, err error) (param, msg string) {
	param = fmt.Sprintf("points[%d]", i)
	var ute *json.UnmarshalTypeError
	var re repeatedError
	switch {
	case errors.As(err, &re):
		return param + "." + string(re), "appears twice in the point; a point gives each member once"
	case errors.As(err, &ute) && ute.Field != "":
		return param + "." + ute.Field, fmt.Sprintf("has the wrong type (%s)", ute.Value)
	case errors.As(err, &ute):
		return param, `must be an object {"series", "t", "v"}`
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return param, strings.TrimPrefix(err.Error(), "json: ") + `; a point has only "series", "t" and "v"`
	default:
		return param, "not a point: " + err.Error()
	}
}

// checkPoint validates the syntax of one point; time bounds that depend on
// the tiers are checked by the Writer.
func checkPoint(rp rawPoint, i int, now int64, verr *ValidationError) (Point, bool) {
	var p Point
	ok := true
	bad := func(field, msg string) {
		if ok {
			verr.Invalid++
		}
		ok = false
		verr.add(fmt.Sprintf("points[%d].%s", i, field), msg)
	}
	switch {
	case rp.Series == nil:
		bad("series", "required")
	default:
		if err := params.SeriesID(*rp.Series); err != nil {
			bad("series", err.Error())
		}
		p.Series = *rp.Series
	}
	switch {
	case len(rp.T) == 0 || string(rp.T) == "null":
		bad("t", "required: Unix milliseconds or an RFC 3339 string")
	case rp.T[0] == '"':
		var s string
		if err := json.Unmarshal(rp.T, &s); err != nil {
			bad("t", "not a valid string")
		} else if t, err := params.Time(s, now); err != nil {
			bad("t", err.Error())
		} else {
			p.T = t
		}
	default:
		t, err := jsonenc.ParseInt(rp.T)
		if err != nil {
			bad("t", "must be integer Unix milliseconds or an RFC 3339 string, got "+truncate(string(rp.T)))
		} else if t >= tiers.MinTime && t < tiers.MaxTime {
			p.T = t // what params.Time makes of it
		} else if t, err := params.Time(strconv.FormatInt(t, 10), now); err != nil {
			bad("t", err.Error())
		} else {
			p.T = t
		}
	}
	switch {
	case rp.V == nil || string(*rp.V) == "null":
		bad("v", "required: a finite number")
	case (*rp.V)[0] == '"' || (*rp.V)[0] == '{' || (*rp.V)[0] == '[' || (*rp.V)[0] == 't' || (*rp.V)[0] == 'f':
		bad("v", "must be a number, got "+truncate(string(*rp.V)))
	default:
		v, err := jsonenc.ParseFloat(*rp.V)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			bad("v", "must be a finite number (float64), got "+truncate(string(*rp.V)))
		} else {
			p.V = v
		}
	}
	return p, ok
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
