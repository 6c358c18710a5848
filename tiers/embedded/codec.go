package embedded

import (
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

	kindSeries     byte = 0x10
	kindLayout     byte = 0x11
	kindLateMark   byte = 0x12
	kindDirty      byte = 0x13
	kindOldest     byte = 0x14
	kindCheckpoint byte = 0x15
	kindSecret     byte = 0x16
	kindBlocked    byte = 0x17
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

// maxEventBucket is the largest event bucket the key's uint16 can hold.
const maxEventBucket = math.MaxUint16

// errBadID rejects series ids the key encoding cannot represent.
var errBadID = errors.New("embedded: series id must be non-empty and must not contain NUL")

// validID reports whether id can be encoded: the NUL terminator is what
// keeps "a" and its partitions sorted before "a.b", so an id must not
// contain one.
func validID(id string) bool {
	return id != "" && strings.IndexByte(id, 0) < 0
}

// tableKind maps a table to its key prefix.
func tableKind(t tiers.Table) (kind byte, ok bool) {
	switch t {
	case tiers.TableRaw:
		return kindRaw, true
	case tiers.TableLate:
		return kindLate, true
	case tiers.TableMinute:
		return kindMinute, true
	case tiers.TableHour:
		return kindHour, true
	case tiers.TableDay:
		return kindDay, true
	}
	return 0, false
}

// kindTable is tableKind's inverse.
func kindTable(kind byte) (tiers.Table, bool) {
	switch kind {
	case kindRaw:
		return tiers.TableRaw, true
	case kindLate:
		return tiers.TableLate, true
	case kindMinute:
		return tiers.TableMinute, true
	case kindHour:
		return tiers.TableHour, true
	case kindDay:
		return tiers.TableDay, true
	}
	return "", false
}

// rawKind reports whether rows of the kind hold a single value rather than
// aggregates, like the value column of the Cassandra raw tables.
func rawKind(kind byte) bool { return kind == kindRaw || kind == kindLate }

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

// checkPartition validates a partition key and returns its kind.
func checkPartition(k tiers.PartitionKey) (byte, error) {
	kind, ok := tableKind(k.Table)
	if !ok {
		return 0, fmt.Errorf("embedded: unknown table %q", k.Table)
	}
	if !validID(k.Series) {
		return 0, errBadID
	}
	if kind == kindRaw && (k.EventBucket < 0 || k.EventBucket > maxEventBucket) {
		return 0, fmt.Errorf("embedded: event bucket %d out of range", k.EventBucket)
	}
	return kind, nil
}

// appendPartition appends the key prefix shared by all rows of a partition:
// kind, series, NUL, bucket, event bucket. The caller has checked k.
//
// Only points_raw is split into event buckets; the other Cassandra tables
// have no event bucket in their partition key, so there it is always 0
// whatever the caller passed, and both stores find the same rows.
func appendPartition(b []byte, kind byte, k tiers.PartitionKey) []byte {
	b = append(b, kind)
	b = appendID(b, k.Series)
	b = appendTime(b, k.Bucket)
	eb := uint16(0)
	if kind == kindRaw {
		eb = uint16(k.EventBucket)
	}
	return binary.BigEndian.AppendUint16(b, eb)
}

// appendRowKey appends the key of the row at t in partition k.
func appendRowKey(b []byte, kind byte, k tiers.PartitionKey, t int64) []byte {
	return appendTime(appendPartition(b, kind, k), t)
}

// decodeRowKey is appendRowKey's inverse.
func decodeRowKey(key []byte) (k tiers.PartitionKey, t int64, ok bool) {
	if len(key) < 1 {
		return k, 0, false
	}
	table, ok := kindTable(key[0])
	if !ok {
		return k, 0, false
	}
	id, rest, ok := splitID(key[1:])
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

// rowValueLen is the size of a row's value in a table of the kind.
func rowValueLen(kind byte) int {
	if rawKind(kind) {
		return rawValueLen
	}
	return rollValueLen
}

// putRow encodes r with its expiry into v, which has rowValueLen(kind)
// bytes. Raw tables keep only the value, like their Cassandra counterparts,
// so a raw row always reads back as a point.
func putRow(v []byte, kind byte, r tiers.Row, exp int64) {
	putInt64(v, exp)
	if rawKind(kind) {
		putFloat(v[8:], r.Value())
		return
	}
	putFloat(v[8:], r.Min)
	putFloat(v[16:], r.Max)
	putFloat(v[24:], r.Sum)
	putInt64(v[32:], r.Count)
}

// getRow decodes the row at t from v; ok is false for a value of the wrong
// size.
func getRow(v []byte, raw bool, t int64) (tiers.Row, bool) {
	if raw {
		if len(v) != rawValueLen {
			return tiers.Row{}, false
		}
		return tiers.PointRow(t, getFloat(v[8:])), true
	}
	if len(v) != rollValueLen {
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

// Keys of the other record kinds.

func seriesKey(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)), kindSeries), id)
}

func layoutPrefix(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)+timeLen), kindLayout), id)
}

func lateMarkPrefix(id string) []byte {
	return appendID(append(make([]byte, 0, 2+len(id)+timeLen), kindLateMark), id)
}

func dirtyPrefix(slot int64) []byte {
	return appendTime(append(make([]byte, 0, 1+timeLen), kindDirty), slot)
}

var oldestKey = []byte{kindOldest}

func namedKey(kind byte, name string) []byte {
	return append(append(make([]byte, 0, 1+len(name)), kind), name...)
}

// formatKey holds the store's format version, checked at Open.
var formatKey = []byte{kindMeta, 'f', 'o', 'r', 'm', 'a', 't'}
