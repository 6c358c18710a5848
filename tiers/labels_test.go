package tiers

import (
	"errors"
	"slices"
	"testing"
)

func TestCheckStorable(t *testing.T) {
	cases := []struct {
		labels Labels
		ok     bool
	}{
		{nil, true},
		{Labels{}, true},
		{Labels{"__name__": "cpu", "host": "a"}, true},
		{Labels{"a": "with\x00nul", "b": "ünïcödé", "c": "\U0010FFFF"}, true},
		{Labels{"a": ""}, true}, // absent, not refused
		{Labels{"": "x"}, false},
		{Labels{SeriesLabel: "id"}, false},
		{Labels{"a\x00b": "x"}, false},
		{Labels{"a\xff": "x"}, false},
		{Labels{"a": "\xff\xfe"}, false},
	}
	for _, c := range cases {
		err := c.labels.CheckStorable()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadLabel)) {
			t.Errorf("CheckStorable(%q) = %v, want ok %v", c.labels, err, c.ok)
		}
	}
}

func TestStoredDropsEmptyValues(t *testing.T) {
	if got := (Labels{"a": "", "b": ""}).Stored(); got != nil {
		t.Errorf("only empty values: %v, want nil", got)
	}
	if got := Labels(nil).Stored(); got != nil {
		t.Errorf("nil: %v, want nil", got)
	}
	l := Labels{"a": "1", "b": "2"}
	if got := l.Stored(); !got.Equal(l) {
		t.Errorf("no empty value: %v, want %v", got, l)
	}
	mixed := Labels{"a": "1", "b": ""}
	if got := mixed.Stored(); !got.Equal(Labels{"a": "1"}) || len(mixed) != 2 {
		t.Errorf("mixed: %v (input now %v), want a=1 and the input unchanged", got, mixed)
	}
}

func TestDiff(t *testing.T) {
	before := Labels{"a": "1", "b": "2", "c": "3"}
	after := Labels{"a": "1", "b": "20", "d": "4"}
	gained, lost := Diff(before, after)
	if want := []Label{{"b", "20"}, {"d", "4"}}; !slices.Equal(gained, want) {
		t.Errorf("gained %v, want %v", gained, want)
	}
	if want := []Label{{"b", "2"}, {"c", "3"}}; !slices.Equal(lost, want) {
		t.Errorf("lost %v, want %v", lost, want)
	}
	if g, l := Diff(nil, nil); g != nil || l != nil {
		t.Errorf("Diff(nil, nil) = %v, %v", g, l)
	}
	if g, l := Diff(before, before); g != nil || l != nil {
		t.Errorf("Diff of equal labels = %v, %v", g, l)
	}
}
