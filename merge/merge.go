// Package merge combines ordered streams: a k-way merge of iterators into
// one ordered iterator (a heap, or a linear scan of the heads for a few), and windowing that folds an ordered
// stream into fixed, epoch-aligned windows.
//
// The package is generic over the element and imports nothing of the
// gateway's, so its contracts are stated here in full.
package merge

import "errors"

// Iterator is a stream of elements in order.
//
// Next advances to the next element and reports whether there is one; At
// returns it and stays valid until the following Next. Once Next has returned
// false it keeps returning false, and Err says why: nil when the stream is
// exhausted, the failure otherwise.
type Iterator[T any] interface {
	Next() bool
	At() T
	Err() error
}

// Merger merges k iterators that are each ordered by less into one ordered
// iterator. Elements that are equal (neither is less than the other) are
// either all emitted, earlier inputs first, or — when deduplication is on —
// collapsed into the one from the input with the highest index, so that a
// later input overrides an earlier one.
//
// The merge only emits an element once every input has either produced its
// next element or ended, so everything emitted so far is exactly the prefix
// of the merged order: an input that fails or stalls stops the merge at the
// last element known to be in order. Err joins the errors of every input
// that failed.
type Merger[T any] struct {
	less   func(a, b T) bool
	dedup  bool
	inputs []Iterator[T]
	heap   []head[T] // a binary min-heap by (element, input index)
	// pending says the element at the top of the heap was emitted and its
	// input must be advanced before the next element can be chosen.
	pending bool
	cur     T
	started bool
	done    bool
	errs    []error
}

// Option configures a Merger.
type Option func(*options)

type options struct{ dedup bool }

// Dedup collapses equal elements into the one from the input with the
// highest index.
func Dedup() Option { return func(o *options) { o.dedup = true } }

// New returns the merge of inputs ordered by less. The inputs are not
// advanced until the first call of Next.
func New[T any](less func(a, b T) bool, inputs []Iterator[T], opts ...Option) *Merger[T] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Merger[T]{less: less, dedup: o.dedup, inputs: inputs}
}

// Iter returns the merge as an Iterator: the input itself when there is
// one, a linear scan of the heads for a few (up to 8), the heap beyond.
func Iter[T any](less func(a, b T) bool, inputs []Iterator[T], opts ...Option) Iterator[T] {
	if len(inputs) == 1 {
		return inputs[0]
	}
	if len(inputs) <= linearMax {
		var o options
		for _, opt := range opts {
			opt(&o)
		}
		return newLinear(less, inputs, o.dedup)
	}
	return New(less, inputs, opts...)
}

// Next advances the merge.
func (m *Merger[T]) Next() bool {
	if m.done {
		return false
	}
	if !m.started {
		m.started = true
		m.heap = make([]head[T], 0, len(m.inputs))
		for i, in := range m.inputs {
			if in.Next() {
				m.push(head[T]{v: in.At(), i: i})
			} else if err := in.Err(); err != nil {
				m.errs = append(m.errs, err)
				return m.stop()
			}
		}
	} else if m.pending {
		// The element emitted last is still at the top of the heap: advance
		// its input in place, which costs one sift instead of a pop and a
		// push.
		m.pending = false
		if !m.advanceTop() {
			return m.stop()
		}
	}
	if len(m.heap) == 0 {
		return m.stop()
	}
	if m.dedup {
		// Equal heads are ordered by input index, so while the top has an
		// equal element below it, the top is a loser: skip it. What remains at
		// the top is the equal element of the highest input.
		for m.topHasEqualChild() {
			if !m.advanceTop() {
				return m.stop()
			}
		}
	}
	m.cur = m.heap[0].v
	m.pending = true
	return true
}

// advanceTop moves the input at the top of the heap to its next element and
// restores the heap; it reports false when the input failed.
func (m *Merger[T]) advanceTop() bool {
	in := m.inputs[m.heap[0].i]
	if in.Next() {
		m.heap[0].v = in.At()
		m.siftDown(0)
		return true
	}
	if err := in.Err(); err != nil {
		m.errs = append(m.errs, err)
		return false
	}
	last := len(m.heap) - 1
	m.heap[0] = m.heap[last]
	m.heap = m.heap[:last]
	if last > 0 {
		m.siftDown(0)
	}
	return true
}

// topHasEqualChild reports whether another input's head equals the top's.
// Equal heads sort by input index, so one exists exactly when a child of the
// root is not greater than the root.
func (m *Merger[T]) topHasEqualChild() bool {
	h := m.heap
	for c := 1; c <= 2 && c < len(h); c++ {
		if !m.less(h[0].v, h[c].v) {
			return true
		}
	}
	return false
}

func (m *Merger[T]) stop() bool {
	m.done = true
	var zero T
	m.cur = zero
	return false
}

// At returns the current element.
func (m *Merger[T]) At() T { return m.cur }

// Err joins the errors of the inputs that failed.
func (m *Merger[T]) Err() error { return errors.Join(m.errs...) }

// head is an input's current element, cached so that heap comparisons make
// no interface calls.
type head[T any] struct {
	v T
	i int
}

// before orders heap entries by element, then by input index so that equal
// elements come out in input order.
func (m *Merger[T]) before(a, b *head[T]) bool {
	if m.less(a.v, b.v) {
		return true
	}
	if m.less(b.v, a.v) {
		return false
	}
	return a.i < b.i
}

func (m *Merger[T]) push(e head[T]) {
	h := append(m.heap, e)
	j := len(h) - 1
	for j > 0 {
		parent := (j - 1) / 2
		if !m.before(&h[j], &h[parent]) {
			break
		}
		h[j], h[parent] = h[parent], h[j]
		j = parent
	}
	m.heap = h
}

func (m *Merger[T]) siftDown(j int) {
	h := m.heap
	for {
		l := 2*j + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && m.before(&h[r], &h[l]) {
			c = r
		}
		if !m.before(&h[c], &h[j]) {
			return
		}
		h[j], h[c] = h[c], h[j]
		j = c
	}
}
