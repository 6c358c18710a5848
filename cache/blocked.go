package cache

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tsgate/tsgate/tiers"
)

// Blocked caches the list of blocked series, read whole from the store at
// most once per TTL (the series cache's): the list is an operator's short
// list, so one read serves every series, and a block set on any instance is
// honoured by every other within the TTL. Changes made through this cache
// apply at once on this instance.
type Blocked struct {
	next tiers.Blocks
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	list  map[string]tiers.BlockedSeries
	at    time.Time
	valid bool
	gen   uint64 // bumped by every local change, so a load racing it is not kept
	group singleflight.Group
}

// NewBlocked returns a cache of next's blocked list.
func NewBlocked(next tiers.Blocks, ttl time.Duration, now func() time.Time) *Blocked {
	return &Blocked{next: next, ttl: ttl, now: now}
}

// IsBlocked returns the series' block from the cached list.
func (b *Blocked) IsBlocked(ctx context.Context, series string) (tiers.BlockedSeries, bool, error) {
	list, err := b.load(ctx)
	if err != nil {
		return tiers.BlockedSeries{}, false, err
	}
	bs, ok := list[series]
	return bs, ok, nil
}

// ListBlocked reads the list from the store, fresh.
func (b *Blocked) ListBlocked(ctx context.Context) ([]tiers.BlockedSeries, error) {
	return b.next.ListBlocked(ctx)
}

// Block blocks the series in the store and drops the cached list.
func (b *Blocked) Block(ctx context.Context, bs tiers.BlockedSeries) error {
	err := b.next.Block(ctx, bs)
	b.invalidate()
	return err
}

// Unblock unblocks the series in the store and drops the cached list.
func (b *Blocked) Unblock(ctx context.Context, series string) error {
	err := b.next.Unblock(ctx, series)
	b.invalidate()
	return err
}

func (b *Blocked) invalidate() {
	b.mu.Lock()
	b.valid = false
	b.gen++
	b.mu.Unlock()
}

func (b *Blocked) load(ctx context.Context) (map[string]tiers.BlockedSeries, error) {
	b.mu.Lock()
	if b.valid && b.now().Sub(b.at) < b.ttl {
		list := b.list
		b.mu.Unlock()
		return list, nil
	}
	gen := b.gen
	b.mu.Unlock()
	// Loads started before a local change are not joined after it.
	v, err, _ := b.group.Do(strconv.FormatUint(gen, 10), func() (any, error) {
		at := b.now()
		all, err := b.next.ListBlocked(ctx)
		if err != nil {
			return nil, err
		}
		list := make(map[string]tiers.BlockedSeries, len(all))
		for _, bs := range all {
			list[bs.Series] = bs
		}
		b.mu.Lock()
		if gen == b.gen {
			b.list, b.at, b.valid = list, at, true
		}
		b.mu.Unlock()
		return list, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]tiers.BlockedSeries), nil
}
