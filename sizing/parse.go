package sizing

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate reads a rate of points: "10/s", "600/m", "2.5/h", or a plain
// number of points per second.
func ParseRate(s string) (float64, error) {
	num, unit, found := strings.Cut(strings.TrimSpace(s), "/")
	per := 1.0
	if found {
		switch strings.TrimSpace(unit) {
		case "s":
		case "m", "min":
			per = 60
		case "h":
			per = 3600
		case "d":
			per = 86400
		default:
			return 0, fmt.Errorf("rate %q: the unit after / must be s, m, h or d", s)
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("rate %q: want a positive number of points per s, m, h or d, like 10/s", s)
	}
	return v / per, nil
}

// ParseBytes reads a size: a number with an optional unit B, KB, MB, GB
// (powers of 1000) or KiB, MiB, GiB (powers of 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: the unit must be B, KB, MB, GB, KiB, MiB or GiB", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0) || v*mult > math.MaxInt64/2 {
		return 0, errors.New("size " + strconv.Quote(s) + ": want a positive size like 50MB")
	}
	return int64(math.Round(v * mult)), nil
}

// FormatBytes writes a size in the largest decimal unit that keeps it at
// least 1, with one decimal.
func FormatBytes(b float64) string {
	for _, u := range []struct {
		name string
		v    float64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if b >= u.v {
			return strconv.FormatFloat(b/u.v, 'f', 1, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(b, 'f', 0, 64) + " B"
}
