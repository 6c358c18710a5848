// Package jsonenc writes JSON by appending to byte slices, without
// reflection: answers are long runs of small arrays of numbers, and building
// them by hand is what keeps encoding off the profile
// (BenchmarkEncodePoints in httpapi compares it with encoding/json). Its
// output is byte for byte what encoding/json writes for the same values.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendPoint writes a raw point as the answers carry it: [t,v].
func AppendPoint(b []byte, t int64, v float64) []byte {
	b = append(b, '[')
	b = AppendInt(b, t)
	b = append(b, ',')
	b = AppendFloat(b, v)
	return append(b, ']')
}

// AppendFloat writes f as encoding/json would, and null for NaN and
// infinities, which JSON cannot express (a sum can overflow to +Inf).
func AppendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if out, ok := appendShortDecimal(b, f); ok {
		return out
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// AppendFloatF writes a finite f as strconv.AppendFloat(b, f, 'f', -1,
// 64) does — the shortest digits that round-trip, never an exponent, as
// Prometheus' API writes sample values — by the short-decimal path when
// it applies.
func AppendFloatF(b []byte, f float64) []byte {
	if out, ok := appendShortDecimal(b, f); ok {
		return out
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// appendShortDecimal writes f with at most four decimals when that is its
// shortest exact form — as sensor values mostly are — without the general
// shortest-float search. It is exact: for m = round(f·10⁴), float64(m)/10⁴
// is the correctly rounded quotient of two exact values, which is what
// parsing the decimal m·10⁻⁴ yields, so equality with f means those digits
// round-trip; dropping m's trailing zeros then gives the shortest digits, as
// strconv would. |f| < 1e11 keeps m exact; under 1e-4 only 0 has four
// decimals.
func appendShortDecimal(b []byte, f float64) ([]byte, bool) {
	if abs := math.Abs(f); !(abs < 1e11 && abs >= 1e-4 || f == 0) {
		return b, false
	}
	m := math.Round(f * 1e4)
	if m/1e4 != f {
		return b, false
	}
	n := int64(m)
	if n < 0 || (n == 0 && math.Signbit(f)) {
		b = append(b, '-')
		n = -n
	}
	// Constant divisors compile to multiplications: this is the hot path of
	// every answer.
	b = strconv.AppendInt(b, n/10000, 10)
	frac := n % 10000
	if frac == 0 {
		return b, true
	}
	d := [5]byte{'.', byte('0' + frac/1000), byte('0' + frac/100%10), byte('0' + frac/10%10), byte('0' + frac%10)}
	end := 5
	for d[end-1] == '0' {
		end--
	}
	return append(b, d[:end]...), true
}

const hexDigits = "0123456789abcdef"

// AppendString writes s as a JSON string, escaping what JSON and HTML-safe
// output require and replacing invalid UTF-8.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendInt writes n. Millisecond timestamps of this era have 13 digits
// and fill most of an answer, so they take a path of their own: fixed
// width, two digits a table lookup, no division by a variable.
func AppendInt(b []byte, n int64) []byte {
	if n >= 1e12 && n < 1e13 {
		return append13(b, uint64(n))
	}
	return strconv.AppendInt(b, n, 10)
}

const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// put4 writes the four digits of n < 10000 at d.
func put4(d []byte, n uint64) {
	hi, lo := n/100, n%100
	d[0], d[1] = digitPairs[2*hi], digitPairs[2*hi+1]
	d[2], d[3] = digitPairs[2*lo], digitPairs[2*lo+1]
}

// append13 writes n, which has exactly 13 digits.
func append13(b []byte, n uint64) []byte {
	var d [13]byte
	hi, lo := n/1e8, n%1e8 // 5 and 8 digits
	d[0] = byte('0' + hi/1e4)
	put4(d[1:5], hi%1e4)
	put4(d[5:9], lo/1e4)
	put4(d[9:13], lo%1e4)
	return append(b, d[:]...)
}

// AppendKey writes an object member's key and its colon.
func AppendKey(b []byte, key string) []byte {
	b = AppendString(b, key)
	return append(b, ':')
}

// ScalarText returns the text of a JSON string or number, as a query
// parameter would carry it: ok is false for any other JSON value. Absent
// and null are "".
func ScalarText(raw []byte) (text string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return s, true
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return string(raw), true
	}
	return "", false
}
