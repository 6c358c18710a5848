// Package membudget bounds the memory the process spends on answers being
// built and sent, across all requests: each request reserves from one
// budget as its answer grows, waits a bounded time when the budget is
// spent, and gives everything back when its answer has been written. One
// client cannot take the process down by asking many large answers at
// once, or by not reading them: what a request holds stays reserved until
// it ends, so the budget, not the clients, decides how much is in flight.
package membudget

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/tsgate/tsgate/failure"
)

// Chunk is the granularity of reservations: an answer that grows by a few
// bytes does not touch the shared semaphore each time.
const Chunk = 1 << 20

// ErrExhausted is returned by Grow when the budget stayed spent for the
// whole wait: the request should be answered as overloaded.
var ErrExhausted = failure.New(failure.Overloaded, "the memory for answers, --answer-memory-bytes, is spent")

// Budget is the memory all answers in flight may hold.
type Budget struct {
	sem   *semaphore.Weighted
	total int64
	wait  time.Duration

	mu       sync.Mutex
	reserved int64
	observe  func(reserved int64)
}

// Observe has f called with what is reserved whenever it changes
// (a gauge's Set).
func (b *Budget) Observe(f func(reserved int64)) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.observe = f
	b.mu.Unlock()
}

// add moves what is reserved by d.
func (b *Budget) add(d int64) {
	b.mu.Lock()
	b.reserved += d
	if b.observe != nil {
		b.observe(b.reserved)
	}
	b.mu.Unlock()
}

// New returns a budget of total bytes; a request waits up to wait for its
// reservation. A total of 0 or less means no bound: every Grow succeeds.
func New(total int64, wait time.Duration) *Budget {
	if total <= 0 {
		return nil
	}
	return &Budget{sem: semaphore.NewWeighted(total), total: total, wait: wait}
}

// Total is the size of the budget (0: unbounded).
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total
}

// Reserved is what all accounts hold now.
func (b *Budget) Reserved() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserved
}

// Account is one request's share of the budget. It is safe for
// concurrent use: a request that builds parts of its answer in parallel
// counts each part's growth into the one account.
//
// A request that knows how large its answer can get says so first
// (Expect): it then waits for all of it at once, before it reads
// anything, so that requests queue for the budget whole instead of each
// holding part of it while waiting for more, which would leave all of them
// stuck once the budget is spent. What its buffers really hold (Meter)
// is reserved too where it goes past the expectation.
type Account struct {
	b *Budget
	// mu is held while a reservation waits, so that the parts of one
	// request queue behind each other rather than each taking a chunk.
	mu       sync.Mutex
	expected int64
	counted  int64
	held     int64
}

// Account opens an account on b; a nil budget gives an account whose
// reservations always succeed.
func (b *Budget) Account() *Account { return &Account{b: b} }

// Expect reserves n bytes for the answer ahead of building it (added to
// what was expected before).
func (a *Account) Expect(ctx context.Context, n int64) error {
	if a == nil || a.b == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expected += n
	return a.cover(ctx)
}

// Use counts n more bytes of answer being held (n may be negative when a
// part is dropped).
func (a *Account) Use(ctx context.Context, n int64) error {
	if a == nil || a.b == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counted += n
	return a.cover(ctx)
}

// cover makes the account hold at least the larger of what it expects and
// what it counts, reserving whole chunks, waiting up to the budget's wait
// (or until ctx ends) for them. It fails with ErrExhausted when they did
// not come, and at once when that is more than the whole budget; the
// request should then stop building its answer.
func (a *Account) cover(ctx context.Context) error {
	need := max(a.expected, a.counted)
	if need <= a.held {
		return nil
	}
	want := (need - a.held + Chunk - 1) / Chunk * Chunk
	if a.held+want > a.b.total {
		want = a.b.total - a.held
		if want <= 0 || a.held+want < need {
			return ErrExhausted
		}
	}
	if !a.b.sem.TryAcquire(want) {
		wctx, cancel := context.WithTimeout(ctx, a.b.wait)
		err := a.b.sem.Acquire(wctx, want)
		cancel()
		if err != nil {
			return ErrExhausted
		}
	}
	a.held += want
	a.b.add(want)
	return nil
}

// Meter counts one growing buffer into an account: Track with the
// buffer's length after each growth.
type Meter struct {
	a       *Account
	counted int64
}

// Meter returns a meter of one buffer counted into a.
func (a *Account) Meter() Meter { return Meter{a: a} }

// Track counts the buffer at size bytes (Account.Use of the growth).
func (m *Meter) Track(ctx context.Context, size int) error {
	if m.a == nil || int64(size) <= m.counted {
		return nil
	}
	d := int64(size) - m.counted
	m.counted = int64(size)
	return m.a.Use(ctx, d)
}

// Held is what the account holds.
func (a *Account) Held() int64 {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// Release gives everything the account holds back, and forgets what it
// counted.
func (a *Account) Release() {
	if a == nil || a.b == nil {
		return
	}
	a.mu.Lock()
	held := a.held
	a.held, a.expected, a.counted = 0, 0, 0
	a.mu.Unlock()
	if held > 0 {
		// Counted out before it is handed back, so that what Reserved
		// says is never more than what the semaphore gave.
		a.b.add(-held)
		a.b.sem.Release(held)
	}
}

type accountKey struct{}

// With returns ctx carrying the request's account.
func With(ctx context.Context, a *Account) context.Context {
	return context.WithValue(ctx, accountKey{}, a)
}

// From is the account ctx carries; nil (which grows freely) when none.
func From(ctx context.Context) *Account {
	a, _ := ctx.Value(accountKey{}).(*Account)
	return a
}
