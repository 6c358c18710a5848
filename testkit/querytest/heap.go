package querytest

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// SampleHeap collects garbage, then records into peak the largest heap of
// objects (garbage not yet collected included) seen every millisecond until
// stop is called: the memory benchmarks' measure of a read.
func SampleHeap(peak *atomic.Uint64) (stop func()) {
	runtime.GC()
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
