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

// sealedEqualsBruteForce writes random raw points to a few buckets (each
// point to the event bucket its time maps to, as the write path does),
// seals random buckets at random moments and writes more points after
// (new times and rewrites of sealed ones, as an import does), and checks
// after every step that reads of random partitions over random spans, in
// both orders and at random page sizes, equal brute force over what was
// written: sealing changes no answer, a row written after a seal wins over
// the sealed point of its time, and nothing comes back twice. Stale
// markers are among the values and must come back bit for bit.
func (s suite) sealedEqualsBruteForce(t *testing.T) {
	sealer, ok := s.store.(tiers.Sealer)
	if !ok {
		t.Skip("the store does not seal buckets")
	}
	r := rand.New(rand.NewPCG(29, 30))
	base := tiers.AlignDown(now(), tiers.Hour) - 3*tiers.Hour
	const retention, eventBuckets = 30 * tiers.Day, 4
	type bucket struct {
		series string
		start  int64
	}
	var buckets []bucket
	for i := range 2 {
		for b := range 2 {
			buckets = append(buckets, bucket{s.series(fmt.Sprintf("seal%d", i)), base + int64(b)*tiers.Hour})
		}
	}
	written := make([]map[int64]float64, len(buckets))
	for i := range written {
		written[i] = map[int64]float64{}
	}
	value := func() float64 {
		switch r.IntN(20) {
		case 0:
			return math.Float64frombits(tiers.StaleNaN)
		case 1:
			return math.Inf(-1)
		case 2:
			return r.NormFloat64() // full precision
		}
		return math.Round(r.NormFloat64()*1e6) / 1e3
	}
	writeSome := func(k int) {
		bk, m := buckets[k], written[k]
		rows := make([][]tiers.Row, eventBuckets)
		seen := map[int64]bool{}
		old := slices.Collect(maps.Keys(m))
		for range 1 + r.IntN(400) {
			var ts int64
			if len(old) > 0 && r.IntN(4) == 0 {
				ts = old[r.IntN(len(old))] // a rewrite
			} else if r.IntN(3) == 0 {
				ts = bk.start + r.Int64N(tiers.Hour)
			} else {
				ts = bk.start + r.Int64N(360)*10*tiers.Second // regular
			}
			if seen[ts] {
				continue
			}
			seen[ts] = true
			v := value()
			m[ts] = v
			eb := tiers.EventBucket(ts, eventBuckets)
			rows[eb] = append(rows[eb], tiers.PointRow(ts, v))
		}
		var writes []tiers.PartitionWrite
		for eb, rs := range rows {
			if len(rs) > 0 {
				writes = append(writes, tiers.PartitionWrite{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: bk.series, Bucket: bk.start, EventBucket: eb}, Retention: retention, Rows: rs})
			}
		}
		s.write(t, writes...)
	}
	check := func(step int) {
		k := r.IntN(len(buckets))
		bk := buckets[k]
		for range 4 {
			eb := r.IntN(eventBuckets)
			var all []tiers.Row
			for ts, v := range written[k] {
				if tiers.EventBucket(ts, eventBuckets) == eb {
					all = append(all, tiers.PointRow(ts, v))
				}
			}
			span := tiers.Span{From: bk.start, To: bk.start + tiers.Hour}
			if r.IntN(3) > 0 {
				x, y := bk.start-5+r.Int64N(tiers.Hour+10), bk.start-5+r.Int64N(tiers.Hour+10)
				span = tiers.Span{From: min(x, y), To: max(x, y) + 1}
			}
			desc := r.IntN(2) == 0
			pageSize := []int{1, 7, 100, 240, 5000}[r.IntN(5)]
			key := tiers.PartitionKey{Table: tiers.TableRaw, Series: bk.series, Bucket: bk.start, EventBucket: eb}
			got := s.read(t, tiers.ReadRequest{Key: key, Span: span, Desc: desc, PageSize: pageSize})
			want := bruteForce(all, span, desc)
			if !sameBits(got, want) {
				t.Fatalf("step %d, partition %+v, span %+v desc %v page %d: got %d points, want %d\n got %v\nwant %v",
					step, key, span, desc, pageSize, len(got), len(want), head(got), head(want))
			}
		}
	}
	seal := func(k int) tiers.SealReport {
		rep, err := sealer.SealBucket(ctx(t), buckets[k].series, buckets[k].start, eventBuckets, retention)
		if err != nil {
			t.Fatalf("seal %+v: %v", buckets[k], err)
		}
		return rep
	}
	sealSteps(t, r, 60, len(buckets), func(k int) int { return len(written[k]) }, writeSome, seal, check)
	// Every bucket sealed, then read.
	for k := range buckets {
		seal(k)
	}
	for range 10 {
		check(-1)
	}
}

// sealSteps takes steps at random over partitions 0 to n-1: writing some
// rows, or sealing and checking that the seal folded in every row written
// (held counts them) and that sealing again rewrites nothing; check runs
// after every step. Some rows must have been sealed.
func sealSteps(t *testing.T, r *rand.Rand, steps, n int, held func(k int) int, writeSome func(k int), seal func(k int) tiers.SealReport, check func(step int)) {
	t.Helper()
	sealedRows := 0
	for step := range steps {
		k := r.IntN(n)
		switch r.IntN(3) {
		case 0:
			writeSome(k)
		case 1:
			rep := seal(k)
			if rep.Points != held(k) {
				t.Fatalf("seal of partition %d: %d rows sealed, %d written", k, rep.Points, held(k))
			}
			sealedRows += rep.Rows
			if again := seal(k); again.Rows != 0 || again.Points != rep.Points {
				t.Fatalf("sealing partition %d again: %+v after %+v", k, again, rep)
			}
		}
		check(step)
	}
	if sealedRows == 0 {
		t.Fatal("nothing was ever sealed")
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

// sealedRollupsEqualBruteForce writes rollup rows with extras of every
// kind of data, and some without, to a few partitions of every rollup
// table, seals random partitions at random moments and writes more rows
// after (new windows and rewrites of sealed ones, as corrections and
// imports do), and checks after every step that reads of random spans, in
// both orders, at random page sizes, with and without extras, equal brute
// force over what was written: sealing changes no answer, a row written
// after a seal wins over the sealed row of its time, extras come back as
// they went in.
func (s suite) sealedRollupsEqualBruteForce(t *testing.T) {
	sealer, ok := s.store.(tiers.Sealer)
	if !ok {
		t.Skip("the store does not seal partitions")
	}
	r := rand.New(rand.NewPCG(31, 32))
	kinds := slices.Sorted(maps.Keys(ExtrasData))
	type partition struct {
		key  tiers.PartitionKey
		tier *tiers.Tier
	}
	var parts []partition
	for _, l := range s.pyramid.Rollups() {
		tier := s.pyramid.Tier(l)
		bucket := tiers.AlignDown(now()-tiers.Hour, tier.BucketWidth)
		for i := range 2 {
			parts = append(parts, partition{tiers.PartitionKey{Table: tier.Table, Series: s.series(fmt.Sprintf("sealroll%d.%s", i, tier.Name)), Bucket: bucket}, tier})
		}
	}
	written := make([]map[int64]tiers.Row, len(parts))
	for i := range written {
		written[i] = map[int64]tiers.Row{}
	}
	windows := func(p partition) int64 { return min(200, p.tier.BucketWidth/p.tier.Step) }
	writeSome := func(k int) {
		p := parts[k]
		n := windows(p)
		start := r.Int64N(n)
		count := 1 + r.Int64N(min(60, n-start))
		rows := rowsWithExtras(r, kinds[r.IntN(len(kinds))], p.key.Bucket+start*p.tier.Step, p.tier.Step, int(count))
		for i := range rows {
			_, rewrite := written[k][rows[i].T]
			switch {
			case r.IntN(8) == 0 && !rewrite:
				// Written before rollups kept extras; only ever a new
				// window, since Cassandra leaves the extras cell of a row
				// rewritten without them as it was.
				rows[i].X = nil
			default:
				rows[i].X = rows[i].X.Compact(rows[i])
			}
			if r.IntN(3) == 0 {
				rows[i].Sum += 0.1 + 0.2 // a sum with bits of its own
			}
			written[k][rows[i].T] = rows[i]
		}
		s.write(t, tiers.PartitionWrite{Key: p.key, Retention: p.tier.Retention, Rows: rows})
	}
	check := func(step int) {
		k := r.IntN(len(parts))
		p := parts[k]
		var all []tiers.Row
		for _, row := range written[k] {
			all = append(all, row)
		}
		slices.SortFunc(all, func(a, b tiers.Row) int { return int(a.T - b.T) })
		width := windows(p) * p.tier.Step
		for range 3 {
			span := tiers.Span{From: p.key.Bucket, To: p.key.Bucket + p.tier.BucketWidth}
			if r.IntN(3) > 0 {
				x, y := p.key.Bucket-5+r.Int64N(width+10), p.key.Bucket-5+r.Int64N(width+10)
				span = tiers.Span{From: min(x, y), To: max(x, y) + 1}
			}
			desc, extras := r.IntN(2) == 0, r.IntN(2) == 0
			pageSize := []int{1, 7, 100, 5000}[r.IntN(4)]
			got := s.read(t, tiers.ReadRequest{Key: p.key, Span: span, Desc: desc, PageSize: pageSize, Extras: extras})
			want := bruteForce(all, span, desc)
			if len(got) != len(want) {
				t.Fatalf("step %d, %+v, span %+v desc %v page %d extras %v: %d rows, want %d", step, p.key, span, desc, pageSize, extras, len(got), len(want))
			}
			for i, w := range want {
				if !extras {
					w.X = nil
				} else if w.X == nil {
					w.X = &tiers.Extras{} // read back as extras that know nothing
				}
				if !sameExtras(got[i], w) || math.Float64bits(got[i].Sum) != math.Float64bits(w.Sum) || (extras && !tiers.SameRow(got[i], w)) {
					t.Fatalf("step %d, %+v, span %+v desc %v page %d extras %v: row %d is %+v %+v, want %+v %+v",
						step, p.key, span, desc, pageSize, extras, i, got[i], got[i].X, w, w.X)
				}
			}
		}
	}
	seal := func(k int) tiers.SealReport {
		rep, err := sealer.SealRollup(ctx(t), parts[k].key, parts[k].tier.Retention)
		if err != nil {
			t.Fatalf("seal %+v: %v", parts[k].key, err)
		}
		return rep
	}
	for k := range parts {
		writeSome(k)
	}
	sealSteps(t, r, 50, len(parts), func(k int) int { return len(written[k]) }, writeSome, seal, check)
	for k := range parts {
		seal(k)
	}
	for range 10 {
		check(-1)
	}
	if _, err := sealer.SealRollup(ctx(t), tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("x"), Bucket: 0}, 0); err == nil {
		t.Fatal("a raw partition was sealed as a rollup partition")
	}
}

// The reads of one series' rollup partitions made under one batch
// (ReadRequest.Batch), which a store may answer with one query, each
// return what they return alone: whatever each partition holds (nothing,
// rows, chunks, chunks and rows written after the seal), whichever of
// them are read, at random spans, orders, page sizes and with or without
// extras; with the batch listing partitions that are not read, reads of
// partitions it does not list, and a partition read twice under it.
func (s suite) rollupPartitionsReadInBatch(t *testing.T) {
	sealer, ok := s.store.(tiers.Sealer)
	if !ok {
		t.Skip("the store does not seal partitions")
	}
	r := rand.New(rand.NewPCG(41, 42))
	kinds := slices.Sorted(maps.Keys(ExtrasData))
	for _, l := range s.pyramid.Rollups() {
		tier := s.pyramid.Tier(l)
		n := 6
		if tier.Retention > 0 {
			n = min(n, int(tier.Retention/2/tier.BucketWidth))
		}
		if n < 2 {
			continue
		}
		windows := min(200, tier.BucketWidth/tier.Step)
		last := tiers.AlignDown(now(), tier.BucketWidth) - tier.BucketWidth
		for round := range 3 {
			series := s.series(fmt.Sprintf("batch%d.%s", round, tier.Name))
			keys := make([]tiers.PartitionKey, n)
			written := make([][]tiers.Row, n)
			for i := range keys {
				keys[i] = tiers.PartitionKey{Table: tier.Table, Series: series, Bucket: last - int64(n-1-i)*tier.BucketWidth}
				held := map[int64]tiers.Row{}
				write := func() {
					start := r.Int64N(windows)
					rows := rowsWithExtras(r, kinds[r.IntN(len(kinds))], keys[i].Bucket+start*tier.Step, tier.Step, int(1+r.Int64N(min(60, windows-start))))
					for j := range rows {
						rows[j].X = rows[j].X.Compact(rows[j])
						held[rows[j].T] = rows[j]
					}
					s.write(t, tiers.PartitionWrite{Key: keys[i], Retention: tier.Retention, Rows: rows})
				}
				seal := func() {
					if _, err := sealer.SealRollup(ctx(t), keys[i], tier.Retention); err != nil {
						t.Fatalf("seal %+v: %v", keys[i], err)
					}
				}
				switch r.IntN(4) {
				case 1:
					write()
				case 2:
					write()
					seal()
				case 3:
					write()
					seal()
					write() // a correction after the seal: a mark on Cassandra
				}
				for _, ts := range slices.Sorted(maps.Keys(held)) {
					written[i] = append(written[i], held[ts])
				}
			}
			for range 6 {
				batch := &tiers.PartitionBatch{}
				for _, k := range keys {
					if r.IntN(5) != 0 {
						batch.Buckets = append(batch.Buckets, k.Bucket)
					}
				}
				reads := someOf(r, len(keys))
				reqs := make([]tiers.ReadRequest, len(reads))
				for j, i := range reads {
					span := tiers.Span{From: keys[i].Bucket, To: keys[i].Bucket + tier.BucketWidth}
					if r.IntN(2) == 0 {
						x, y := keys[i].Bucket-5+r.Int64N(windows*tier.Step+10), keys[i].Bucket-5+r.Int64N(windows*tier.Step+10)
						span = tiers.Span{From: min(x, y), To: max(x, y) + 1}
					}
					reqs[j] = tiers.ReadRequest{Key: keys[i], Span: span, Desc: r.IntN(2) == 0, PageSize: []int{1, 7, 100, 5000}[r.IntN(4)],
						Extras: r.IntN(2) == 0, End: keys[i].Bucket + tier.BucketWidth, Batch: batch}
				}
				got, errs := s.readAtOnce(t, reqs)
				for j, i := range reads {
					req := reqs[j]
					if errs[j] != nil {
						t.Fatalf("%+v in a batch of %v: %v", req.Key, batch.Buckets, errs[j])
					}
					want := bruteForce(written[i], req.Span, req.Desc)
					same := len(got[j]) == len(want)
					for k := 0; same && k < len(want); k++ {
						w := want[k]
						if !req.Extras {
							w.X = nil
						}
						same = tiers.SameRow(got[j][k], w)
					}
					if !same {
						t.Fatalf("%+v (holding %d rows) in a batch of %v, span %+v desc %v page %d extras %v: got %d rows, want %d\n got %v\nwant %v",
							req.Key, len(written[i]), batch.Buckets, req.Span, req.Desc, req.PageSize, req.Extras, len(got[j]), len(want), head(got[j]), head(want))
					}
				}
			}
		}
	}
}
