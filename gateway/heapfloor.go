package gateway

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// HeapFloor lets the heap grow to floor bytes before the collector runs
// while the live heap is small, by raising GOGC after each collection:
// the runtime has no minimum heap goal, and a gateway just started, whose
// first reads decode tens of megabytes of rows against a live heap of a
// few, otherwise collects every few megabytes — a fifth of a cold read's
// CPU on the benchmark's week of 20 series (docs/benchmarks.md). Once the
// live heap passes half the floor, GOGC is the process's own again, so
// the caches a busy gateway fills are paced as before. The floor is
// memory the gateway's caches are configured to take anyway. It returns a
// function that stops it and gives GOGC back.
func HeapFloor(floor uint64) (stop func()) {
	h := &heapFloor{floor: floor, base: debug.SetGCPercent(100)}
	debug.SetGCPercent(h.base)
	if h.base < 0 {
		return func() {} // collection is off: nothing to pace
	}
	h.adjust()
	h.arm()
	return func() {
		if h.stopped.CompareAndSwap(false, true) {
			debug.SetGCPercent(h.base)
		}
	}
}

// minHeap is the runtime's minimum heap goal at GOGC=100.
const minHeap = 4 << 20

type heapFloor struct {
	floor   uint64
	base    int
	stopped atomic.Bool
}

// gcSentinel is garbage whose finalizer runs after each collection; big
// enough not to share a block of the tiny allocator with live objects.
type gcSentinel struct{ _ [32]byte }

func (h *heapFloor) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if !h.stopped.Load() {
			h.adjust()
			h.arm()
		}
	})
}

// adjust sets GOGC so that the next collection comes at the floor, or at
// the process's own pacing once that comes later.
func (h *heapFloor) adjust() {
	live, roots := liveHeap()
	percent := h.base
	if live > 0 && live < h.floor/2 {
		// The runtime's goal is live + (live + roots) × GOGC/100, and
		// never under its minimum heap, 4 MiB × GOGC/100: with a GOGC
		// this large the stacks and globals it scans weigh as much as
		// the heap, and the minimum alone may pass the floor.
		percent = max(h.base, int(min((h.floor-live)*100/(live+roots), h.floor*100/minHeap)))
	}
	if !h.stopped.Load() {
		debug.SetGCPercent(percent)
	}
}

// liveHeap is the heap the last collection left live (or what the heap
// holds before the first one), and the stacks and globals it scans.
func liveHeap() (live, roots uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(sample)
	live = sample[0].Value.Uint64()
	if live == 0 {
		live = sample[1].Value.Uint64()
	}
	return live, sample[2].Value.Uint64() + sample[3].Value.Uint64()
}
