package sealed

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/tsgate/tsgate/ricecode"
	"github.com/tsgate/tsgate/tiers"
)

// A rollup chunk holds up to MaxSamples rows of a rollup partition column
// by column, each column a point chunk (Encode's formats) of its own, so
// that each gets the prediction and the parameter that suit it: a minute
// row's min, max and sum are as noisy as the points they fold and code
// in a byte or two each, its count and its counter's time offsets are
// nearly constant and code in a bit or less. As rows, the same minute row
// took some 50 bytes on disk: a key with the series, bucket and time,
// four float64s and its extras.
//
// A value column codes the row index as its time (regular: no time bits)
// and the column's value. Layout after the format byte:
//
//	uvarint count n ≥ 1
//	column  times, each row's count as the value
//	column  min, column max, column sum
//	uvarint length of the extras section (0: the rows have no extras)
//	extras section:
//	  column kinds: xHasCounter | xIncSpread | the sketch form << 2
//	  column FirstT − T, column LastT − FirstT
//	  column First, column Last, column Inc (0 where there is none, and
//	         Inc where it is Last − First)
//	  per row whose sketch form is sketchBytes: uvarint length, the bytes
//
// where a column is a uvarint length and a chunk as Encode makes it.
const rollupFormat = 0x30

// The kinds of a row's extras.
const (
	kindHasCounter = 1 << 0
	kindIncSpread  = 1 << 1
	// The sketch form, kind >> 2: unknown, derived from min, max and count
	// (quantile.Derivable), or stored.
	sketchUnknown = 0
	sketchDerived = 1
	sketchBytes   = 2
	kindMax       = sketchBytes<<2 | kindIncSpread | kindHasCounter
)

// maxExactInt bounds the integers a column holds exactly as a float64.
const maxExactInt = 1 << 52

// EncodeRollup encodes rollup rows, in strictly ascending time order, as
// chunks of at most MaxSamples rows each. Rows that carry Extras keep them
// (AppendExtras encodes a decoded row as it encoded the original); either
// every row carries Extras or none does.
func EncodeRollup(rows []tiers.Row) ([]Chunk, error) {
	var out []Chunk
	for part := range slices.Chunk(rows, MaxSamples) {
		for i := 1; i < len(part); i++ {
			if part[i].T <= part[i-1].T {
				return nil, fmt.Errorf("sealed: rows out of order at %d", part[i].T)
			}
		}
		if len(out) > 0 && part[0].T <= out[len(out)-1].Last {
			return nil, fmt.Errorf("sealed: rows out of order at %d", part[0].T)
		}
		data, err := encodeRollupChunk(part)
		if err != nil {
			return nil, err
		}
		out = append(out, Chunk{First: part[0].T, Last: part[len(part)-1].T, Count: len(part), Data: data})
	}
	return out, nil
}

func encodeRollupChunk(rows []tiers.Row) ([]byte, error) {
	n := len(rows)
	for _, r := range rows {
		if r.Count < 0 || r.Count >= maxExactInt {
			return nil, fmt.Errorf("sealed: row at %d counts %d values", r.T, r.Count)
		}
		if (r.X != nil) != (rows[0].X != nil) {
			return nil, fmt.Errorf("sealed: rows with and without extras at %d", r.T)
		}
	}
	col := make([]tiers.Row, n)
	// column appends the column of value(i) for every row i, indexed by
	// the rows' times when times is set, else by their positions.
	column := func(dst []byte, times bool, value func(i int) float64) ([]byte, error) {
		for i, r := range rows {
			t := int64(i)
			if times {
				t = r.T
			}
			col[i] = tiers.PointRow(t, value(i))
		}
		data, err := encodeColumn(col)
		if err != nil {
			return nil, err
		}
		dst = binary.AppendUvarint(dst, uint64(len(data)))
		return append(dst, data...), nil
	}
	b := binary.AppendUvarint([]byte{rollupFormat}, uint64(n))
	var err error
	for c, value := range []func(i int) float64{
		func(i int) float64 { return float64(rows[i].Count) },
		func(i int) float64 { return rows[i].Min },
		func(i int) float64 { return rows[i].Max },
		func(i int) float64 { return rows[i].Sum },
	} {
		if b, err = column(b, c == 0, value); err != nil {
			return nil, err
		}
	}
	if rows[0].X == nil {
		return binary.AppendUvarint(b, 0), nil
	}

	xs := make([]tiers.Extras, n)
	kinds := make([]int, n)
	for i, r := range rows {
		x := r.X.Compact(r)
		xs[i] = *x
		k := 0
		if x.HasCounter {
			c := x.Counter
			k |= kindHasCounter
			if math.Float64bits(c.Inc) == math.Float64bits(c.Last-c.First) {
				k |= kindIncSpread
			}
			if off, spread := c.FirstT-r.T, c.LastT-c.FirstT; off <= -maxExactInt || off >= maxExactInt || spread < 0 || spread >= maxExactInt {
				return nil, fmt.Errorf("sealed: counter of the row at %d spans %d..%d", r.T, c.FirstT, c.LastT)
			}
		}
		switch {
		case !x.HasSketch():
		case x.Derived:
			k |= sketchDerived << 2
		default:
			k |= sketchBytes << 2
		}
		kinds[i] = k
	}
	// counter is a column of a counter's field, 0 for rows without one.
	counter := func(get func(i int, c tiers.Counter) float64) func(i int) float64 {
		return func(i int) float64 {
			if !xs[i].HasCounter {
				return 0
			}
			return get(i, xs[i].Counter)
		}
	}
	var ex []byte
	for _, value := range []func(i int) float64{
		func(i int) float64 { return float64(kinds[i]) },
		counter(func(i int, c tiers.Counter) float64 { return float64(c.FirstT - rows[i].T) }),
		counter(func(_ int, c tiers.Counter) float64 { return float64(c.LastT - c.FirstT) }),
		counter(func(_ int, c tiers.Counter) float64 { return c.First }),
		counter(func(_ int, c tiers.Counter) float64 { return c.Last }),
		counter(func(i int, c tiers.Counter) float64 {
			if kinds[i]&kindIncSpread != 0 {
				return 0
			}
			return c.Inc
		}),
	} {
		if ex, err = column(ex, false, value); err != nil {
			return nil, err
		}
	}
	for i := range xs {
		if kinds[i]>>2 == sketchBytes {
			ex = binary.AppendUvarint(ex, uint64(len(xs[i].Sketch)))
			ex = append(ex, xs[i].Sketch...)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(ex)))
	return append(b, ex...), nil
}

// scratch is DecodeRollup's working space for one chunk.
type scratch struct {
	times  [MaxSamples]int64
	floats [MaxSamples]float64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// IsRollup reports whether data is a rollup chunk.
func IsRollup(data []byte) bool { return len(data) > 0 && data[0] == rollupFormat }

// DecodeRollup appends to dst the rows of the rollup chunk data whose time
// lies in span and is not before oldest, in ascending time order. With
// extras, every row carries its Extras (those of a row sealed without them
// know nothing), whose sketches are slices of data: the caller must not
// reuse data. Without, no row carries any and the extras are not decoded.
func DecodeRollup(dst []tiers.Row, data []byte, span tiers.Span, oldest int64, extras bool) ([]tiers.Row, error) {
	if !IsRollup(data) {
		return dst, fmt.Errorf("%w: not a rollup chunk", ErrCorrupt)
	}
	b := data[1:]
	un, k := binary.Uvarint(b)
	if k <= 0 || un == 0 || un > MaxSamples {
		return dst, fmt.Errorf("%w: rollup count", ErrCorrupt)
	}
	b = b[k:]
	n := int(un)
	// The times, and a column of values at a time: scratch that a read of
	// a week of minute rows would otherwise allocate, and clear, for each
	// of its hundreds of chunks.
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	times, floats := sc.times[:n], sc.floats[:n]
	// column decodes the next column into floats (and its times into
	// times when given, else checks that it is indexed by position).
	column := func(times []int64) error {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return fmt.Errorf("%w: rollup column", ErrCorrupt)
		}
		c := b[k : k+int(l)]
		b = b[k+int(l):]
		return decodeColumnInto(floats, times, c)
	}
	if err := column(times); err != nil {
		return dst, err
	}
	from := max(span.From, oldest)
	lo, _ := slices.BinarySearch(times, from)
	hi, _ := slices.BinarySearch(times, span.To)
	hi = max(hi, lo)
	start := len(dst)
	dst = slices.Grow(dst, hi-lo)
	for i := lo; i < hi; i++ {
		c := floats[i]
		if c < 0 || c >= maxExactInt || c != math.Trunc(c) {
			return dst, fmt.Errorf("%w: rollup count %g", ErrCorrupt, c)
		}
		dst = append(dst, tiers.Row{T: times[i], Count: int64(c)})
	}
	out := dst[start:]
	for c := range 3 {
		if err := column(nil); err != nil {
			return dst[:start], err
		}
		in := floats[lo:hi]
		switch c {
		case 0:
			for i := range out {
				out[i].Min = in[i]
			}
		case 1:
			for i := range out {
				out[i].Max = in[i]
			}
		case 2:
			for i := range out {
				out[i].Sum = in[i]
			}
		}
	}
	exLen, k := binary.Uvarint(b)
	if k <= 0 || exLen != uint64(len(b)-k) {
		return dst[:start], fmt.Errorf("%w: rollup extras length", ErrCorrupt)
	}
	if !extras || len(out) == 0 {
		return dst, nil
	}
	xs := make([]tiers.Extras, len(out))
	for i := range out {
		out[i].X = &xs[i]
	}
	if exLen == 0 {
		return dst, nil
	}
	b = b[k:]
	kinds := make([]int, n)
	cs := make([]tiers.Counter, n)
	for c := range 6 {
		if err := column(nil); err != nil {
			return dst[:start], err
		}
		for i, v := range floats {
			ok := true
			switch c {
			case 0:
				kinds[i] = int(v)
				ok = v == math.Trunc(v) && v >= 0 && v <= kindMax && kinds[i]>>2 <= sketchBytes
			case 1:
				cs[i].FirstT, ok = int64(v), isExactInt(v)
			case 2:
				cs[i].LastT, ok = int64(v), isExactInt(v) && v >= 0
			case 3:
				cs[i].First = v
			case 4:
				cs[i].Last = v
			case 5:
				cs[i].Inc = v
			}
			if !ok {
				return dst[:start], fmt.Errorf("%w: rollup extras column %d", ErrCorrupt, c)
			}
		}
	}
	for i := range n {
		var sketch []byte
		if kinds[i]>>2 == sketchBytes {
			l, k := binary.Uvarint(b)
			if k <= 0 || l == 0 || l > uint64(len(b)-k) {
				return dst[:start], fmt.Errorf("%w: rollup sketch", ErrCorrupt)
			}
			sketch = b[k : k+int(l) : k+int(l)]
			b = b[k+int(l):]
		}
		if i < lo || i >= hi {
			continue
		}
		r := &out[i-lo]
		x := r.X
		if kinds[i]&kindHasCounter != 0 {
			c := cs[i]
			c.FirstT += r.T
			c.LastT += c.FirstT
			if kinds[i]&kindIncSpread != 0 {
				c.Inc = c.Last - c.First
			}
			x.Counter, x.HasCounter = c, true
		}
		switch kinds[i] >> 2 {
		case sketchDerived:
			x.Derived = true
		case sketchBytes:
			x.Sketch = sketch
		}
	}
	if len(b) != 0 {
		return dst[:start], fmt.Errorf("%w: %d bytes after the rollup sketches", ErrCorrupt, len(b))
	}
	return dst, nil
}

// nearDecimalFormat is the format byte of a column of values that are
// decimals of d digits but for a few units in their last place, as sums
// of decimals computed in floating point are: nearDecimalFormat + d. After
// it and the event buckets byte:
//
//	uvarint length of the misses section
//	misses  a byte of Rice parameter, then for each value the zigzagged
//	        difference, in units in the last place, between it and the
//	        decimal it is near (as the bits of two float64s of one sign)
//	        — padded to a byte
//	        the decimals as a decimal chunk of d digits (after its two
//	        header bytes)
const nearDecimalFormat = 0x20

// maxULPs bounds how far, in units in the last place, a value may be from
// the decimal it is near: a sum of a few thousand decimals is within some
// tens.
const maxULPs = 1 << 20

// encodeColumn encodes one column of a rollup chunk: as a point chunk
// (Encode) when its values are exact decimals or not decimals at all, and
// in the near-decimal format when that is shorter.
func encodeColumn(col []tiers.Row) ([]byte, error) {
	chunks, err := Encode(col, 1)
	if err != nil {
		return nil, err
	}
	if len(chunks) != 1 {
		return nil, fmt.Errorf("sealed: a rollup column of %d rows made %d chunks", len(col), len(chunks))
	}
	best := chunks[0].Data
	if best[0] >= decimalFormat {
		return best, nil
	}
	if near, ok := encodeNearDecimal(col); ok && len(near) < len(best) {
		return near, nil
	}
	return best, nil
}

// encodeNearDecimal encodes col in the near-decimal format with the fewest
// digits whose decimals every value is near, or returns false.
func encodeNearDecimal(col []tiers.Row) ([]byte, bool) {
	approx := make([]tiers.Row, len(col))
	misses := make([]uint64, len(col))
digits:
	for d := range maxDigits + 1 {
		for i, p := range col {
			v := p.Value()
			m := math.Round(v * pow10[d])
			a := m / pow10[d]
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(m) >= 1<<52 || math.Signbit(a) != math.Signbit(v) {
				continue digits
			}
			miss := int64(math.Float64bits(v)) - int64(math.Float64bits(a))
			if miss <= -maxULPs || miss >= maxULPs {
				continue digits
			}
			approx[i] = tiers.PointRow(p.T, a)
			misses[i] = ricecode.Zigzag(miss)
		}
		dd := digits(approx) // d or fewer
		if dd < 0 {
			continue
		}
		k, _ := ricecode.Best(misses)
		w := ricecode.NewWriter([]byte{byte(k)})
		for _, u := range misses {
			w.Rice(u, k)
		}
		section := w.Flush()
		b := binary.AppendUvarint([]byte{byte(nearDecimalFormat + dd), 1}, uint64(len(section)))
		b = append(b, section...)
		return encodeDecimal(b, approx, dd), true
	}
	return nil, false
}

// decodeColumnInto decodes a column encodeColumn made of exactly
// len(vals) values into vals, and their times into times when it is not
// nil; a nil times asks for a column indexed by position.
func decodeColumnInto(vals []float64, times []int64, data []byte) error {
	n := len(vals)
	check := func(i int, t int64) bool {
		if times != nil {
			times[i] = t
			return true
		}
		return t == int64(i)
	}
	var misses ricecode.Reader
	var mk uint
	near := len(data) >= 3 && data[0] >= nearDecimalFormat && data[0] <= nearDecimalFormat+maxDigits
	decimal := len(data) >= 3 && data[0] >= decimalFormat && data[0] <= decimalFormat+maxDigits
	if !near && !decimal {
		rows, err := Decode(make([]tiers.Row, 0, n), data, tiers.Span{From: math.MinInt64, To: math.MaxInt64}, math.MinInt64, AllEventBuckets)
		if err != nil {
			return err
		}
		if len(rows) != n {
			return fmt.Errorf("%w: rollup column of %d rows, want %d", ErrCorrupt, len(rows), n)
		}
		for i, r := range rows {
			if !check(i, r.T) {
				return fmt.Errorf("%w: rollup column index", ErrCorrupt)
			}
			vals[i] = r.Sum
		}
		return nil
	}
	var scale float64
	b := data[2:]
	if near {
		scale = pow10[data[0]-nearDecimalFormat]
		l, k := binary.Uvarint(b)
		if k <= 0 || l == 0 || l > uint64(len(b)-k) || b[k] > ricecode.MaxParameter {
			return fmt.Errorf("%w: near-decimal misses", ErrCorrupt)
		}
		misses, mk = ricecode.NewReader(b[k+1:k+int(l)]), uint(b[k])
		b = b[k+int(l):]
	} else {
		scale = pow10[data[0]-decimalFormat]
	}
	d, err := newDecimalReader(b)
	if err != nil {
		return err
	}
	if d.n != n {
		return fmt.Errorf("%w: rollup column of %d rows, want %d", ErrCorrupt, d.n, n)
	}
	for i := range n {
		t, v := d.next()
		if !check(i, t) {
			return fmt.Errorf("%w: rollup column index", ErrCorrupt)
		}
		f := float64(v) / scale
		if near {
			f = math.Float64frombits(uint64(int64(math.Float64bits(f)) + ricecode.Unzigzag(misses.Rice(mk))))
		}
		vals[i] = f
	}
	if err := d.check(); err != nil {
		return err
	}
	if misses.Overrun() {
		return fmt.Errorf("%w: near-decimal misses truncated", ErrCorrupt)
	}
	return nil
}

func isExactInt(v float64) bool {
	return v == math.Trunc(v) && v > -maxExactInt && v < maxExactInt
}
