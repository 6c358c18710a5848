package cache

import (
	"sync"
	"sync/atomic"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tsgate/tsgate/tiers"
)

// WindowKey names the windows of one series at one step, folded from one
// tier's rows, as they stand at one generation of the series: late
// corrections and imports give the series a new generation (see
// Finality), so an entry is never invalidated, only left behind.
type WindowKey struct {
	Series     string
	Generation int64
	Level      tiers.Level
	Step       int64
	// Extras: the windows carry their extras (tiers.Row.X), for reads
	// of percentiles; windows cached without them cannot answer those.
	Extras bool
}

// Windows is the results cache: complete windows of answers, so that a
// panel asked again, or slid on with now, reads from the store only the
// windows it lacks. An entry is one contiguous span of windows and the
// rows of those that have points (a window of the span without a row has
// none); the engine fills it with windows whose rows are all final. Rows
// handed out are shared and never written to, their extras included (the
// engine caches them compacted: an encoded sketch, not a live one). Bounded in bytes, least
// recently used first out.
type Windows struct {
	maxBytes, maxEntry int64

	mu    sync.Mutex
	lru   *lru.LRU[WindowKey, *windowEntry]
	bytes int64

	hits, misses, served atomic.Int64
}

type windowEntry struct {
	span tiers.Span
	rows []tiers.Row // ascending T, window starts within span
	size int64
}

// rowBytes is what a cached window takes.
const rowBytes = int64(unsafe.Sizeof(tiers.Row{}))

// NewWindows returns a results cache holding at most maxBytes of windows,
// no entry more than an eighth of it.
func NewWindows(maxBytes int64) *Windows {
	w := &Windows{maxBytes: maxBytes, maxEntry: maxBytes / 8}
	// Bounded in bytes below, not in entries.
	w.lru, _ = lru.NewLRU[WindowKey, *windowEntry](1<<30, nil)
	return w
}

// Get returns the span of k's entry and its rows from at on, when the
// entry's span holds at: windows of the span from at to its end are
// known. ok is false when the entry does not hold at.
func (w *Windows) Get(k WindowKey, at int64) (span tiers.Span, rows []tiers.Row, ok bool) {
	w.mu.Lock()
	e, found := w.lru.Get(k)
	w.mu.Unlock()
	if !found || at < e.span.From || at >= e.span.To {
		w.misses.Add(1)
		return tiers.Span{}, nil, false
	}
	w.hits.Add(1)
	i := searchRows(e.rows, at)
	return tiers.Span{From: at, To: e.span.To}, e.rows[i:], true
}

// Served counts windows handed out from the cache.
func (w *Windows) Served(n int) { w.served.Add(int64(n)) }

// Put records that the windows of span are complete and rows (ascending,
// within span) are those with points. A span that touches or overlaps
// k's entry extends it, its rows replacing the entry's within span;
// another replaces the entry (a dashboard slides forward).
func (w *Windows) Put(k WindowKey, span tiers.Span, rows []tiers.Row) {
	if span.Empty() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := &windowEntry{span: span}
	if old, ok := w.lru.Peek(k); ok && old.span.From <= span.To && span.From <= old.span.To {
		e.span = tiers.Span{From: min(old.span.From, span.From), To: max(old.span.To, span.To)}
		before := old.rows[:searchRows(old.rows, span.From)]
		after := old.rows[searchRows(old.rows, span.To):]
		e.rows = make([]tiers.Row, 0, len(before)+len(rows)+len(after))
		e.rows = append(append(append(e.rows, before...), rows...), after...)
	} else {
		e.rows = append([]tiers.Row(nil), rows...)
	}
	e.size = int64(len(e.rows))*rowBytes + int64(len(k.Series)) + 96
	for _, r := range e.rows {
		e.size += r.ExtrasBytes()
	}
	if e.size > w.maxEntry {
		return // an entry this large would crowd out every other panel
	}
	w.remove(k)
	w.lru.Add(k, e)
	w.bytes += e.size
	for w.bytes > w.maxBytes {
		_, old, ok := w.lru.RemoveOldest()
		if !ok {
			break
		}
		w.bytes -= old.size
	}
}

func (w *Windows) remove(k WindowKey) {
	if old, ok := w.lru.Peek(k); ok {
		w.lru.Remove(k)
		w.bytes -= old.size
	}
}

// Stats returns the lookups that found an entry, those that did not, and
// the windows served.
func (w *Windows) Stats() (hits, misses, served int64) {
	return w.hits.Load(), w.misses.Load(), w.served.Load()
}

// Bytes is the memory the entries take.
func (w *Windows) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// searchRows is the index of the first row at or after t.
func searchRows(rows []tiers.Row, t int64) int {
	lo, hi := 0, len(rows)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if rows[m].T < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
