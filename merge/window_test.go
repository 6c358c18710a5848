package merge

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

type sumCount struct {
	sum   int64
	count int
}

func TestWindowerMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for iter := range 2000 {
		desc := iter%2 == 1
		step := []int64{1, 7, 60, 1000}[r.IntN(4)]
		keys := make([]int64, r.IntN(200))
		for i := range keys {
			keys[i] = r.Int64N(5000) - 2500
		}
		slices.Sort(keys)
		if desc {
			slices.Reverse(keys)
		}
		// Brute force: group by floor(key/step), in stream order.
		var want []Window[sumCount]
		for _, k := range keys {
			start := k - ((k%step)+step)%step
			if n := len(want); n > 0 && want[n-1].Start == start {
				want[n-1].Acc.sum += k
				want[n-1].Acc.count++
				continue
			}
			want = append(want, Window[sumCount]{Start: start, Acc: sumCount{k, 1}})
		}
		w := NewWindower(FromSlice(keys), step, func(k int64) int64 { return k },
			func(acc *sumCount, k int64) { acc.sum += k; acc.count++ })
		got, err := Collect(w)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d desc %v keys %v:\n got %v\nwant %v", step, desc, keys, got, want)
		}
	}
}

// A failing input never yields the window it was filling.
func TestWindowerDropsIncompleteWindowOnError(t *testing.T) {
	boom := errors.New("budget exhausted")
	keys := []int64{0, 5, 10, 12, 19}
	w := NewWindower(FromSliceErr(keys, boom), 10, func(k int64) int64 { return k },
		func(acc *int, _ int64) { *acc++ })
	got, err := Collect(w)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	want := []Window[int]{{Start: 0, Acc: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want only the window closed before the failure %v", got, want)
	}
	// Every row of window 10 arrived, but the input failed before saying it
	// had no more: the window is dropped and named as the place to resume.
	if start, ok := w.Dropped(); !ok || start != 10 {
		t.Fatalf("Dropped() = %d, %v; want 10", start, ok)
	}
}
