package grafana

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

// ruleWindow is the max_points rule of the API, written from its text:
// the smallest round step of the ladder that is at least need, read from
// the coarsest tier whose step divides it; while that tier no longer keeps
// the start of the range (here the start of its first whole window), the
// next coarser tier, and the smallest ladder step that is a multiple of its
// step.
func ruleWindow(need int64, span tiers.Span, now int64, p tiers.Pyramid) (tiers.Level, int64) {
	ladder := []int64{tiers.Second, 2 * tiers.Second, 5 * tiers.Second, 10 * tiers.Second, 15 * tiers.Second, 30 * tiers.Second,
		tiers.Minute, 2 * tiers.Minute, 5 * tiers.Minute, 10 * tiers.Minute, 15 * tiers.Minute, 30 * tiers.Minute,
		tiers.Hour, 2 * tiers.Hour, 3 * tiers.Hour, 6 * tiers.Hour, 12 * tiers.Hour, tiers.Day, 2 * tiers.Day}
	for w := int64(1); w < 1000; w++ {
		ladder = append(ladder, w*7*tiers.Day)
	}
	step := func(unit int64) int64 {
		for _, s := range ladder {
			if s >= need && s%unit == 0 {
				return s
			}
		}
		panic("beyond the ladder")
	}
	divides := func(w int64) tiers.Level {
		l := tiers.LevelRaw
		for i := 1; i < len(p); i++ {
			if w%p[i].Step == 0 {
				l = tiers.Level(i)
			}
		}
		return l
	}
	w := step(1)
	level := divides(w)
	for int(level) < len(p)-1 && !p[level].Covers(tiers.AlignDown(span.From, w), now) {
		level++
		w = step(p[level].Step)
		level = divides(w)
	}
	return level, w
}

// Grafana's hints go through the router's max_points rule, with the
// interval as the narrowest window: for any range and need, the tier and
// window the router picks are the rule's.
func TestGrafanaHintsFollowTheRule(t *testing.T) {
	p := tiers.DefaultPyramid()
	now := int64(1_800_000_000_000)
	r := rand.New(rand.NewPCG(3, 4))
	logUniform := func(lo, hi float64) int64 {
		return int64(math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))))
	}
	for range 200_000 {
		length := max(1, logUniform(1, float64(400*tiers.Day)))
		ago := r.Int64N(400 * tiers.Day)
		if r.IntN(2) == 0 {
			ago = 0
		}
		span := tiers.Span{From: now - ago - length, To: now - ago}
		interval := logUniform(1, float64(3*length))
		maxDataPoints := logUniform(1, 1e7)
		need := max(interval, (length+maxDataPoints-1)/maxDataPoints, 1)
		wantLevel, wantWindow := ruleWindow(need, span, now, p)
		req := router.Request{Span: span, MaxPoints: maxDataPoints, MinWindow: interval, WholeFirstWindow: true}
		plan, err := router.Route(req, now, p, nil)
		if err != nil {
			t.Fatalf("range %d need %d: %v", length, need, err)
		}
		if plan.Step != wantWindow || plan.Tier != wantLevel {
			t.Fatalf("range %d (ending %d ago) interval %d maxDataPoints %d: need %d, router chose %d at %d, the rule %d at %d",
				length, ago, interval, maxDataPoints, need, plan.Tier, plan.Step, wantLevel, wantWindow)
		}
		if plan.Read.From > span.From || plan.Read.From+plan.Step <= span.From {
			t.Fatalf("the window holding the range start is not read whole: read %+v, range %+v", plan.Read, span)
		}
	}
}

// RuleWindow lends the rule to the end-to-end tests.
var RuleWindow = ruleWindow
