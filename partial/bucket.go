package partial

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/tiers"
)

// Run is the rows of a bucket's partitions merged into one ascending run:
// a whole bucket the cache holds, or the part of a bucket a group read
// (see MergePages). Raw points are held compactly (T and V, 16 bytes a
// point); rollup rows whole (Rows). Its rows never change once built, so
// any number of reads may slice it at once without copying; what it adds
// later (its encodings, see Keep) is published atomically.
type Run struct {
	T    []int64
	V    []float64   // the raw points' values, when Rows is nil
	Rows []tiers.Row // rollup rows, when set (T holds their times too)

	// Keep, when set, lets the run keep its rows encoded as answers write
	// them (see encoding), the first time a read copies them, and its
	// rollup rows also as whole windows for the lists of fields answers
	// ask for (up to maxWindowEncodings lists), so that a batch of
	// windows is one copy rather than six per row. A cache sets it to
	// account for the bytes: it reports whether the run may keep that
	// many more. The encoding is made on first use, not when the run is
	// cached, because most reads of rollup rows fold them into wider
	// windows and never copy a row's JSON: encoding them all on a cold
	// read was a fifth of its time.
	Keep       func(bytes int64) bool
	windowMu   sync.Mutex
	enc        atomic.Pointer[encoding]
	encRefused atomic.Bool
	windows    atomic.Pointer[[]*windowsJSON]
}

// encoding is a run's rows as answers write them, so that reads copy them
// instead of formatting them again. For raw points: each point, [t,v],
// followed by a comma; point i is json[ends[i-1]:ends[i]] (from 0 for the
// first), so consecutive points are one slice. For rollup rows: the
// pieces of each row, t and then its Fields, without separators; piece k
// of row i ends at ends[i*(1+Fields)+k].
type encoding struct {
	json []byte
	ends []uint32
	// charged is set when Keep accounted for the bytes: Bytes leaves them
	// out then, so that what a cache charged at insertion stays the size
	// it subtracts at eviction.
	charged bool
}

func (e *encoding) bytes() int64 { return int64(cap(e.json)) + 4*int64(len(e.ends)) }

// encoded returns the run's encoding: the one made already, or a new one
// when the run has a Keep that pays for it; nil when there is none.
func (r *Run) encoded() *encoding {
	if e := r.enc.Load(); e != nil {
		return e
	}
	if r.Keep == nil || len(r.T) == 0 || r.encRefused.Load() {
		return nil
	}
	r.windowMu.Lock()
	defer r.windowMu.Unlock()
	if e := r.enc.Load(); e != nil {
		return e
	}
	if r.encRefused.Load() {
		return nil
	}
	e := r.encode()
	if !r.Keep(e.bytes()) {
		// Refused once, refused for good: the cache would refuse the same
		// bytes on every read, and each read would pay for encoding them.
		r.encRefused.Store(true)
		return nil
	}
	e.charged = true
	r.enc.Store(e)
	return e
}

// maxWindowEncodings bounds the lists of fields a run keeps windows for:
// a dashboard asks for the same few over and over.
const maxWindowEncodings = 2

// windowsJSON is every rollup row of a run as a window of one row for a
// list of fields: "[t,f,...]," with the comma, row i ending at ends[i].
type windowsJSON struct {
	fields []int
	json   []byte
	ends   []uint32
}

// keptWindows returns the windows kept for fields, if any, and whether
// the run may keep another list.
func (r *Run) keptWindows(fields []int) (w *windowsJSON, room bool) {
	p := r.windows.Load()
	if p == nil {
		return nil, true
	}
	for _, w := range *p {
		if slices.Equal(w.fields, fields) {
			return w, false
		}
	}
	return nil, len(*p) < maxWindowEncodings
}

// windowsFor returns the run's rows encoded as windows of fields, encoding
// them now when the run may keep another list; nil when not.
func (r *Run) windowsFor(enc *encoding, fields []int) *windowsJSON {
	if w, room := r.keptWindows(fields); w != nil || !room {
		return w
	}
	r.windowMu.Lock()
	defer r.windowMu.Unlock()
	// Checked again: another read may have encoded them meanwhile.
	if w, room := r.keptWindows(fields); w != nil || !room {
		return w
	}
	var list []*windowsJSON
	if p := r.windows.Load(); p != nil {
		list = *p
	}
	w := &windowsJSON{fields: slices.Clone(fields), ends: make([]uint32, len(r.Rows))}
	size := 0
	for i := range r.Rows {
		base := i * (1 + Fields)
		size += int(enc.ends[base]-enc.piece(base)) + len(fields) + 3 // [t,f...],
		for _, f := range fields {
			size += int(enc.ends[base+f+1] - enc.ends[base+f])
		}
	}
	w.json = make([]byte, 0, size)
	for i := range r.Rows {
		w.json = append(enc.appendRow(append(w.json, '['), i, fields), ']', ',')
		w.ends[i] = uint32(len(w.json))
	}
	if !r.Keep(int64(cap(w.json)) + 4*int64(len(w.ends)) + int64(8*len(fields))) {
		return nil
	}
	r.windows.Store(new(append(slices.Clip(list), w)))
	return w
}

// appendRow writes rollup row i's time and fields, comma-separated, from
// its encoded pieces.
func (e *encoding) appendRow(b []byte, i int, fields []int) []byte {
	base := i * (1 + Fields)
	b = append(b, e.json[e.piece(base):e.ends[base]]...)
	for _, f := range fields {
		b = append(b, ',')
		b = append(b, e.json[e.ends[base+f]:e.ends[base+f+1]]...)
	}
	return b
}

// The numbers of a rollup row that Encode writes, in this order after its
// time: what a window of one row answers for each aggregate.
const (
	FieldMin = iota
	FieldMax
	FieldSum
	FieldCount
	FieldMean // Sum / Count
	Fields
)

// Encode encodes the run now (see encoding), for runs built to be read
// many times outside a cache; a cached run (Keep set) encodes itself on
// first use, charged to its cache, and Encode leaves it so.
func (r *Run) Encode() {
	if r.enc.Load() != nil || len(r.T) == 0 || r.Keep != nil {
		return
	}
	r.windowMu.Lock()
	defer r.windowMu.Unlock()
	if r.enc.Load() == nil {
		r.enc.Store(r.encode())
	}
}

func (r *Run) encode() *encoding {
	var b []byte
	var ends []uint32
	if r.Rows == nil {
		// Sized from the first points, whose times and values are as long
		// as the rest's as a rule, so that the buffer is written once and
		// not copied again to drop spare room.
		n := len(r.T)
		const head = 64
		b, ends = make([]byte, 0, 48*min(n, head)), make([]uint32, n)
		for i, t := range r.T {
			if i == head {
				b = append(make([]byte, 0, len(b)*n/head+len(b)*n/head/32+64), b...)
			}
			b = jsonenc.AppendPoint(b, t, r.V[i])
			b = append(b, ',')
			ends[i] = uint32(len(b))
		}
	} else {
		b, ends = make([]byte, 0, 80*len(r.T)), make([]uint32, 0, (1+Fields)*len(r.T))
		for _, row := range r.Rows {
			b = jsonenc.AppendInt(b, row.T)
			ends = append(ends, uint32(len(b)))
			for f := range Fields {
				b = appendField(b, row, f)
				ends = append(ends, uint32(len(b)))
			}
		}
	}
	if cap(b) > len(b)+len(b)/8 {
		// The run lives as long as the cache keeps it: do not hold the
		// spare room the appends left.
		b = append(make([]byte, 0, len(b)), b...)
	}
	return &encoding{json: b, ends: ends}
}

// appendField writes one of a rollup row's numbers as an answer does.
func appendField(b []byte, row tiers.Row, f int) []byte {
	switch f {
	case FieldMin:
		return jsonenc.AppendFloat(b, row.Min)
	case FieldMax:
		return jsonenc.AppendFloat(b, row.Max)
	case FieldSum:
		return jsonenc.AppendFloat(b, row.Sum)
	case FieldCount:
		return jsonenc.AppendInt(b, row.Count)
	default:
		return jsonenc.AppendFloat(b, row.Sum/float64(row.Count))
	}
}

// AppendRows appends rollup rows [lo, hi), in descending order when desc
// is set, as answers write windows of one row each: [t,field,...] with the
// fields named, arrays separated by commas.
func (r *Run) AppendRows(b []byte, lo, hi int, desc bool, fields []int) []byte {
	var enc *encoding
	if r.Rows != nil && hi > lo {
		enc = r.encoded()
	}
	if r.Keep != nil && enc != nil {
		if w := r.windowsFor(enc, fields); w != nil {
			return appendItems(b, w.json, w.ends, lo, hi, desc)
		}
	}
	for k := range hi - lo {
		i := nth(lo, hi, k, desc)
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		if enc == nil {
			// Not encoded (no cache pays for it), or rows of one point
			// each held compactly, whose encoding is of raw points.
			row := r.Row(i)
			b = jsonenc.AppendInt(b, row.T)
			for _, f := range fields {
				b = append(b, ',')
				b = appendField(b, row, f)
			}
		} else {
			b = enc.appendRow(b, i, fields)
		}
		b = append(b, ']')
	}
	return b
}

// nth is the index of the k-th of rows [lo, hi) taken in order: from lo
// up, or from hi-1 down when desc.
func nth(lo, hi, k int, desc bool) int {
	if desc {
		return hi - 1 - k
	}
	return lo + k
}

// piece is where encoded piece k begins (for raw points, point k).
func (e *encoding) piece(k int) uint32 {
	if k == 0 {
		return 0
	}
	return e.ends[k-1]
}

// AppendJSON appends rows [lo, hi) as JSON points separated by commas, in
// descending order when desc is set.
func (r *Run) AppendJSON(b []byte, lo, hi int, desc bool) []byte {
	if lo >= hi {
		return b
	}
	enc := r.encoded()
	if enc == nil {
		for k := range hi - lo {
			if k > 0 {
				b = append(b, ',')
			}
			i := nth(lo, hi, k, desc)
			b = jsonenc.AppendPoint(b, r.T[i], r.V[i])
		}
		return b
	}
	return appendItems(b, enc.json, enc.ends, lo, hi, desc)
}

// appendItems appends items [lo, hi) of enc, where item i is
// enc[ends[i-1]:ends[i]] (from 0 for the first) and ends with its comma,
// in descending order when desc is set, without the comma after the last
// item written: ascending, one copy.
func appendItems(b, enc []byte, ends []uint32, lo, hi int, desc bool) []byte {
	start := func(i int) uint32 {
		if i == 0 {
			return 0
		}
		return ends[i-1]
	}
	if !desc {
		return append(b, enc[start(lo):ends[hi-1]-1]...)
	}
	for i := hi - 1; i >= lo; i-- {
		end := ends[i]
		if i == lo {
			end--
		}
		b = append(b, enc[start(i):end]...)
	}
	return b
}

// Len is the number of rows.
func (r *Run) Len() int { return len(r.T) }

// Row returns the i-th row.
func (r *Run) Row(i int) tiers.Row {
	if r.Rows != nil {
		return r.Rows[i]
	}
	return tiers.PointRow(r.T[i], r.V[i])
}

// Append returns a new run of r's rows followed by next's, which all come
// after them, as a cache grows a bucket's settled start by its next rows.
// Neither run changes; the encodings are not carried over.
func (r *Run) Append(next *Run) *Run {
	out := &Run{T: make([]int64, 0, len(r.T)+len(next.T))}
	out.T = append(append(out.T, r.T...), next.T...)
	if r.Rows == nil && next.Rows == nil {
		out.V = make([]float64, 0, len(out.T))
		out.V = append(append(out.V, r.V...), next.V...)
		return out
	}
	out.Rows = make([]tiers.Row, 0, len(out.T))
	for _, part := range []*Run{r, next} {
		for i := range part.T {
			out.Rows = append(out.Rows, part.Row(i))
		}
	}
	return out
}

// Bytes is the memory the run takes.
func (r *Run) Bytes() int64 {
	var enc int64
	if e := r.enc.Load(); e != nil && !e.charged {
		enc = e.bytes()
	}
	if r.Rows != nil {
		n := int64(len(r.Rows))*int64(unsafe.Sizeof(tiers.Row{})) + int64(len(r.T))*8 + enc
		if len(r.Rows) > 0 && r.Rows[0].X != nil {
			for _, row := range r.Rows {
				n += row.ExtrasBytes()
			}
		}
		return n
	}
	return int64(len(r.T))*16 + enc
}

// Range returns the indices [lo, hi) of the rows inside span.
func (r *Run) Range(span tiers.Span) (lo, hi int) {
	lo = sort.Search(len(r.T), func(i int) bool { return r.T[i] >= span.From })
	hi = lo + sort.Search(len(r.T)-lo, func(i int) bool { return r.T[lo+i] >= span.To })
	return lo, hi
}

// BucketRead is how a bucket cache serves a group: Run when the bucket is
// cached already, Load to read and cache it. Both nil means the group is
// read partition by partition.
type BucketRead struct {
	Run  *Run
	Load func(ctx context.Context) (*Run, error)
	// Rest are the reads of the group the run does not cover (a late
	// partition that may still change), merged on top of it.
	Rest []tiers.ReadRequest
	// Covered is how many partitions the run stands for.
	Covered int
}

// Buckets serves whole buckets from memory: the event-bucket partitions,
// and the late partition too when it can no longer change unnoticed.
type Buckets interface {
	Bucket(g Group) BucketRead
}

// RunSlice is consecutive rows of a run, Lo to Hi-1, in the order of the
// stream that handed them over (from Hi-1 down to Lo when Desc).
type RunSlice struct {
	Run    *Run
	Lo, Hi int
	Desc   bool
}

// Len is the number of rows.
func (s RunSlice) Len() int { return s.Hi - s.Lo }

// Row is the k-th row in the slice's order.
func (s RunSlice) Row(k int) tiers.Row { return s.Run.Row(nth(s.Lo, s.Hi, k, s.Desc)) }

// Last is the last row in the slice's order.
func (s RunSlice) Last() tiers.Row { return s.Row(s.Len() - 1) }

// AppendJSON appends the rows, raw points, as an answer writes them:
// [t,v] arrays separated by commas.
func (s RunSlice) AppendJSON(b []byte) []byte {
	return s.Run.AppendJSON(b, s.Lo, s.Hi, s.Desc)
}

// AppendRows appends the rows, rollup rows, as answers write windows of
// one row each (see Run.AppendRows).
func (s RunSlice) AppendRows(b []byte, fields []int) []byte {
	return s.Run.AppendRows(b, s.Lo, s.Hi, s.Desc, fields)
}

// runIter iterates over rows [lo, hi) of a run, in either order.
type runIter struct {
	run    *Run
	i, end int
	step   int
	cur    tiers.Row
}

func newRunIter(r *Run, span tiers.Span, desc bool) *runIter {
	lo, hi := r.Range(span)
	if desc {
		return &runIter{run: r, i: hi, end: lo - 1, step: -1}
	}
	return &runIter{run: r, i: lo - 1, end: hi, step: 1}
}

func (it *runIter) count() int { return (it.end - it.i - it.step) * it.step }

func (it *runIter) Next() bool {
	if it.i+it.step == it.end {
		it.i = it.end - it.step // stay exhausted
		return false
	}
	it.i += it.step
	if it.run.Rows != nil {
		it.cur = it.run.Rows[it.i]
	} else {
		it.cur = tiers.PointRow(it.run.T[it.i], it.run.V[it.i])
	}
	return true
}

// freshAhead is how many of the next rows, up to limit, come before the
// first stale marker.
func (it *runIter) freshAhead(limit int) int {
	n := min(limit, it.count())
	if it.run.Rows != nil {
		return n // rollup rows are never stale markers
	}
	for k := range n {
		if math.Float64bits(it.run.V[it.i+it.step*(k+1)]) == tiers.StaleNaN {
			return k
		}
	}
	return n
}

// take moves past up to limit rows at once and returns them as [lo, hi).
func (it *runIter) take(limit int) (lo, hi int) {
	n := min(limit, it.count())
	if n <= 0 {
		return 0, 0
	}
	if it.step > 0 {
		lo, hi = it.i+1, it.i+1+n
		it.i = hi - 1
	} else {
		lo, hi = it.i-n, it.i
		it.i = lo
	}
	it.cur = it.run.Row(it.i)
	return lo, hi
}

func (it *runIter) At() tiers.Row { return it.cur }
func (it *runIter) Err() error    { return nil }
