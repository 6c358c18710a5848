package cassandra

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// randomTime draws from the whole time range, with a bias towards its
// edges and towards the epoch, where off-by-one and sign errors live.
func randomTime(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return tiers.MinTime + r.Int64N(1000)
	case 1:
		return tiers.MaxTime - 1 - r.Int64N(1000)
	case 2:
		return r.Int64N(2000) - 1000
	}
	return tiers.MinTime + r.Int64N(tiers.MaxTime-tiers.MinTime)
}

func TestStampsPreserveOrderWithoutOverflow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	inRange := func(name string, ts int64) {
		t.Helper()
		if ts < 1 || ts > math.MaxInt64-1 {
			t.Fatalf("%s = %d, outside [1, MaxInt64-1]", name, ts)
		}
	}
	for range 200000 {
		a, b := randomTime(r), randomTime(r)
		if r.IntN(10) == 0 {
			b = a + 1 // neighbours must still be told apart
		}
		if a > b {
			a, b = b, a
		}
		if b >= tiers.MaxTime {
			continue
		}
		inRange("maxWinsStamp", maxWinsStamp(a))
		inRange("minWinsStamp", minWinsStamp(a))
		if a < b && !(maxWinsStamp(a) < maxWinsStamp(b)) {
			t.Fatalf("maxWinsStamp(%d) = %d is not below maxWinsStamp(%d) = %d", a, maxWinsStamp(a), b, maxWinsStamp(b))
		}
		if a < b && !(minWinsStamp(a) > minWinsStamp(b)) {
			t.Fatalf("minWinsStamp(%d) = %d is not above minWinsStamp(%d) = %d", a, minWinsStamp(a), b, minWinsStamp(b))
		}
	}
	// Values outside the time range clamp: order is kept weakly and the
	// stamps stay in range.
	for _, v := range []int64{math.MinInt64, math.MinInt64 + 1, tiers.MinTime - 1, tiers.MaxTime, math.MaxInt64 - 1, math.MaxInt64} {
		inRange("maxWinsStamp", maxWinsStamp(v))
		inRange("minWinsStamp", minWinsStamp(v))
	}
	if maxWinsStamp(math.MinInt64) != maxWinsStamp(tiers.MinTime) || maxWinsStamp(math.MaxInt64) != maxWinsStamp(tiers.MaxTime-1) {
		t.Fatal("out-of-range values do not clamp to the range's ends")
	}
	if got := maxWinsStamp(tiers.MinTime); got != 1 {
		t.Fatalf("maxWinsStamp(MinTime) = %d, want 1", got)
	}
	if got := minWinsStamp(tiers.MinTime); got != math.MaxInt64-1 {
		t.Fatalf("minWinsStamp(MinTime) = %d, want MaxInt64-1", got)
	}
}

func TestRowTTL(t *testing.T) {
	const now = int64(1_700_000_000_000)
	cases := []struct {
		name         string
		t, retention int64
		ttl          int
		ok           bool
	}{
		{"forever", now - 100*tiers.Day, 0, 0, true},
		{"a whole second left", now, 1000, 1, true},
		{"rounds up", now, 1001, 2, true},
		{"one millisecond left", now - tiers.Day + 1, tiers.Day, 1, true},
		{"expires now", now - tiers.Day, tiers.Day, 0, false},
		{"expired", now - 2*tiers.Day, tiers.Day, 0, false},
		{"future point", now + tiers.Hour, tiers.Day, 25 * 3600, true},
		{"capped at Cassandra's limit", now, 30 * 365 * tiers.Day, maxTTLSeconds, true},
		{"no overflow", math.MaxInt64 - 5, math.MaxInt64, maxTTLSeconds, true},
		{"no underflow", math.MinInt64, 1, 0, false},
	}
	for _, c := range cases {
		ttl, ok := rowTTL(c.t, c.retention, now)
		if ttl != c.ttl || ok != c.ok {
			t.Errorf("%s: rowTTL(%d, %d) = %d, %v; want %d, %v", c.name, c.t, c.retention, ttl, ok, c.ttl, c.ok)
		}
	}
}

// TestShardsAreStable pins the hash and the shard counts: they decide in
// which partition stored registry, rollup-log and label index entries
// live. Postings and values are split 16 ways like the registry, names 4
// ways like the rollup log, so the same columns pin them.
func TestShardsAreStable(t *testing.T) {
	cases := []struct {
		id            string
		hash          uint32
		series, dirty int
	}{
		{"", 2166136261, 5, 1},
		{"a", 3826002220, 12, 0},
		{"cpu.user", 3302154770, 2, 2},
		{"demo.temperature.office", 1836170484, 4, 0},
		{"demo.power.meter1", 427089137, 1, 1},
	}
	for _, c := range cases {
		if got := fnv1a(c.id); got != c.hash {
			t.Errorf("fnv1a(%q) = %d, want %d", c.id, got, c.hash)
		}
		if got := seriesShard(c.id); got != c.series {
			t.Errorf("seriesShard(%q) = %d, want %d", c.id, got, c.series)
		}
		if got := dirtyShard(c.id); got != c.dirty {
			t.Errorf("dirtyShard(%q) = %d, want %d", c.id, got, c.dirty)
		}
		if got := postingShard(c.id); got != c.series {
			t.Errorf("postingShard(%q) = %d, want %d", c.id, got, c.series)
		}
		if got := valueShard(c.id); got != c.series {
			t.Errorf("valueShard(%q) = %d, want %d", c.id, got, c.series)
		}
		if got := nameShard(c.id); got != c.dirty {
			t.Errorf("nameShard(%q) = %d, want %d", c.id, got, c.dirty)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		h := fnv.New32a()
		h.Write(b)
		if got, want := fnv1a(string(b)), h.Sum32(); got != want {
			t.Fatalf("fnv1a(%x) = %d, hash/fnv says %d", b, got, want)
		}
	}
}
