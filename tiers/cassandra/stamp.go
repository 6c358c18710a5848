package cassandra

import (
	"math"

	"github.com/tsgate/tsgate/tiers"
)

const maxInt64 = math.MaxInt64

// Cells that must keep the largest or the smallest value ever written to
// them, without reading first, carry a write timestamp derived from the
// value: Cassandra keeps the cell with the largest write timestamp, so a
// timestamp that grows with the value keeps the maximum and one that shrinks
// with it keeps the minimum, whatever order the writes arrive in.
//
// Write timestamps are int64 microseconds; both mappings below stay in
// [1, MaxInt64-1] for every time in [tiers.MinTime, tiers.MaxTime), so they
// never overflow and never meet the values Cassandra reserves (negative
// ones, MinInt64 for "no timestamp"). Times outside that range are clamped
// into it; the gateway never produces them.

// clampTime clamps t into [MinTime, MaxTime).
func clampTime(t int64) int64 { return min(max(t, tiers.MinTime), tiers.MaxTime-1) }

// maxWinsStamp is a write timestamp that grows strictly with t: t in
// microseconds, shifted so that MinTime maps to 1. Its largest value,
// about 3.2e17, is far below MaxInt64.
func maxWinsStamp(t int64) int64 {
	return (clampTime(t)-tiers.MinTime)*1000 + 1
}

// minWinsStamp is a write timestamp that shrinks strictly as t grows:
// MaxInt64 minus maxWinsStamp, so it lies in [MaxInt64-3.2e17, MaxInt64-1].
func minWinsStamp(t int64) int64 {
	return maxInt64 - maxWinsStamp(t)
}

// rowTTL returns the TTL, in whole seconds rounded up, that makes a row at
// t expire at t+retention as seen at now, and false when it has expired
// already. Retention 0 keeps the row forever (TTL 0 also overrides the
// table's default TTL). TTLs beyond Cassandra's limit are capped to it.
func rowTTL(t, retention, now int64) (int, bool) {
	if retention == 0 {
		return 0, true
	}
	// t+retention-now, saturated: t and retention come from callers.
	left := satSub(satAdd(t, retention), now)
	if left <= 0 {
		return 0, false
	}
	return int(min(left/1000+btoi(left%1000 != 0), maxTTLSeconds)), true
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > maxInt64-b {
		return maxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return maxInt64
		}
		return a - b
	}
	return satAdd(a, -b)
}

// The registry and the rollup log spread their entries over a fixed number
// of partitions by a hash of the series id. Both counts and the hash are
// part of the on-disk format: changing any of them strands every stored
// entry in a partition nobody reads. TestShardsAreStable pins them.
const (
	seriesShards = 16
	dirtyShards  = 4
)

// fnv1a is the 32-bit FNV-1a hash of s.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func seriesShard(id string) int    { return int(fnv1a(id) % seriesShards) }
func dirtyShard(series string) int { return int(fnv1a(series) % dirtyShards) }
