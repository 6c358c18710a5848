package promapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// parseTime reads a time as the Prometheus API does: Unix seconds, with a
// fraction, or RFC 3339. Milliseconds are the gateway's precision; finer
// digits are cut.
func parseTime(name, s string) (int64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || f*1000 < float64(tiers.MinTime) || f*1000 >= float64(tiers.MaxTime) {
			return 0, badData("invalid parameter %q: %q is outside the years 1 to 9999", name, s)
		}
		// Rounded to the millisecond, as Prometheus does: clients send
		// float seconds, whose decimals are not exact.
		sec, frac := math.Modf(f)
		return int64(sec)*1000 + int64(math.Round(frac*1000)), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		ms := t.UnixMilli()
		if ms < tiers.MinTime || ms >= tiers.MaxTime {
			return 0, badData("invalid parameter %q: %q is outside the years 1 to 9999", name, s)
		}
		return ms, nil
	}
	return 0, badData("invalid parameter %q: cannot parse %q to a valid timestamp (Unix seconds or RFC 3339)", name, s)
}

// parseDuration reads a duration as the Prometheus API does: seconds,
// with a fraction, or a duration like 5m, 1h30m, 1d, 1w.
func parseDuration(name, s string) (int64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f*1000 >= float64(tiers.MaxTime) || f*1000 <= -float64(tiers.MaxTime) {
			return 0, badData("invalid parameter %q: cannot parse %q to a valid duration", name, s)
		}
		return int64(math.Round(f * 1000)), nil
	}
	d, err := params.Duration(s)
	if err != nil {
		return 0, badData("invalid parameter %q: cannot parse %q to a valid duration: seconds or a duration like 30s, 5m, 1h", name, s)
	}
	return d, nil
}

// formRequiredTime is the time parameter name, which must be given.
func formRequiredTime(r *http.Request, name string) (int64, error) {
	s := strings.TrimSpace(r.Form.Get(name))
	if s == "" {
		return 0, badData("invalid parameter %q: missing; Unix seconds or RFC 3339", name)
	}
	return parseTime(name, s)
}

// formTime is the time parameter name, or def when it is absent.
func formTime(r *http.Request, name string, def int64) (int64, error) {
	s := strings.TrimSpace(r.Form.Get(name))
	if s == "" {
		return def, nil
	}
	return parseTime(name, s)
}

// budget is the latency budget of a request: its timeout parameter, from
// its arrival. Zero leaves the engine's default.
func formTimeout(r *http.Request) (time.Duration, error) {
	s := strings.TrimSpace(r.Form.Get("timeout"))
	if s == "" {
		return 0, nil
	}
	d, err := parseDuration("timeout", s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, badData("invalid parameter \"timeout\": must be positive")
	}
	return time.Duration(d) * time.Millisecond, nil
}

// span is the [start, end] of the listing endpoints: everything when
// absent.
func formSpan(r *http.Request) (start, end int64, err error) {
	if start, err = formTime(r, "start", tiers.MinTime); err != nil {
		return 0, 0, err
	}
	if end, err = formTime(r, "end", tiers.MaxTime-1); err != nil {
		return 0, 0, err
	}
	if end < start {
		return 0, 0, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	return start, end, nil
}

// formLimit is the limit parameter of the listing endpoints: 0 is none.
func formLimit(r *http.Request) (int, error) {
	s := strings.TrimSpace(r.Form.Get("limit"))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, badData("invalid parameter \"limit\": %q is not a non-negative integer", s)
	}
	return n, nil
}
