package storetest

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// sealedEqualsBruteForce writes random raw points to a few partitions,
// seals random partitions at random moments and writes more points after
// (new times and rewrites of sealed ones, as an import does), and checks
// after every step that reads of random spans, in both orders and at
// random page sizes, equal brute force over what was written: sealing
// changes no answer, a row written after a seal wins over the sealed
// point of its time, and nothing comes back twice. Stale markers are among
// the values and must come back bit for bit.
func (s suite) sealedEqualsBruteForce(t *testing.T) {
	sealer, ok := s.store.(tiers.Sealer)
	if !ok {
		t.Skip("the store does not seal partitions")
	}
	r := rand.New(rand.NewPCG(29, 30))
	base := tiers.AlignDown(now(), tiers.Hour) - 3*tiers.Hour
	const retention = 30 * tiers.Day
	var keys []tiers.PartitionKey
	for i := range 2 {
		for b := range 2 {
			for _, eb := range []int{0, 3} {
				keys = append(keys, tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series(fmt.Sprintf("seal%d", i)), Bucket: base + int64(b)*tiers.Hour, EventBucket: eb})
			}
		}
	}
	written := make([]map[int64]float64, len(keys))
	for i := range written {
		written[i] = map[int64]float64{}
	}
	value := func() float64 {
		switch r.IntN(20) {
		case 0:
			return math.Float64frombits(tiers.StaleNaN)
		case 1:
			return math.Inf(-1)
		}
		return math.Round(r.NormFloat64()*1e6) / 1e3
	}
	writeSome := func(k int) {
		m := written[k]
		var rows []tiers.Row
		seen := map[int64]bool{}
		old := slices.Collect(maps.Keys(m))
		for range 1 + r.IntN(400) {
			var ts int64
			if len(old) > 0 && r.IntN(4) == 0 {
				ts = old[r.IntN(len(old))] // a rewrite
			} else if r.IntN(3) == 0 {
				ts = keys[k].Bucket + r.Int64N(tiers.Hour)
			} else {
				ts = keys[k].Bucket + r.Int64N(360)*10*tiers.Second // regular
			}
			if seen[ts] {
				continue
			}
			seen[ts] = true
			v := value()
			m[ts] = v
			rows = append(rows, tiers.PointRow(ts, v))
		}
		s.write(t, tiers.PartitionWrite{Key: keys[k], Retention: retention, Rows: rows})
	}
	check := func(step int) {
		k := r.IntN(len(keys))
		var all []tiers.Row
		for ts, v := range written[k] {
			all = append(all, tiers.PointRow(ts, v))
		}
		b := keys[k].Bucket
		for range 4 {
			span := tiers.Span{From: b, To: b + tiers.Hour}
			if r.IntN(3) > 0 {
				x, y := b-5+r.Int64N(tiers.Hour+10), b-5+r.Int64N(tiers.Hour+10)
				span = tiers.Span{From: min(x, y), To: max(x, y) + 1}
			}
			desc := r.IntN(2) == 0
			pageSize := []int{1, 7, 100, 240, 5000}[r.IntN(5)]
			got := s.read(t, tiers.ReadRequest{Key: keys[k], Span: span, Desc: desc, PageSize: pageSize})
			want := bruteForce(all, span, desc)
			if !sameBits(got, want) {
				t.Fatalf("step %d, partition %+v, span %+v desc %v page %d: got %d points, want %d\n got %v\nwant %v",
					step, keys[k], span, desc, pageSize, len(got), len(want), head(got), head(want))
			}
		}
	}
	sealedPoints := 0
	for step := range 60 {
		k := r.IntN(len(keys))
		switch r.IntN(3) {
		case 0:
			writeSome(k)
		case 1:
			rep, err := sealer.SealPartition(ctx(t), keys[k], retention)
			if err != nil {
				t.Fatalf("seal %+v: %v", keys[k], err)
			}
			if rep.Points != len(written[k]) {
				t.Fatalf("seal %+v: %d points sealed, %d written", keys[k], rep.Points, len(written[k]))
			}
			sealedPoints += rep.Rows
			// Sealing again rewrites nothing.
			again, err := sealer.SealPartition(ctx(t), keys[k], retention)
			if err != nil {
				t.Fatalf("seal %+v again: %v", keys[k], err)
			}
			if again.Rows != 0 || again.Points != rep.Points {
				t.Fatalf("sealing %+v again: %+v after %+v", keys[k], again, rep)
			}
		}
		check(step)
	}
	if sealedPoints == 0 {
		t.Fatal("no point was ever sealed")
	}
	// Every partition sealed, then read whole.
	for k := range keys {
		if _, err := sealer.SealPartition(ctx(t), keys[k], retention); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		check(-1)
	}
}

// sameBits compares rows bit for bit, so that NaN values (stale markers)
// compare equal to themselves.
func sameBits(a, b []tiers.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.T != y.T || x.Count != y.Count ||
			math.Float64bits(x.Min) != math.Float64bits(y.Min) ||
			math.Float64bits(x.Max) != math.Float64bits(y.Max) ||
			math.Float64bits(x.Sum) != math.Float64bits(y.Sum) {
			return false
		}
	}
	return true
}
