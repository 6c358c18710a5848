package cache

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
)

// held keeps answers of the store for a TTL, bounded in count (and in
// weight when weigh is set). It counts invalidations in an epoch: an
// answer fetched before an invalidation is not kept after it, since it
// may predate the write that caused it. A TTL of 0 keeps nothing.
type held[K comparable, V any] struct {
	ttl time.Duration
	now func() time.Time
	// weigh, when set, bounds the values' total weight to maxWeight; a
	// value heavier than a quarter of it is not kept.
	weigh     func(V) int
	maxWeight int

	mu     sync.Mutex
	epoch  uint64
	weight int
	lru    *lru.LRU[K, heldValue[V]]
}

type heldValue[V any] struct {
	v  V
	at time.Time
}

func newHeld[K comparable, V any](size int, ttl time.Duration, now func() time.Time) *held[K, V] {
	h := &held[K, V]{ttl: ttl, now: now}
	h.lru, _ = lru.NewLRU[K, heldValue[V]](max(1, size), func(_ K, e heldValue[V]) {
		if h.weigh != nil {
			h.weight -= h.weigh(e.v)
		}
	})
	return h
}

// one returns k's value held while fresh and usable, else fetch's, which
// it then holds.
func (h *held[K, V]) one(k K, usable func(V) bool, fetch func() (V, error)) (V, error) {
	h.mu.Lock()
	if e, ok := h.lru.Get(k); ok && h.fresh(e, h.now()) && usable(e.v) {
		h.mu.Unlock()
		return e.v, nil
	}
	epoch := h.epoch
	h.mu.Unlock()
	at := h.now()
	v, err := fetch()
	if err == nil {
		h.keep(epoch, at, map[K]V{k: v})
	}
	return v, err
}

// many returns the values of keys: those held while fresh and usable,
// the others from one fetch of them, which must answer every key it is
// asked, and which it then holds.
func (h *held[K, V]) many(keys []K, usable func(V) bool, fetch func([]K) (map[K]V, error)) (map[K]V, error) {
	out := make(map[K]V, len(keys))
	var misses []K
	now := h.now()
	h.mu.Lock()
	for _, k := range keys {
		if e, ok := h.lru.Get(k); ok && h.fresh(e, now) && usable(e.v) {
			out[k] = e.v
		} else {
			misses = append(misses, k)
		}
	}
	epoch := h.epoch
	h.mu.Unlock()
	if len(misses) == 0 {
		return out, nil
	}
	got, err := fetch(misses)
	if err != nil {
		return nil, err
	}
	h.keep(epoch, now, got)
	for k, v := range got {
		out[k] = v
	}
	return out, nil
}

func (h *held[K, V]) fresh(e heldValue[V], now time.Time) bool { return now.Sub(e.at) < h.ttl }

// keep holds the values fetched at under epoch, unless an invalidation
// ran since.
func (h *held[K, V]) keep(epoch uint64, at time.Time, vs map[K]V) {
	if h.ttl <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch != h.epoch {
		return
	}
	for k, v := range vs {
		h.lru.Remove(k)
		if h.weigh != nil {
			w := h.weigh(v)
			if w > h.maxWeight/4 {
				continue
			}
			for h.weight+w > h.maxWeight {
				if _, _, ok := h.lru.RemoveOldest(); !ok {
					break
				}
			}
			h.weight += w
		}
		h.lru.Add(k, heldValue[V]{v, at})
	}
}

// forget drops the values of keys, and every value of a fetch under way.
func (h *held[K, V]) forget(keys ...K) {
	h.mu.Lock()
	h.epoch++
	for _, k := range keys {
		h.lru.Remove(k)
	}
	h.mu.Unlock()
}

// purge drops every value, and every value of a fetch under way.
func (h *held[K, V]) purge() {
	h.mu.Lock()
	h.epoch++
	h.lru.Purge()
	h.mu.Unlock()
}
