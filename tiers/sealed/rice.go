package sealed

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tsgate/tsgate/ricecode"
	"github.com/tsgate/tsgate/tiers"
)

// The decimal chunk format holds a chunk whose values are all decimals of
// at most maxDigits digits (see digits) as integers, and codes what is left
// once each point is predicted from the ones before it.
//
// Gorilla's XOR coding, which Prometheus' chunks use, was made for values
// whose float64 bit patterns repeat; a gauge printed with three decimals
// changes in its low digits every sample, and even scaled to an integer
// costs XOR some 19 bits a point. What is left to code is the noise: the
// difference to the previous value (or, for counters and smooth curves,
// to the previous difference) is a small integer of a roughly two-sided
// geometric distribution, for which a Rice code with a parameter chosen
// per chunk comes within a fraction of a bit of its entropy. That is what
// VictoriaMetrics does with its decimal mantissas and zstd, and what FLAC
// does with its residuals; timestamps get the same code over their
// delta-of-delta, which is 0 for a regular scrape: one bit a point, none
// when every interval of the chunk is equal.
//
// Layout after the format byte and the event buckets byte:
//
//	uvarint  count n ≥ 1
//	varint   first time
//	varint   first scaled value
//	if n > 1:
//	  varint first interval (t1 − t0)
//	  byte   time parameter: riceRegular when every interval equals the first,
//	         else the Rice parameter of the intervals' delta-of-delta
//	  byte   value mode (valueDelta, valueDelta2, valueMean4) << 6 | the
//	         Rice parameter
//	  uvarint length in bytes of the time codes (0 when regular)
//	  bits   n−2 time codes, padded to a byte
//	  bits   n−1 value codes
const (
	// decimalFormat is the format byte of a decimal chunk of d digits:
	// decimalFormat + d. Formats below it are XOR chunks (see Encode).
	decimalFormat = 0x10
	// riceRegular as the time parameter says every interval is the first.
	riceRegular = 0xff
	// The value modes name the prediction whose miss is coded:
	// valueDelta the previous value; valueDelta2 the previous value plus
	// the previous difference, closer for counters and smooth curves;
	// valueMean4 the mean of the last four values, closer for noise about
	// a slow level, the commonest gauge (its miss has 1.25 times the
	// noise's variance against the difference's 2, a third of a bit less
	// a point).
	valueDelta  = 0
	valueDelta2 = 1
	valueMean4  = 2
)

// valueModes is how many value modes there are.
const valueModes = 3

// history is the last four values of a chunk, the latest first.
type history [4]int64

func (h *history) push(v int64) { h[0], h[1], h[2], h[3] = v, h[0], h[1], h[2] }

// predict is mode's prediction of value i ≥ 1 from the values before it.
// Scaled values are below 2^52 in magnitude, so no sum here overflows.
func (h *history) predict(mode, i int) int64 {
	switch {
	case mode == valueDelta2 && i >= 2:
		return 2*h[0] - h[1]
	case mode == valueMean4 && i >= 4:
		return (h[0] + h[1] + h[2] + h[3]) >> 2
	}
	return h[0]
}

// encodeDecimal appends to dst the decimal chunk of points whose values
// are scaled by 10^d (digits(points) == d ≥ 0), times strictly ascending.
func encodeDecimal(dst []byte, points []tiers.Row, d int) []byte {
	n := len(points)
	scaled := make([]int64, n)
	for i, p := range points {
		scaled[i] = int64(math.Round(p.Value() * pow10[d]))
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendVarint(dst, points[0].T)
	dst = binary.AppendVarint(dst, scaled[0])
	if n == 1 {
		return dst
	}
	interval := points[1].T - points[0].T
	dst = binary.AppendVarint(dst, interval)

	times := make([]uint64, 0, n-2)
	regular := true
	for i := 2; i < n; i++ {
		dod := (points[i].T - points[i-1].T) - (points[i-1].T - points[i-2].T)
		regular = regular && points[i].T-points[i-1].T == interval
		times = append(times, ricecode.Zigzag(dod))
	}
	tk := uint(riceRegular)
	if !regular {
		tk, _ = ricecode.Best(times)
	}

	mode, vk, cost := -1, uint(0), 0
	var values []uint64
	for m := range valueModes {
		misses := make([]uint64, n-1)
		var h history
		h.push(scaled[0])
		for i := 1; i < n; i++ {
			misses[i-1] = ricecode.Zigzag(scaled[i] - h.predict(m, i))
			h.push(scaled[i])
		}
		if k, c := ricecode.Best(misses); mode < 0 || c < cost {
			mode, vk, cost, values = m, k, c, misses
		}
	}
	dst = append(dst, byte(tk), byte(mode<<6)|byte(vk))

	var timeCodes []byte
	if tk != riceRegular {
		w := ricecode.NewWriter(nil)
		for _, u := range times {
			w.Rice(u, tk)
		}
		timeCodes = w.Flush()
	}
	dst = binary.AppendUvarint(dst, uint64(len(timeCodes)))
	dst = append(dst, timeCodes...)
	w := ricecode.NewWriter(dst)
	for _, u := range values {
		w.Rice(u, vk)
	}
	return w.Flush()
}

// decimalReader reads the points of a decimal chunk one by one, values
// as the scaled integers they were coded as.
type decimalReader struct {
	n, i        int
	t, interval int64
	v           int64
	regular     bool
	mode        int
	tk, vk      uint
	times       ricecode.Reader
	values      ricecode.Reader
	h           history
	// err is the first corruption next met; the points after it are
	// garbage.
	err error
}

// newDecimalReader starts reading the decimal chunk b (after the format
// and event buckets bytes).
func newDecimalReader(b []byte) (decimalReader, error) {
	var d decimalReader
	n, k := binary.Uvarint(b)
	// A point costs at least one bit of value code.
	if k <= 0 || n == 0 || n > uint64(8*len(b)+1) {
		return d, fmt.Errorf("%w: count", ErrCorrupt)
	}
	d.n = int(n)
	b = b[k:]
	if d.t, k = binary.Varint(b); k <= 0 {
		return d, fmt.Errorf("%w: first time", ErrCorrupt)
	}
	b = b[k:]
	if d.v, k = binary.Varint(b); k <= 0 {
		return d, fmt.Errorf("%w: first value", ErrCorrupt)
	}
	b = b[k:]
	d.h.push(d.v)
	if d.n == 1 {
		return d, nil
	}
	d.interval, k = binary.Varint(b)
	if k <= 0 || len(b) < k+2 {
		return d, fmt.Errorf("%w: interval", ErrCorrupt)
	}
	b = b[k:]
	d.regular, d.tk = b[0] == riceRegular, uint(b[0])
	d.mode, d.vk = int(b[1]>>6), uint(b[1]&0x3f)
	if (!d.regular && d.tk > ricecode.MaxParameter) || d.mode >= valueModes || d.interval <= 0 {
		return d, fmt.Errorf("%w: parameters", ErrCorrupt)
	}
	b = b[2:]
	timeLen, k := binary.Uvarint(b)
	if k <= 0 || timeLen > uint64(len(b)-k) || (d.regular && timeLen > 0) {
		return d, fmt.Errorf("%w: time codes", ErrCorrupt)
	}
	// The time codes and the value codes are read side by side, so that a
	// read stops at the end of its span without decoding the rest.
	d.times = ricecode.NewReader(b[k : k+int(timeLen)])
	d.values = ricecode.NewReader(b[k+int(timeLen):])
	return d, nil
}

// next returns the next point; the first call returns the first. A
// corruption ends the times (at MaxInt64) and is kept for check.
func (d *decimalReader) next() (int64, int64) {
	i := d.i
	d.i++
	if i == 0 {
		return d.t, d.v
	}
	if !d.regular && i > 1 {
		d.interval += ricecode.Unzigzag(d.times.Rice(d.tk))
	}
	if d.interval <= 0 || d.t+d.interval < d.t {
		d.corrupt()
		return math.MaxInt64, 0
	}
	d.t += d.interval
	d.v = d.h.predict(d.mode, i) + ricecode.Unzigzag(d.values.Rice(d.vk))
	d.h.push(d.v)
	return d.t, d.v
}

func (d *decimalReader) corrupt() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: times out of order or overflowing", ErrCorrupt)
	}
	d.i = d.n
}

// check reports a corruption next met, or a chunk whose codes ran out
// before its points.
func (d *decimalReader) check() error {
	if d.err != nil {
		return d.err
	}
	if d.times.Overrun() || d.values.Overrun() {
		return fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	return nil
}

// decodeDecimal appends to dst the points of the decimal chunk b (after
// the format and event buckets bytes) before end for which keep is true,
// values divided by scale, in time order.
func decodeDecimal(dst []tiers.Row, b []byte, scale float64, end int64, keep func(int64) bool) ([]tiers.Row, error) {
	d, err := newDecimalReader(b)
	if err != nil {
		return dst, err
	}
	for d.i < d.n {
		t, v := d.next()
		if t >= end {
			break
		}
		if keep(t) {
			dst = append(dst, tiers.PointRow(t, float64(v)/scale))
		}
	}
	return dst, d.check()
}
