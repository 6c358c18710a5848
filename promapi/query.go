package promapi

// /api/v1/query and /api/v1/query_range: PromQL by Prometheus' engine.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tsgate/tsgate/failure"
)

// result is a query's answer, encoded as the Prometheus API encodes it.
type result struct {
	typ parser.ValueType
	v   parser.Value
}

func (a *API) queryRange(r *http.Request) (any, []string, error) {
	start, err := formRequiredTime(r, "start")
	if err != nil {
		return nil, nil, err
	}
	end, err := formRequiredTime(r, "end")
	if err != nil {
		return nil, nil, err
	}
	if end < start {
		return nil, nil, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	stepText := strings.TrimSpace(r.Form.Get("step"))
	if stepText == "" {
		return nil, nil, badData("invalid parameter \"step\": a step is required, in seconds or as a duration like 1m")
	}
	step, err := parseDuration("step", stepText)
	if err != nil {
		return nil, nil, err
	}
	if step <= 0 {
		return nil, nil, badData("invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer")
	}
	// Prometheus' own test, so the same requests pass and fail.
	if (end-start)/step > MaxPointsPerSeries {
		return nil, nil, overLimit("max_points", "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")
	}
	ctx, cancel, err := a.queryContext(r)
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	qs := r.Form.Get("query")
	storage := a.queryable()
	storage.fromTiers, storage.facts = true, factsOf(qs)
	q, err := a.engine.NewRangeQuery(ctx, storage, nil, qs, time.UnixMilli(start), time.UnixMilli(end), time.Duration(step)*time.Millisecond)
	if err != nil {
		return nil, nil, queryError(err)
	}
	return a.exec(ctx, q, storage)
}

func (a *API) instantQuery(r *http.Request) (any, []string, error) {
	at, err := formTime(r, "time", a.deps.Now().UnixMilli())
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel, err := a.queryContext(r)
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	qs := r.Form.Get("query")
	storage := a.queryable()
	storage.fromTiers, storage.facts = true, factsOf(qs)
	q, err := a.engine.NewInstantQuery(ctx, storage, nil, qs, time.UnixMilli(at))
	if err != nil {
		return nil, nil, queryError(err)
	}
	return a.exec(ctx, q, storage)
}

// queryContext bounds a query by its timeout parameter, when given and
// shorter than the engine's (--slo-max).
func (a *API) queryContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	timeout, err := formTimeout(r)
	if err != nil {
		return nil, nil, err
	}
	if timeout > 0 && timeout < a.deps.Timeout {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	return ctx, cancel, nil
}

// queryable is the storage one query reads.
func (a *API) queryable() *queryable {
	return &queryable{a: a, maxSeries: a.cfg.MaxSeries}
}

// exec runs q and returns its value, encoded, and warnings. The value is
// encoded before the query is closed: Close hands the value's slices back
// to the engine's pools, for the next query to fill.
func (a *API) exec(ctx context.Context, q promql.Query, storage *queryable) (any, []string, error) {
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, nil, queryError(res.Err)
	}
	warnings := annotations.New()
	warnings.Merge(res.Warnings)
	warnings.Merge(storage.annotations())
	ws, infos := warnings.AsStrings("", 0, 0)
	return json.RawMessage(appendResult(nil, result{typ: res.Value.Type(), v: res.Value})), append(ws, infos...), nil
}

// queryError is the Prometheus error of a failed query, as Prometheus
// answers it: bad_data for what does not parse, execution for what the
// engine refuses (too many samples), timeout, canceled, and the
// gateway's own kinds for what the store said.
func queryError(err error) error {
	var ae *apiError
	var perr *parser.ParseErr
	var perrs parser.ParseErrors
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &perr), errors.As(err, &perrs):
		return &apiError{typ: errBadData, msg: err.Error()}
	}
	switch e := err.(type) {
	case promql.ErrQueryCanceled:
		return &apiError{typ: errCanceled, msg: e.Error()}
	case promql.ErrQueryTimeout:
		return &apiError{typ: errTimeout, msg: e.Error() + " (--slo-max, or the timeout parameter)", status: http.StatusServiceUnavailable}
	case promql.ErrTooManySamples:
		return &apiError{typ: errExec, msg: e.Error() + " (--prom-max-samples)", limit: "max_samples"}
	case promql.ErrStorage:
		return engineError(e.Err)
	}
	if failure.Of(err) == failure.Internal {
		// What the engine says of the expression it evaluates (a
		// function's argument out of range, a label set twice, ...).
		return &apiError{typ: errExec, msg: err.Error()}
	}
	return engineError(err)
}

// appendResult encodes a query's value: {"resultType", "result"}.
func appendResult(b []byte, res result) []byte {
	b = append(b, `{"resultType":"`...)
	b = append(b, res.typ...)
	b = append(b, `","result":`...)
	switch v := res.v.(type) {
	case promql.Matrix:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendMetric(b, s.Metric)
			b = append(b, `,"values":[`...)
			for k, p := range s.Floats {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendPair(b, p.T, p.F)
			}
			b = append(b, "]}"...)
		}
		b = append(b, ']')
	case promql.Vector:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendMetric(b, s.Metric)
			b = append(b, `,"value":`...)
			b = appendPair(b, s.T, s.F)
			b = append(b, '}')
		}
		b = append(b, ']')
	case promql.Scalar:
		b = appendPair(b, v.T, v.V)
	case promql.String:
		b = append(b, '[')
		b = appendTime(b, v.T)
		b = append(b, ',')
		b = appendQuoted(b, v.V)
		b = append(b, ']')
	default:
		b = append(b, "[]"...)
	}
	return append(b, '}')
}

func appendPair(b []byte, t int64, v float64) []byte {
	b = append(b, '[')
	b = appendTime(b, t)
	b = append(b, ',')
	b = appendValue(b, v)
	return append(b, ']')
}

// appendMetric writes a label set as a JSON object.
func appendMetric(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendQuoted(b, l.Name)
		b = append(b, ':')
		b = appendQuoted(b, l.Value)
	})
	return append(b, '}')
}
