package tiers

import (
	"strconv"
)

// Time bounds accepted anywhere in the gateway: years 0001 through 9999 UTC.
// Keeping times well inside int64 means span arithmetic (To-From, t+width,
// t+retention) cannot overflow.
const (
	MinTime int64 = -62135596800000 // 0001-01-01T00:00:00Z
	MaxTime int64 = 253402300800000 // 10000-01-01T00:00:00Z, exclusive
)

// Common durations in milliseconds.
const (
	Second int64 = 1000
	Minute       = 60 * Second
	Hour         = 60 * Minute
	Day          = 24 * Hour
	Week         = 7 * Day
)

// Span is the half-open interval [From, To) of Unix milliseconds.
type Span struct {
	From, To int64
}

// Empty reports whether the span holds no instant.
func (s Span) Empty() bool { return s.From >= s.To }

// Contains reports whether From <= t < To.
func (s Span) Contains(t int64) bool { return s.From <= t && t < s.To }

// Intersect returns the instants in both spans (possibly empty).
func (s Span) Intersect(o Span) Span {
	return Span{From: max(s.From, o.From), To: min(s.To, o.To)}
}

// FloorDiv is a / b rounded towards negative infinity (b > 0), so that bucket
// and window alignment is the same on both sides of the epoch.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// AlignDown returns the largest multiple of step that is <= t (step > 0).
func AlignDown(t, step int64) int64 { return FloorDiv(t, step) * step }

// AlignUp returns the smallest multiple of step that is >= t (step > 0).
func AlignUp(t, step int64) int64 {
	d := AlignDown(t, step)
	if d == t {
		return t
	}
	return d + step
}

// FormatDuration writes a duration of ms milliseconds the way the API reads
// durations: its day, hour, minute, second and millisecond parts, largest
// first, zeros omitted ("1d", "36h", "1m30s", "250ms").
func FormatDuration(ms int64) string {
	if ms == 0 {
		return "0s"
	}
	var b []byte
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	for _, u := range [...]struct {
		name string
		ms   int64
	}{{"d", Day}, {"h", Hour}, {"m", Minute}, {"s", Second}, {"ms", 1}} {
		if n := ms / u.ms; n > 0 {
			b = strconv.AppendInt(b, n, 10)
			b = append(b, u.name...)
			ms -= n * u.ms
		}
	}
	return string(b)
}
