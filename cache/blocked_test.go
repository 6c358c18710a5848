package cache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// blockList is a store's blocked list that counts its whole-list reads.
type blockList struct {
	mu    sync.Mutex
	list  map[string]tiers.BlockedSeries
	lists int
}

func (b *blockList) Block(_ context.Context, bs tiers.BlockedSeries) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.list[bs.Series] = bs
	return nil
}

func (b *blockList) Unblock(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.list, id)
	return nil
}

func (b *blockList) ListBlocked(context.Context) ([]tiers.BlockedSeries, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lists++
	var out []tiers.BlockedSeries
	for _, bs := range b.list {
		out = append(out, bs)
	}
	return out, nil
}

func (b *blockList) IsBlocked(_ context.Context, id string) (tiers.BlockedSeries, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bs, ok := b.list[id]
	return bs, ok, nil
}

// One instance's block is seen by another only once its TTL has passed,
// by itself at once; the list is read once per TTL, whatever the number
// of series asked about.
func TestBlockedListHonouredWithinTTL(t *testing.T) {
	store := &blockList{list: map[string]tiers.BlockedSeries{}}
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a, b := NewBlocked(store, 2*time.Second, clock), NewBlocked(store, 2*time.Second, clock)
	ctx := context.Background()
	blocked := func(c *Blocked, id string) bool {
		t.Helper()
		_, ok, err := c.IsBlocked(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, id := range []string{"x", "y", "z"} {
		if blocked(a, id) || blocked(b, id) {
			t.Fatalf("%s blocked before any block", id)
		}
	}
	if store.lists != 2 {
		t.Fatalf("%d list reads for two caches, want 2", store.lists)
	}
	if err := a.Block(ctx, tiers.BlockedSeries{Series: "x", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if !blocked(a, "x") {
		t.Fatal("the blocking instance does not see its block at once")
	}
	now = now.Add(1999 * time.Millisecond)
	if blocked(b, "x") {
		t.Fatal("the other instance saw the block before its TTL passed: it reads more often than it should")
	}
	now = now.Add(time.Millisecond)
	if !blocked(b, "x") {
		t.Fatal("the other instance does not see the block after its TTL")
	}
	if err := b.Unblock(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if blocked(b, "x") {
		t.Fatal("the unblocking instance still refuses the series")
	}
	list, err := a.ListBlocked(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("ListBlocked = %v %v", list, err)
	}
}
