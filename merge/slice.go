package merge

// SliceIter iterates over a slice; it is the simplest Iterator and the one
// tests and cached data use.
type SliceIter[T any] struct {
	s   []T
	i   int
	err error
}

// FromSlice returns an iterator over s.
func FromSlice[T any](s []T) *SliceIter[T] { return &SliceIter[T]{s: s, i: -1} }

// FromSliceErr returns an iterator over s that fails with err at its end.
func FromSliceErr[T any](s []T, err error) *SliceIter[T] {
	return &SliceIter[T]{s: s, i: -1, err: err}
}

func (it *SliceIter[T]) Next() bool {
	if it.i+1 >= len(it.s) {
		it.i = len(it.s)
		return false
	}
	it.i++
	return true
}

func (it *SliceIter[T]) At() T { return it.s[it.i] }

func (it *SliceIter[T]) Err() error {
	if it.i >= len(it.s) {
		return it.err
	}
	return nil
}

// Collect drains an iterator into a slice and returns its error.
func Collect[T any](it Iterator[T]) ([]T, error) {
	var out []T
	for it.Next() {
		out = append(out, it.At())
	}
	return out, it.Err()
}
