package sealed

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

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
	// riceEscape is the quotient from which a Rice code gives up: it
	// writes riceEscape one bits, 7 bits of length L and the value in L
	// bits, so that an outlier (a counter reset, a gap) costs tens of bits
	// rather than a unary run as long as the outlier is large.
	riceEscape = 32
	// maxRice is the largest Rice parameter tried: a zigzagged 64-bit
	// difference needs no more.
	maxRice = 63
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

// zigzag maps signed to unsigned, small magnitudes to small numbers.
func zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// riceBits is the length of u's Rice code with parameter k.
func riceBits(u uint64, k uint) int {
	if q := u >> k; q < riceEscape {
		return int(q) + 1 + int(k)
	}
	return riceEscape + 7 + bits.Len64(u)
}

// bestRice returns the Rice parameter coding us in the fewest bits, and
// that many bits.
func bestRice(us []uint64) (uint, int) {
	if len(us) == 0 {
		return 0, 0
	}
	// The best parameter lies near log2 of the mean; trying every one
	// from there down to the first that costs more keeps the search to a
	// few passes.
	var sum uint64
	for _, u := range us {
		sum += u >> 8 // the mean's order of magnitude, without overflow
	}
	start := uint(0)
	if m := sum / uint64(len(us)); m > 0 {
		start = uint(bits.Len64(m)) + 8
	} else {
		var s uint64
		for _, u := range us {
			s += u
		}
		start = uint(bits.Len64(s / uint64(len(us))))
	}
	start = min(start, maxRice)
	cost := func(k uint) int {
		n := 0
		for _, u := range us {
			n += riceBits(u, k)
		}
		return n
	}
	best, bestCost := start, cost(start)
	for k := start; k > 0; {
		k--
		c := cost(k)
		if c >= bestCost {
			break
		}
		best, bestCost = k, c
	}
	for k := best + 1; k <= maxRice; k++ {
		c := cost(k)
		if c >= bestCost {
			break
		}
		best, bestCost = k, c
	}
	return best, bestCost
}

// bitWriter appends bits to a byte slice, most significant first.
type bitWriter struct {
	buf  []byte
	acc  uint64 // pending bits, right-aligned
	nacc uint   // how many
}

// write appends the low n bits of v, n ≤ 57.
func (w *bitWriter) write(v uint64, n uint) {
	w.acc = w.acc<<n | v&(1<<n-1)
	w.nacc += n
	for w.nacc >= 8 {
		w.nacc -= 8
		w.buf = append(w.buf, byte(w.acc>>w.nacc))
	}
}

// writeWide appends the low n bits of v, n ≤ 64.
func (w *bitWriter) writeWide(v uint64, n uint) {
	if n > 32 {
		w.write(v>>32, n-32)
		n = 32
	}
	w.write(v, n)
}

func (w *bitWriter) rice(u uint64, k uint) {
	q := u >> k
	if q >= riceEscape {
		w.write(1<<riceEscape-1, riceEscape)
		n := uint(bits.Len64(u))
		w.write(uint64(n), 7)
		w.writeWide(u, n)
		return
	}
	// q ones and a zero, then the k low bits.
	w.write((1<<q-1)<<1, uint(q)+1)
	w.writeWide(u, k)
}

// flush pads the last byte with zeros.
func (w *bitWriter) flush() []byte {
	if w.nacc > 0 {
		w.buf = append(w.buf, byte(w.acc<<(8-w.nacc)))
		w.nacc = 0
	}
	return w.buf
}

// bitReader reads what bitWriter wrote.
type bitReader struct {
	buf  []byte
	pos  int    // next byte of buf
	acc  uint64 // buffered bits, left-aligned
	nacc uint
	bad  bool // an escape with an impossible length
}

func (r *bitReader) fill() {
	for r.nacc <= 56 {
		// Past the end the reader reads zeros; overrun tells afterwards
		// whether any of them was taken.
		var b byte
		if r.pos < len(r.buf) {
			b = r.buf[r.pos]
		}
		r.pos++
		r.acc |= uint64(b) << (56 - r.nacc)
		r.nacc += 8
	}
}

// read returns the next n bits, n ≤ 56.
func (r *bitReader) read(n uint) uint64 {
	if n == 0 {
		return 0
	}
	if r.nacc < n {
		r.fill()
	}
	v := r.acc >> (64 - n)
	r.acc <<= n
	r.nacc -= n
	return v
}

func (r *bitReader) readWide(n uint) uint64 {
	if n > 32 {
		hi := r.read(n - 32)
		return hi<<32 | r.read(32)
	}
	return r.read(n)
}

func (r *bitReader) rice(k uint) uint64 {
	if r.nacc < riceEscape+1 {
		r.fill()
	}
	// Count the leading ones, at most riceEscape.
	q := uint(bits.LeadingZeros64(^r.acc))
	if q >= riceEscape {
		r.read(riceEscape)
		n := uint(r.read(7))
		if n > 64 {
			r.bad = true
			return 0
		}
		return r.readWide(n)
	}
	r.read(q + 1)
	return uint64(q)<<k | r.readWide(k)
}

// overrun says whether the reader took bits past its data, or met an
// impossible code: the chunk is corrupt.
func (r *bitReader) overrun() bool {
	return r.bad || 8*r.pos-int(r.nacc) > 8*len(r.buf)
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
		times = append(times, zigzag(dod))
	}
	tk := uint(riceRegular)
	if !regular {
		tk, _ = bestRice(times)
	}

	mode, vk, cost := -1, uint(0), 0
	var values []uint64
	for m := range valueModes {
		misses := make([]uint64, n-1)
		var h history
		h.push(scaled[0])
		for i := 1; i < n; i++ {
			misses[i-1] = zigzag(scaled[i] - h.predict(m, i))
			h.push(scaled[i])
		}
		if k, c := bestRice(misses); mode < 0 || c < cost {
			mode, vk, cost, values = m, k, c, misses
		}
	}
	dst = append(dst, byte(tk), byte(mode<<6)|byte(vk))

	var timeCodes []byte
	if tk != riceRegular {
		w := bitWriter{}
		for _, u := range times {
			w.rice(u, tk)
		}
		timeCodes = w.flush()
	}
	dst = binary.AppendUvarint(dst, uint64(len(timeCodes)))
	dst = append(dst, timeCodes...)
	w := bitWriter{buf: dst}
	for _, u := range values {
		w.rice(u, vk)
	}
	return w.flush()
}

// decodeDecimal appends to dst the points of the decimal chunk b (after
// the format and event buckets bytes) before end for which keep is true,
// values divided by scale, in time order.
func decodeDecimal(dst []tiers.Row, b []byte, scale float64, end int64, keep func(int64) bool) ([]tiers.Row, error) {
	n, k := binary.Uvarint(b)
	// A point costs at least one bit of value code.
	if k <= 0 || n == 0 || n > uint64(8*len(b)+1) {
		return dst, fmt.Errorf("%w: count", ErrCorrupt)
	}
	b = b[k:]
	t, k := binary.Varint(b)
	if k <= 0 {
		return dst, fmt.Errorf("%w: first time", ErrCorrupt)
	}
	b = b[k:]
	v, k := binary.Varint(b)
	if k <= 0 {
		return dst, fmt.Errorf("%w: first value", ErrCorrupt)
	}
	b = b[k:]
	if keep(t) {
		dst = append(dst, tiers.PointRow(t, float64(v)/scale))
	}
	if n == 1 {
		return dst, nil
	}
	interval, k := binary.Varint(b)
	if k <= 0 || len(b) < k+2 {
		return dst, fmt.Errorf("%w: interval", ErrCorrupt)
	}
	b = b[k:]
	regular, tk := b[0] == riceRegular, uint(b[0])
	mode, vk := b[1]>>6, uint(b[1]&0x3f)
	if (!regular && tk > maxRice) || int(mode) >= valueModes || interval <= 0 {
		return dst, fmt.Errorf("%w: parameters", ErrCorrupt)
	}
	b = b[2:]
	timeLen, k := binary.Uvarint(b)
	if k <= 0 || timeLen > uint64(len(b)-k) || (regular && timeLen > 0) {
		return dst, fmt.Errorf("%w: time codes", ErrCorrupt)
	}
	// The time codes and the value codes are read side by side, so that a
	// read stops at the end of its span without decoding the rest.
	times := bitReader{buf: b[k : k+int(timeLen)]}
	values := bitReader{buf: b[k+int(timeLen):]}
	var h history
	h.push(v)
	for i := 1; i < int(n); i++ {
		if !regular && i > 1 {
			interval += unzigzag(times.rice(tk))
			if interval <= 0 {
				return dst, fmt.Errorf("%w: times out of order", ErrCorrupt)
			}
		}
		if t+interval < t {
			return dst, fmt.Errorf("%w: time overflows", ErrCorrupt)
		}
		t += interval
		v = h.predict(int(mode), i) + unzigzag(values.rice(vk))
		h.push(v)
		if t >= end {
			break
		}
		if keep(t) {
			dst = append(dst, tiers.PointRow(t, float64(v)/scale))
		}
	}
	if times.overrun() || values.overrun() {
		return dst, fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	return dst, nil
}
