// Package sealed owns the sealed form of a raw partition: its points as a
// few compressed chunks — timestamps delta-of-delta, decimal values as
// Rice-coded integer differences, other values XOR in Prometheus' chunk
// encoding (tsdb/chunkenc) — instead of one row per point, and the read that merges a partition's chunks with the rows it
// still holds.
//
// A store seals a partition once no more on-time points can land in it: it
// reads the partition (chunks and rows), encodes the points with Encode,
// replaces its chunks with the result, then deletes the row form. Points
// written to the partition afterwards (an import, a write racing the seal)
// stay rows until the next seal, and a read merges them over the chunks
// with Merge: on equal timestamps the row wins, as a rewrite wins over what
// it rewrites.
//
// XOR chunks keep every float64 bit pattern, so Prometheus' stale markers
// (tiers.StaleNaN) come back from a chunk as they went in.
package sealed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tsgate/tsgate/tiers"
)

// MaxSamples bounds the points of one chunk. Prometheus cuts its chunks at
// 120 samples so that a query decodes little it does not need; a sealed
// chunk is also a stored record, with a key of tens of bytes and a head of
// 24 (expiry, retention, last time) and 15 (the chunk's own header), which
// at a point's 1.3 bytes is a large share of a short chunk: two chunks of
// an hour at 10 s (240 and 120 points) cost 0.3 bytes a point on top. A
// chunk decodes at some 25–30 ns a point (BenchmarkDecodeChunk) and a read
// stops at the end of its span, so a chunk holds an hour at 10 s whole,
// and a read of a short span throws away at most some 30 µs of decoding.
const MaxSamples = 1024

// Chunk is one encoded run of points, ascending by time.
type Chunk struct {
	// First and Last are the times of its first and last point.
	First, Last int64
	// Count is how many points it holds.
	Count int
	// Data is a format byte and the XOR chunk's bytes (see Encode).
	Data []byte
}

// Span returns [First, Last+1).
func (c Chunk) Span() tiers.Span { return tiers.Span{From: c.First, To: c.Last + 1} }

// xorFormat is the format byte of an XOR chunk of values as they are.
const xorFormat = 0

// maxDigits is the most decimal digits a chunk's values are scaled by.
const maxDigits = 6

// pow10 are the scales of decimal values.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// digits returns the fewest decimal digits d such that every value v of
// points is round(v·10^d)/10^d bit for bit, an integer below 2^52 once
// scaled, or -1 when there is none (NaN, such as a stale marker, −0 and
// values with more digits).
func digits(points []tiers.Row) int {
	d := 0
	for _, p := range points {
		v := p.Value()
		if v == 0 && math.Signbit(v) {
			return -1 // an integer has no negative zero
		}
		for ; d <= maxDigits; d++ {
			x := math.Round(v * pow10[d])
			if math.Abs(x) < 1<<52 && math.Float64bits(x/pow10[d]) == math.Float64bits(v) {
				break
			}
		}
		if d > maxDigits {
			return -1
		}
	}
	// Scaling by more digits than a value needs is not obviously exact for
	// it: check them all at the final scale.
	for _, p := range points {
		v := p.Value()
		if math.Float64bits(math.Round(v*pow10[d])/pow10[d]) != math.Float64bits(v) {
			return -1
		}
	}
	return d
}

// Encode encodes points, which must be raw rows in strictly ascending time
// order, as chunks of at most MaxSamples points each, in time order. The
// points are those of a whole bucket of eventBuckets partitions: one
// series of regular timestamps encodes in far fewer bits than the
// irregular ones each event bucket holds, and a read of one partition
// keeps the points whose time maps to it (tiers.EventBucket).
//
// A chunk's data is one byte of format, one byte of event buckets, then
// the points. Values that are decimals of a few digits, as most exporters
// print them, are held as integers in the decimal format (rice.go, format
// decimalFormat+d for d digits), which a read divides back bit for bit;
// other values (more digits, NaN such as a stale marker) are held as they
// are in an XOR chunk of Prometheus' encoding (format xorFormat). Stores
// sealed before the decimal format hold formats 1+d: XOR chunks of
// decimal values scaled to integers; Decode still reads them.
func Encode(points []tiers.Row, eventBuckets int) ([]Chunk, error) {
	if eventBuckets < 1 || eventBuckets > tiers.MaxEventBuckets {
		return nil, fmt.Errorf("sealed: %d event buckets", eventBuckets)
	}
	var out []Chunk
	for part := range slices.Chunk(points, MaxSamples) {
		for i := 1; i < len(part); i++ {
			if part[i].T <= part[i-1].T {
				return nil, fmt.Errorf("sealed: points out of order at %d", part[i].T)
			}
		}
		if len(out) > 0 && part[0].T <= out[len(out)-1].Last {
			return nil, fmt.Errorf("sealed: points out of order at %d", part[0].T)
		}
		d := digits(part)
		var data []byte
		if d >= 0 {
			data = encodeDecimal([]byte{byte(decimalFormat + d), byte(eventBuckets)}, part, d)
		} else {
			c := chunkenc.NewXORChunk()
			app, err := c.Appender()
			if err != nil {
				return nil, fmt.Errorf("sealed: %w", err)
			}
			for _, p := range part {
				app.Append(0, p.T, p.Value())
			}
			data = append([]byte{xorFormat, byte(eventBuckets)}, c.Bytes()...)
		}
		out = append(out, Chunk{First: part[0].T, Last: part[len(part)-1].T, Count: len(part), Data: data})
	}
	return out, nil
}

// ErrCorrupt says a stored chunk does not decode.
var ErrCorrupt = errors.New("sealed: corrupt chunk")

// AllEventBuckets asks Decode for the points of every event bucket.
const AllEventBuckets = -1

// Decode appends to dst the points of the chunk data whose time lies in
// span and is not before oldest (points before it have expired, as their
// rows would have) and that belong to the partition eventBucket of the
// bucket (every point with AllEventBuckets), in ascending time order.
func Decode(dst []tiers.Row, data []byte, span tiers.Span, oldest int64, eventBucket int) ([]tiers.Row, error) {
	if len(data) < 3 || data[1] < 1 || int(data[1]) > tiers.MaxEventBuckets {
		return dst, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(data))
	}
	n := int(data[1])
	filter := n > 1 && eventBucket != AllEventBuckets
	from := max(span.From, oldest)
	keep := func(t int64) bool {
		return t >= from && t < span.To && (!filter || tiers.EventBucket(t, n) == eventBucket)
	}
	if f := data[0]; f >= decimalFormat && f <= decimalFormat+maxDigits {
		return decodeDecimal(dst, data[2:], pow10[f-decimalFormat], span.To, keep)
	}
	// An XOR chunk's two-byte header is its sample count; chunkenc
	// indexes it without a check.
	if len(data) < 4 || int(data[0]) > maxDigits+1 {
		return dst, fmt.Errorf("%w: format %d, %d bytes", ErrCorrupt, data[0], len(data))
	}
	scaled, scale := data[0] > xorFormat, 1.0
	if scaled {
		scale = pow10[data[0]-1]
	}
	c, err := chunkenc.FromData(chunkenc.EncXOR, data[2:])
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	it := c.Iterator(nil)
	last, seen := int64(0), false
	for vt := it.Seek(from); vt == chunkenc.ValFloat; vt = it.Next() {
		t, v := it.At()
		if t >= span.To {
			break
		}
		// chunkenc decodes whatever bits it is given; a chunk whose times
		// do not ascend was never written by Encode.
		if seen && t <= last {
			return dst, fmt.Errorf("%w: times out of order", ErrCorrupt)
		}
		last, seen = t, true
		if keep(t) {
			if scaled {
				v /= scale
			}
			dst = append(dst, tiers.PointRow(t, v))
		}
	}
	if err := it.Err(); err != nil {
		return dst, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return dst, nil
}

// Count returns how many points (or rollup rows) the chunk data holds,
// from its header: a seal that has no row to fold in reports what the
// chunks hold without decoding them.
func Count(data []byte) (int, error) {
	switch {
	case IsRollup(data):
		n, k := binary.Uvarint(data[1:])
		if k <= 0 || n == 0 || n > MaxSamples {
			return 0, fmt.Errorf("%w: rollup count", ErrCorrupt)
		}
		return int(n), nil
	case len(data) >= 3 && data[0] >= decimalFormat && data[0] <= decimalFormat+maxDigits:
		n, k := binary.Uvarint(data[2:])
		if k <= 0 || n == 0 || n > MaxSamples {
			return 0, fmt.Errorf("%w: count", ErrCorrupt)
		}
		return int(n), nil
	case len(data) >= 4 && int(data[0]) <= maxDigits+1:
		// An XOR chunk's header is its sample count.
		return int(binary.BigEndian.Uint16(data[2:])), nil
	}
	return 0, fmt.Errorf("%w: %d bytes of no known format", ErrCorrupt, len(data))
}

// Oldest is the time of the oldest point a partition written with
// retention still holds at now: points before it have expired. With
// retention 0 nothing expires.
func Oldest(now, retention int64) int64 {
	if retention <= 0 {
		return math.MinInt64
	}
	return now - retention + 1
}

// MergePoints merges rows (ascending, distinct times) over chunk points
// (ascending, distinct times) into one ascending slice; on equal times the
// row is kept.
func MergePoints(chunkPoints, rows []tiers.Row) []tiers.Row {
	out := make([]tiers.Row, 0, len(chunkPoints)+len(rows))
	i, j := 0, 0
	for i < len(chunkPoints) && j < len(rows) {
		switch a, b := chunkPoints[i], rows[j]; {
		case a.T < b.T:
			out = append(out, a)
			i++
		case a.T > b.T:
			out = append(out, b)
			j++
		default:
			out = append(out, b)
			i++
			j++
		}
	}
	out = append(out, chunkPoints[i:]...)
	return append(out, rows[j:]...)
}

// Merge returns the pages of a partition read whose row form is read by
// rows and whose chunk points in the read's span are points (ascending,
// distinct times, whatever the read's order): the union in the read's
// order (descending when desc is set), pageSize points a page, a row
// replacing the chunk point of the same time. With no points it returns
// rows itself. Merge takes points over: its pages may be slices of it.
func Merge(points []tiers.Row, rows tiers.RowPages, desc bool, pageSize int) tiers.RowPages {
	if len(points) == 0 {
		return rows
	}
	if desc {
		points = slices.Clone(points)
		slices.Reverse(points)
	}
	if pageSize <= 0 {
		pageSize = 5000
	}
	return &merged{points: points, rows: rows, desc: desc, pageSize: pageSize}
}

// merged is Merge's reader.
type merged struct {
	points   []tiers.Row // chunk points not returned yet, in read order
	rows     tiers.RowPages
	desc     bool
	pageSize int

	page     []tiers.Row // the rows' current page, from pos on not returned
	pos      int
	rowsDone bool
	err      error // ends the read once the rows' error or ErrDone
}

// before reports whether time a comes before b in the read's order.
func (m *merged) before(a, b int64) bool {
	if m.desc {
		return a > b
	}
	return a < b
}

// fillRows makes sure a row is buffered unless the rows are exhausted; it
// returns the rows' error other than ErrDone.
func (m *merged) fillRows() error {
	for !m.rowsDone && m.pos >= len(m.page) {
		page, err := m.rows.Next()
		if errors.Is(err, tiers.ErrDone) {
			m.rowsDone = true
			return nil
		}
		if err != nil {
			return err
		}
		m.page, m.pos = page, 0
	}
	return nil
}

func (m *merged) Next() ([]tiers.Row, error) {
	if m.err != nil {
		return nil, m.err
	}
	var out []tiers.Row
	for len(out) < m.pageSize {
		if err := m.fillRows(); err != nil {
			m.err = err
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		haveRow := m.pos < len(m.page)
		if !haveRow && len(m.points) == 0 {
			break
		}
		if out == nil && !haveRow && m.rowsDone {
			// Only chunk points are left, which are the read's own: a
			// page of them needs no copy.
			n := min(m.pageSize, len(m.points))
			out, m.points = m.points[:n:n], m.points[n:]
			break
		}
		if out == nil {
			out = make([]tiers.Row, 0, min(m.pageSize, 1024))
		}
		switch {
		case !haveRow:
			n := min(m.pageSize-len(out), len(m.points))
			out = append(out, m.points[:n]...)
			m.points = m.points[n:]
		case len(m.points) == 0 || m.before(m.page[m.pos].T, m.points[0].T):
			out = append(out, m.page[m.pos])
			m.pos++
		case m.page[m.pos].T == m.points[0].T:
			out = append(out, m.page[m.pos])
			m.pos++
			m.points = m.points[1:]
		default:
			out = append(out, m.points[0])
			m.points = m.points[1:]
		}
	}
	if len(out) == 0 {
		m.err = tiers.ErrDone
		return nil, tiers.ErrDone
	}
	return out, nil
}

func (m *merged) Close() error {
	m.points, m.page = nil, nil
	return m.rows.Close()
}
