package promapi

import (
	"errors"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1768487842", 1768487842000, true},
		{"1768487842.123", 1768487842123, true},
		{"1768487842.1", 1768487842100, true},
		{"-1.5", -1500, true},
		{"2026-01-15T14:37:22.123Z", 1768487842123, true},
		{"2026-01-15T15:37:22+01:00", 1768487842000, true},
		{"yesterday", 0, false},
		{"NaN", 0, false},
		{"1e20", 0, false},
		{"", 0, false},
	} {
		got, err := parseTime("start", c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseTime(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !isBadData(err) {
			t.Errorf("parseTime(%q): %v is not bad_data", c.in, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"15", 15000, true}, {"0.5", 500, true}, {"1m", tiers.Minute, true}, {"1h30m", 90 * tiers.Minute, true},
		{"1d", tiers.Day, true}, {"1w", tiers.Week, true}, {"soon", 0, false}, {"Inf", 0, false},
	} {
		got, err := parseDuration("step", c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseDuration(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestAppendTimeAndValue(t *testing.T) {
	for ms, want := range map[int64]string{
		1768487842123: "1768487842.123", 1768487842100: "1768487842.1", 1768487842120: "1768487842.12",
		1768487842000: "1768487842", 1768487842001: "1768487842.001", -1500: "-1.5", 0: "0",
	} {
		if got := string(appendTime(nil, ms)); got != want {
			t.Errorf("appendTime(%d) = %s, want %s", ms, got, want)
		}
		if back, err := parseTime("t", want); err != nil || back != ms {
			t.Errorf("parseTime(%s) = %d, %v; want %d", want, back, err, ms)
		}
	}
	for v, want := range map[float64]string{1.5: `"1.5"`, -3: `"-3"`, 1e21: `"1000000000000000000000"`} {
		if got := string(appendValue(nil, v)); got != want {
			t.Errorf("appendValue(%v) = %s, want %s", v, got, want)
		}
	}
}

func isBadData(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.typ == errBadData
}
