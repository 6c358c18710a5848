package tiers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Labels are a series' labels, name → value. The pseudo-label "series" (the
// id) is never stored.
//
// A label with an empty value is absent, as in Prometheus: stores keep only
// the pairs with a value (see Stored).
type Labels map[string]string

// SeriesLabel is the pseudo-label every series has, its id. It is never
// stored: SetLabels refuses it.
const SeriesLabel = "series"

// LabelIndex keeps each series' labels and the postings that find series by
// a label's value.
//
// Names and values are compared as bytes, which for UTF-8 is code point
// order; every listing is in that order on every store. The index does not
// depend on the registry: a series may have labels before NoteSeries first
// sees it (writers label a series before its first write is acknowledged),
// and then Postings and SeriesLabels find it while LookupSeries does not.
type LabelIndex interface {
	// SetLabels makes labels the labels of series id: postings of pairs it
	// gains are written before the series' labels record, postings of
	// pairs it loses are deleted after it (so a reader that finds a series
	// by a posting and then reads its labels may see labels that no longer
	// match — callers re-check — but never misses a series whose labels
	// match). Idempotent: a call that failed part way is completed by
	// calling it again with the same labels. Concurrent calls for
	// different series commute; calls for one series are the caller's to
	// order. Empty/nil labels clears them; pairs with an empty value are
	// absent. Labels that CheckStorable refuses are refused with
	// ErrBadLabel and nothing is written.
	SetLabels(ctx context.Context, id string, labels Labels) error
	// SeriesLabels returns the labels of each of ids that has labels (ids
	// without any are absent from the map). Callers pass up to thousands
	// of ids in one call: stores read them concurrently or in one ordered
	// pass, never one round trip after another.
	SeriesLabels(ctx context.Context, ids []string) (map[string]Labels, error)
	// Postings returns the ids of the series whose label name has value,
	// ascending, without duplicates.
	Postings(ctx context.Context, name, value string) ([]string, error)
	// LabelValues returns the values label name has on some series,
	// ascending.
	LabelValues(ctx context.Context, name string) ([]string, error)
	// LabelNames returns the label names some series has, ascending.
	LabelNames(ctx context.Context) ([]string, error)
}

// ErrBadLabel is the error of SetLabels for labels a store cannot keep.
var ErrBadLabel = errors.New("tiers: label cannot be stored")

// CheckStorable reports whether every store can keep the labels: names are
// non-empty UTF-8 without NUL and not SeriesLabel; values are UTF-8 (NUL,
// being a UTF-8 character, is allowed). It is not the API's validation
// (name syntax, lengths, reserved names), which happens above the store;
// it is what the stores' encodings need, checked alike on every store.
func (l Labels) CheckStorable() error {
	for _, name := range slices.Sorted(maps.Keys(l)) {
		value := l[name]
		switch {
		case name == "":
			return fmt.Errorf("%w: an empty name", ErrBadLabel)
		case name == SeriesLabel:
			return fmt.Errorf("%w: %q is the series id, never a stored label", ErrBadLabel, name)
		case strings.IndexByte(name, 0) >= 0 || !utf8.ValidString(name):
			return fmt.Errorf("%w: name %q is not UTF-8 without NUL", ErrBadLabel, name)
		case !utf8.ValidString(value):
			return fmt.Errorf("%w: the value of %s is not UTF-8", ErrBadLabel, name)
		}
	}
	return nil
}

// Stored returns the pairs of l a store keeps: those with a value. It is
// nil when there are none, and l itself when every pair has a value.
func (l Labels) Stored() Labels {
	empty := 0
	for _, v := range l {
		if v == "" {
			empty++
		}
	}
	switch {
	case empty == len(l):
		return nil
	case empty == 0:
		return l
	}
	out := make(Labels, len(l)-empty)
	for n, v := range l {
		if v != "" {
			out[n] = v
		}
	}
	return out
}

// Equal reports whether l and o hold the same pairs; nil and empty labels
// are equal.
func (l Labels) Equal(o Labels) bool { return maps.Equal(l, o) }

// Names returns the label names of l, ascending.
func (l Labels) Names() []string { return slices.Sorted(maps.Keys(l)) }

// Label is one name and value.
type Label struct {
	Name, Value string
}

// Diff returns the pairs of after that before lacks (gained) and the pairs
// of before that after lacks (lost), each ordered by name. A label whose
// value changes is both lost (the old value) and gained (the new one).
func Diff(before, after Labels) (gained, lost []Label) {
	for _, n := range after.Names() {
		if v, ok := before[n]; !ok || v != after[n] {
			gained = append(gained, Label{n, after[n]})
		}
	}
	for _, n := range before.Names() {
		if v, ok := after[n]; !ok || v != before[n] {
			lost = append(lost, Label{n, before[n]})
		}
	}
	return gained, lost
}
