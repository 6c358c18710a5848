package quantile

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"

	"github.com/DataDog/sketches-go/ddsketch/store"

	"github.com/tsgate/tsgate/ricecode"
)

// The Rice format of a sketch codes its bin counts the way sealed chunks
// code their values: each count predicted from the counts before it and
// the miss Rice-coded.
//
// The library's encoding writes each count as a varfloat of one to two
// bytes (or an index delta and a count per bin, sparsely): a day of
// heavy-tailed latencies fills some 360 bins at about 2 bytes each. The
// bins of a window's histogram change smoothly from one to the next, and
// what is left once a count is predicted from its neighbours is its
// sampling noise, a few bits; where a store's counts are small (a minute
// row's six values over thirty bins) the Rice parameter adapts down to a
// bit or two a bin.
//
//	byte    riceFormat
//	uvarint count of zeros
//	per store, positive then negative:
//	  uvarint its codes' count n: the bins of its index range (dense), or
//	          its non-empty bins (sparse); 0: empty, nothing more
//	  varint  lowest index
//	  byte    dense: the prediction (low 2 bits: none, last, mean of four)
//	          | the fixed parameter << 2, or riceAdaptive << 2 (each
//	          code's parameter follows the codes before it);
//	          sparse: 3 | the gaps' parameter << 2
//	  byte    sparse only: the counts' parameter
//	bits    per store: dense, n codes of counts' misses; sparse, n−1 codes
//	        of the steps between indexes less one, then n codes of the
//	        counts less one; padded to a byte at the end
//
// Decoders tell the format from its first byte: the library's encoding
// starts with a flag whose low two bits name its type, and no flag it
// writes is riceFormat.
const riceFormat = 0xC1

// The predictions of a count from the counts before it in its store.
const (
	predictNone  = 0 // the count itself (small counts, few bins)
	predictLast  = 1 // the previous count
	predictMean4 = 2 // the mean of the last four: less of their noise
	predictions  = 3
)

// riceAdaptive as the parameter says each code's parameter is chosen from
// the codes before it (as LOCO-I does): a store's tails cost a bit or two
// a bin, its body a few.
const riceAdaptive = 63

// maxRiceCount bounds the counts the format holds: integers a float64
// holds exactly. A sketch with another count (never one this package
// builds) keeps the library's encoding.
const maxRiceCount = 1 << 53

// nonEmpty returns a store's non-empty bins in ascending order of
// index, or false when a count is not a whole number the format holds.
func nonEmpty(st store.Store) (index []int, count []uint64, ok bool) {
	// At most a bin a value: a minute row's few values take one
	// allocation each.
	if n := st.TotalCount(); n >= 1 {
		index, count = make([]int, 0, int(min(n, 64))), make([]uint64, 0, int(min(n, 64)))
	}
	ok = true
	st.ForEach(func(i int, c float64) bool {
		if c != math.Trunc(c) || c < 0 || c > maxRiceCount {
			ok = false
			return true
		}
		index = append(index, i)
		count = append(count, uint64(c))
		return false
	})
	return index, count, ok
}

// predictor predicts each count of a store from those before it.
type predictor struct {
	mode int
	h    [4]uint64
}

func (p *predictor) predict() uint64 {
	switch p.mode {
	case predictLast:
		return p.h[0]
	case predictMean4:
		return (p.h[0] + p.h[1] + p.h[2] + p.h[3] + 2) / 4
	}
	return 0
}

func (p *predictor) push(c uint64) { p.h[0], p.h[1], p.h[2], p.h[3] = c, p.h[0], p.h[1], p.h[2] }

// missCode is what is coded of count c predicted as pred.
func missCode(mode int, c, pred uint64) uint64 {
	if mode == predictNone {
		return c
	}
	return ricecode.Zigzag(int64(c - pred))
}

// adapter chooses each code's parameter from the last four codes, so the
// decoder can follow without side information.
type adapter struct{ h [4]uint64 }

func (a *adapter) k() uint {
	// The least k with 4·2^k ≥ the sum of the last four codes.
	if s := a.h[0] + a.h[1] + a.h[2] + a.h[3]; s > 4 {
		return min(uint(bits.Len64((s-1)>>2)), ricecode.MaxParameter)
	}
	return 0
}

func (a *adapter) push(u uint64) { a.h[0], a.h[1], a.h[2], a.h[3] = u, a.h[0], a.h[1], a.h[2] }

// codes writes into us the codes of cs under a prediction, and returns
// their length coded with adaptive parameters and their sum.
func codes(mode int, cs, us []uint64) (adaptiveBits int, sum uint64) {
	p := predictor{mode: mode}
	var a adapter
	for i, c := range cs {
		u := missCode(mode, c, p.predict())
		p.push(c)
		us[i] = u
		adaptiveBits += ricecode.Bits(u, a.k())
		a.push(u)
		sum += u >> 8 // the mean's order of magnitude, without overflow
	}
	return adaptiveBits, sum
}

// sumShifted is the sum of us, each shifted right by 8.
func sumShifted(us []uint64) (sum8 uint64) {
	for _, u := range us {
		sum8 += u >> 8
	}
	return sum8
}

// fixedParameter returns a fixed Rice parameter for us, whose sum>>8 is
// sum8, and the bits it takes: the best of the parameters around log2 of
// the mean. Counts of a histogram have no outliers to make the cost
// bumpy there (ricecode.Best searches every parameter, at several times
// the cost, for data that has them).
func fixedParameter(us []uint64, sum8 uint64) (uint, int) {
	k0 := uint(0)
	if m := sum8 / uint64(max(len(us), 1)); m > 0 {
		k0 = uint(bits.Len64(m)) + 8
	} else {
		var s uint64
		for _, u := range us {
			s += u
		}
		k0 = uint(bits.Len64(s / uint64(max(len(us), 1))))
	}
	best, bestBits := uint(0), -1
	for k := max(k0, 1) - 1; k <= min(k0+1, riceAdaptive-1); k++ {
		n := 0
		for _, u := range us {
			n += ricecode.Bits(u, k)
		}
		if bestBits < 0 || n < bestBits {
			best, bestBits = k, n
		}
	}
	return best, bestBits
}

// storeCoding is how one store's counts are coded.
type storeCoding struct {
	lo int
	// us are the codes of the counts of every index from lo (dense), or
	// of the non-empty bins' counts less one (sparse).
	us   []uint64
	mode int
	// param is riceAdaptive or the counts' fixed parameter; a sparse
	// store's gaps (index steps less one) have their own.
	param, gapParam uint
	gaps            []uint64
}

// sparse as the prediction says the store codes its non-empty bins
// alone: each one's step from the previous index, less one, and its
// count less one. A minute row's few values lie bins apart.
const sparse = 3

// headerBytes is the length of the store's header.
func (c storeCoding) headerBytes() int {
	var tmp [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(tmp[:], uint64(len(c.us))) + binary.PutVarint(tmp[:], int64(c.lo)) + 1
	if c.mode == sparse {
		h++
	}
	return h
}

// chooseCoding picks the coding of a store's non-empty bins (ascending
// indexes, their counts) in the fewest bits.
func chooseCoding(index []int, count []uint64) storeCoding {
	var best storeCoding
	bestBits := -1
	try := func(c storeCoding, bits int) {
		if bits += 8 * c.headerBytes(); bestBits < 0 || bits < bestBits {
			best, bestBits = c, bits
		}
	}
	lo := index[0]
	gaps := make([]uint64, len(index)-1)
	us := make([]uint64, len(count))
	for i := range index {
		if i > 0 {
			gaps[i-1] = uint64(index[i] - index[i-1] - 1)
		}
		us[i] = count[i] - 1
	}
	gk, gn := ricecode.Best(gaps)
	ck, cn := fixedParameter(us, sumShifted(us))
	try(storeCoding{lo: lo, us: us, mode: sparse, param: ck, gapParam: gk, gaps: gaps}, gn+cn)
	bins := index[len(index)-1] - lo + 1
	if bins >= 8*len(index) {
		// At least 8 bins a value: a dense coding takes a bit a bin or
		// more, the sparse one some log2(8)+4 bits a value.
		return best
	}
	cs := make([]uint64, bins)
	for i, at := range index {
		cs[at-lo] = count[i]
	}
	// The dense codings share one buffer of codes; the winner's are
	// made again at the end.
	buf := make([]uint64, len(cs))
	for mode := range predictions {
		adaptive, sum8 := codes(mode, cs, buf)
		try(storeCoding{lo: lo, us: buf, mode: mode, param: riceAdaptive}, adaptive)
		k, n := fixedParameter(buf, sum8)
		try(storeCoding{lo: lo, us: buf, mode: mode, param: k}, n)
	}
	if best.mode != sparse {
		codes(best.mode, cs, buf)
	}
	return best
}

// appendRice appends the sketch in the Rice format, or returns false
// when a count is not one the format holds. libraryMin is a length the
// library's encoding of the sketch cannot be shorter than: a flag and a
// count of zeros (2 bytes), and per store a flag, the number of bins and
// either a byte or more for every index of its range with its lowest
// index and step (dense: 4 + range) or two bytes or more for every
// non-empty bin (sparse: 2 + 2n).
func (s *Sketch) appendRice(b []byte) (out []byte, libraryMin int, ok bool) {
	zeros := s.dd.GetZeroCount()
	if zeros != math.Trunc(zeros) || zeros < 0 || zeros > maxRiceCount {
		return b, 0, false
	}
	if zeros > 0 {
		libraryMin += 2
	}
	var coded [2]storeCoding
	for i, st := range [2]store.Store{s.dd.GetPositiveValueStore(), s.dd.GetNegativeValueStore()} {
		index, count, ok := nonEmpty(st)
		if !ok {
			return b, 0, false
		}
		if n := len(index); n > 0 {
			coded[i] = chooseCoding(index, count)
			libraryMin += min(4+index[n-1]-index[0]+1, 2+2*n)
		}
	}
	b = append(b, riceFormat)
	b = binary.AppendUvarint(b, uint64(zeros))
	for _, c := range coded {
		b = binary.AppendUvarint(b, uint64(len(c.us)))
		if len(c.us) == 0 {
			continue
		}
		b = binary.AppendVarint(b, int64(c.lo))
		if c.mode == sparse {
			b = append(b, byte(c.mode)|byte(c.gapParam)<<2, byte(c.param))
			continue
		}
		b = append(b, byte(c.mode)|byte(c.param)<<2)
	}
	w := ricecode.NewWriter(b)
	for _, c := range coded {
		for _, g := range c.gaps {
			w.Rice(g, c.gapParam)
		}
		var a adapter
		for _, u := range c.us {
			k := c.param
			if k == riceAdaptive {
				k = a.k()
				a.push(u)
			}
			w.Rice(u, k)
		}
	}
	return w.Flush(), libraryMin, true
}

var errCorruptRice = errors.New("corrupt Rice-coded sketch")

// minIndex and maxIndex bound the indexes of the mapping's bins: a store
// of the format never holds another (a corrupt one may claim any).
var (
	minIndex = theMapping.Index(theMapping.MinIndexableValue())
	maxIndex = theMapping.Index(theMapping.MaxIndexableValue())
)

// maxRiceBins bounds the index range a store of the format may claim: the
// mapping's indexes of finite magnitudes span fewer (about 2·36,000 at
// 1 %), so a larger range is corrupt, and a decoder never allocates for
// more.
const maxRiceBins = 1 << 17

// mergeRice adds the values of a Rice-format encoding to s.
func (s *Sketch) mergeRice(b []byte) error {
	b = b[1:]
	zeros, n := binary.Uvarint(b)
	if n <= 0 || zeros > maxRiceCount {
		return errCorruptRice
	}
	b = b[n:]
	var stores [2]storeCoding
	for i := range stores {
		bins, n := binary.Uvarint(b)
		if n <= 0 || bins > maxRiceBins {
			return errCorruptRice
		}
		b = b[n:]
		if bins == 0 {
			continue
		}
		lo, n := binary.Varint(b)
		if n <= 0 || len(b) < n+1 || lo < int64(minIndex) || lo+int64(bins)-1 > int64(maxIndex) {
			return errCorruptRice
		}
		c := storeCoding{lo: int(lo), us: make([]uint64, bins), mode: int(b[n] & 3), param: uint(b[n] >> 2)}
		b = b[n+1:]
		if c.mode == sparse {
			if len(b) < 1 || b[0] > ricecode.MaxParameter {
				return errCorruptRice
			}
			c.gapParam, c.param = c.param, uint(b[0])
			c.gaps = make([]uint64, bins-1)
			b = b[1:]
		}
		stores[i] = c
	}
	r := ricecode.NewReader(b)
	for i := range stores {
		c := &stores[i]
		// A sparse store's indexes must stay within the mapping's.
		end := int64(c.lo)
		for j := range c.gaps {
			c.gaps[j] = r.Rice(c.gapParam)
			if end += int64(min(c.gaps[j], maxRiceBins)) + 1; end > int64(maxIndex) {
				return errCorruptRice
			}
		}
		var a adapter
		p := predictor{mode: c.mode}
		for j := range c.us {
			k := c.param
			if k == riceAdaptive {
				k = a.k()
			}
			u := r.Rice(k)
			a.push(u)
			count := u
			switch c.mode {
			case sparse:
				count = u + 1
			case predictLast, predictMean4:
				count = p.predict() + uint64(ricecode.Unzigzag(u))
			}
			if count > maxRiceCount {
				return errCorruptRice
			}
			p.push(count)
			c.us[j] = count
		}
	}
	if r.Overrun() {
		return errCorruptRice
	}
	if zeros > 0 {
		_ = s.dd.AddWithCount(0, float64(zeros))
	}
	for i, st := range [2]store.Store{s.dd.GetPositiveValueStore(), s.dd.GetNegativeValueStore()} {
		c := stores[i]
		index := c.lo
		for j, count := range c.us {
			if c.mode == sparse && j > 0 {
				index += int(c.gaps[j-1]) + 1
			}
			st.AddWithCount(index, float64(count))
			if c.mode != sparse {
				index++
			}
		}
	}
	return nil
}
