package tiers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func randomLayout(r *rand.Rand) Layout {
	widths := []int64{Second, 7 * Second, Minute, 15 * Minute, Hour, 3 * Hour, Day}
	n := 1 + r.IntN(4)
	l := Layout{{Since: r.Int64N(Day) - Day/2, Width: widths[r.IntN(len(widths))], EventBuckets: 1 + r.IntN(6)}}
	since := l[0].Since
	for range n - 1 {
		since += 1 + r.Int64N(2*Day)
		l = append(l, LayoutEntry{Since: since, Width: widths[r.IntN(len(widths))], EventBuckets: 1 + r.IntN(6)})
	}
	return l
}

// The enumeration property: for any range, the buckets yielded are exactly
// the buckets that hold a point of the range — every point of a random set
// lies in a yielded bucket, and every yielded bucket intersects the range —
// they are disjoint, contiguous and in order, and desc is the reverse of asc.
func TestBucketsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		l := randomLayout(r)
		if err := l.Validate(); err != nil {
			t.Fatalf("iteration %d: generated invalid layout %+v: %v", iter, l, err)
		}
		from := r.Int64N(6*Day) - 2*Day
		span := Span{From: from, To: from + 1 + r.Int64N(Day)}

		asc := slices.Collect(l.Buckets(span, false))
		desc := slices.Collect(l.Buckets(span, true))
		slices.Reverse(desc)
		if !slices.Equal(asc, desc) {
			t.Fatalf("layout %+v span %+v: desc enumeration is not asc reversed", l, span)
		}
		if len(asc) == 0 {
			t.Fatalf("layout %+v span %+v: no buckets for a non-empty span", l, span)
		}
		if !asc[0].Span().Contains(span.From) || !asc[len(asc)-1].Span().Contains(span.To-1) {
			t.Fatalf("layout %+v span %+v: buckets %+v do not reach both ends", l, span, asc)
		}
		for i, b := range asc {
			if b.Span().Intersect(span).Empty() {
				t.Fatalf("layout %+v span %+v: bucket %+v lies outside the range", l, span, b)
			}
			if i > 0 && asc[i-1].End != b.Start {
				t.Fatalf("layout %+v span %+v: buckets %+v and %+v are not contiguous", l, span, asc[i-1], b)
			}
		}
		// Every point of a random set inside the range maps to exactly one
		// enumerated partition.
		for range 50 {
			pt := span.From + r.Int64N(span.To-span.From)
			start, eb := l.Locate(pt)
			idx := slices.IndexFunc(asc, func(b Bucket) bool { return b.Start == start })
			if idx < 0 {
				t.Fatalf("layout %+v span %+v: point %d in bucket %d which was not enumerated", l, span, pt, start)
			}
			if b := asc[idx]; !b.Span().Contains(pt) || eb < 0 || eb >= b.EventBuckets {
				t.Fatalf("layout %+v: point %d located in bucket %+v, event bucket %d", l, pt, b, eb)
			}
		}
		bs, ps := l.CountBuckets(span)
		wantPs := 0
		for _, b := range asc {
			wantPs += b.EventBuckets
		}
		if bs != len(asc) || ps != wantPs {
			t.Fatalf("CountBuckets = %d, %d; enumeration has %d, %d", bs, ps, len(asc), wantPs)
		}
	}
}

// BucketOf agrees with a brute-force walk: stepping through time one unit at
// a time, a new bucket starts exactly at Since_i + k*Width_i or at a layout
// change, and never elsewhere.
func TestBucketOfBruteForce(t *testing.T) {
	l := Layout{
		{Since: 0, Width: 10 * Second, EventBuckets: 2},
		{Since: 25 * Second, Width: 4 * Second, EventBuckets: 3},
		{Since: 31 * Second, Width: 60 * Second, EventBuckets: 1},
	}
	isBoundary := func(ts int64) bool {
		switch {
		case ts < 25*Second:
			return ts%(10*Second) == 0
		case ts < 31*Second:
			return (ts-25*Second)%(4*Second) == 0
		default:
			return (ts-31*Second)%(60*Second) == 0
		}
	}
	prev := l.BucketOf(-30 * Second)
	for ts := -30*Second + 1; ts < 200*Second; ts++ {
		b := l.BucketOf(ts)
		if !b.Span().Contains(ts) {
			t.Fatalf("BucketOf(%d) = %+v does not contain it", ts, b)
		}
		if changed := b != prev; changed != isBoundary(ts) {
			t.Fatalf("at %d: bucket changed=%v from %+v to %+v, boundary=%v", ts, changed, prev, b, isBoundary(ts))
		}
		prev = b
	}
	if got := l.BucketOf(24 * Second); got != (Bucket{Start: 20 * Second, End: 25 * Second, EventBuckets: 2}) {
		t.Fatalf("last bucket before a layout change = %+v, want it cut at the change", got)
	}
}

func TestEventBucketIsStable(t *testing.T) {
	// These values are stored data's partition assignment; they must never
	// change.
	cases := []struct {
		t    int64
		n    int
		want int
	}{
		{0, 4, 3}, {1, 4, 1}, {1768487842123, 4, 3}, {1768487842124, 4, 1},
		{-1, 4, 0}, {1768487842123, 7, 6}, {1768487842123, 1, 0}, {42, 64, 21},
	}
	for _, c := range cases {
		if got := EventBucket(c.t, c.n); got != c.want {
			t.Errorf("EventBucket(%d, %d) = %d, want %d", c.t, c.n, got, c.want)
		}
	}
}

// A busy second's points spread over all event buckets.
func TestEventBucketSpreads(t *testing.T) {
	counts := make([]int, 4)
	for ms := int64(1768487842000); ms < 1768487842000+4000; ms++ {
		counts[EventBucket(ms, 4)]++
	}
	for eb, c := range counts {
		if c < 800 || c > 1200 {
			t.Fatalf("event bucket %d got %d of 4000 consecutive timestamps: %v", eb, c, counts)
		}
	}
}

func TestAlign(t *testing.T) {
	cases := []struct{ t, step, down, up int64 }{
		{0, 60, 0, 0}, {59, 60, 0, 60}, {60, 60, 60, 60}, {-1, 60, -60, 0}, {-60, 60, -60, -60}, {-61, 60, -120, -60},
	}
	for _, c := range cases {
		if d, u := AlignDown(c.t, c.step), AlignUp(c.t, c.step); d != c.down || u != c.up {
			t.Errorf("align(%d, %d) = %d, %d; want %d, %d", c.t, c.step, d, u, c.down, c.up)
		}
	}
}

func TestPyramidValidate(t *testing.T) {
	p := DefaultPyramid()
	if err := p.Validate(); err != nil {
		t.Fatalf("default pyramid invalid: %v", err)
	}
	for _, c := range []struct {
		name   string
		break_ func(p Pyramid) Pyramid
	}{
		{"a minute bucket that is not a whole number of minutes", func(p Pyramid) Pyramid { p[1].BucketWidth = 90 * Second; return p }},
		{"an hour tier keeping less than the minute tier", func(p Pyramid) Pyramid { p[2].Retention = Day; return p }},
		{"zero event buckets", func(p Pyramid) Pyramid { p[0].EventBuckets = 0; return p }},
		{"a step that does not divide the next", func(p Pyramid) Pyramid {
			p = append(Pyramid{p[0], NewRollupTier("sec7", 7*Second, Day, 14*Day, Day)}, p[1:]...)
			p.Renumber()
			return p
		}},
		{"a step finer than the one below", func(p Pyramid) Pyramid { p[1], p[2] = p[2], p[1]; p.Renumber(); return p }},
		{"a duplicate name", func(p Pyramid) Pyramid { p[2].Name = "minute"; return p }},
		{"a reserved name", func(p Pyramid) Pyramid { p[2].Name = "auto"; return p }},
		{"a name with upper case", func(p Pyramid) Pyramid { p[2].Name = "Hour"; return p }},
		{"a first tier that is not raw", func(p Pyramid) Pyramid { p = p[1:]; p.Renumber(); return p }},
		{"an auto threshold on the coarsest tier", func(p Pyramid) Pyramid { p[3].AutoMax = 365 * Day; return p }},
		{"auto thresholds that do not grow", func(p Pyramid) Pyramid { p[2].AutoMax = Day; return p }},
		{"a wrong table", func(p Pyramid) Pyramid { p[2].Table = "rollup_x"; return p }},
		{"event buckets on a rollup tier", func(p Pyramid) Pyramid { p[1].EventBuckets = 2; return p }},
		{"no tiers", func(Pyramid) Pyramid { return nil }},
	} {
		if err := c.break_(DefaultPyramid()).Validate(); err == nil {
			t.Errorf("%s was accepted", c.name)
		}
	}
}

// A five-tier pyramid with a 10s tier under the minute tier is valid, and
// the syntax of the --tiers flag round-trips.
func TestParsePyramid(t *testing.T) {
	dur := func(s string) (int64, error) {
		for _, u := range []struct {
			suffix string
			ms     int64
		}{{"ms", 1}, {"s", Second}, {"m", Minute}, {"h", Hour}, {"d", Day}} {
			if n, ok := strings.CutSuffix(s, u.suffix); ok {
				v, err := strconv.ParseInt(n, 10, 64)
				return v * u.ms, err
			}
		}
		return 0, fmt.Errorf("bad duration %q", s)
	}
	def, err := ParsePyramid(DefaultPyramid().String(), dur)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(def, DefaultPyramid()) {
		t.Fatalf("default pyramid does not round-trip:\n%v\n%v", def, DefaultPyramid())
	}
	spec := "name=raw,bucket=1h,event-buckets=4,retention=7d,auto-max=1h;" +
		"name=10s,step=10s,bucket=6h,retention=14d,auto-max=1d;" +
		"name=minute,step=1m,bucket=1d,retention=30d,auto-max=7d;" +
		"name=hour,step=1h,bucket=30d,retention=365d,auto-max=90d;" +
		"name=day,step=1d,bucket=365d,retention=0ms"
	p, err := ParsePyramid(spec, dur)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 5 || p[1].Table != "rollup_10s" || p[2].Table != "rollup_1m" || p.DirtyStep() != 10*Second {
		t.Fatalf("parsed %+v", p)
	}
	for _, bad := range []string{
		"", "name=raw", "name=raw,bucket=1h,retention=7d,colour=red",
		"name=raw,bucket=1h,retention=7d;name=x,step=90ms,bucket=1h,retention=7d",
		"name=raw,bucket=1h,bucket=2h,retention=7d",
	} {
		if _, err := ParsePyramid(bad, dur); err == nil {
			t.Errorf("ParsePyramid(%q) accepted", bad)
		}
	}
}
