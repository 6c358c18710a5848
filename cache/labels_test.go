package cache_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/cache"
	"github.com/tsgate/tsgate/tiers"
)

// countedIndex counts the label-index reads that reach the store; hold,
// when set, is called inside Postings after the store answered.
type countedIndex struct {
	tiers.LabelIndex
	reads atomic.Int64
	hold  func()
}

func (c *countedIndex) Postings(ctx context.Context, name, value string) ([]string, error) {
	c.reads.Add(1)
	ids, err := c.LabelIndex.Postings(ctx, name, value)
	if c.hold != nil {
		c.hold()
	}
	return ids, err
}

func (c *countedIndex) SeriesLabels(ctx context.Context, ids []string) (map[string]tiers.Labels, error) {
	c.reads.Add(1)
	return c.LabelIndex.SeriesLabels(ctx, ids)
}

func (c *countedIndex) LabelValues(ctx context.Context, name string) ([]string, error) {
	c.reads.Add(1)
	return c.LabelIndex.LabelValues(ctx, name)
}

// Random label writes, through the cache (this gateway) and around it
// (another gateway), between reads: every read after a write through the
// cache, and every read once the TTL has passed since the last write
// around it, equals the store's answer; reads in between repeat what the
// cache held, without asking the store.
func TestLabelsSeeLocalWritesAtOnceAndOthersWithinTheTTL(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	store := memStore(t, clock)
	counted := &countedIndex{LabelIndex: store}
	const ttl = 2 * time.Second
	held := cache.NewLabels(counted, 100, ttl, clock.Now)

	r := rand.New(rand.NewPCG(3, 4))
	ids := []string{"a", "b", "c", "d", "e", "f"}
	randomLabels := func() tiers.Labels {
		l := tiers.Labels{}
		for _, name := range []string{"job", "dc"} {
			if r.IntN(3) > 0 {
				l[name] = fmt.Sprintf("v%d", r.IntN(3))
			}
		}
		return l
	}
	type answer struct {
		postings map[string][]string
		values   []string
		labels   map[string]tiers.Labels
	}
	ask := func(ix tiers.LabelIndex) answer {
		t.Helper()
		a := answer{postings: map[string][]string{}}
		for v := range 3 {
			p, err := ix.Postings(ctx, "job", fmt.Sprintf("v%d", v))
			if err != nil {
				t.Fatal(err)
			}
			a.postings[fmt.Sprint(v)] = p
		}
		var err error
		if a.values, err = ix.LabelValues(ctx, "dc"); err != nil {
			t.Fatal(err)
		}
		if a.labels, err = ix.SeriesLabels(ctx, ids); err != nil {
			t.Fatal(err)
		}
		// A caller that filters or changes what it got changes no later
		// answer: the answer compared is a copy, what the caller got is
		// scribbled on.
		c := answer{postings: map[string][]string{}, values: slices.Clone(a.values), labels: map[string]tiers.Labels{}}
		for k, p := range a.postings {
			c.postings[k] = slices.Clone(p)
		}
		for id, l := range a.labels {
			c.labels[id] = maps.Clone(l)
		}
		for _, p := range a.postings {
			if len(p) > 0 {
				p[0] = "scribbled"
			}
		}
		for _, l := range a.labels {
			l["scribbled"] = "yes"
		}
		return c
	}
	throughAndAround(t, r, clock, ttl, counted.reads.Load,
		func() {
			if err := held.SetLabels(ctx, ids[r.IntN(len(ids))], randomLabels()); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if err := store.SetLabels(ctx, ids[r.IntN(len(ids))], randomLabels()); err != nil {
				t.Fatal(err)
			}
		},
		func() (got, want any, what string) { return ask(held), ask(store), "labels" })
}

// A posting list read while this gateway labels a series is not held: it
// may predate the new labels.
func TestLabelsDropAnAnswerFetchedDuringALocalWrite(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	store := memStore(t, clock)
	counted := &countedIndex{LabelIndex: store}
	held := cache.NewLabels(counted, 100, time.Minute, clock.Now)
	if err := held.SetLabels(ctx, "a", tiers.Labels{"job": "x"}); err != nil {
		t.Fatal(err)
	}
	// The read reaches the store and gets its answer; before the cache
	// takes it, this gateway labels b.
	counted.hold = func() {
		counted.hold = nil
		if err := held.SetLabels(ctx, "b", tiers.Labels{"job": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := held.Postings(ctx, "job", "x")
	if err != nil || !slices.Equal(stale, []string{"a"}) {
		t.Fatalf("racing read: %v, %v", stale, err)
	}
	got, err := held.Postings(ctx, "job", "x")
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("read after the write: %v, %v; want [a b]", got, err)
	}
}

// With a TTL of 0 every read asks the store.
func TestLabelsWithoutTTLHoldNothing(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	store := memStore(t, clock)
	counted := &countedIndex{LabelIndex: store}
	held := cache.NewLabels(counted, 100, 0, clock.Now)
	if err := store.SetLabels(ctx, "a", tiers.Labels{"job": "x"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := held.Postings(ctx, "job", "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := held.SeriesLabels(ctx, []string{"a"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := counted.reads.Load(); n != 6 {
		t.Fatalf("%d store reads, want 6", n)
	}
	if err := store.SetLabels(ctx, "a", tiers.Labels{"job": "y"}); err != nil {
		t.Fatal(err)
	}
	got, err := held.SeriesLabels(ctx, []string{"a"})
	if want := map[string]tiers.Labels{"a": {"job": "y"}}; err != nil || !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("labels: %v, %v; want %v", got, err, want)
	}
}
