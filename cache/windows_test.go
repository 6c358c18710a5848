package cache

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// truth is the windows of one series at step 10: a window has a row when
// its start hashes odd, so that gaps without rows are part of every span.
func truth(from, to int64) []tiers.Row {
	var rows []tiers.Row
	for t := from; t < to; t += 10 {
		if (t/10*2654435761)%3 != 0 {
			rows = append(rows, tiers.Row{T: t, Min: float64(t), Max: float64(t), Sum: float64(t), Count: 1})
		}
	}
	return rows
}

// Whatever spans were put, in whatever order, a Get answers exactly the
// windows of the brute-force truth from its instant to its entry's end,
// and only for instants an entry holds.
func TestWindowsAnswerWhatWasPut(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := NewWindows(1 << 20)
		k := WindowKey{Series: "s", Level: 1, Step: 10}
		var held tiers.Span // the span the entry must hold, by the rules of Put
		for range 12 {
			from := int64(rng.IntN(50)) * 10
			span := tiers.Span{From: from, To: from + int64(1+rng.IntN(20))*10}
			w.Put(k, span, truth(span.From, span.To))
			if !held.Empty() && held.From <= span.To && span.From <= held.To {
				held = tiers.Span{From: min(held.From, span.From), To: max(held.To, span.To)}
			} else {
				held = span
			}
			for at := int64(-10); at <= 720; at += 10 {
				got, rows, ok := w.Get(k, at)
				if want := at >= held.From && at < held.To; ok != want {
					t.Fatalf("seed %d: Get(%d) found %v, held %v", seed, at, ok, held)
				}
				if !ok {
					continue
				}
				if got != (tiers.Span{From: at, To: held.To}) {
					t.Fatalf("seed %d: Get(%d) span %v, held %v", seed, at, got, held)
				}
				if want := truth(at, held.To); !slices.Equal(rows, want) {
					t.Fatalf("seed %d: Get(%d) rows %v, want %v", seed, at, rows, want)
				}
			}
		}
	}
}

// The cache keeps to its bytes: old entries leave first, and an entry
// larger than an eighth of the bound is not kept at all.
func TestWindowsStayWithinBytes(t *testing.T) {
	w := NewWindows(64 << 10)
	for i := range 500 {
		k := WindowKey{Series: string(rune('a' + i%26)), Generation: int64(i), Step: 10}
		w.Put(k, tiers.Span{From: 0, To: 1000}, truth(0, 1000))
		if b := w.Bytes(); b > 64<<10 {
			t.Fatalf("after %d puts the cache holds %d bytes, bound %d", i+1, b, 64<<10)
		}
	}
	last := WindowKey{Series: string(rune('a' + 499%26)), Generation: 499, Step: 10}
	if _, _, ok := w.Get(last, 0); !ok {
		t.Fatal("the most recent entry was evicted")
	}
	if _, _, ok := w.Get(WindowKey{Series: "a", Step: 10}, 0); ok {
		t.Fatal("the oldest entry survived 500 puts into 64 KiB")
	}
	huge := WindowKey{Series: "huge", Step: 10}
	w.Put(huge, tiers.Span{From: 0, To: 1 << 20}, truth(0, 1<<20))
	if _, _, ok := w.Get(huge, 0); ok {
		t.Fatal("an entry over an eighth of the bound was kept")
	}
	if hits, misses, _ := w.Stats(); hits != 1 || misses != 2 {
		t.Fatalf("stats: %d hits %d misses, want 1 and 2", hits, misses)
	}
}
