package jsonenc

import (
	"strconv"
)

// ParseInt reads a base-10 integer as strconv.ParseInt(string(b), 10, 64)
// does, with the same result and error for every input. Timestamps and
// counts of up to 18 digits, the ones points carry, are read in one pass
// without the string conversion and the checks strconv makes for every
// base; anything else is strconv's.
func ParseInt(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return strconv.ParseInt(string(b), 10, 64)
	}
	var n int64
	for _, c := range d {
		c -= '0'
		if c > 9 {
			return strconv.ParseInt(string(b), 10, 64)
		}
		n = n*10 + int64(c)
	}
	if neg {
		n = -n
	}
	return n, nil
}

// appendDigits reads the decimal digits of b from i on into mant, as its
// lower digits, and returns where they end. (mant may overflow for more
// than 19 digits in all; the callers check the count.)
func appendDigits(b []byte, i int, mant uint64) (int, uint64) {
	for ; i < len(b) && b[i]-'0' <= 9; i++ {
		mant = mant*10 + uint64(b[i]-'0')
	}
	return i, mant
}

// exactPow10 are the powers of ten a float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ParseFloat reads a number as strconv.ParseFloat(string(b), 64) does,
// with the same result, bit for bit, and error for every input. Numbers as
// JSON writes them, -?digits(.digits)?([eE][+-]?digits)?, whose digits fit
// 2^53 and whose scale is within 10^±22 — the values of points — are
// computed as one multiplication or division of two exact float64s, which
// IEEE 754 rounds correctly (Clinger's fast path, which strconv also
// takes, after a longer way to it); anything else is strconv's.
func ParseFloat(b []byte) (float64, error) {
	i := 0
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		i++
	}
	start := i
	i, mant := appendDigits(b, i, 0)
	if i == start {
		return strconv.ParseFloat(string(b), 64)
	}
	scale, point := 0, 0
	if i < len(b) && b[i] == '.' {
		frac := i + 1
		if i, mant = appendDigits(b, frac, mant); i == frac {
			return strconv.ParseFloat(string(b), 64)
		}
		scale, point = frac-i, 1
	}
	digits := i - start - point
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := i < len(b) && b[i] == '-'
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			i++
		}
		exp, e0 := 0, i
		for ; i < len(b) && b[i]-'0' <= 9 && exp < 1000; i++ {
			exp = exp*10 + int(b[i]-'0')
		}
		if i == e0 {
			return strconv.ParseFloat(string(b), 64)
		}
		if eneg {
			exp = -exp
		}
		scale += exp
	}
	// 19 digits cannot overflow the uint64; 2^53 keeps the mantissa exact.
	if i != len(b) || digits > 19 || mant > 1<<53 || scale < -22 || scale > 22 {
		return strconv.ParseFloat(string(b), 64)
	}
	f := float64(mant)
	if scale < 0 {
		f /= exactPow10[-scale]
	} else {
		f *= exactPow10[scale]
	}
	if neg {
		f = -f
	}
	return f, nil
}
