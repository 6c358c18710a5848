// Package params parses the syntaxes of the HTTP API: times (RFC 3339, Unix
// milliseconds, or relative to now), durations (Go style plus d and w),
// series ids, and the enumerations of the read parameters. Every parser
// returns an error whose text can be shown to the client as is: it says what
// was expected.
//
// Results are in int64 Unix milliseconds, like the rest of the gateway, and
// bounded by tiers.MinTime and tiers.MaxTime so that later arithmetic cannot
// overflow.
package params

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tsgate/tsgate/tiers"
)

// MaxSeriesIDLen is the longest series id the API accepts.
const MaxSeriesIDLen = 200

// SeriesID checks a series id: 1 to 200 characters of [A-Za-z0-9_.:-],
// other than . and .., which are path segments that URLs drop: a series
// of either id could be written but not read at /v1/series/{id}.
func SeriesID(id string) error {
	if id == "." || id == ".." {
		return fmt.Errorf("must not be %q: URLs drop it as a path segment", id)
	}
	return SeriesPrefix(id)
}

// SeriesPrefix checks the beginning of series ids, as the listing takes
// it: 1 to 200 characters of [A-Za-z0-9_.:-].
func SeriesPrefix(id string) error {
	if id == "" {
		return errors.New("must not be empty")
	}
	if len(id) > MaxSeriesIDLen {
		return fmt.Errorf("must be at most %d characters, got %d", MaxSeriesIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return fmt.Errorf("may only contain letters, digits and _ . : - (found %q at position %d)", quoteByte(id, i), i)
		}
	}
	return nil
}

func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}

// quoteByte returns the character starting at byte i, for messages; i is
// the first byte that is not an id character, so it starts a character.
func quoteByte(s string, i int) string {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return string(r)
}

// Instant is a time as a request gives it: absolute, or relative to the
// clock ("now-6h"), which is resolved when the request is served. A
// relative instant keeps its meaning as the clock moves; a cursor pins the
// resolution of the request's first page. The zero Instant is unset.
type Instant struct {
	set      bool
	relative bool
	ms       int64 // Unix ms, or the offset from now
}

// At is the absolute instant ms.
func At(ms int64) Instant { return Instant{set: true, ms: ms} }

// FromNow is the instant offset ms after the clock (negative: before).
func FromNow(offset int64) Instant { return Instant{set: true, relative: true, ms: offset} }

// IsZero reports whether the instant is unset.
func (i Instant) IsZero() bool { return !i.set }

// Relative reports whether the instant moves with the clock.
func (i Instant) Relative() bool { return i.relative }

// Resolve returns the instant in Unix ms at clock now; it fails when the
// result lies outside years 0001 to 9999.
func (i Instant) Resolve(now int64) (int64, error) {
	t := i.ms
	if i.relative {
		t = now + i.ms
	}
	if t < tiers.MinTime || t >= tiers.MaxTime {
		return 0, errors.New("is out of range (years 0001 to 9999)")
	}
	return t, nil
}

// Canon is the instant's canonical text: relative instants as now and an
// offset in ms, absolute ones as Unix ms, so that equal instants written
// differently compare equal.
func (i Instant) Canon() string {
	switch {
	case !i.set:
		return ""
	case i.relative:
		return "now" + strconv.FormatInt(i.ms, 10)
	}
	return strconv.FormatInt(i.ms, 10)
}

// ParseInstant parses a point in time: RFC 3339 with any offset
// ("2026-01-15T14:37:22.123Z"), integer Unix milliseconds ("1768487842123"),
// or relative to the clock ("now", "now-15m", "now+1h"). Sub-millisecond
// digits are truncated towards the past.
func ParseInstant(s string) (Instant, error) {
	if s == "" {
		return Instant{}, errors.New("must not be empty; use RFC 3339, Unix milliseconds, or now-<duration>")
	}
	if strings.HasPrefix(s, "now") {
		rest := s[3:]
		if rest == "" {
			return FromNow(0), nil
		}
		sign := int64(1)
		switch rest[0] {
		case '-':
			sign = -1
		case '+':
		default:
			return Instant{}, fmt.Errorf("%q is not a time: after now comes - or + and a duration, like now-15m", s)
		}
		d, err := Duration(rest[1:])
		if err != nil {
			return Instant{}, fmt.Errorf("%q is not a time: %v", s, err)
		}
		return FromNow(sign * d), nil
	}
	if isInteger(s) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < tiers.MinTime || ms >= tiers.MaxTime {
			return Instant{}, fmt.Errorf("%q is out of range for Unix milliseconds (years 0001 to 9999)", s)
		}
		return At(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Instant{}, fmt.Errorf("%q is not a time: use RFC 3339 (2026-01-15T14:37:22Z), Unix milliseconds, or now-<duration>", s)
	}
	ms := t.UnixMilli() // floors: Go keeps nanoseconds non-negative
	if ms < tiers.MinTime || ms >= tiers.MaxTime {
		return Instant{}, fmt.Errorf("%q is out of range (years 0001 to 9999)", s)
	}
	return At(ms), nil
}

// Time parses a point in time like ParseInstant and resolves it at now.
func Time(s string, now int64) (int64, error) {
	i, err := ParseInstant(s)
	if err != nil {
		return 0, err
	}
	t, err := i.Resolve(now)
	if err != nil {
		return 0, fmt.Errorf("%q %v", s, err)
	}
	return t, nil
}

func isInteger(s string) bool {
	if s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var unitMillis = map[string]float64{
	"ms": 1, "s": 1e3, "m": 60e3, "h": 3600e3, "d": 86400e3, "w": 7 * 86400e3,
}

// maxDuration keeps durations within the representable time range.
const maxDuration = tiers.MaxTime - tiers.MinTime

// Duration parses a Go-style duration in milliseconds: a sequence of
// decimal numbers, each with a unit of ms, s, m, h, d (24h) or w (7d), such
// as "250ms", "1.5h" or "1h30m". The result must be a whole number of
// milliseconds and is never negative.
func Duration(s string) (int64, error) {
	orig := s
	if s == "" {
		return 0, errors.New("empty duration; use a number and a unit (ms, s, m, h, d, w), like 5m")
	}
	if s == "0" {
		return 0, nil
	}
	var total float64
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("%q is not a duration: expected a number at %q", orig, s)
		}
		num, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || strings.Count(s[:i], ".") > 1 || s[0] == '.' && i == 1 {
			return 0, fmt.Errorf("%q is not a duration: bad number %q", orig, s[:i])
		}
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') && s[j] != '.' {
			j++
		}
		unit := s[:j]
		mult, ok := unitMillis[unit]
		if !ok {
			if unit == "" {
				return 0, fmt.Errorf("%q is not a duration: missing unit (ms, s, m, h, d, w)", orig)
			}
			return 0, fmt.Errorf("%q is not a duration: unknown unit %q (use ms, s, m, h, d, w)", orig, unit)
		}
		s = s[j:]
		total += num * mult
		if total > float64(maxDuration) {
			return 0, fmt.Errorf("%q is too long", orig)
		}
	}
	if total != math.Trunc(total) {
		// Allow float noise such as 0.1s = 100.00000000000001ms.
		if r := math.Round(total); math.Abs(total-r) < 1e-6 {
			total = r
		} else {
			return 0, fmt.Errorf("%q is not a whole number of milliseconds", orig)
		}
	}
	return int64(total), nil
}
