// Package cache keeps what the gateway reads over and over: series metadata
// (read-through, for a short time, widened in place by local writes) and
// the rows of partition reads that can no longer change.
//
// Partition reads are cached only when a predicate (Finality.Final) says
// the rows of the requested span are final — a closed raw bucket past the
// late-data window, a rollup bucket no late point can still correct —
// so the cache never holds data that a write could change, and entries
// never need invalidation. Keys carry a format version and the whole
// request (table, series, bucket, event bucket, span), and an entry is
// checked against the full key on every hit. Concurrent misses of one key
// load once. The cache is bounded in bytes.
package cache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/tsgate/tsgate/tiers"
)

// keyVersion is part of every key; bump it when the cached form changes.
const keyVersion = 1

// rowBytes is the memory one cached row takes.
const rowBytes = 40

type partitionKey struct {
	version int
	key     tiers.PartitionKey
	span    tiers.Span
}

type entry struct {
	key  partitionKey
	rows []tiers.Row // ascending
}

// Partitions is a read-through cache in front of a PartitionReader.
type Partitions struct {
	next      tiers.PartitionReader
	immutable func(tiers.ReadRequest) bool
	maxBytes  int64
	maxEntry  int64

	mu    sync.Mutex
	lru   *lru.LRU[partitionKey, *entry]
	bytes int64
	group singleflight.Group

	hits, misses atomic.Int64
}

// NewPartitions caches reads of next for which immutable reports true,
// holding at most maxBytes of rows, and no single entry larger than a
// sixteenth of that.
func NewPartitions(next tiers.PartitionReader, immutable func(tiers.ReadRequest) bool, maxBytes int64) *Partitions {
	p := &Partitions{next: next, immutable: immutable, maxBytes: maxBytes, maxEntry: maxBytes / 16}
	// The LRU is bounded in bytes below, not in entries.
	p.lru, _ = lru.NewLRU[partitionKey, *entry](1<<30, nil)
	return p
}

// Stats returns the hits and misses so far.
func (p *Partitions) Stats() (hits, misses int64) { return p.hits.Load(), p.misses.Load() }

var errTooLarge = errors.New("cache: partition larger than an entry may be")

// Read serves req from the cache when its rows are final, loading them on a
// miss; everything else goes straight to the next reader.
func (p *Partitions) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	if p.maxEntry < rowBytes || !p.immutable(req) {
		return p.next.Read(ctx, req)
	}
	k := partitionKey{version: keyVersion, key: req.Key, span: req.Span}
	if e := p.get(k); e != nil {
		p.hits.Add(1)
		return newCachedPages(e.rows, req, true)
	}
	p.misses.Add(1)
	v, err, _ := p.group.Do(keyString(k), func() (any, error) {
		if e := p.get(k); e != nil {
			return e, nil
		}
		rows, err := p.load(ctx, req)
		if err != nil {
			return nil, err
		}
		e := &entry{key: k, rows: rows}
		p.put(e)
		return e, nil
	})
	if err != nil {
		// Too large to cache, or the shared load failed under another
		// request's context: read directly, under this request's own.
		return p.next.Read(ctx, req)
	}
	e := v.(*entry)
	if e.key != k {
		return p.next.Read(ctx, req) // a key-string collision: never serve another key's rows
	}
	return newCachedPages(e.rows, req, false)
}

// load reads the whole span ascending, giving up once it exceeds an
// entry's size.
func (p *Partitions) load(ctx context.Context, req tiers.ReadRequest) ([]tiers.Row, error) {
	asc := req
	asc.Desc = false
	pages := p.next.Read(ctx, asc)
	defer pages.Close()
	var rows []tiers.Row
	for {
		page, err := pages.Next()
		if errors.Is(err, tiers.ErrDone) {
			return slices.Clip(rows), nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, page...)
		if int64(len(rows))*rowBytes > p.maxEntry {
			return nil, errTooLarge
		}
	}
}

func (p *Partitions) get(k partitionKey) *entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.lru.Get(k)
	if !ok || e.key != k {
		return nil
	}
	return e
}

func (p *Partitions) put(e *entry) {
	size := entrySize(e)
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.lru.Peek(e.key); ok {
		p.bytes -= entrySize(old)
	}
	p.lru.Add(e.key, e)
	p.bytes += size
	for p.bytes > p.maxBytes {
		_, old, ok := p.lru.RemoveOldest()
		if !ok {
			break
		}
		p.bytes -= entrySize(old)
	}
}

func entrySize(e *entry) int64 {
	return int64(len(e.rows))*rowBytes + 128 + int64(len(e.key.key.Series))
}

func keyString(k partitionKey) string {
	b := make([]byte, 0, 64+len(k.key.Series))
	b = append(b, byte(k.version))
	b = append(b, k.key.Table...)
	b = append(b, 0)
	b = append(b, k.key.Series...)
	b = append(b, 0)
	for _, n := range []int64{k.key.Bucket, int64(k.key.EventBucket), k.span.From, k.span.To} {
		for i := range 8 {
			b = append(b, byte(n>>(8*i)))
		}
	}
	return string(b)
}

// cachedPages serves cached rows in pages, in either order.
type cachedPages struct {
	rows []tiers.Row
	desc bool
	size int
	hit  bool
}

func newCachedPages(rows []tiers.Row, req tiers.ReadRequest, hit bool) *cachedPages {
	return &cachedPages{rows: rows, desc: req.Desc, size: max(1, req.PageSize), hit: hit}
}

func (c *cachedPages) Next() ([]tiers.Row, error) {
	if len(c.rows) == 0 {
		return nil, tiers.ErrDone
	}
	n := min(c.size, len(c.rows))
	var page []tiers.Row
	if c.desc {
		page = slices.Clone(c.rows[len(c.rows)-n:])
		slices.Reverse(page)
		c.rows = c.rows[:len(c.rows)-n]
	} else {
		page = slices.Clone(c.rows[:n])
		c.rows = c.rows[n:]
	}
	return page, nil
}

func (c *cachedPages) Close() error { return nil }

// FromCache reports whether the rows were already cached (a hit) rather
// than loaded by this read.
func (c *cachedPages) FromCache() bool { return c.hit }
