package partial

import (
	"sync"

	"github.com/tsgate/tsgate/tiers"
)

// A bucket's raw points are spread over its event-bucket partitions by a
// hash of their time, so its pages interleave point by point, and a merge
// that scans every page's head for each point spends most of its time on
// the scan. mergePoints merges them pairwise instead, as a balanced tree
// of two-way merges over the points' two columns: each point is compared
// once per level (two levels for the usual four partitions plus one for a
// late partition), with one comparison and one branch per point. Pages in
// descending order merge the same way into descending columns.

// pointColumns are the columns of merged raw points, and scratch space
// for the levels of a merge.
type pointColumns struct {
	t []int64
	v []float64
}

var scratchPool = sync.Pool{New: func() any { return new(pointColumns) }}

// mergePoints merges pages of raw points, ascending or, when desc is
// set, descending, into t and v (each as long as all pages together) in
// the same order, the later page winning on equal times, and returns how
// many points it wrote.
func mergePoints(pages [][]tiers.Row, desc bool, t []int64, v []float64) int {
	if len(pages) <= 2 {
		return mergePointPair(pages, desc, t, v)
	}
	sc := scratchPool.Get().(*pointColumns)
	if cap(sc.t) < len(t) {
		sc.t, sc.v = make([]int64, len(t)), make([]float64, len(t))
	}
	n := mergeLevels(pages, desc, t, v, sc.t[:len(t)], sc.v[:len(t)])
	scratchPool.Put(sc)
	return n
}

// mergeLevels writes the merge of pages into t, v, using tmpT, tmpV (as
// long) for the levels below: each half is merged into the scratch with
// this level's output as its own scratch, which is free until the halves
// are merged into it.
func mergeLevels(pages [][]tiers.Row, desc bool, t []int64, v []float64, tmpT []int64, tmpV []float64) int {
	if len(pages) <= 2 {
		return mergePointPair(pages, desc, t, v)
	}
	h := len(pages) / 2
	nl := 0
	for _, p := range pages[:h] {
		nl += len(p)
	}
	a := mergeLevels(pages[:h], desc, tmpT[:nl], tmpV[:nl], t[:nl], v[:nl])
	b := mergeLevels(pages[h:], desc, tmpT[nl:], tmpV[nl:], t[nl:], v[nl:])
	return mergeColumns(tmpT[:a], tmpV[:a], tmpT[nl:nl+b], tmpV[nl:nl+b], desc, t, v)
}

// mergePointPair merges up to two pages of rows into columns.
func mergePointPair(pages [][]tiers.Row, desc bool, t []int64, v []float64) int {
	switch len(pages) {
	case 0:
		return 0
	case 1:
		p := pages[0]
		t, v = t[:len(p)], v[:len(p)]
		for i, r := range p {
			t[i], v[i] = r.T, r.Sum
		}
		return len(p)
	}
	a, b := pages[0], pages[1]
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i].T, b[j].T
		if x != y && (x < y) != desc {
			t[k], v[k] = x, a[i].Sum
			i++
		} else {
			t[k], v[k] = y, b[j].Sum
			j++
			if x == y {
				i++ // the later page wins
			}
		}
		k++
	}
	for _, r := range a[i:] {
		t[k], v[k] = r.T, r.Sum
		k++
	}
	for _, r := range b[j:] {
		t[k], v[k] = r.T, r.Sum
		k++
	}
	return k
}

// mergeColumns merges two runs of points in the same order, b winning on
// equal times.
func mergeColumns(at []int64, av []float64, bt []int64, bv []float64, desc bool, t []int64, v []float64) int {
	av, bv = av[:len(at)], bv[:len(bt)]
	i, j, k := 0, 0, 0
	for i < len(at) && j < len(bt) {
		x, y := at[i], bt[j]
		if x != y && (x < y) != desc {
			t[k], v[k] = x, av[i]
			i++
		} else {
			t[k], v[k] = y, bv[j]
			j++
			if x == y {
				i++
			}
		}
		k++
	}
	copy(v[k:], av[i:])
	k += copy(t[k:], at[i:])
	copy(v[k:], bv[j:])
	return k + copy(t[k:], bt[j:])
}
