package membudget

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Whatever many requests grow and release at once, what is reserved never
// passes the budget, every account covers what it counted, and everything
// comes back.
func TestReservationsNeverPassTheBudget(t *testing.T) {
	const total = 16 * Chunk
	b := New(total, 20*time.Millisecond)
	var peak atomic.Int64
	b.Observe(func(n int64) {
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n > total || n < 0 {
			t.Errorf("reserved %d of %d", n, total)
		}
	})
	var wg sync.WaitGroup
	var granted, refused atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 50 {
				a := b.Account()
				m := a.Meter()
				size := 0
				for range 1 + r.IntN(8) {
					size += r.IntN(3 * Chunk)
					if err := m.Track(context.Background(), size); err != nil {
						if !errors.Is(err, ErrExhausted) {
							t.Error(err)
						}
						refused.Add(1)
						break
					}
					if a.Held() < int64(size) {
						t.Errorf("an account holds %d for a buffer of %d", a.Held(), size)
					}
					granted.Add(1)
				}
				a.Release()
			}
		})
	}
	wg.Wait()
	if b.Reserved() != 0 {
		t.Fatalf("%d bytes still reserved after every account was released", b.Reserved())
	}
	if granted.Load() == 0 || refused.Load() == 0 || peak.Load() < total/2 {
		t.Fatalf("granted %d, refused %d, peak %d: the test did not press the budget", granted.Load(), refused.Load(), peak.Load())
	}
}

// A request that needs more than the whole budget is refused at once, not
// after the wait; one that needs what others hold waits for it.
func TestWaitAndRefusal(t *testing.T) {
	b := New(4*Chunk, time.Second)
	start := time.Now()
	if err := b.Account().Use(context.Background(), 5*Chunk); !errors.Is(err, ErrExhausted) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("more than the budget: %v after %v", err, time.Since(start))
	}
	holder := b.Account()
	if err := holder.Use(context.Background(), 4*Chunk); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		holder.Release()
	}()
	waiter := b.Account()
	if err := waiter.Use(context.Background(), Chunk); err != nil {
		t.Fatalf("a request that could wait for a release: %v", err)
	}
	short := New(Chunk, 10*time.Millisecond)
	if err := short.Account().Use(context.Background(), Chunk); err != nil {
		t.Fatal(err)
	}
	if err := short.Account().Use(context.Background(), 1); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a spent budget after the wait: %v", err)
	}
}

// No budget, no account: everything is granted.
func TestUnbounded(t *testing.T) {
	var b *Budget = New(0, time.Second)
	if err := b.Account().Use(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
	if err := From(context.Background()).Use(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
}
