package tiers

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/tsgate/tsgate/quantile"
)

// Extras are what a rollup row keeps of its window besides min, max, sum
// and count: a quantile sketch of its values, and what a reset-aware
// counter increase needs (Counter). Stores read them only when a read asks
// (ReadRequest.Extras): ordinary reads leave Row.X nil.
//
// In a read that asks for them, every rollup row carries Extras and a raw
// point carries none (it stands for itself: a window of one value at its
// time). A row written before rollups kept extras carries Extras that know
// nothing (no sketch, no counter), and so does every window folded with it,
// until the next rollup of the window fills them in.
type Extras struct {
	// Counter is known when HasCounter is set.
	Counter    Counter
	HasCounter bool
	// The window's quantile sketch is in one of three forms, or unknown
	// when none is set: Sketch, its encoding as stored
	// (quantile.Sketch.AppendBinary); Derived, not stored because the
	// row's Min, Max and Count give it (quantile.Derivable); Live, a
	// sketch a fold is building. Extras read from a store are shared by
	// every reader of the row: nothing may change them.
	Sketch  []byte
	Derived bool
	Live    *quantile.Sketch
}

// Counter is what a reset-aware increase of a counter over a window needs,
// Prometheus' way: the first sample (FirstT, First), the last (LastT, Last)
// and Inc, the sum of the increases between consecutive samples, where a
// sample below its predecessor is a reset and adds its own value.
type Counter struct {
	FirstT, LastT int64
	First, Last   float64
	Inc           float64
}

// PointCounter is the counter of one sample.
func PointCounter(t int64, v float64) Counter {
	return Counter{FirstT: t, LastT: t, First: v, Last: v}
}

// step is the increase from a sample a to the next sample b.
func step(a, b float64) float64 {
	if b < a {
		return b // a reset: the counter restarted from zero
	}
	return b - a
}

// Then returns the counter of c's window followed by o's, which starts
// after c's ends.
func (c Counter) Then(o Counter) Counter {
	return Counter{FirstT: c.FirstT, First: c.First, LastT: o.LastT, Last: o.Last,
		Inc: c.Inc + o.Inc + step(c.Last, o.First)}
}

// merge folds o, a window of the same series before or after c's, into c.
func (c Counter) merge(o Counter) Counter {
	if o.LastT < c.FirstT {
		return o.Then(c)
	}
	return c.Then(o)
}

// HasSketch reports whether the window's sketch is known.
func (x *Extras) HasSketch() bool { return x.Sketch != nil || x.Derived || x.Live != nil }

// known reports whether the extras of a row are fully known: a raw point
// (no Extras) always is.
func extrasOf(r Row) (sketch, counter bool) {
	if r.X == nil {
		return true, true
	}
	return r.X.HasSketch(), r.X.HasCounter
}

// addSketch adds the values of r's window to s. A sketch that cannot be
// decoded is an error: the window's sketch is then unknown.
func addSketch(s *quantile.Sketch, r Row) error {
	switch {
	case r.X == nil:
		s.Add(r.Sum)
	case r.X.Live != nil:
		s.Merge(r.X.Live)
	case r.X.Derived:
		s.AddDerived(r.Min, r.Max, r.Count)
	case r.X.Sketch != nil:
		return s.MergeEncoded(r.X.Sketch)
	}
	return nil
}

// counterOf is r's counter: its own, or that of the raw point r is.
func counterOf(r Row) Counter {
	if r.X == nil {
		return PointCounter(r.T, r.Sum)
	}
	return r.X.Counter
}

// AddExtras folds o, a window (or raw point) of the same series, into r
// as Add does, and its extras too: the sketches merge, and the counters
// join in time order, whichever order the rows come in. r's Extras are
// its own (a fold never changes o's); the first row folded into an empty
// r starts them. Rows must come from reads that asked for extras.
func (r *Row) AddExtras(o Row) {
	r.addExtras(o, false)
}

// AddSeries folds o, a window of another series, into r as Add does, and
// merges the sketches: a group's window holds the values of all its
// series. The counter, which describes one series, is dropped.
func (r *Row) AddSeries(o Row) {
	r.addExtras(o, true)
}

func (r *Row) addExtras(o Row, series bool) {
	if r.Count == 0 {
		r.Min, r.Max, r.Sum, r.Count = o.Min, o.Max, o.Sum, o.Count
		r.X = &Extras{}
		sk, ck := extrasOf(o)
		if sk {
			r.X.Live = quantile.New()
			if addSketch(r.X.Live, o) != nil {
				r.X.Live = nil
			}
		}
		if ck && !series {
			r.X.Counter, r.X.HasCounter = counterOf(o), true
		}
		return
	}
	r.Add(o)
	if r.X == nil {
		r.X = &Extras{} // folded without extras before: unknown
	}
	sk, ck := extrasOf(o)
	if r.X.Live != nil && (!sk || addSketch(r.X.Live, o) != nil) {
		r.X.Live = nil
	}
	if r.X.HasCounter {
		if ck && !series {
			r.X.Counter = r.X.Counter.merge(counterOf(o))
		} else {
			r.X.HasCounter = false
		}
	}
}

// Compact returns x with a live sketch in its encoded form, which takes
// tens of bytes where the live sketch takes a kilobyte or more: for
// windows held in memory. x itself is left as it is.
func (x *Extras) Compact(r Row) *Extras {
	if x == nil || x.Live == nil {
		return x
	}
	c := *x
	c.Live = nil
	if quantile.Derivable(r.Min, r.Max, r.Count) {
		c.Derived = true
	} else {
		c.Sketch = x.Live.AppendBinary(nil)
	}
	return &c
}

// Detach returns x as Compact does, with a sketch encoding of its own
// rather than a slice of what a read decoded: for windows a cache keeps
// after the read is done. x itself is left as it is.
func (x *Extras) Detach(r Row) *Extras {
	if x == nil {
		return nil
	}
	if x.Live != nil {
		return x.Compact(r)
	}
	c := *x
	c.Sketch = slices.Clone(x.Sketch)
	return &c
}

// Quantile returns the quantile q (0 ≤ q ≤ 1) of the window's values from
// its sketch, or false when the sketch is unknown (the row was written
// before rollups kept sketches, or was read without extras).
func (r Row) Quantile(q float64) (float64, bool) {
	s, ok := r.QuantileSketch()
	if !ok {
		return math.NaN(), false
	}
	return s.Quantile(q)
}

// QuantileSketch returns the window's sketch, decoded once for a reader
// that asks it several quantiles, or false when it is unknown (see
// Quantile). The sketch must not be changed: it may be the row's own.
func (r Row) QuantileSketch() (*quantile.Sketch, bool) {
	if r.X == nil || r.Count == 0 {
		return nil, false
	}
	switch {
	case r.X.Live != nil:
		return r.X.Live, true
	case r.X.Derived:
		return quantile.Derive(r.Min, r.Max, r.Count), true
	case r.X.Sketch != nil:
		s, err := quantile.Decode(r.X.Sketch)
		if err != nil {
			return nil, false
		}
		return s, true
	}
	return nil, false
}

// MaxExtrasLen bounds the encoding of a row's extras (AppendExtras).
const MaxExtrasLen = 2048

// The flags that start an encoding of extras.
const (
	xCounter     = 1 << 0
	xFirstIsMin  = 1 << 1
	xFirstIsMax  = 1 << 2
	xLastIsMin   = 1 << 3
	xLastIsMax   = 1 << 4
	xIncIsSpread = 1 << 5 // Inc == Last - First
	xSketchMask  = 3 << 6
	xSketchEnc   = 1 << 6
	xSketchDer   = 2 << 6
	// xDecimalCounter, a counter whose First is both Min and Max (which
	// the plain form never says: it tells Min first), flags the counter's
	// decimal form (appendDecimalCounter).
	xDecimalCounter = xCounter | xFirstIsMin | xFirstIsMax
)

// AppendExtras appends the encoding of r's extras, the form both stores
// keep: a flags byte, then the counter (FirstT as a varint offset from the
// row's T, LastT as a uvarint offset from FirstT, then First, Last and Inc
// as little-endian float64s, each left out when the flags say it equals
// Min or Max, or Last - First for Inc), then the sketch as
// quantile.Sketch.AppendBinary encodes it, left out when it is Derived
// (quantile.Derivable). When one of the counter's floats is a decimal
// (see decimalDigits) and its decimal form (see appendDecimalCounter) is
// shorter, the counter takes that form instead. Nothing is appended for a row without Extras;
// unknown extras encode as one byte. A live sketch whose encoding would
// pass its bound is collapsed (see quantile.Sketch.AppendBinary).
func AppendExtras(b []byte, r Row) []byte {
	x := r.X
	if x == nil {
		return b
	}
	flagAt := len(b)
	var flags byte
	b = append(b, 0)
	if x.HasCounter {
		c := x.Counter
		flags |= xCounter
		if sameBits(c.Inc, c.Last-c.First) {
			flags |= xIncIsSpread
		}
		start := len(b)
		plainFlags := flags
		b = binary.AppendVarint(b, c.FirstT-r.T)
		b = binary.AppendUvarint(b, uint64(c.LastT-c.FirstT))
		b, plainFlags = appendUnless(b, plainFlags, c.First, r, xFirstIsMin, xFirstIsMax)
		b, plainFlags = appendUnless(b, plainFlags, c.Last, r, xLastIsMin, xLastIsMax)
		if flags&xIncIsSpread == 0 {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.Inc))
		}
		flags = plainFlags
		// The decimal form, after the plain one, replaces it when shorter.
		plainEnd := len(b)
		if dec, ok := appendDecimalCounter(b, c, r, flags&xIncIsSpread != 0); ok && len(dec)-plainEnd < plainEnd-start {
			b = append(b[:start], dec[plainEnd:]...)
			flags = flags&^(xFirstIsMin|xFirstIsMax|xLastIsMin|xLastIsMax) | xDecimalCounter
		}
	}
	switch {
	case !x.HasSketch():
	case x.Derived || quantile.Derivable(r.Min, r.Max, r.Count):
		flags |= xSketchDer
	case x.Live != nil:
		flags |= xSketchEnc
		b = x.Live.AppendBinary(b)
	default:
		flags |= xSketchEnc
		b = append(b, x.Sketch...)
	}
	b[flagAt] = flags
	return b
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// appendUnless appends v unless it is r.Min or r.Max, which the flags
// then say.
func appendUnless(b []byte, flags byte, v float64, r Row, isMin, isMax byte) ([]byte, byte) {
	switch {
	case sameBits(v, r.Min):
		return b, flags | isMin
	case sameBits(v, r.Max):
		return b, flags | isMax
	}
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v)), flags
}

// maxDecimalDigits bounds the digits after the point a decimal float of a
// counter may have: what gauges and counters are printed with.
const maxDecimalDigits = 6

// powersOfTen are exact in a float64, so that m / 10^d is the float
// nearest the decimal, the float a parser makes of its text.
var powersOfTen = [maxDecimalDigits + 1]float64{1, 10, 100, 1e3, 1e4, 1e5, 1e6}

// decimalDigits returns the fewest digits d ≤ maxDecimalDigits after the
// point with which v is m / 10^d for an integer m of at most 53 bits,
// bit for bit, or -1. A value with d digits is one with any more too: m
// and 10^d are exact, and the quotient of the same rational, correctly
// rounded, is the same float.
func decimalDigits(v float64) int {
	for d, p := range powersOfTen {
		// Through int64, as the decoder goes: -0 is no decimal.
		if m := math.Round(v * p); math.Abs(m) < 1<<53 && sameBits(float64(int64(m))/p, v) {
			return d
		}
	}
	return -1
}

// The decimal form of a counter, flagged by xDecimalCounter, codes each of
// First, Last and Inc that is a decimal as the integer m of m / 10^d, one
// d for the row, as a varint: a gauge printed with three decimals takes 3
// bytes a float instead of 8. After the flags byte:
//
//	byte    which floats are left out (equal to Min or Max) and which
//	        are decimals (the dc flags)
//	varint  FirstT − T, uvarint LastT − FirstT
//	byte    d
//	        First, Last, Inc (unless the flags leave it out): a varint m
//	        for a decimal, else a little-endian float64
const (
	dcFirstIsMin = 1 << iota
	dcFirstIsMax
	dcLastIsMin
	dcLastIsMax
	dcFirstDecimal
	dcLastDecimal
	dcIncDecimal
)

// appendDecimalCounter appends c in its decimal form, or returns false
// (and b as it was) when none of the floats it would store is a decimal.
func appendDecimalCounter(b []byte, c Counter, r Row, incIsSpread bool) ([]byte, bool) {
	type stored struct {
		v        float64
		decimal  byte
		min, max byte
	}
	fs := [3]stored{{c.First, dcFirstDecimal, dcFirstIsMin, dcFirstIsMax}, {c.Last, dcLastDecimal, dcLastIsMin, dcLastIsMax}, {c.Inc, dcIncDecimal, 0, 0}}
	var dc byte
	d := -1
	var keep [3]bool
	for i, f := range fs {
		switch {
		case i == 2 && incIsSpread:
			continue
		case f.min != 0 && sameBits(f.v, r.Min):
			dc |= f.min
			continue
		case f.max != 0 && sameBits(f.v, r.Max):
			dc |= f.max
			continue
		}
		keep[i] = true
		if fd := decimalDigits(f.v); fd >= 0 {
			d = max(d, fd)
		}
	}
	if d < 0 {
		return b, false
	}
	p := powersOfTen[d]
	for i, f := range fs {
		if keep[i] {
			if m := math.Round(f.v * p); math.Abs(m) < 1<<53 && sameBits(float64(int64(m))/p, f.v) {
				dc |= f.decimal
			}
		}
	}
	b = append(b, dc)
	b = binary.AppendVarint(b, c.FirstT-r.T)
	b = binary.AppendUvarint(b, uint64(c.LastT-c.FirstT))
	b = append(b, byte(d))
	for i, f := range fs {
		switch {
		case !keep[i]:
		case dc&f.decimal != 0:
			b = binary.AppendVarint(b, int64(math.Round(f.v*p)))
		default:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.v))
		}
	}
	return b, true
}

// decodeDecimalCounter reads what appendDecimalCounter wrote, and returns
// the rest of b.
func decodeDecimalCounter(b []byte, r Row, incIsSpread bool) (Counter, []byte, error) {
	if len(b) < 1 {
		return Counter{}, nil, ErrBadExtras
	}
	dc := b[0]
	b = b[1:]
	off, n := binary.Varint(b)
	if n <= 0 {
		return Counter{}, nil, ErrBadExtras
	}
	b = b[n:]
	spread, n := binary.Uvarint(b)
	if n <= 0 || spread > math.MaxInt64/2 || len(b) < n+1 || int(b[n]) > maxDecimalDigits {
		return Counter{}, nil, ErrBadExtras
	}
	p := powersOfTen[b[n]]
	b = b[n+1:]
	c := Counter{FirstT: r.T + off}
	c.LastT = c.FirstT + int64(spread)
	read := func(decimal byte) (float64, bool) {
		if dc&decimal != 0 {
			m, n := binary.Varint(b)
			if n <= 0 || m >= 1<<53 || m <= -1<<53 {
				return 0, false
			}
			b = b[n:]
			return float64(m) / p, true
		}
		if len(b) < 8 {
			return 0, false
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(b))
		b = b[8:]
		return v, true
	}
	// readUnless reads a float the flags do not say is Min or Max.
	readUnless := func(isMin, isMax, decimal byte) (float64, bool) {
		switch {
		case dc&isMin != 0:
			return r.Min, true
		case dc&isMax != 0:
			return r.Max, true
		}
		return read(decimal)
	}
	var ok bool
	if c.First, ok = readUnless(dcFirstIsMin, dcFirstIsMax, dcFirstDecimal); !ok {
		return Counter{}, nil, ErrBadExtras
	}
	if c.Last, ok = readUnless(dcLastIsMin, dcLastIsMax, dcLastDecimal); !ok {
		return Counter{}, nil, ErrBadExtras
	}
	if incIsSpread {
		c.Inc = c.Last - c.First
	} else if c.Inc, ok = read(dcIncDecimal); !ok {
		return Counter{}, nil, ErrBadExtras
	}
	return c, b, nil
}

// ErrBadExtras is the error of an encoding of extras that cannot be read.
var ErrBadExtras = errors.New("tiers: corrupt rollup extras")

// DecodeExtras is AppendExtras' inverse for the row r, whose T, Min, Max
// and Count are set: it returns r's Extras, whose sketch, if any, is a
// slice of b (the caller must not reuse b). An empty b is extras that know
// nothing: a row written before rollups kept extras.
func DecodeExtras(r Row, b []byte) (*Extras, error) {
	x := &Extras{}
	if err := x.decode(r, b); err != nil {
		return nil, err
	}
	return x, nil
}

// DecodeExtrasInto is DecodeExtras into x, which it overwrites: stores
// decode the extras of a page into one block.
func DecodeExtrasInto(x *Extras, r Row, b []byte) error {
	*x = Extras{}
	return x.decode(r, b)
}

func (x *Extras) decode(r Row, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	flags := b[0]
	b = b[1:]
	if flags&xDecimalCounter == xDecimalCounter {
		c, rest, err := decodeDecimalCounter(b, r, flags&xIncIsSpread != 0)
		if err != nil {
			return err
		}
		x.Counter, x.HasCounter, b = c, true, rest
	} else if flags&xCounter != 0 {
		off, n := binary.Varint(b)
		if n <= 0 {
			return ErrBadExtras
		}
		b = b[n:]
		spread, n := binary.Uvarint(b)
		if n <= 0 || spread > math.MaxInt64/2 {
			return ErrBadExtras
		}
		b = b[n:]
		c := Counter{FirstT: r.T + off}
		c.LastT = c.FirstT + int64(spread)
		var ok bool
		if c.First, b, ok = floatUnless(b, flags, r, xFirstIsMin, xFirstIsMax); !ok {
			return ErrBadExtras
		}
		if c.Last, b, ok = floatUnless(b, flags, r, xLastIsMin, xLastIsMax); !ok {
			return ErrBadExtras
		}
		if flags&xIncIsSpread != 0 {
			c.Inc = c.Last - c.First
		} else {
			if len(b) < 8 {
				return ErrBadExtras
			}
			c.Inc, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		}
		x.Counter, x.HasCounter = c, true
	}
	switch flags & xSketchMask {
	case 0:
		if len(b) > 0 {
			return ErrBadExtras
		}
	case xSketchDer:
		if len(b) > 0 || !quantile.Derivable(r.Min, r.Max, r.Count) {
			return ErrBadExtras
		}
		x.Derived = true
	case xSketchEnc:
		if len(b) == 0 {
			return ErrBadExtras
		}
		x.Sketch = b
	default:
		return ErrBadExtras
	}
	return nil
}

func floatUnless(b []byte, flags byte, r Row, isMin, isMax byte) (float64, []byte, bool) {
	switch {
	case flags&isMin != 0:
		return r.Min, b, true
	case flags&isMax != 0:
		return r.Max, b, true
	case len(b) < 8:
		return 0, b, false
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:], true
}

// ExtrasBytes is about the memory a row's extras hold, for caches that
// account for it.
func (r Row) ExtrasBytes() int64 {
	if r.X == nil {
		return 0
	}
	return 96 + int64(len(r.X.Sketch))
}

// SameRow reports whether a and b are the same row as a store keeps it:
// the same time and aggregates, and extras with the same encoding
// (AppendExtras), so that a row recomputed with a live sketch equals the
// row stored from the same values. Comparing rows with == would compare
// their extras' pointers.
func SameRow(a, b Row) bool {
	if a.T != b.T || a.Min != b.Min || a.Max != b.Max || a.Sum != b.Sum || a.Count != b.Count {
		return false
	}
	if a.X == nil || b.X == nil {
		return a.X == nil && b.X == nil
	}
	var buf [2 * 256]byte
	ea := AppendExtras(buf[:0:256], a)
	eb := AppendExtras(buf[256:256], b)
	return string(ea) == string(eb)
}
