package router

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

const now = int64(1768487842123) // 2026-01-15T14:37:22.123Z

var noLag = tiers.Watermarks{tiers.MaxTime, tiers.MaxTime, tiers.MaxTime, tiers.MaxTime}

// The levels of the default pyramid.
const (
	raw tiers.Level = iota
	minute
	hour
	day
)

func route(t *testing.T, req Request, wm tiers.Watermarks) Plan {
	t.Helper()
	plan, err := Route(req, now, tiers.DefaultPyramid(), wm)
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
		{"1 minute", lastN(tiers.Minute), raw, 0},
		{"6h exactly", lastN(6 * tiers.Hour), raw, 0},
		{"6h and 1ms", lastN(6*tiers.Hour + ms), minute, tiers.Minute},
		{"7d exactly", lastN(7 * tiers.Day), minute, tiers.Minute},
		{"7d and 1ms", lastN(7*tiers.Day + ms), hour, tiers.Hour},
		{"90d exactly", lastN(90 * tiers.Day), hour, tiers.Hour},
		{"90d and 1ms", lastN(90*tiers.Day + ms), day, tiers.Day},
		{"10 years", lastN(3650 * tiers.Day), day, tiers.Day},
		// Retention edges: raw keeps 7d, minute 30d, hour 365d.
		{"5h starting exactly 7d ago", tiers.Span{From: now - 7*tiers.Day, To: now - 7*tiers.Day + 5*tiers.Hour}, raw, 0},
		{"5h starting 7d and 1ms ago", tiers.Span{From: now - 7*tiers.Day - ms, To: now - 7*tiers.Day + 5*tiers.Hour}, minute, tiers.Minute},
		{"2d starting 31d ago", tiers.Span{From: now - 31*tiers.Day, To: now - 29*tiers.Day}, hour, tiers.Hour},
		{"5h starting 31d ago climbs two tiers", tiers.Span{From: now - 31*tiers.Day, To: now - 31*tiers.Day + 5*tiers.Hour}, hour, tiers.Hour},
		{"30d starting 2y ago", tiers.Span{From: now - 730*tiers.Day, To: now - 700*tiers.Day}, day, tiers.Day},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := route(t, Request{Span: c.span}, noLag)
			if plan.Tier != c.tier || plan.Step != c.step {
				t.Fatalf("got %d step %d, want %d step %d (%s)", plan.Tier, plan.Step, c.tier, c.step, plan.Reason)
			}
			if len(plan.Warnings) != 0 {
				t.Fatalf("auto produced warnings %v", plan.Warnings)
			}
			p := tiers.DefaultPyramid()
			if !p.Tier(plan.Tier).Covers(plan.Read.From, now) {
				t.Fatalf("auto picked %d, which does not keep %d", plan.Tier, plan.Read.From)
			}
		})
	}
}

func TestExplicitResolution(t *testing.T) {
	cases := []struct {
		window int64
		tier   tiers.Level
	}{
		{tiers.Second, raw},
		{1500, raw},
		{90 * tiers.Second, raw},
		{tiers.Minute, minute},
		{5 * tiers.Minute, minute},
		{90 * tiers.Minute, minute},
		{tiers.Hour, hour},
		{36 * tiers.Hour, hour},
		{tiers.Day, day},
		{7 * tiers.Day, day},
	}
	for _, c := range cases {
		plan := route(t, Request{Span: lastN(tiers.Day), Resolution: Resolution{Kind: Window, Window: c.window}}, noLag)
		if plan.Tier != c.tier || plan.Step != c.window {
			t.Errorf("window %d: got %d step %d, want %d", c.window, plan.Tier, plan.Step, c.tier)
		}
		if plan.Read.From%c.window != 0 || plan.Read.To%c.window != 0 {
			t.Errorf("window %d: read %+v is not aligned to whole windows", c.window, plan.Read)
		}
		if plan.Read.From < now-tiers.Day || plan.Read.From-c.window >= now-tiers.Day {
			t.Errorf("window %d: read starts at %d, want the first window start >= from", c.window, plan.Read.From)
		}
	}
	p := tiers.DefaultPyramid()
	if _, err := Route(Request{Span: lastN(tiers.Day), Resolution: Resolution{Kind: Window, Window: 999}}, now, p, noLag); err == nil {
		t.Fatal("a window under 1s was accepted")
	}
}

func TestExplicitResolutionWarnsBeyondRetention(t *testing.T) {
	plan := route(t, Request{Span: lastN(40 * tiers.Day), Resolution: Resolution{Kind: Window, Window: tiers.Minute}}, noLag)
	if plan.Tier != minute {
		t.Fatalf("explicit 1m went to %d", plan.Tier)
	}
	want := "minute tier keeps 30d; no points before 1765895842123"
	if !slices.Equal(plan.Warnings, []string{want}) {
		t.Fatalf("warnings = %q, want %q", plan.Warnings, want)
	}
	plan = route(t, Request{Span: lastN(7 * tiers.Day), Resolution: Resolution{Kind: RawPoints}}, noLag)
	if len(plan.Warnings) != 0 {
		t.Fatalf("raw over exactly its retention warned: %v", plan.Warnings)
	}
	// A range resolved a moment before the router's clock does not warn
	// about that moment.
	plan = route(t, Request{Span: lastN(7*tiers.Day + 1), Resolution: Resolution{Kind: RawPoints}}, noLag)
	if len(plan.Warnings) != 0 {
		t.Fatalf("raw 1ms beyond its retention warned: %v", plan.Warnings)
	}
	plan = route(t, Request{Span: lastN(7*tiers.Day + tiers.Minute + 1), Resolution: Resolution{Kind: RawPoints}}, noLag)
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
		{"need under 1s rounds up to 1s", tiers.Minute, 1000, raw, tiers.Second},
		{"need 1.001s rounds up to 2s", 1001 * 1000, 1000, raw, 2 * tiers.Second},
		{"need 11s rounds up to 15s", 11 * tiers.Second * 1000, 1000, raw, 15 * tiers.Second},
		{"need 59.999s is 1m, from the minute tier", 59999 * 1000, 1000, minute, tiers.Minute},
		{"need exactly 1m", tiers.Minute * 1000, 1000, minute, tiers.Minute},
		{"need 1m and 1ms", (tiers.Minute + 1) * 1000, 1000, minute, 2 * tiers.Minute},
		{"need 29m is 30m, never 29m", 29 * tiers.Minute * 100, 100, minute, 30 * tiers.Minute},
		{"need 38m is 1h", 38 * tiers.Minute * 100, 100, hour, tiers.Hour},
		{"need just under 1h", (tiers.Hour - 1) * 100, 100, hour, tiers.Hour},
		{"need exactly 1h", tiers.Hour * 100, 100, hour, tiers.Hour},
		{"need 4h is 6h", 4 * tiers.Hour * 10, 10, hour, 6 * tiers.Hour},
		{"need 1d", tiers.Day * 50, 50, day, tiers.Day},
		{"need 2.5d is 7d", 5 * tiers.Day, 2, day, 7 * tiers.Day},
		{"need 8d is 14d", 16 * tiers.Day, 2, day, 14 * tiers.Day},
		{"one point", tiers.Hour, 1, hour, tiers.Hour},
		{"grafana 6h over 1920px", 6 * tiers.Hour, 1920, raw, 15 * tiers.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := route(t, Request{Span: tiers.Span{From: now - c.length, To: now}, MaxPoints: c.max}, noLag)
			if plan.Tier != c.tier || plan.Step != c.window {
				t.Fatalf("got %d at %d, want %d at %d (%s)", plan.Tier, plan.Step, c.tier, c.window, plan.Reason)
			}
		})
	}
	// Grafana's interval is a floor for the window.
	plan := route(t, Request{Span: lastN(tiers.Hour), MaxPoints: 1000, MinWindow: 20 * tiers.Second}, noLag)
	if plan.Step != 30*tiers.Second {
		t.Fatalf("interval 20s: window %d", plan.Step)
	}
	// Retention moves the read to a coarser tier and the window to a
	// ladder step that is a multiple of its step: 10 minutes a month ago
	// needs 1s windows, which raw and minute no longer keep.
	plan = route(t, Request{Span: tiers.Span{From: now - 40*tiers.Day, To: now - 40*tiers.Day + 10*tiers.Minute}, MaxPoints: 600}, noLag)
	if plan.Tier != hour || plan.Step != tiers.Hour {
		t.Fatalf("old range: %d at %d (%s)", plan.Tier, plan.Step, plan.Reason)
	}
	// With whole first windows, the window holding from is read whole.
	plan = route(t, Request{Span: tiers.Span{From: now - tiers.Day, To: now}, MaxPoints: 24, WholeFirstWindow: true}, noLag)
	if plan.Read.From != tiers.AlignDown(now-tiers.Day, tiers.Hour) {
		t.Fatalf("whole first window: read %+v", plan.Read)
	}
}

func TestRoundStep(t *testing.T) {
	for _, c := range []struct{ need, unit, want int64 }{
		{1, 1, tiers.Second},
		{tiers.Second, 1, tiers.Second},
		{3 * tiers.Second, 1, 5 * tiers.Second},
		{3 * tiers.Second, 10 * tiers.Second, 10 * tiers.Second},
		{tiers.Second, tiers.Hour, tiers.Hour},
		{13 * tiers.Hour, 1, tiers.Day},
		{3 * tiers.Day, 1, tiers.Week},
		{tiers.Week + 1, 1, 2 * tiers.Week},
		{tiers.Minute, 90 * tiers.Second, 15 * tiers.Minute},
		{tiers.Second, 7 * tiers.Second, tiers.Week},
	} {
		if got := RoundStep(c.need, c.unit); got != c.want {
			t.Errorf("RoundStep(%d, %d) = %d, want %d", c.need, c.unit, got, c.want)
		}
	}
}

// For random ranges and max_points: at most max_points windows start in the
// range, the window is the smallest ladder step >= range/max_points that the
// tier's step divides, and the tier is the coarsest whose step divides it
// among those that keep the range start.
func TestMaxPointsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, p := range []tiers.Pyramid{tiers.DefaultPyramid(), storetest.FiveTiers()} {
		for range 20000 {
			length := 1 + r.Int64N(400*tiers.Day)
			to := now - r.Int64N(tiers.Day)
			span := tiers.Span{From: to - length, To: to}
			maxPoints := 1 + r.Int64N(5000)
			plan, err := Route(Request{Span: span, MaxPoints: maxPoints}, now, p, noLag[:0])
			if err != nil {
				t.Fatal(err)
			}
			w := plan.Step
			windows := (plan.Read.To - plan.Read.From) / w
			if windows > maxPoints {
				t.Fatalf("span %+v max %d: %d windows of %d", span, maxPoints, windows, w)
			}
			need := (length + maxPoints - 1) / maxPoints
			unit := max(p[plan.Tier].Step, 1)
			if w%unit != 0 || w != RoundStep(need, unit) {
				t.Fatalf("span %+v max %d: window %d on tier %d is not the round step >= %d", span, maxPoints, w, plan.Tier, need)
			}
			if plan.Tier < p.Coarsest() && w%p[plan.Tier+1].Step == 0 {
				t.Fatalf("span %+v max %d: tier %d chosen though tier %d divides %d", span, maxPoints, plan.Tier, plan.Tier+1, w)
			}
			if !p[plan.Tier].Covers(plan.Read.From, now) {
				t.Fatalf("tier %d does not keep the range start", plan.Tier)
			}
		}
	}
}

// On a configured pyramid the same rules pick the configured tiers: auto
// by each tier's threshold, windows by the coarsest step that divides them.
func TestFiveTierPyramid(t *testing.T) {
	p := storetest.FiveTiers()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  Request
		tier string
		step int64
	}{
		{Request{Span: lastN(tiers.Hour)}, "raw", 0},
		{Request{Span: lastN(2 * tiers.Hour)}, "10s", 10 * tiers.Second},
		{Request{Span: lastN(tiers.Day)}, "10s", 10 * tiers.Second},
		{Request{Span: lastN(2 * tiers.Day)}, "minute", tiers.Minute},
		{Request{Span: lastN(100 * tiers.Day)}, "day", tiers.Day},
		{Request{Span: lastN(tiers.Hour), Resolution: Resolution{Kind: Window, Window: 30 * tiers.Second}}, "10s", 30 * tiers.Second},
		{Request{Span: lastN(tiers.Hour), Resolution: Resolution{Kind: Window, Window: 5 * tiers.Second}}, "raw", 5 * tiers.Second},
		{Request{Span: lastN(tiers.Hour), MaxPoints: 200}, "10s", 30 * tiers.Second},
		{Request{Span: lastN(tiers.Hour), MaxPoints: 100}, "minute", tiers.Minute},
		// 10s keeps 14 days: a range from 20 days ago climbs to minute.
		{Request{Span: tiers.Span{From: now - 20*tiers.Day, To: now - 20*tiers.Day + 2*tiers.Hour}}, "minute", tiers.Minute},
	} {
		plan, err := Route(c.req, now, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if plan.TierName != c.tier || plan.Step != c.step {
			t.Errorf("%+v: got %s at %d, want %s at %d (%s)", c.req, plan.TierName, plan.Step, c.tier, c.step, plan.Reason)
		}
		for _, s := range plan.Segments {
			if s.TierName != p[s.Tier].Name {
				t.Errorf("segment %+v names the wrong tier", s)
			}
		}
	}
}

func TestStitchFillsRecentWindowsFromFinerTiers(t *testing.T) {
	span := tiers.Span{From: now - 60*tiers.Day, To: now} // hour tier
	wm := tiers.Watermarks{0, tiers.AlignDown(now, tiers.Minute) - 10*tiers.Minute, tiers.AlignDown(now, tiers.Hour) - 2*tiers.Hour, 0}
	plan := route(t, Request{Span: span}, wm)
	if plan.Tier != hour {
		t.Fatalf("tier %d", plan.Tier)
	}
	want := []Segment{
		{Span: tiers.Span{From: plan.Read.From, To: wm[hour]}, Tier: hour, TierName: "hour"},
		{Span: tiers.Span{From: wm[hour], To: wm[minute]}, Tier: minute, TierName: "minute"},
		{Span: tiers.Span{From: wm[minute], To: plan.Read.To}, Tier: raw, TierName: "raw"},
	}
	if !slices.Equal(plan.Segments, want) {
		t.Fatalf("segments\n got %+v\nwant %+v", plan.Segments, want)
	}
	// A coarser tier ahead of a finer one is clamped to it.
	wm[hour] = tiers.MaxTime
	plan = route(t, Request{Span: span}, wm)
	if n := len(plan.Segments); n != 2 || plan.Segments[0].Span.To != wm[minute] || plan.Segments[1].Tier != raw {
		t.Fatalf("segments %+v", plan.Segments)
	}
	// Never rolled up: raw serves everything.
	plan = route(t, Request{Span: span}, tiers.NoWatermarks(tiers.DefaultPyramid()))
	if !slices.Equal(plan.Segments, []Segment{{Span: plan.Read, Tier: raw, TierName: "raw"}}) {
		t.Fatalf("segments %+v", plan.Segments)
	}
	// Segments always partition the read range.
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		wm := tiers.Watermarks{0, now - r.Int64N(90*tiers.Day), now - r.Int64N(90*tiers.Day), now - r.Int64N(400*tiers.Day)}
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

// Requests the engine would have refused are a bug of the caller: the
// router says so rather than plan them.
func TestRouteRefusesUncheckedRequests(t *testing.T) {
	p := tiers.DefaultPyramid()
	for _, req := range []Request{
		{Span: tiers.Span{From: now, To: now}},
		{Span: lastN(tiers.Hour), Resolution: Resolution{Kind: Window, Window: 10}},
		{Span: lastN(tiers.Hour), Resolution: Resolution{Kind: 99}},
	} {
		if _, err := Route(req, now, p, noLag); err == nil {
			t.Errorf("Route(%+v) planned an unchecked request", req)
		}
	}
}
