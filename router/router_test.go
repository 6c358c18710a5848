package router

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

const now = int64(1768487842123) // 2026-01-15T14:37:22.123Z

var noLag = Watermarks{tiers.MaxTime, tiers.MaxTime, tiers.MaxTime, tiers.MaxTime}

func route(t *testing.T, req Request, wm Watermarks) Plan {
	t.Helper()
	p := tiers.DefaultPyramid()
	plan, err := Route(req, now, &p, DefaultConfig(), wm)
	if err != nil {
		t.Fatalf("Route(%+v): %v", req, err)
	}
	return plan
}

func lastN(d int64) tiers.Span { return tiers.Span{From: now - d, To: now} }

func TestAutoThresholds(t *testing.T) {
	const ms = 1
	cases := []struct {
		name string
		span tiers.Span
		tier tiers.Level
		step int64
	}{
		{"1 minute", lastN(tiers.Minute), tiers.LevelRaw, 0},
		{"6h exactly", lastN(6 * tiers.Hour), tiers.LevelRaw, 0},
		{"6h and 1ms", lastN(6*tiers.Hour + ms), tiers.LevelMinute, tiers.Minute},
		{"7d exactly", lastN(7 * tiers.Day), tiers.LevelMinute, tiers.Minute},
		{"7d and 1ms", lastN(7*tiers.Day + ms), tiers.LevelHour, tiers.Hour},
		{"90d exactly", lastN(90 * tiers.Day), tiers.LevelHour, tiers.Hour},
		{"90d and 1ms", lastN(90*tiers.Day + ms), tiers.LevelDay, tiers.Day},
		{"10 years", lastN(3650 * tiers.Day), tiers.LevelDay, tiers.Day},
		// Retention edges: raw keeps 7d, minute 30d, hour 365d.
		{"5h starting exactly 7d ago", tiers.Span{From: now - 7*tiers.Day, To: now - 7*tiers.Day + 5*tiers.Hour}, tiers.LevelRaw, 0},
		{"5h starting 7d and 1ms ago", tiers.Span{From: now - 7*tiers.Day - ms, To: now - 7*tiers.Day + 5*tiers.Hour}, tiers.LevelMinute, tiers.Minute},
		{"2d starting 31d ago", tiers.Span{From: now - 31*tiers.Day, To: now - 29*tiers.Day}, tiers.LevelHour, tiers.Hour},
		{"5h starting 31d ago climbs two tiers", tiers.Span{From: now - 31*tiers.Day, To: now - 31*tiers.Day + 5*tiers.Hour}, tiers.LevelHour, tiers.Hour},
		{"30d starting 2y ago", tiers.Span{From: now - 730*tiers.Day, To: now - 700*tiers.Day}, tiers.LevelDay, tiers.Day},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := route(t, Request{Span: c.span}, noLag)
			if plan.Tier != c.tier || plan.Step != c.step {
				t.Fatalf("got %s step %d, want %s step %d (%s)", plan.Tier, plan.Step, c.tier, c.step, plan.Reason)
			}
			if len(plan.Warnings) != 0 {
				t.Fatalf("auto produced warnings %v", plan.Warnings)
			}
			p := tiers.DefaultPyramid()
			if !p.Tier(plan.Tier).Covers(plan.Read.From, now) {
				t.Fatalf("auto picked %s, which does not keep %d", plan.Tier, plan.Read.From)
			}
		})
	}
}

func TestExplicitResolution(t *testing.T) {
	cases := []struct {
		window int64
		tier   tiers.Level
	}{
		{tiers.Second, tiers.LevelRaw},
		{1500, tiers.LevelRaw},
		{90 * tiers.Second, tiers.LevelRaw},
		{tiers.Minute, tiers.LevelMinute},
		{5 * tiers.Minute, tiers.LevelMinute},
		{90 * tiers.Minute, tiers.LevelMinute},
		{tiers.Hour, tiers.LevelHour},
		{36 * tiers.Hour, tiers.LevelHour},
		{tiers.Day, tiers.LevelDay},
		{7 * tiers.Day, tiers.LevelDay},
	}
	for _, c := range cases {
		plan := route(t, Request{Span: lastN(tiers.Day), Resolution: Resolution{Kind: Window, Window: c.window}}, noLag)
		if plan.Tier != c.tier || plan.Step != c.window {
			t.Errorf("window %d: got %s step %d, want %s", c.window, plan.Tier, plan.Step, c.tier)
		}
		if plan.Read.From%c.window != 0 || plan.Read.To%c.window != 0 {
			t.Errorf("window %d: read %+v is not aligned to whole windows", c.window, plan.Read)
		}
		if plan.Read.From < now-tiers.Day || plan.Read.From-c.window >= now-tiers.Day {
			t.Errorf("window %d: read starts at %d, want the first window start >= from", c.window, plan.Read.From)
		}
	}
	p := tiers.DefaultPyramid()
	if _, err := Route(Request{Span: lastN(tiers.Day), Resolution: Resolution{Kind: Window, Window: 999}}, now, &p, DefaultConfig(), noLag); err == nil {
		t.Fatal("a window under 1s was accepted")
	}
}

func TestExplicitResolutionWarnsBeyondRetention(t *testing.T) {
	plan := route(t, Request{Span: lastN(40 * tiers.Day), Resolution: Resolution{Kind: Window, Window: tiers.Minute}}, noLag)
	if plan.Tier != tiers.LevelMinute {
		t.Fatalf("explicit 1m went to %s", plan.Tier)
	}
	want := "minute tier keeps 30d; no points before 1765895842123"
	if !slices.Equal(plan.Warnings, []string{want}) {
		t.Fatalf("warnings = %q, want %q", plan.Warnings, want)
	}
	plan = route(t, Request{Span: lastN(7 * tiers.Day), Resolution: Resolution{Kind: RawPoints}}, noLag)
	if len(plan.Warnings) != 0 {
		t.Fatalf("raw over exactly its retention warned: %v", plan.Warnings)
	}
	plan = route(t, Request{Span: lastN(7*tiers.Day + 1), Resolution: Resolution{Kind: RawPoints}}, noLag)
	if len(plan.Warnings) != 1 || !strings.HasPrefix(plan.Warnings[0], "raw tier keeps 7d") {
		t.Fatalf("raw beyond retention: warnings %v", plan.Warnings)
	}
}

func TestMaxPointsEdges(t *testing.T) {
	cases := []struct {
		name   string
		length int64
		max    int64
		tier   tiers.Level
		window int64
	}{
		{"need under 1s rounds up to 1s", tiers.Minute, 1000, tiers.LevelRaw, tiers.Second},
		{"need 59.999s", 59999 * 1000, 1000, tiers.LevelRaw, 60 * tiers.Second},
		{"need exactly 1m", tiers.Minute * 1000, 1000, tiers.LevelMinute, tiers.Minute},
		{"need 1m and 1ms", (tiers.Minute + 1) * 1000, 1000, tiers.LevelMinute, 2 * tiers.Minute},
		{"need just under 1h", (tiers.Hour - 1) * 100, 100, tiers.LevelMinute, tiers.Hour},
		{"need exactly 1h", tiers.Hour * 100, 100, tiers.LevelHour, tiers.Hour},
		{"need 1d", tiers.Day * 50, 50, tiers.LevelDay, tiers.Day},
		{"need 2.5d", 5 * tiers.Day, 2, tiers.LevelDay, 3 * tiers.Day},
		{"one point", tiers.Hour, 1, tiers.LevelHour, tiers.Hour},
		{"grafana 6h over 1920px", 6 * tiers.Hour, 1920, tiers.LevelRaw, 12 * tiers.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := route(t, Request{Span: tiers.Span{From: now - c.length, To: now}, MaxPoints: c.max}, noLag)
			if plan.Tier != c.tier || plan.Step != c.window {
				t.Fatalf("got %s at %d, want %s at %d (%s)", plan.Tier, plan.Step, c.tier, c.window, plan.Reason)
			}
		})
	}
}

// For random ranges and max_points: at most max_points windows start in the
// range, the window is a whole number of the tier's step, it is the smallest
// such window >= range/max_points, and the tier is the coarsest allowed.
func TestMaxPointsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	p := tiers.DefaultPyramid()
	for range 20000 {
		length := 1 + r.Int64N(400*tiers.Day)
		to := now - r.Int64N(tiers.Day)
		span := tiers.Span{From: to - length, To: to}
		maxPoints := 1 + r.Int64N(5000)
		plan, err := Route(Request{Span: span, MaxPoints: maxPoints}, now, &p, DefaultConfig(), noLag)
		if err != nil {
			t.Fatal(err)
		}
		w := plan.Step
		windows := (plan.Read.To - plan.Read.From) / w
		if windows > maxPoints {
			t.Fatalf("span %+v max %d: %d windows of %d", span, maxPoints, windows, w)
		}
		unit := p.Tier(plan.Tier).Step
		if plan.Tier == tiers.LevelRaw {
			unit = tiers.Second
		}
		need := (length + maxPoints - 1) / maxPoints
		if w%unit != 0 || w < need || (w-unit >= need && w > unit) {
			t.Fatalf("span %+v max %d: window %d on %s is not the smallest multiple of %d >= %d", span, maxPoints, w, plan.Tier, unit, need)
		}
		if !p.Tier(plan.Tier).Covers(plan.Read.From, now) {
			t.Fatalf("tier %s does not keep the range start", plan.Tier)
		}
		if plan.Tier < tiers.LevelDay && p.Tier(plan.Tier+1).Step <= need && p.Tier(plan.Tier).Covers(plan.Read.From, now) && plan.Tier != tiers.LevelRaw {
			t.Fatalf("span %+v max %d: %s chosen though %s has step <= %d", span, maxPoints, plan.Tier, plan.Tier+1, need)
		}
	}
}

func TestStitchFillsRecentWindowsFromFinerTiers(t *testing.T) {
	span := tiers.Span{From: now - 60*tiers.Day, To: now} // hour tier
	wm := Watermarks{0, tiers.AlignDown(now, tiers.Minute) - 10*tiers.Minute, tiers.AlignDown(now, tiers.Hour) - 2*tiers.Hour, 0}
	plan := route(t, Request{Span: span}, wm)
	if plan.Tier != tiers.LevelHour {
		t.Fatalf("tier %s", plan.Tier)
	}
	want := []Segment{
		{Span: tiers.Span{From: plan.Read.From, To: wm[tiers.LevelHour]}, Tier: tiers.LevelHour},
		{Span: tiers.Span{From: wm[tiers.LevelHour], To: wm[tiers.LevelMinute]}, Tier: tiers.LevelMinute},
		{Span: tiers.Span{From: wm[tiers.LevelMinute], To: plan.Read.To}, Tier: tiers.LevelRaw},
	}
	if !slices.Equal(plan.Segments, want) {
		t.Fatalf("segments\n got %+v\nwant %+v", plan.Segments, want)
	}
	// A coarser tier ahead of a finer one is clamped to it.
	wm[tiers.LevelHour] = tiers.MaxTime
	plan = route(t, Request{Span: span}, wm)
	if n := len(plan.Segments); n != 2 || plan.Segments[0].Span.To != wm[tiers.LevelMinute] || plan.Segments[1].Tier != tiers.LevelRaw {
		t.Fatalf("segments %+v", plan.Segments)
	}
	// Never rolled up: raw serves everything.
	plan = route(t, Request{Span: span}, Watermarks{tiers.MinTime, tiers.MinTime, tiers.MinTime, tiers.MinTime})
	if !slices.Equal(plan.Segments, []Segment{{Span: plan.Read, Tier: tiers.LevelRaw}}) {
		t.Fatalf("segments %+v", plan.Segments)
	}
	// Segments always partition the read range.
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		wm := Watermarks{0, now - r.Int64N(90*tiers.Day), now - r.Int64N(90*tiers.Day), now - r.Int64N(400*tiers.Day)}
		plan := route(t, Request{Span: lastN(1 + r.Int64N(500*tiers.Day))}, wm)
		at := plan.Read.From
		for i, s := range plan.Segments {
			if s.Span.From != at || s.Span.Empty() || (i > 0 && s.Tier >= plan.Segments[i-1].Tier) {
				t.Fatalf("segments %+v do not partition %+v finest-last", plan.Segments, plan.Read)
			}
			at = s.Span.To
		}
		if at != plan.Read.To && !plan.Read.Empty() {
			t.Fatalf("segments %+v end at %d, read %+v", plan.Segments, at, plan.Read)
		}
	}
}

func TestRouteRejects(t *testing.T) {
	p := tiers.DefaultPyramid()
	cases := []struct {
		req   Request
		param string
	}{
		{Request{Span: tiers.Span{From: now, To: now}}, "from"},
		{Request{Span: lastN(tiers.Hour), MaxPoints: 10, Resolution: Resolution{Kind: RawPoints}}, "max_points"},
		{Request{Span: lastN(tiers.Hour), Resolution: Resolution{Kind: Window, Window: 10}}, "resolution"},
	}
	for _, c := range cases {
		_, err := Route(c.req, now, &p, DefaultConfig(), noLag)
		re, ok := err.(*Error)
		if !ok || re.Param != c.param {
			t.Errorf("Route(%+v) = %v, want an error naming %s", c.req, err, c.param)
		}
	}
}
