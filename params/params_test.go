package params

import (
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

const now = int64(1768487842123)

func TestTime(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"now", now},
		{"now-15m", now - 15*tiers.Minute},
		{"now-6h", now - 6*tiers.Hour},
		{"now-7d", now - 7*tiers.Day},
		{"now-2w", now - 14*tiers.Day},
		{"now+1h", now + tiers.Hour},
		{"now-1h30m", now - 90*tiers.Minute},
		{"now-250ms", now - 250},
		{"1768487842123", 1768487842123},
		{"0", 0},
		{"-1000", -1000},
		{"2026-01-15T14:37:22.123Z", 1768487842123},
		{"2026-01-15T14:37:22Z", 1768487842000},
		{"2026-01-15T15:37:22.123+01:00", 1768487842123},
		{"2026-01-15T14:37:22.123456789Z", 1768487842123},
		{"1969-12-31T23:59:59.9995Z", -1},
	}
	for _, c := range cases {
		got, err := Time(c.in, now)
		if err != nil || got != c.want {
			t.Errorf("Time(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "now-", "now-5", "now-5y", "now*2", "2026-01-15", "2026-13-01T00:00:00Z",
		"99999999999999999999", "253402300800000", "1e12", "now-1000000w", " now"} {
		if _, err := Time(bad, now); err == nil {
			t.Errorf("Time(%q) accepted", bad)
		}
	}
}

func TestDuration(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"250ms", 250}, {"1s", 1000}, {"90s", 90000}, {"5m", 300000}, {"1h", 3600000},
		{"36h", 36 * 3600000}, {"1d", 86400000}, {"7d", 7 * 86400000}, {"1w", 7 * 86400000},
		{"1h30m", 5400000}, {"1.5h", 5400000}, {"0.1s", 100}, {"0", 0},
	}
	for _, c := range cases {
		got, err := Duration(c.in)
		if err != nil || got != c.want {
			t.Errorf("Duration(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "5", "m", "-5m", "5y", "1.5ms", "5 m", "1..5s", ".s", "1e3s", "999999999999w"} {
		if _, err := Duration(bad); err == nil {
			t.Errorf("Duration(%q) accepted", bad)
		}
	}
}

func TestSeriesID(t *testing.T) {
	for _, ok := range []string{"a", "sensor-1", "A.b:c_d-9", strings.Repeat("x", 200)} {
		if err := SeriesID(ok); err != nil {
			t.Errorf("SeriesID(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 201), "a b", "a/b", "é", "a\x00", "a?", ".", ".."} {
		if err := SeriesID(bad); err == nil {
			t.Errorf("SeriesID(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"...", ".a", "a.", "..a", "a..b"} {
		if err := SeriesID(ok); err != nil {
			t.Errorf("SeriesID(%q): %v", ok, err)
		}
	}
	for _, prefix := range []string{".", ".."} {
		if err := SeriesPrefix(prefix); err != nil {
			t.Errorf("SeriesPrefix(%q): %v", prefix, err)
		}
	}
	if err := SeriesID("temp/é"); err == nil || !strings.Contains(err.Error(), `"/"`) {
		t.Errorf("message does not name the bad character: %v", err)
	}
}

// Durations printed by FormatDuration parse back to themselves.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"250ms", "1h30m", "1.5h", "7d", "1w", "0", "", "5", "1e3s", "..s", "9999999999999999w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Duration(s)
		if err != nil {
			return
		}
		if d < 0 || d > tiers.MaxTime-tiers.MinTime {
			t.Fatalf("Duration(%q) = %d out of range", s, d)
		}
		back, err := Duration(tiers.FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("Duration(FormatDuration(%d) = %q) = %d, %v", d, tiers.FormatDuration(d), back, err)
		}
	})
}

// Every accepted time is in range; a Unix-ms time and its RFC 3339 form
// agree.
func FuzzTime(f *testing.F) {
	for _, s := range []string{"now", "now-15m", "1768487842123", "2026-01-15T14:37:22.123Z", "-5", "now+1w", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := Time(s, now)
		if err != nil {
			return
		}
		if ms < tiers.MinTime || ms >= tiers.MaxTime {
			t.Fatalf("Time(%q) = %d out of range", s, ms)
		}
		rfc := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		back, err := Time(rfc, now)
		if err != nil || back != ms {
			t.Fatalf("Time(%q) = %d, but its RFC 3339 form %q gives %d, %v", s, ms, rfc, back, err)
		}
	})
}

func FuzzSeriesID(f *testing.F) {
	for _, s := range []string{"sensor-1", "", "a b", "é", ".", "..", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := SeriesID(s)
		prefix := len(s) >= 1 && len(s) <= 200
		for i := 0; i < len(s); i++ {
			prefix = prefix && idChar(s[i])
		}
		if err := SeriesPrefix(s); (err == nil) != prefix {
			t.Fatalf("SeriesPrefix(%q) = %v, want valid=%v", s, err, prefix)
		}
		valid := prefix && s != "." && s != ".."
		if (err == nil) != valid {
			t.Fatalf("SeriesID(%q) = %v, want valid=%v", s, err, valid)
		}
	})
}
