package merge

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

type elem struct {
	key   int64
	input int // which stream produced it
	seq   int // position within that stream, to check stability
}

func ascLess(a, b elem) bool  { return a.key < b.key }
func descLess(a, b elem) bool { return a.key > b.key }

// randomStreams returns k ordered streams whose keys collide across streams.
func randomStreams(r *rand.Rand, k int, desc, strict bool) [][]elem {
	streams := make([][]elem, k)
	for i := range streams {
		n := r.IntN(60)
		keys := make([]int64, n)
		for j := range keys {
			keys[j] = r.Int64N(100)
		}
		slices.Sort(keys)
		if strict {
			keys = slices.Compact(keys)
		}
		if desc {
			slices.Reverse(keys)
		}
		for j, key := range keys {
			streams[i] = append(streams[i], elem{key: key, input: i, seq: j})
		}
	}
	return streams
}

func iters(streams [][]elem) []Iterator[elem] {
	out := make([]Iterator[elem], len(streams))
	for i, s := range streams {
		out[i] = FromSlice(s)
	}
	return out
}

// The merge of random ordered streams equals their concatenation sorted
// stably by key (ties in input order), in both orders.
func TestMergeEqualsSortedConcatenation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 3000 {
		desc := iter%2 == 1
		less := ascLess
		if desc {
			less = descLess
		}
		streams := randomStreams(r, r.IntN(12), desc, false)
		want := slices.Concat(streams...)
		slices.SortStableFunc(want, func(a, b elem) int {
			if c := cmp.Compare(a.key, b.key); c != 0 {
				if desc {
					return -c
				}
				return c
			}
			return cmp.Compare(a.input, b.input)
		})
		got, err := Collect(Iter(less, iters(streams)))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("desc=%v streams %v:\n got %v\nwant %v", desc, streams, got, want)
		}
	}
}

// With Dedup, each key comes out once, from the highest-indexed input that
// holds it.
func TestMergeDedupKeepsLastInput(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 3000 {
		desc := iter%2 == 1
		less := ascLess
		if desc {
			less = descLess
		}
		streams := randomStreams(r, 1+r.IntN(8), desc, true)
		winner := map[int64]elem{}
		for _, s := range streams {
			for _, e := range s {
				winner[e.key] = e // later inputs overwrite earlier ones
			}
		}
		want := make([]elem, 0, len(winner))
		for _, e := range winner {
			want = append(want, e)
		}
		slices.SortFunc(want, func(a, b elem) int {
			if desc {
				return cmp.Compare(b.key, a.key)
			}
			return cmp.Compare(a.key, b.key)
		})
		got, err := Collect(New(less, iters(streams), Dedup()))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("desc=%v streams %v:\n got %v\nwant %v", desc, streams, got, want)
		}
	}
}

// When an input fails, the merge stops with its error, and what it emitted
// is a prefix of the full merge that holds everything ordered before the
// failed input's last good element.
func TestMergeStopsAtFailedInputWithPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	boom := errors.New("partition read failed")
	for range 2000 {
		streams := randomStreams(r, 1+r.IntN(8), false, false)
		full, _ := Collect(Iter(ascLess, iters(streams)))
		failing := r.IntN(len(streams))
		cut := r.IntN(len(streams[failing]) + 1)
		in := iters(streams)
		in[failing] = FromSliceErr(streams[failing][:cut], boom)
		got, err := Collect(New(ascLess, in))
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the input's error", err)
		}
		if len(got) > len(full) || !slices.Equal(got, full[:len(got)]) {
			t.Fatalf("output is not a prefix of the full merge:\n got %v\nfull %v", got, full)
		}
		if cut > 0 {
			last := streams[failing][cut-1]
			for _, e := range full {
				if e.key < last.key && !slices.Contains(got, e) {
					t.Fatalf("element %v ordered before the failed input's last element %v is missing", e, last)
				}
			}
		}
	}
}

func TestMergeNoInputs(t *testing.T) {
	m := New(ascLess, nil)
	if m.Next() || m.Err() != nil {
		t.Fatal("merge of nothing produced something")
	}
}

func BenchmarkMerge(b *testing.B) {
	const total = 1 << 16
	for _, k := range []int{1, 4, 16, 64, 256} {
		streams := make([][]int64, k)
		for i := range total {
			streams[i%k] = append(streams[i%k], int64(i))
		}
		b.Run(fmt.Sprintf("inputs=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			less := func(a, b int64) bool { return a < b }
			for b.Loop() {
				in := make([]Iterator[int64], k)
				for i, s := range streams {
					in[i] = FromSlice(s)
				}
				it := Iter(less, in)
				n := 0
				for it.Next() {
					n++
				}
				if n != total {
					b.Fatalf("merged %d of %d", n, total)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/elem")
		})
	}
}

// The linear scan for a few inputs and the heap give the same elements and
// the same errors, with and without deduplication, in both orders, when
// inputs fail part way.
func TestLinearEqualsHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	boom := errors.New("partition read failed")
	for iter := range 4000 {
		desc := iter%2 == 1
		less := ascLess
		if desc {
			less = descLess
		}
		dedup := iter%4 >= 2
		streams := randomStreams(r, r.IntN(linearMax+1), desc, dedup)
		mk := func() []Iterator[elem] {
			in := iters(streams)
			if len(streams) > 0 && iter%3 == 0 {
				k := (iter / 3) % len(streams)
				in[k] = FromSliceErr(streams[k][:len(streams[k])/2], boom)
			}
			return in
		}
		var opts []Option
		if dedup {
			opts = append(opts, Dedup())
		}
		want, werr := Collect(Iterator[elem](New(less, mk(), opts...)))
		got, gerr := Collect(Iterator[elem](newLinear(less, mk(), dedup)))
		full, _ := Collect(Iterator[elem](New(less, iters(streams), opts...)))
		// With a failed input, the heap may stop one element earlier: it
		// advances the losers of a tie before emitting the winner, the
		// scan after. Both are prefixes of the whole merge.
		ok := slices.Equal(got, want)
		if werr != nil {
			ok = len(got) >= len(want) && len(got) <= len(want)+1 && slices.Equal(got[:len(want)], want) && slices.Equal(got, full[:len(got)])
		}
		if !ok || (werr == nil) != (gerr == nil) {
			t.Fatalf("iteration %d (dedup %v, desc %v, %d inputs): linear %v (%v), heap %v (%v)", iter, dedup, desc, len(streams), got, gerr, want, werr)
		}
	}
}

// BenchmarkMergeBucket merges the 4 event-bucket partitions of an hour
// bucket of 1 Hz points, with deduplication, by heap and by linear scan.
func BenchmarkMergeBucket(b *testing.B) {
	streams := make([][]elem, 4)
	for t := range int64(3600) {
		i := int(t*2654435761>>7) % 4
		streams[i] = append(streams[i], elem{key: t, input: i})
	}
	for _, c := range []struct {
		name string
		mk   func([]Iterator[elem]) Iterator[elem]
	}{
		{"heap", func(in []Iterator[elem]) Iterator[elem] { return New(ascLess, in, Dedup()) }},
		{"linear", func(in []Iterator[elem]) Iterator[elem] { return newLinear(ascLess, in, true) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				it := c.mk(iters(streams))
				for it.Next() {
				}
			}
		})
	}
}
