package gateway

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func heapGoal() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// waitPercent collects until GOGC satisfies ok, or fails after a while:
// the floor adjusts it from a finalizer, after a collection.
func waitPercent(t *testing.T, what string, ok func(int) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if ok(gcPercent()) {
			return
		}
	}
	t.Fatalf("GOGC %d: not %s", gcPercent(), what)
}

// While the live heap is under half the floor, GOGC puts the next
// collection at the floor; once it is over, GOGC is the process's own; a
// stopped floor gives it back.
func TestHeapFloorPacesASmallHeap(t *testing.T) {
	base := gcPercent()
	if base < 0 {
		t.Fatalf("GOGC is off in the test process")
	}
	const floor = 64 << 20
	stop := HeapFloor(floor)
	defer stop()
	waitPercent(t, "raised for a small heap", func(p int) bool { return p > base })
	// The runtime's goal is the floor.
	if goal := heapGoal(); goal < floor*9/10 || goal > floor*11/10 {
		t.Fatalf("GOGC %d: the heap's goal is %d, want about %d", gcPercent(), goal, floor)
	}
	keep := make([][]byte, 0, 48)
	for range 48 {
		keep = append(keep, make([]byte, 1<<20))
	}
	waitPercent(t, "the process's own with a live heap over half the floor", func(p int) bool { return p == base })
	runtime.KeepAlive(keep) // and no longer: the heap is small again
	waitPercent(t, "raised again once the heap is small", func(p int) bool { return p > base })
	stop()
	if p := gcPercent(); p != base {
		t.Fatalf("stopped: GOGC %d, want %d", p, base)
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != base {
		t.Fatalf("a collection after the stop set GOGC %d, want %d", p, base)
	}
}
