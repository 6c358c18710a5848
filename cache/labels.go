package cache

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tsgate/tsgate/tiers"
)

// Labels holds, for a short time, the label index's answers that resolve
// a selector: posting lists, label values and series' labels. A dashboard
// repeating a panel then asks the store nothing to find its series.
//
// This gateway's own label writes are seen at once: SetLabels through
// Labels drops every answer held, and an answer fetched while it ran is
// not kept. Other gateways' labels are seen within the TTL
// (--series-cache-ttl), as their new series already are. A TTL of 0 holds
// nothing.
type Labels struct {
	tiers.LabelIndex
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	// epoch counts the SetLabels calls: an answer fetched under an older
	// epoch may predate one.
	epoch      uint64
	postings   *lru.LRU[postingsKey, heldIDs]
	postingIDs int // ids held by postings
	labels     *lru.LRU[string, heldLabels]
	values     *lru.LRU[string, heldIDs]
}

// maxPostingIDs bounds the ids the postings held name, all lists
// together; a longer list is read each time.
const maxPostingIDs = 1 << 20

type postingsKey struct{ name, value string }

type heldIDs struct {
	ids []string
	at  time.Time
}

type heldLabels struct {
	labels tiers.Labels // nil: the series has none
	at     time.Time
}

// NewLabels holds up to size series' labels and as many posting lists,
// each for ttl.
func NewLabels(index tiers.LabelIndex, size int, ttl time.Duration, now func() time.Time) *Labels {
	size = max(1, size)
	l := &Labels{LabelIndex: index, ttl: ttl, now: now}
	l.postings, _ = lru.NewLRU[postingsKey, heldIDs](size, func(_ postingsKey, h heldIDs) { l.postingIDs -= len(h.ids) })
	l.labels, _ = lru.NewLRU[string, heldLabels](size, nil)
	l.values, _ = lru.NewLRU[string, heldIDs](1024, nil)
	return l
}

func (l *Labels) fresh(at time.Time) bool { return l.now().Sub(at) < l.ttl }

// SetLabels labels the series and drops every label answer held: the
// series may join or leave any posting list.
func (l *Labels) SetLabels(ctx context.Context, id string, labels tiers.Labels) error {
	err := l.LabelIndex.SetLabels(ctx, id, labels)
	l.mu.Lock()
	l.epoch++
	l.postings.Purge()
	l.labels.Purge()
	l.values.Purge()
	l.mu.Unlock()
	return err
}

// Postings returns the posting list, held for the TTL.
func (l *Labels) Postings(ctx context.Context, name, value string) ([]string, error) {
	k := postingsKey{name, value}
	l.mu.Lock()
	if h, ok := l.postings.Get(k); ok && l.fresh(h.at) {
		l.mu.Unlock()
		return slices.Clone(h.ids), nil // callers filter lists in place
	}
	epoch := l.epoch
	l.mu.Unlock()
	at := l.now()
	ids, err := l.LabelIndex.Postings(ctx, name, value)
	if err != nil || l.ttl <= 0 || len(ids) > maxPostingIDs/4 {
		return ids, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if epoch == l.epoch {
		l.postings.Remove(k)
		for l.postingIDs+len(ids) > maxPostingIDs {
			if _, _, ok := l.postings.RemoveOldest(); !ok {
				break
			}
		}
		l.postings.Add(k, heldIDs{slices.Clone(ids), at})
		l.postingIDs += len(ids)
	}
	return ids, nil
}

// LabelValues returns the label's values, held for the TTL.
func (l *Labels) LabelValues(ctx context.Context, name string) ([]string, error) {
	l.mu.Lock()
	if h, ok := l.values.Get(name); ok && l.fresh(h.at) {
		l.mu.Unlock()
		return slices.Clone(h.ids), nil
	}
	epoch := l.epoch
	l.mu.Unlock()
	at := l.now()
	values, err := l.LabelIndex.LabelValues(ctx, name)
	if err != nil || l.ttl <= 0 {
		return values, err
	}
	l.mu.Lock()
	if epoch == l.epoch {
		l.values.Add(name, heldIDs{slices.Clone(values), at})
	}
	l.mu.Unlock()
	return values, nil
}

// SeriesLabels returns the series' labels, those held for the TTL without
// asking the store.
func (l *Labels) SeriesLabels(ctx context.Context, ids []string) (map[string]tiers.Labels, error) {
	out := make(map[string]tiers.Labels, len(ids))
	var misses []string
	l.mu.Lock()
	for _, id := range ids {
		if h, ok := l.labels.Get(id); ok && l.fresh(h.at) {
			if h.labels != nil {
				out[id] = maps.Clone(h.labels)
			}
			continue
		}
		misses = append(misses, id)
	}
	epoch := l.epoch
	l.mu.Unlock()
	if len(misses) == 0 {
		return out, nil
	}
	at := l.now()
	got, err := l.LabelIndex.SeriesLabels(ctx, misses)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	keep := epoch == l.epoch && l.ttl > 0
	for _, id := range misses {
		if ls, ok := got[id]; ok {
			out[id] = ls
		}
		if keep {
			l.labels.Add(id, heldLabels{maps.Clone(got[id]), at})
		}
	}
	l.mu.Unlock()
	return out, nil
}
