package merge

import "errors"

// linearMax is the most inputs for which a linear scan of the heads beats
// the heap: the partitions of one bucket are a handful.
const linearMax = 8

// linear merges a few iterators with the same contract as Merger, finding
// the smallest head by a scan of all of them: for a handful of inputs that
// costs fewer comparisons and no swaps.
type linear[T any] struct {
	less   func(a, b T) bool
	dedup  bool
	inputs []Iterator[T]
	heads  []T
	live   []int // the inputs not yet exhausted, ascending
	adv    []int // the inputs whose heads were consumed by the last Next
	cur    T
	start  bool
	done   bool
	errs   []error
}

func newLinear[T any](less func(a, b T) bool, inputs []Iterator[T], dedup bool) *linear[T] {
	return &linear[T]{less: less, dedup: dedup, inputs: inputs, heads: make([]T, len(inputs))}
}

// advance moves input i on; it reports false when the input failed.
func (m *linear[T]) advance(i int) bool {
	in := m.inputs[i]
	if in.Next() {
		m.heads[i] = in.At()
		return true
	}
	if err := in.Err(); err != nil {
		m.errs = append(m.errs, err)
		return false
	}
	for k, j := range m.live {
		if j == i {
			m.live = append(m.live[:k], m.live[k+1:]...)
			break
		}
	}
	return true
}

func (m *linear[T]) Next() bool {
	if m.done {
		return false
	}
	if !m.start {
		m.start = true
		m.live = make([]int, 0, len(m.inputs))
		for i := range m.inputs {
			m.live = append(m.live, i)
		}
		m.adv = append(m.adv[:0], m.live...)
	}
	for _, i := range m.adv {
		if !m.advance(i) {
			return m.stop()
		}
	}
	if len(m.live) == 0 {
		return m.stop()
	}
	// One pass: best is the first smallest head; with deduplication, the
	// later heads equal to it are consumed too and the last one wins.
	h := m.heads
	best := m.live[0]
	m.adv = append(m.adv[:0], best)
	for _, i := range m.live[1:] {
		switch {
		case m.less(h[i], h[best]):
			best = i
			m.adv = append(m.adv[:0], i)
		case m.dedup && !m.less(h[best], h[i]):
			m.adv = append(m.adv, i)
		}
	}
	m.cur = m.heads[m.adv[len(m.adv)-1]]
	return true
}

func (m *linear[T]) stop() bool {
	m.done = true
	var zero T
	m.cur = zero
	return false
}

func (m *linear[T]) At() T      { return m.cur }
func (m *linear[T]) Err() error { return errors.Join(m.errs...) }
