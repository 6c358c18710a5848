package cache

import (
	"context"
	"maps"
	"slices"
	"time"

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
// nothing. Answers are handed out as copies: the index filters candidate
// lists in place.
type Labels struct {
	tiers.LabelIndex
	postings *held[postingsKey, []string]
	values   *held[string, []string]
	labels   *held[string, tiers.Labels] // nil: the series has none
}

// maxPostingIDs bounds the ids the posting lists held name, all lists
// together; a list longer than a quarter of it is read each time.
const maxPostingIDs = 1 << 20

type postingsKey struct{ name, value string }

// NewLabels holds up to size series' labels and as many posting lists,
// each for ttl.
func NewLabels(index tiers.LabelIndex, size int, ttl time.Duration, now func() time.Time) *Labels {
	l := &Labels{
		LabelIndex: index,
		postings:   newHeld[postingsKey, []string](size, ttl, now),
		values:     newHeld[string, []string](1024, ttl, now),
		labels:     newHeld[string, tiers.Labels](size, ttl, now),
	}
	l.postings.weigh, l.postings.maxWeight = func(ids []string) int { return len(ids) }, maxPostingIDs
	return l
}

func always[V any](V) bool { return true }

// SetLabels labels the series and drops every label answer held: the
// series may join or leave any posting list.
func (l *Labels) SetLabels(ctx context.Context, id string, labels tiers.Labels) error {
	err := l.LabelIndex.SetLabels(ctx, id, labels)
	l.postings.purge()
	l.values.purge()
	l.labels.purge()
	return err
}

// Postings returns the posting list, held for the TTL.
func (l *Labels) Postings(ctx context.Context, name, value string) ([]string, error) {
	ids, err := l.postings.one(postingsKey{name, value}, always, func() ([]string, error) {
		return l.LabelIndex.Postings(ctx, name, value)
	})
	return slices.Clone(ids), err
}

// LabelValues returns the label's values, held for the TTL.
func (l *Labels) LabelValues(ctx context.Context, name string) ([]string, error) {
	values, err := l.values.one(name, always, func() ([]string, error) {
		return l.LabelIndex.LabelValues(ctx, name)
	})
	return slices.Clone(values), err
}

// SeriesLabels returns the series' labels, those held for the TTL without
// asking the store.
func (l *Labels) SeriesLabels(ctx context.Context, ids []string) (map[string]tiers.Labels, error) {
	got, err := l.labels.many(ids, always, func(misses []string) (map[string]tiers.Labels, error) {
		found, err := l.LabelIndex.SeriesLabels(ctx, misses)
		if err != nil {
			return nil, err
		}
		all := make(map[string]tiers.Labels, len(misses))
		for _, id := range misses {
			all[id] = found[id]
		}
		return all, nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]tiers.Labels, len(got))
	for id, ls := range got {
		if ls != nil {
			out[id] = maps.Clone(ls)
		}
	}
	return out, nil
}
