package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tsgate/tsgate/tiers"
)

// Record kinds: the first byte of every key. The values are part of the
// on-disk format. Row kinds and the other expiring kinds are each contiguous
// so that the sweeper visits two key ranges and nothing else.
const (
	kindMeta byte = 0x00

	kindRaw    byte = 0x01
	kindLate   byte = 0x02
	kindMinute byte = 0x03
	kindHour   byte = 0x04
	kindDay    byte = 0x05
	// kindRollup keys the rollup tables of other pyramids: the table's
	// name and a NUL follow the kind byte.
	kindRollup byte = 0x06
	// kindRawChunk keys the sealed chunks of points_raw partitions (see
	// tiers/sealed): the partition's key, then the chunk's first time.
	kindRawChunk byte = 0x07
	// kindRollupChunk keys the sealed chunks of rollup partitions: the
	// partition's row key prefix (its table's kind, or kindRollup and the
	// table's name), then the chunk's first time.
	kindRollupChunk byte = 0x08

	kindSeries     byte = 0x10
	kindLayout     byte = 0x11
	kindLateMark   byte = 0x12
	kindDirty      byte = 0x13
	kindOldest     byte = 0x14
	kindCheckpoint byte = 0x15
	kindSecret     byte = 0x16
	kindBlocked    byte = 0x17
	// kindGeneration keys each series' generation (see
	// tiers.Registry.MarkRewritten).
	kindGeneration byte = 0x19
	// The label index (tiers.LabelIndex): each series' labels, the
	// postings, the values some series has and the names.
	kindLabels     byte = 0x1a
	kindPosting    byte = 0x1b
	kindLabelValue byte = 0x1c
	kindLabelName  byte = 0x1d
)

// Widths of the fixed-width parts of keys and values.
const (
	timeLen = 8
	ebLen   = 2

	expiryLen    = 8
	rawValueLen  = expiryLen + 8
	rollValueLen = expiryLen + 4*8
	spanValueLen = 16
	layoutValLen = 8 + 2
	int64ValLen  = 8
)

// errBadID rejects series ids the key encoding cannot represent.
var errBadID = errors.New("embedded: series id must be non-empty and must not contain NUL")

// validID reports whether id can be encoded: the NUL terminator is what
// keeps "a" and its partitions sorted before "a.b", so an id must not
// contain one.
func validID(id string) bool {
	return id != "" && strings.IndexByte(id, 0) < 0
}

// tableCode is how the rows of one table are keyed and stored.
type tableCode struct {
	// prefix starts every row key of the table: the kind byte, and for
	// kindRollup the table's name and a NUL.
	prefix []byte
	// raw rows hold a single value, like the value column of the Cassandra
	// raw tables; the others hold aggregates.
	raw bool
	// eventBuckets: only points_raw partitions are split into event
	// buckets; the other Cassandra tables have no such column.
	eventBuckets bool
}

// knownTables are the tables with a kind byte of their own: those of the
// default pyramid, whose keys predate named rollup tables.
var knownTables = map[tiers.Table]tableCode{
	tiers.TableRaw:  {prefix: []byte{kindRaw}, raw: true, eventBuckets: true},
	tiers.TableLate: {prefix: []byte{kindLate}, raw: true},
	"rollup_1m":     {prefix: []byte{kindMinute}},
	"rollup_1h":     {prefix: []byte{kindHour}},
	"rollup_1d":     {prefix: []byte{kindDay}},
}

// tableCodeOf returns the code of a table: one of knownTables, or a rollup
// table of another pyramid (rollup_<step>), keyed under kindRollup by name.
func tableCodeOf(t tiers.Table) (tableCode, bool) {
	if c, ok := knownTables[t]; ok {
		return c, true
	}
	name, ok := strings.CutPrefix(string(t), "rollup_")
	if !ok || name == "" || len(name) > 32 {
		return tableCode{}, false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return tableCode{}, false
		}
	}
	prefix := append([]byte{kindRollup}, t...)
	return tableCode{prefix: append(prefix, 0)}, true
}

// tableOfKey is tableCodeOf's inverse: the table a row key belongs to, and
// the rest of the key after the table's prefix.
func tableOfKey(key []byte) (tiers.Table, []byte, bool) {
	if len(key) == 0 {
		return "", nil, false
	}
	if key[0] == kindRollup {
		name, rest, ok := splitID(key[1:])
		return tiers.Table(name), rest, ok
	}
	for t, c := range knownTables {
		if c.prefix[0] == key[0] {
			return t, key[1:], true
		}
	}
	return "", nil, false
}

// Flipping the sign bit maps int64 order onto unsigned big-endian byte order,
// so times before the epoch sort first.
const signBit = 1 << 63

func appendTime(b []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(t)^signBit)
}

func putTime(b []byte, t int64) { binary.BigEndian.PutUint64(b, uint64(t)^signBit) }

func getTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ signBit) }

func appendID(b []byte, id string) []byte {
	b = append(b, id...)
	return append(b, 0)
}

// splitID returns the NUL-terminated id at the start of b and what follows.
func splitID(b []byte) (id string, rest []byte, ok bool) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), b[i+1:], true
		}
	}
	return "", nil, false
}

// checkPartition validates a partition key and returns its table's code.
// An event bucket other than 0 outside points_raw is an error, as it is on
// Cassandra, whose other tables have no such column.
func checkPartition(k tiers.PartitionKey) (tableCode, error) {
	c, ok := tableCodeOf(k.Table)
	if !ok {
		return c, fmt.Errorf("embedded: unknown table %q", k.Table)
	}
	if !validID(k.Series) {
		return c, errBadID
	}
	switch {
	case c.eventBuckets && (k.EventBucket < 0 || k.EventBucket >= tiers.MaxEventBuckets):
		return c, fmt.Errorf("embedded: event bucket %d of %s is out of range", k.EventBucket, k.Table)
	case !c.eventBuckets && k.EventBucket != 0:
		return c, fmt.Errorf("embedded: %s is not split into event buckets (event bucket %d)", k.Table, k.EventBucket)
	}
	return c, nil
}

// appendPartition appends the key prefix shared by all rows of a partition:
// the table's prefix, series, NUL, bucket, event bucket. The caller has
// checked k.
func appendPartition(b []byte, c tableCode, k tiers.PartitionKey) []byte {
	b = append(b, c.prefix...)
	b = appendID(b, k.Series)
	b = appendTime(b, k.Bucket)
	return binary.BigEndian.AppendUint16(b, uint16(k.EventBucket))
}

// appendRowKey appends the key of the row at t in partition k.
func appendRowKey(b []byte, c tableCode, k tiers.PartitionKey, t int64) []byte {
	return appendTime(appendPartition(b, c, k), t)
}

// decodeRowKey is appendRowKey's inverse.
func decodeRowKey(key []byte) (k tiers.PartitionKey, t int64, ok bool) {
	table, rest, ok := tableOfKey(key)
	if !ok {
		return k, 0, false
	}
	id, rest, ok := splitID(rest)
	if !ok || len(rest) != timeLen+ebLen+timeLen {
		return k, 0, false
	}
	k = tiers.PartitionKey{
		Table:       table,
		Series:      id,
		Bucket:      getTime(rest),
		EventBucket: int(binary.BigEndian.Uint16(rest[timeLen:])),
	}
	return k, getTime(rest[timeLen+ebLen:]), true
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix, or nil when there is none (prefix is all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Values carry no ordering, so they are little-endian fixed-width fields.
// Every expiring record starts with its expiry (Unix ms, 0 = never), which
// lets reads and the sweeper judge a record without knowing its kind.

// expiry returns when a record stamped at t with the given retention
// expires: never (0) for retention 0, and never 0 otherwise, so that a
// record whose expiry lands exactly on the epoch does not live forever.
func expiry(t, retention int64) int64 {
	if retention <= 0 {
		return 0
	}
	e := t + retention
	if e < t { // saturate rather than wrap
		e = math.MaxInt64
	}
	if e == 0 {
		e = -1
	}
	return e
}

// expired reports whether a record with expiry e is gone at now, the way
// Cassandra drops a cell once its TTL has run out.
func expired(e, now int64) bool { return e != 0 && e <= now }

func getExpiry(v []byte) int64 { return int64(binary.LittleEndian.Uint64(v)) }

func putInt64(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) }

func getInt64(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }

func putFloat(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) }

func getFloat(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }

// rowValueLen is the size of a row's value in a table.
func rowValueLen(c tableCode) int {
	if c.raw {
		return rawValueLen
	}
	return rollValueLen
}

// putRow encodes r with its expiry into v, which has rowValueLen(kind)
// bytes, followed by the rollup row's extras (tiers.AppendExtras) when it
// has them: a value of exactly rollValueLen bytes is a rollup row without
// extras, as every row written before format 2 is. Raw tables keep only
// the value, like their Cassandra counterparts, so a raw row always reads
// back as a point.
func putRow(v []byte, c tableCode, r tiers.Row, exp int64) []byte {
	putInt64(v, exp)
	if c.raw {
		putFloat(v[8:], r.Value())
		return v
	}
	putFloat(v[8:], r.Min)
	putFloat(v[16:], r.Max)
	putFloat(v[24:], r.Sum)
	putInt64(v[32:], r.Count)
	return tiers.AppendExtras(v, r)
}

// getRow decodes the row at t from v; ok is false for a value of the wrong
// size. The extras of a rollup row are left undecoded (see getExtras).
func getRow(v []byte, raw bool, t int64) (tiers.Row, bool) {
	if raw {
		if len(v) != rawValueLen {
			return tiers.Row{}, false
		}
		return tiers.PointRow(t, getFloat(v[8:])), true
	}
	if len(v) < rollValueLen {
		return tiers.Row{}, false
	}
	return tiers.Row{
		T:     t,
		Min:   getFloat(v[8:]),
		Max:   getFloat(v[16:]),
		Sum:   getFloat(v[24:]),
		Count: getInt64(v[32:]),
	}, true
}

// extrasOf returns the encoded extras of a rollup row's value: empty for
// a row written without them.
func extrasOf(v []byte) []byte { return v[rollValueLen:] }

// Keys of the other record kinds.

func generationKey(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)), kindGeneration), id)
}

func seriesKey(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)), kindSeries), id)
}

func layoutPrefix(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)+timeLen), kindLayout), id)
}

func lateMarkPrefix(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)+timeLen), kindLateMark), id)
}

func labelsKey(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)), kindLabels), id)
}

// postingPrefix starts the postings of one pair: the name, NUL, the value
// escaped and terminated (appendValue); the series id and its NUL follow.
func postingPrefix(name, value string) []byte {
	b := append(make([]byte, 0, 4+len(name)+len(value)+2), kindPosting)
	b = append(append(b, name...), 0)
	return appendValue(b, value)
}

func postingKey(name, value, id string) []byte {
	return appendID(postingPrefix(name, value), id)
}

// labelValuePrefix starts the value entries of a name.
func labelValuePrefix(name string) []byte {
	b := append(make([]byte, 0, 2+len(name)), kindLabelValue)
	return append(append(b, name...), 0)
}

func labelValueKey(name, value string) []byte {
	return appendValue(labelValuePrefix(name), value)
}

func labelNameKey(name string) []byte { return namedKey(kindLabelName, name) }

// appendValue appends a label value in an order-preserving, self-delimiting
// form: values are UTF-8 and may hold NUL, so a NUL is written as 0x00
// 0xff and the value ends with 0x00 0x01. A value then sorts before every
// longer value it starts (0x01 is below 0xff and below every other byte
// that can follow), and otherwise as its bytes do, so value keys list in
// value order and a value's postings are a prefix no other value's
// postings share.
func appendValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, v[i])
		}
	}
	return append(b, 0, 1)
}

// splitValue is appendValue's inverse: the value at the start of b and what
// follows it.
func splitValue(b []byte) (v string, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	if i+1 < len(b) && b[i+1] == 1 {
		return string(b[:i]), b[i+2:], true // no NUL inside: the common case
	}
	out := make([]byte, 0, len(b))
	for j := 0; j < len(b); j++ {
		if b[j] != 0 {
			out = append(out, b[j])
			continue
		}
		if j+1 >= len(b) {
			return "", nil, false
		}
		switch b[j+1] {
		case 0xff:
			out = append(out, 0)
			j++
		case 1:
			return string(out), b[j+2:], true
		default:
			return "", nil, false
		}
	}
	return "", nil, false
}

// encodeLabels encodes a labels record: the pairs in name order, each name
// and value preceded by its length as a uvarint.
func encodeLabels(l tiers.Labels) []byte {
	n := 0
	for k, v := range l {
		n += len(k) + len(v) + 2*binary.MaxVarintLen32
	}
	b := make([]byte, 0, n)
	for _, k := range l.Names() {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(l[k])))
		b = append(b, l[k]...)
	}
	return b
}

// decodeLabels is encodeLabels' inverse; an empty record is no labels.
func decodeLabels(b []byte) (tiers.Labels, bool) {
	if len(b) == 0 {
		return nil, true
	}
	l := make(tiers.Labels, 8)
	for len(b) > 0 {
		var field [2]string
		for i := range field {
			n, w := binary.Uvarint(b)
			if w <= 0 || n > uint64(len(b)-w) {
				return nil, false
			}
			field[i], b = string(b[w:w+int(n)]), b[w+int(n):]
		}
		l[field[0]] = field[1]
	}
	return l, true
}

// rewriteMarkSuffix ends a rewrite mark's key, which is otherwise its
// bucket's late-mark key: a bucket may have either mark or both, each
// with its own version.
const rewriteMarkSuffix byte = 0x01

func dirtyPrefix(slot int64) []byte {
	return appendTime(append(make([]byte, 0, 1+timeLen), kindDirty), slot)
}

var oldestKey = []byte{kindOldest}

func namedKey(kind byte, name string) []byte {
	return append(append(make([]byte, 0, 1+len(name)), kind), name...)
}

// formatKey holds the store's format version, checked at Open.
var formatKey = []byte{kindMeta, 'f', 'o', 'r', 'm', 'a', 't'}
