package httpapi

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

func TestGrafanaTargetIDs(t *testing.T) {
	cases := []struct {
		target string
		want   []string // nil: an error naming why
		errHas string
	}{
		{"s-42", []string{"s-42"}, ""},
		{`s\.42`, []string{"s.42"}, ""},
		{`s\-42`, []string{"s-42"}, ""},
		{"s.42", []string{"s.42"}, ""}, // typed by hand: a dot is an id character
		{"(s-42|s-43)", []string{"s-42", "s-43"}, ""},
		{`(s-42|s\.44|s-43)`, []string{"s-42", "s.44", "s-43"}, ""},
		{"(s-42)", []string{"s-42"}, ""},
		{"(s-42|s-42)", []string{"s-42"}, ""},
		{`room\.(a|b)\.temp`, []string{"room.a.temp", "room.b.temp"}, ""},
		{"(a|b)-(x|y)", []string{"a-x", "a-y", "b-x", "b-y"}, ""},
		{"s.*", nil, "not a regular expression"},
		{".*", nil, "not a series id"},
		{"s-42|s-43", nil, "inside a group"},
		{"(s-42|s-43", nil, "not closed"},
		{"s-42)", nil, "closes no group"},
		{"((a|b)|c)", nil, "do not nest"},
		{`s-42\`, nil, "lone backslash"},
		{"(a|)", nil, "not a series id"},
		{"s 42", nil, "not a series id"},
		{"(" + strings.Repeat("a|", 100) + "a)", nil, "more than"},
		{"(a|b|c|d|e|f|g|h|i|j|k)(a|b|c|d|e|f|g|h|i|j|k)", nil, "more than"},
	}
	for _, c := range cases {
		got, err := grafanaTargetIDs(c.target, 100)
		switch {
		case c.want == nil && (err == nil || !strings.Contains(err.Error(), c.errHas)):
			t.Errorf("%q: %v, %v; want an error with %q", c.target, got, err, c.errHas)
		case c.want != nil && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%q: %v, %v; want %v", c.target, got, err, c.want)
		}
	}
}

// ruleWindow is the max_points rule of the API, written from its text: the
// coarsest tier whose step is at most need (raw below a minute), the
// smallest multiple of the step (1s for raw) that is at least need, and
// the next coarser tier while the chosen one no longer keeps the start of
// the range.
func ruleWindow(need int64, span tiers.Span, now int64, p *tiers.Pyramid) (tiers.Level, int64) {
	level := tiers.LevelRaw
	switch {
	case need >= tiers.Day:
		level = tiers.LevelDay
	case need >= tiers.Hour:
		level = tiers.LevelHour
	case need >= tiers.Minute:
		level = tiers.LevelMinute
	}
	for {
		unit := p.Tier(level).Step
		if level == tiers.LevelRaw {
			unit = tiers.Second
		}
		w := max(unit, int64(math.Ceil(float64(need)/float64(unit)))*unit)
		if level == tiers.LevelDay || p.Tier(level).Covers(tiers.AlignUp(span.From, w), now) {
			return level, w
		}
		level++
	}
}

// grafanaAuto must lead the router to the rule's tier and window for any
// range and need; where no max_points can, it asks for the window, which
// happens only for ranges of a few windows.
func TestGrafanaAutoMatchesTheRule(t *testing.T) {
	p := tiers.DefaultPyramid()
	now := int64(1_800_000_000_000)
	r := rand.New(rand.NewPCG(3, 4))
	logUniform := func(lo, hi float64) int64 {
		return int64(math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))))
	}
	var fallbacks int
	const n = 200_000
	for range n {
		length := max(1, logUniform(1, float64(400*tiers.Day)))
		ago := r.Int64N(400 * tiers.Day)
		if r.IntN(2) == 0 {
			ago = 0
		}
		span := tiers.Span{From: now - ago - length, To: now - ago}
		interval := logUniform(1, float64(3*length))
		maxDataPoints := logUniform(1, 1e7)
		need := max(interval, (length+maxDataPoints-1)/maxDataPoints, 1)
		wantLevel, wantWindow := ruleWindow(need, span, now, &p)

		maxPoints, window := grafanaAuto(span, interval, maxDataPoints, now, &p)
		req := router.Request{Span: span, Resolution: router.Resolution{Kind: router.Auto}, MaxPoints: maxPoints}
		if maxPoints == 0 {
			fallbacks++
			req.Resolution = router.Resolution{Kind: router.Window, Window: window}
			// The window before any step-up, in units of its tier.
			first, w := ruleWindow(need, tiers.Span{From: now, To: now + 1}, now, &p)
			unit := max(p.Tier(first).Step, tiers.Second)
			if windows := length / w; windows > w/unit+1 {
				t.Errorf("range %d need %d: no max_points although the range holds %d windows of %d", length, need, windows, wantWindow)
			}
		} else if maxPoints > maxDataPoints {
			t.Errorf("range %d need %d: max_points %d above maxDataPoints %d", length, need, maxPoints, maxDataPoints)
		}
		plan, err := router.Route(req, now, &p, router.DefaultConfig(), router.Watermarks{})
		if err != nil {
			t.Fatalf("range %d need %d: %v", length, need, err)
		}
		if plan.Step != wantWindow || (maxPoints > 0 && plan.Tier != wantLevel) {
			t.Fatalf("range %d (ending %d ago) interval %d maxDataPoints %d: need %d, router chose %s at %d (max_points %d, window %d), the rule %s at %d",
				length, ago, interval, maxDataPoints, need, plan.Tier, plan.Step, maxPoints, window, wantLevel, wantWindow)
		}
	}
	t.Logf("%d of %d cases asked for the window explicitly", fallbacks, n)
}

// RuleWindow lends the rule to the end-to-end tests.
var RuleWindow = ruleWindow
