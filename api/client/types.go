package client

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Rows are the points of an answer, one slice per point or window in the
// order of the answer's columns: t (Unix milliseconds, a window's start)
// first, then v or the aggregates. An aggregate the gateway sends as null
// (a sum that overflowed float64) is NaN.
type Rows [][]float64

// UnmarshalJSON reads rows, turning null into NaN.
func (r *Rows) UnmarshalJSON(b []byte) error {
	var raw [][]*float64
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*r = nil
		return nil
	}
	out := make(Rows, len(raw))
	for i, row := range raw {
		out[i] = make([]float64, len(row))
		for j, v := range row {
			if v == nil {
				out[i][j] = math.NaN()
			} else {
				out[i][j] = *v
			}
		}
	}
	*r = out
	return nil
}

// MarshalJSON writes rows as the gateway does, NaN and infinities as null.
func (r Rows) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	b := []byte{'['}
	for i, row := range r {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, v := range row {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendFloat(b, v)
		}
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

// appendFloat writes v as encoding/json does, and NaN and infinities as
// null.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		b = strconv.AppendFloat(b, v, 'e', -1, 64)
		// e-07 as e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// BatchItem is one result of a batch query: the answer of its query or,
// when Error is set, the problem that query ran into (then only Series is
// set besides).
type BatchItem struct {
	PointsAnswer
	Error *Problem `json:"error,omitempty"`
}

// Time is t as a time of a request body: Unix milliseconds, as a string.
func Time(t time.Time) TimeValue { return strconv.FormatInt(t.UnixMilli(), 10) }

// The aggregates and columns by name. Agg and Column are strings that
// also take percentiles (`p99`, `p99.9`: see Percentile), so the contract
// lists them as a pattern rather than an enum and the generator defines no
// constants; these are the fixed ones.
const (
	AggMin   Agg = "min"
	AggMax   Agg = "max"
	AggSum   Agg = "sum"
	AggCount Agg = "count"
	AggAvg   Agg = "avg"

	ColumnT     Column = "t"
	ColumnV     Column = "v"
	ColumnMin   Column = "min"
	ColumnMax   Column = "max"
	ColumnSum   Column = "sum"
	ColumnCount Column = "count"
	ColumnAvg   Column = "avg"
)

// Percentile is the aggregate of the p-th percentile of a window's values
// (0 < p < 100, at most three decimals): Percentile(99) is "p99",
// Percentile(99.9) "p99.9". Its column has the same name.
func Percentile(p float64) Agg {
	return Agg("p" + strconv.FormatFloat(p, 'f', -1, 64))
}
