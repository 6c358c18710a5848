package embedded

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

const (
	// sweepChunk bounds the keys one step of a sweep visits while it holds
	// writes of expiring records off, so a sweep delays a write by about a
	// millisecond at worst.
	sweepChunk = 4096
	// minRangeRun is the shortest run of consecutive expired keys deleted
	// with one range deletion instead of point deletions. A whole expired
	// partition is such a run; a few stray keys are cheaper as points, since
	// every range tombstone fragments the ones it overlaps.
	minRangeRun = 16
)

// expiringRanges are the key ranges whose records carry an expiry: the row
// tables and the sealed chunks, then the late index and the rollup log.
var expiringRanges = [][2][]byte{
	{{kindRaw}, {kindRollupChunk + 1}},
	{{kindLateMark}, {kindDirty + 1}},
}

func (s *Store) sweepLoop(ctx context.Context, interval time.Duration) {
	defer close(s.sweeperDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		n, err := s.Sweep(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("sweeping expired records", "err", err)
		default:
			s.log.Debug("swept expired records", "deleted", n, "took", time.Since(start))
		}
	}
}

// Sweep deletes the records that have expired by the store's clock and
// returns how many it deleted. Reads already skip expired records; sweeping
// reclaims their space. Runs of expired keys, such as whole partitions past
// their retention, go in one range deletion. The deletions are not synced:
// a crash can only bring back records that reads skip and the next sweep
// deletes again.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	now := s.nowMs()
	total := 0
	for _, r := range expiringRanges {
		start := r[0]
		for start != nil {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			n, next, err := s.sweepStep(start, r[1], now)
			total += n
			if err != nil {
				return total, err
			}
			start = next
		}
	}
	return total, nil
}

// sweepStep deletes the expired records among up to sweepChunk keys from
// start on, and returns where the next step starts (nil at upper).
func (s *Store) sweepStep(start, upper []byte, now int64) (deleted int, next []byte, err error) {
	if err := s.enter(); err != nil {
		return 0, nil, err
	}
	defer s.mu.RUnlock()
	// Scan and delete under one exclusive hold, so that every key the scan
	// found expired is still the record that gets deleted.
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()

	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: upper})
	if err != nil {
		return 0, nil, fmt.Errorf("embedded: sweep: %w", err)
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()

	var run sweepRun
	visited := 0
	for valid := it.First(); valid; valid = it.Next() {
		if visited == sweepChunk {
			next = bytes.Clone(it.Key())
			break
		}
		visited++
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, nil, fmt.Errorf("embedded: sweep: %w", err)
		}
		if len(v) >= expiryLen && expired(getExpiry(v), now) {
			run.add(it.Key())
			continue
		}
		if err := run.flush(b, &deleted); err != nil {
			return 0, nil, err
		}
	}
	if err := it.Error(); err != nil {
		return 0, nil, fmt.Errorf("embedded: sweep: %w", err)
	}
	if err := run.flush(b, &deleted); err != nil {
		return 0, nil, err
	}
	if b.Empty() {
		return 0, next, nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, nil, fmt.Errorf("embedded: sweep: %w", err)
	}
	return deleted, next, nil
}

// sweepRun collects consecutive expired keys: each key while the run is
// short, only its first and last key once it is long enough for a range
// deletion.
type sweepRun struct {
	keys  [][]byte
	first []byte
	last  []byte
	n     int
}

func (r *sweepRun) add(key []byte) {
	if r.n == 0 {
		r.first = append(r.first[:0], key...)
	}
	r.last = append(r.last[:0], key...)
	if r.n < minRangeRun {
		r.keys = append(r.keys, bytes.Clone(key))
	}
	r.n++
}

// flush adds the run's deletions to b and counts the records they delete.
// Pebble copies keys into the batch, so the run's buffers are reused.
func (r *sweepRun) flush(b *pebble.Batch, deleted *int) error {
	if r.n == 0 {
		return nil
	}
	var err error
	if r.n >= minRangeRun {
		// The run is every key from first to last, so the range ends just
		// after last: last followed by the smallest possible byte.
		err = b.DeleteRange(r.first, append(r.last, 0), nil)
	} else {
		for _, k := range r.keys {
			if err = b.Delete(k, nil); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("embedded: sweep: %w", err)
	}
	*deleted += r.n
	r.keys = r.keys[:0]
	r.n = 0
	return nil
}
