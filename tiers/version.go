package tiers

import (
	"sync/atomic"
	"time"
)

var lastVersion atomic.Int64

// NewVersion returns a late-mark version: the wall clock in nanoseconds,
// made strictly increasing within the process so that two marks never share
// a version, and starting past any version an earlier process could have
// handed out on a clock that did not go back.
func NewVersion() int64 {
	for {
		last := lastVersion.Load()
		v := max(time.Now().UnixNano(), last+1)
		if lastVersion.CompareAndSwap(last, v) {
			return v
		}
	}
}
