package merge

// Window is one aggregated window: [Start, Start+step).
type Window[A any] struct {
	Start int64
	Acc   A
}

// Windower folds an ordered stream into epoch-aligned windows
// [k*step, (k+1)*step). The input must be ordered by key, ascending (or
// descending, when desc is set); windows come out in the same order, and a
// window with no element is never produced.
//
// A window is emitted only once the input has moved past it or ended
// cleanly: when the input fails, the window it was filling is dropped, so an
// emitted window always aggregates every element of its span.
type Windower[T, A any] struct {
	in      Iterator[T]
	step    int64
	key     func(T) int64
	fold    func(acc *A, x T)
	held    T
	hasHeld bool
	cur     Window[A]
	done    bool
	// dropped is the window the input failed in, if any, with what it had
	// folded so far.
	dropped    Window[A]
	hasDropped bool
	// acc is the window being filled. A field rather than a local: a local
	// whose address is passed to fold, a function value, escapes, and
	// every window would cost an allocation.
	acc A
}

// NewWindower returns windows of width step (> 0) over in. key gives an
// element's time; fold adds an element to a window's accumulator, which
// starts as A's zero value.
func NewWindower[T, A any](in Iterator[T], step int64, key func(T) int64, fold func(acc *A, x T)) *Windower[T, A] {
	return &Windower[T, A]{in: in, step: step, key: key, fold: fold}
}

// Next advances to the next complete window.
func (w *Windower[T, A]) Next() bool {
	if w.done {
		return false
	}
	if !w.hasHeld {
		if !w.in.Next() {
			w.done = true
			return false
		}
		w.held, w.hasHeld = w.in.At(), true
	}
	var zero A
	w.acc = zero
	start := alignDown(w.key(w.held), w.step)
	w.fold(&w.acc, w.held)
	w.hasHeld = false
	for w.in.Next() {
		x := w.in.At()
		if alignDown(w.key(x), w.step) != start {
			w.held, w.hasHeld = x, true
			w.cur = Window[A]{Start: start, Acc: w.acc}
			return true
		}
		w.fold(&w.acc, x)
	}
	w.done = true
	if w.in.Err() != nil {
		w.dropped, w.hasDropped = Window[A]{Start: start, Acc: w.acc}, true
		return false
	}
	w.cur = Window[A]{Start: start, Acc: w.acc}
	return true
}

// At returns the current window.
func (w *Windower[T, A]) At() Window[A] { return w.cur }

// Dropped returns the start of the window that was being filled when the
// input failed: the first window not emitted. A reader that resumes after a
// failure must resume at that window, not where the input stopped, because
// the input may have delivered all of the window's rows before failing.
func (w *Windower[T, A]) Dropped() (start int64, ok bool) { return w.dropped.Start, w.hasDropped }

// DroppedWindow returns the window Dropped names, with the elements folded
// into it before the input failed. A caller that knows by other means that
// the input had delivered all of the window's elements (a watermark past
// its end) may use it as complete.
func (w *Windower[T, A]) DroppedWindow() (Window[A], bool) { return w.dropped, w.hasDropped }

// Err is the input's error, if it failed.
func (w *Windower[T, A]) Err() error { return w.in.Err() }

func alignDown(t, step int64) int64 {
	q := t / step
	if t%step != 0 && t < 0 {
		q--
	}
	return q * step
}
