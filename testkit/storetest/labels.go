package storetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// Tests of the label index (tiers.LabelIndex). Every store is held to a
// model of what was set: each read equals a brute force over the model.
//
// Label names, like series ids, start with the run's prefix (its dot an
// underscore, as names allow no dots), and each test adds its own tag, so
// that LabelNames can be compared with the model on a store that other
// tests and runs share.

// labelName is name under the run's prefix.
func (s suite) labelName(name string) string {
	return strings.TrimSuffix(s.prefix, ".") + "_" + name
}

// labelModel is what a test has set: each series' labels (none: absent).
type labelModel map[string]tiers.Labels

// set records SetLabels(id, l): pairs with an empty value are absent.
func (m labelModel) set(id string, l tiers.Labels) {
	l = maps.Clone(l)
	maps.DeleteFunc(l, func(_, v string) bool { return v == "" })
	if len(l) == 0 {
		delete(m, id)
		return
	}
	m[id] = l
}

// labelCheck is what checkLabels compares against the model.
type labelCheck struct {
	// ids are every id the test has used; SeriesLabels is asked for all
	// of them, twice, with an unknown one.
	ids []string
	// pairs are every pair the test has ever set: Postings of each.
	pairs map[tiers.Label]bool
	// namePrefix starts every label name of the test.
	namePrefix string
	// noted are the series NoteSeries has seen; listPrefix starts their
	// ids, so that ListSeries of it lists exactly them.
	noted      map[string]bool
	listPrefix string
}

// checkLabels compares every read of the index with the model.
func (s suite) checkLabels(t *testing.T, step string, m labelModel, c labelCheck) {
	t.Helper()
	// SeriesLabels, duplicates and an unknown id included.
	ask := append(slices.Clone(c.ids), c.ids...)
	ask = append(ask, s.series("labels.unknown"))
	got, err := s.store.SeriesLabels(ctx(t), ask)
	if err != nil {
		t.Fatalf("%s: SeriesLabels: %v", step, err)
	}
	for _, id := range c.ids {
		l, ok := got[id]
		if want, wok := m[id]; ok != wok || !l.Equal(want) {
			t.Fatalf("%s: SeriesLabels[%q] = %v (%v), want %v (%v)", step, id, l, ok, want, wok)
		}
	}
	if len(got) != len(m) {
		t.Fatalf("%s: SeriesLabels returned %d series, want %d: %v", step, len(got), len(m), got)
	}

	// Postings of every pair ever set.
	holders := map[tiers.Label][]string{}
	values := map[string][]string{}
	for id, l := range m {
		for n, v := range l {
			p := tiers.Label{Name: n, Value: v}
			if len(holders[p]) == 0 {
				values[n] = append(values[n], v)
			}
			holders[p] = append(holders[p], id)
		}
	}
	for p := range c.pairs {
		got, err := s.store.Postings(ctx(t), p.Name, p.Value)
		if err != nil {
			t.Fatalf("%s: Postings(%s, %q): %v", step, p.Name, p.Value, err)
		}
		want := holders[p]
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Postings(%s, %q) = %q, want %q", step, p.Name, p.Value, got, want)
		}
	}

	// LabelValues of every name ever set, and LabelNames.
	everNames := map[string]bool{}
	for p := range c.pairs {
		everNames[p.Name] = true
	}
	for n := range everNames {
		got, err := s.store.LabelValues(ctx(t), n)
		if err != nil {
			t.Fatalf("%s: LabelValues(%s): %v", step, n, err)
		}
		want := values[n]
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: LabelValues(%s) = %q, want %q", step, n, got, want)
		}
	}
	names, err := s.store.LabelNames(ctx(t))
	if err != nil {
		t.Fatalf("%s: LabelNames: %v", step, err)
	}
	if !slices.IsSorted(names) {
		t.Fatalf("%s: LabelNames not ascending: %q", step, names)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, c.namePrefix) })
	if want := slices.Sorted(maps.Keys(values)); !slices.Equal(names, want) {
		t.Fatalf("%s: LabelNames = %q, want %q", step, names, want)
	}

	// The registry shows the labels: LookupSeries and ListSeries.
	for id := range c.noted {
		info, err := s.store.LookupSeries(ctx(t), id)
		if err != nil {
			t.Fatalf("%s: LookupSeries(%q): %v", step, id, err)
		}
		if !info.Labels.Equal(m[id]) || (info.Labels != nil) != (m[id] != nil) {
			t.Fatalf("%s: LookupSeries(%q).Labels = %#v, want %#v", step, id, info.Labels, m[id])
		}
	}
	if c.listPrefix == "" {
		return
	}
	var listed []string
	after := ""
	for {
		page, err := s.store.ListSeries(ctx(t), c.listPrefix, after, 7)
		if err != nil {
			t.Fatalf("%s: ListSeries: %v", step, err)
		}
		for _, info := range page {
			listed = append(listed, info.ID)
			if !info.Labels.Equal(m[info.ID]) || (info.Labels != nil) != (m[info.ID] != nil) {
				t.Fatalf("%s: ListSeries lists %q with labels %#v, want %#v", step, info.ID, info.Labels, m[info.ID])
			}
		}
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].ID
	}
	if want := slices.Sorted(maps.Keys(c.noted)); !slices.Equal(listed, want) {
		t.Fatalf("%s: ListSeries = %q, want %q", step, listed, want)
	}
}

// trickyValues are label values whose bytes test the stores' encodings:
// values that start one another (with and without a NUL after the
// common part), NUL itself, separators of ids and selectors, quotes,
// multi-byte UTF-8 up to the largest code point, and 1024 bytes.
var trickyValues = []string{
	"a", "a\x00", "a\x00b", "a\x00\x00", "ab", "a.b", "a:b", "a-b", "a b", "A",
	"\x00", "\x01", "\x7f", "ü", "ünïcödé", "日本語", "🙂", "\U0010FFFF", "\uFFFD",
	"a=b", `x"y'z`, "{a=\"1\"}", ",", "0", "-1", "1e9", "  ", "\t\n",
	strings.Repeat("v", 1024), strings.Repeat("ü", 512),
}

// labelsEqualBruteForce sets random labels on random series — new labels,
// replacements, unchanged repeats, clears by nil, by an empty map and by
// empty values — and after every batch of steps compares every read of
// the index and the registry with the model.
func (s suite) labelsEqualBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	base := s.series("lab.")
	ids := []string{base + "a", base + "a.b", base + "a:b", base + "a-b", base + "a_b", base + "ab",
		base + "Z", base + "ü.ñ", base + "日本", base + "x.y.z:w"}
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("%sn%d", base, i))
	}
	names := []string{s.labelName("bf___name__"), s.labelName("bf_host"), s.labelName("bf_dc"),
		s.labelName("bf_a"), s.labelName("bf_ab"), s.labelName("bf_b")}
	pickValue := func(n int) string {
		if r.IntN(3) == 0 {
			return trickyValues[r.IntN(len(trickyValues))]
		}
		return fmt.Sprintf("v%d", r.IntN(n))
	}
	randomLabels := func() tiers.Labels {
		l := tiers.Labels{}
		for _, n := range names {
			if r.IntN(2) == 0 {
				l[n] = pickValue(4)
			}
		}
		return l
	}
	// Half the series are in the registry, so that LookupSeries and
	// ListSeries show their labels; the others have labels only.
	noted := map[string]bool{}
	var infos []tiers.SeriesInfo
	for i, id := range ids {
		if i%2 == 0 {
			noted[id] = true
			infos = append(infos, tiers.SeriesInfo{ID: id, First: now() - int64(i), Last: now()})
		}
	}
	if err := s.store.NoteSeries(ctx(t), infos); err != nil {
		t.Fatal(err)
	}
	m := labelModel{}
	c := labelCheck{ids: ids, pairs: map[tiers.Label]bool{}, namePrefix: s.labelName("bf_"), noted: noted, listPrefix: base}
	s.checkLabels(t, "before any labels", m, c)
	for step := 1; step <= 240; step++ {
		id := ids[r.IntN(len(ids))]
		var l tiers.Labels
		switch k := r.IntN(10); {
		case k == 0:
			l = nil
		case k == 1:
			l = tiers.Labels{}
		case k == 2: // empty values: those labels are absent
			l = randomLabels()
			for n := range l {
				if r.IntN(2) == 0 {
					l[n] = ""
				}
			}
		case k == 3 && m[id] != nil: // the same labels again
			l = maps.Clone(m[id])
		case k == 4 && m[id] != nil: // one value changed
			l = maps.Clone(m[id])
			n := slices.Sorted(maps.Keys(l))[r.IntN(len(l))]
			l[n] = pickValue(8)
		default:
			l = randomLabels()
		}
		if err := s.store.SetLabels(ctx(t), id, l); err != nil {
			t.Fatalf("step %d: SetLabels(%q, %v): %v", step, id, l, err)
		}
		m.set(id, l)
		for n, v := range l {
			if v != "" {
				c.pairs[tiers.Label{Name: n, Value: v}] = true
			}
		}
		if step%40 == 0 {
			s.checkLabels(t, fmt.Sprintf("step %d", step), m, c)
		}
	}
	// Clear everything: no value and no name of the test is left.
	for _, id := range ids {
		if err := s.store.SetLabels(ctx(t), id, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.checkLabels(t, "after clearing every series", labelModel{}, c)
}

// labelPostingsSpanEveryShard gives one pair to enough series to fill every
// shard a store may split postings into, reads it whole, then takes it
// from half of them and from the rest.
func (s suite) labelPostingsSpanEveryShard(t *testing.T) {
	const n = 1000
	name, other := s.labelName("wide_job"), s.labelName("wide_instance")
	ids := make([]string, n)
	m := labelModel{}
	for i := range ids {
		ids[i] = s.series(fmt.Sprintf("wide.%04d", i))
		m.set(ids[i], tiers.Labels{name: "api", other: fmt.Sprintf("i%d", i)})
	}
	s.setAll(t, m)
	c := labelCheck{ids: ids, pairs: map[tiers.Label]bool{{Name: name, Value: "api"}: true, {Name: other, Value: "i7"}: true,
		{Name: other, Value: "i999"}: true}, namePrefix: s.labelName("wide_")}
	s.checkLabels(t, "all labelled", m, c)
	values, err := s.store.LabelValues(ctx(t), other)
	if err != nil || len(values) != n {
		t.Fatalf("LabelValues(%s): %d values, %v; want %d", other, len(values), err, n)
	}

	half := labelModel{}
	for i, id := range ids {
		if i%2 == 1 {
			half.set(id, tiers.Labels{name: "web"})
		}
	}
	s.setAll(t, half)
	for id, l := range half {
		m.set(id, l)
	}
	c.pairs[tiers.Label{Name: name, Value: "web"}] = true
	s.checkLabels(t, "half moved to another job", m, c)

	cleared := labelModel{}
	for _, id := range ids {
		cleared[id] = nil
	}
	s.setAll(t, cleared)
	s.checkLabels(t, "all cleared", labelModel{}, c)
}

// setAll sets the labels of every series of m, 16 calls at once.
func (s suite) setAll(t *testing.T, m labelModel) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(m))
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for id := range work {
				if err := s.store.SetLabels(ctx(t), id, m[id]); err != nil {
					errs <- fmt.Errorf("SetLabels(%q): %w", id, err)
				}
			}
		})
	}
	for id := range m {
		work <- id
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// labelsConcurrently runs SetLabels of different series at once, each
// series changing its labels several times among a few shared pairs, so
// that one call removes the last posting of a pair while another adds
// one: the index ends exactly as the last labels of each series say.
func (s suite) labelsConcurrently(t *testing.T) {
	const series, changes = 48, 6
	names := []string{s.labelName("conc_a"), s.labelName("conc_b"), s.labelName("conc_c")}
	ids := make([]string, series)
	final := make([]tiers.Labels, series)
	var wg sync.WaitGroup
	errs := make(chan error, series)
	for i := range ids {
		ids[i] = s.series(fmt.Sprintf("conc.%02d", i))
		r := rand.New(rand.NewPCG(31, uint64(i)))
		wg.Go(func() {
			var l tiers.Labels
			for range changes {
				l = tiers.Labels{}
				for _, n := range names {
					if r.IntN(3) > 0 {
						l[n] = fmt.Sprintf("v%d", r.IntN(3))
					}
				}
				if err := s.store.SetLabels(ctx(t), ids[i], l); err != nil {
					errs <- err
					return
				}
			}
			final[i] = l
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	m := labelModel{}
	c := labelCheck{ids: ids, pairs: map[tiers.Label]bool{}, namePrefix: s.labelName("conc_")}
	for i, id := range ids {
		m.set(id, final[i])
	}
	for _, n := range names {
		for v := range 3 {
			c.pairs[tiers.Label{Name: n, Value: fmt.Sprintf("v%d", v)}] = true
		}
	}
	s.checkLabels(t, "after concurrent changes", m, c)

	// All at once again, each series now clearing its labels or taking
	// the one pair they all share: it stays listed exactly when some
	// series holds it.
	var keep []int
	wg = sync.WaitGroup{}
	for i := range ids {
		var l tiers.Labels
		if i%5 == 0 {
			l = tiers.Labels{names[0]: "shared"}
			keep = append(keep, i)
		}
		m.set(ids[i], l)
		wg.Go(func() {
			if err := s.store.SetLabels(ctx(t), ids[i], l); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	c.pairs[tiers.Label{Name: names[0], Value: "shared"}] = true
	s.checkLabels(t, "after concurrent clears", m, c)
	if len(keep) == 0 {
		t.Fatal("no series kept a label")
	}
}

// labelsRefusedAndAbsent: labels no store can keep are refused whole,
// leaving the series' labels as they were; empty values are absent; a
// series may have labels before the registry knows it.
func (s suite) labelsRefusedAndAbsent(t *testing.T) {
	id := s.series("labedge")
	a, b := s.labelName("edge_a"), s.labelName("edge_b")
	if err := s.store.SetLabels(ctx(t), id, tiers.Labels{a: "1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []tiers.Labels{
		{a: "2", tiers.SeriesLabel: id},
		{a: "2", "": "x"},
		{a: "2", b: "\xff\xfe"},
		{a: "2", "b\xff": "x"},
		{a: "2", "b\x00c": "x"},
	} {
		err := s.store.SetLabels(ctx(t), id, bad)
		if !errors.Is(err, tiers.ErrBadLabel) {
			t.Errorf("SetLabels(%q): err = %v, want ErrBadLabel", bad, err)
		}
	}
	m := labelModel{id: {a: "1"}}
	c := labelCheck{ids: []string{id}, pairs: map[tiers.Label]bool{{Name: a, Value: "1"}: true, {Name: a, Value: "2"}: true},
		namePrefix: s.labelName("edge_")}
	s.checkLabels(t, "after refused labels", m, c)

	// Empty values are absent: not stored, not listed, no postings.
	if err := s.store.SetLabels(ctx(t), id, tiers.Labels{a: "1", b: ""}); err != nil {
		t.Fatal(err)
	}
	s.checkLabels(t, "with an empty value", m, c)
	if got, err := s.store.Postings(ctx(t), b, ""); err != nil || len(got) != 0 {
		t.Fatalf("Postings of an empty value = %q, %v", got, err)
	}
	if got, err := s.store.Postings(ctx(t), tiers.SeriesLabel, id); err != nil || len(got) != 0 {
		t.Fatalf("Postings of the series pseudo-label = %q, %v; it is never stored", got, err)
	}
	if got, err := s.store.SeriesLabels(ctx(t), []string{s.series("bad\xff")}); err != nil || len(got) != 0 {
		t.Fatalf("SeriesLabels of an id that is not UTF-8 = %v, %v; want none", got, err)
	}

	// Labelled before the registry knows it: found by its postings, not
	// by LookupSeries or ListSeries, until NoteSeries.
	if _, err := s.store.LookupSeries(ctx(t), id); !errors.Is(err, tiers.ErrNotFound) {
		t.Fatalf("LookupSeries of a series with labels only: %v, want ErrNotFound", err)
	}
	if listed, err := s.store.ListSeries(ctx(t), id, "", 10); err != nil || len(listed) != 0 {
		t.Fatalf("ListSeries lists a series with labels only: %v, %v", listed, err)
	}
	if err := s.store.NoteSeries(ctx(t), []tiers.SeriesInfo{{ID: id, First: now(), Last: now()}}); err != nil {
		t.Fatal(err)
	}
	c.noted, c.listPrefix = map[string]bool{id: true}, id
	s.checkLabels(t, "once noted", m, c)
	if err := s.store.SetLabels(ctx(t), id, tiers.Labels{a: ""}); err != nil {
		t.Fatal(err)
	}
	s.checkLabels(t, "cleared by an empty value", labelModel{}, c)
}
