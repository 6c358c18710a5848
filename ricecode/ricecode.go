// Package ricecode holds Rice codes over a bit stream: the writer and the
// reader of a stream of bits, most significant first, the Rice code of
// unsigned integers with an escape for outliers, and the choice of the
// parameter that codes a set of integers in the fewest bits. The sealed
// chunks of raw points and the quantile sketches of rollup rows code what
// is left of their numbers once predicted with it.
package ricecode

import (
	"encoding/binary"
	"math/bits"
)

const (
	// Escape is the quotient from which a Rice code gives up: it writes
	// Escape one bits, 7 bits of length L and the value in L bits, so
	// that an outlier (a counter reset, a gap) costs tens of bits rather
	// than a unary run as long as the outlier is large.
	Escape = 32
	// MaxParameter is the largest Rice parameter tried: a zigzagged
	// 64-bit difference needs no more.
	MaxParameter = 63
)

// Zigzag maps signed to unsigned, small magnitudes to small numbers.
func Zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }

func Unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// Bits is the length of u's Rice code with parameter k.
func Bits(u uint64, k uint) int {
	if q := u >> k; q < Escape {
		return int(q) + 1 + int(k)
	}
	return Escape + 7 + bits.Len64(u)
}

// Best returns the Rice parameter coding us in the fewest bits, and
// that many bits. It tries every parameter up to the bit length of the
// largest code (a larger one only lengthens every code): the cost is not
// unimodal in the parameter once outliers escape, so a search from the
// mean can stop at a local minimum far from the best.
func Best(us []uint64) (uint, int) {
	if len(us) == 0 {
		return 0, 0
	}
	// A code's length depends on its value's bit length L and, when it
	// does not escape (L - k ≤ escapeBits), on its top L - k bits: count
	// the values of each length and, of them, those with each of the
	// escapeBits bits below the leading one set, once; then every
	// parameter's cost is a sum over the lengths present.
	var count [65]int
	var set [65][escapeBits]int
	var most uint64
	for _, u := range us {
		most |= u
		l := bits.Len64(u)
		count[l]++
		for j := 1; j < escapeBits && j < l; j++ {
			set[l][j] += int(u >> uint(l-1-j) & 1)
		}
	}
	var lengths []int
	for l, c := range count {
		if c > 0 {
			lengths = append(lengths, l)
		}
	}
	best, bestCost := uint(0), -1
	for k := 0; k <= min(bits.Len64(most), MaxParameter); k++ {
		c := 0
		for _, l := range lengths {
			if l-k > escapeBits {
				c += count[l] * (Escape + 7 + l)
				continue
			}
			c += count[l] * (1 + k)
			// The quotient u >> k, from its top l - k bits.
			for j := 0; j < l-k; j++ {
				n := count[l]
				if j > 0 {
					n = set[l][j]
				}
				c += n << uint(l-1-j-k)
			}
		}
		if bestCost < 0 || c < bestCost {
			best, bestCost = uint(k), c
		}
	}
	return best, bestCost
}

// escapeBits is the bit length of the largest quotient that does not
// escape: quotients below Escape.
const escapeBits = 5

// Escape is 1 << escapeBits: neither is larger.
var (
	_ [Escape - 1<<escapeBits]struct{}
	_ [1<<escapeBits - Escape]struct{}
)

// Writer appends bits to a byte slice, most significant first.
type Writer struct {
	buf  []byte
	acc  uint64 // pending bits, right-aligned
	nacc uint   // how many
}

// Write appends the low n bits of v, n ≤ 57.
func (w *Writer) Write(v uint64, n uint) {
	w.acc = w.acc<<n | v&(1<<n-1)
	w.nacc += n
	for w.nacc >= 8 {
		w.nacc -= 8
		w.buf = append(w.buf, byte(w.acc>>w.nacc))
	}
}

// WriteWide appends the low n bits of v, n ≤ 64.
func (w *Writer) WriteWide(v uint64, n uint) {
	if n > 32 {
		w.Write(v>>32, n-32)
		n = 32
	}
	w.Write(v, n)
}

func (w *Writer) Rice(u uint64, k uint) {
	q := u >> k
	if q >= Escape {
		w.Write(1<<Escape-1, Escape)
		n := uint(bits.Len64(u))
		w.Write(uint64(n), 7)
		w.WriteWide(u, n)
		return
	}
	// q ones and a zero, then the k low bits.
	w.Write((1<<q-1)<<1, uint(q)+1)
	w.WriteWide(u, k)
}

// Flush pads the last byte with zeros.
func (w *Writer) Flush() []byte {
	if w.nacc > 0 {
		w.buf = append(w.buf, byte(w.acc<<(8-w.nacc)))
		w.nacc = 0
	}
	return w.buf
}

// Reader reads what Writer wrote.
type Reader struct {
	buf  []byte
	pos  int    // next byte of buf
	acc  uint64 // buffered bits, left-aligned
	nacc uint
	bad  bool // an escape with an impossible length
}

func (r *Reader) fill() {
	if r.pos+8 <= len(r.buf) {
		// Whole bytes at once: as many as the accumulator has room for.
		w := binary.BigEndian.Uint64(r.buf[r.pos:])
		n := (64 - r.nacc) &^ 7
		r.acc |= (w >> r.nacc) &^ (1<<(64-r.nacc-n) - 1)
		r.pos += int(n >> 3)
		r.nacc += n
		return
	}
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

// Read returns the next n bits, n ≤ 56.
func (r *Reader) Read(n uint) uint64 {
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

func (r *Reader) ReadWide(n uint) uint64 {
	if n > 32 {
		hi := r.Read(n - 32)
		return hi<<32 | r.Read(32)
	}
	return r.Read(n)
}

func (r *Reader) Rice(k uint) uint64 {
	if r.nacc < Escape+1 {
		r.fill()
	}
	// Count the leading ones, at most Escape.
	q := uint(bits.LeadingZeros64(^r.acc))
	if q >= Escape {
		r.Read(Escape)
		n := uint(r.Read(7))
		if n > 64 {
			r.bad = true
			return 0
		}
		return r.ReadWide(n)
	}
	if q+1+k <= r.nacc {
		// The whole code is buffered (k ≤ 63: a shift by 64 gives 0).
		r.acc <<= q + 1
		v := r.acc >> (64 - k)
		r.acc <<= k
		r.nacc -= q + 1 + k
		return uint64(q)<<k | v
	}
	r.Read(q + 1)
	return uint64(q)<<k | r.ReadWide(k)
}

// Overrun says whether the reader took bits past its data, or met an
// impossible code: the chunk is corrupt.
func (r *Reader) Overrun() bool {
	return r.bad || 8*r.pos-int(r.nacc) > 8*len(r.buf)
}

// NewWriter returns a writer appending to dst.
func NewWriter(dst []byte) Writer { return Writer{buf: dst} }

// NewReader returns a reader of b. Past its end it reads zeros; Overrun
// tells afterwards whether any of them was taken.
func NewReader(b []byte) Reader { return Reader{buf: b} }
