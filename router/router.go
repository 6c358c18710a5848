// Package router chooses how a read is answered: which tier of the pyramid
// serves it, the window the answer is re-aggregated to, the exact range to
// read, and — when a tier has not rolled up its most recent windows yet —
// which finer tiers fill them in.
//
// Route is a pure function of the request, the clock, the pyramid and the
// rollup watermarks: it does no I/O, so every threshold edge is a table
// test. It knows tiers only as the pyramid describes them, so a configured
// pyramid (a 10s tier, no hour tier) routes by the same rules.
package router

import (
	"fmt"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// ResolutionKind is how the client asked for the resolution.
type ResolutionKind int

const (
	// Auto lets the router pick the tier from the range (and MaxPoints).
	Auto ResolutionKind = iota
	// RawPoints asks for the stored points themselves.
	RawPoints
	// Window asks for aggregates over windows of a given width.
	Window
)

// Resolution is the resolution parameter: auto, raw, or a window width.
type Resolution struct {
	Kind   ResolutionKind
	Window int64 // ms, for Kind == Window
}

// ParseResolution reads the resolution parameter: auto (or empty), raw, or
// a window duration. Whether a window is wide enough is Route's to say.
func ParseResolution(s string) (Resolution, error) {
	switch s {
	case "", "auto":
		return Resolution{Kind: Auto}, nil
	case "raw":
		return Resolution{Kind: RawPoints}, nil
	}
	d, err := params.Duration(s)
	if err != nil {
		return Resolution{}, fmt.Errorf("must be auto, raw or a window duration like 5m: %v", err)
	}
	return Resolution{Kind: Window, Window: d}, nil
}

// MinWindow is the narrowest window a client may ask for.
const MinWindow = tiers.Second

// Request is what the router needs to know of a read.
type Request struct {
	Span       tiers.Span // [from, to) as the client gave it
	Resolution Resolution
	// MaxPoints bounds the number of windows of an auto answer; 0 means no
	// bound.
	MaxPoints int64
	// MinWindow is the narrowest window an auto answer with MaxPoints may
	// have (Grafana's intervalMs); 0 means none.
	MinWindow int64
	// WholeFirstWindow includes the window that holds Span.From, whole, in
	// an aggregated answer, so that a chart has no gap at its left edge; by
	// default only windows that start in the range are returned.
	WholeFirstWindow bool
}

// Segment is a part of the read range and the tier that serves it.
type Segment struct {
	Span     tiers.Span
	Tier     tiers.Level
	TierName string
}

// Plan is the router's answer.
type Plan struct {
	// Tier is the tier chosen for the answer; parts of Read may be served by
	// finer tiers (see Segments).
	Tier     tiers.Level
	TierName string
	// Step is the width of the answer's windows, or 0 for raw points.
	Step int64
	// Read is the range whose rows make up the answer. For raw points it is
	// the request's range; for windows it is the windows whose start lies
	// in [from, to) (and the one holding from, with WholeFirstWindow), each
	// whole.
	Read tiers.Span
	// Segments partition Read, in ascending time order.
	Segments []Segment
	// Reason explains the choice in a sentence fragment, for /plan.
	Reason string
	// Warnings are shown to the client with the answer.
	Warnings []string
}

// Ladder is the sequence of round window widths that max_points chooses
// from, so that windows fall on clock boundaries a person expects (30m,
// never 29m). Past its end come whole multiples of a week.
var Ladder = []int64{
	1 * tiers.Second, 2 * tiers.Second, 5 * tiers.Second, 10 * tiers.Second, 15 * tiers.Second, 30 * tiers.Second,
	tiers.Minute, 2 * tiers.Minute, 5 * tiers.Minute, 10 * tiers.Minute, 15 * tiers.Minute, 30 * tiers.Minute,
	tiers.Hour, 2 * tiers.Hour, 3 * tiers.Hour, 6 * tiers.Hour, 12 * tiers.Hour,
	tiers.Day, 2 * tiers.Day, tiers.Week,
}

// RoundStep returns the smallest step of the ladder (or whole number of
// weeks past it) that is at least need and a whole multiple of unit
// (unit > 0). Every unit divides some number of weeks, so there always is
// one.
func RoundStep(need, unit int64) int64 {
	for _, s := range Ladder {
		if s >= need && s%unit == 0 {
			return s
		}
	}
	weeks := max(1, (need+tiers.Week-1)/tiers.Week)
	for w := weeks; ; w++ {
		if s := w * tiers.Week; s%unit == 0 {
			return s
		}
	}
}

// w is the window of an explicit resolution, else 0.
func w(req Request) int64 {
	if req.Resolution.Kind == Window {
		return req.Resolution.Window
	}
	return 0
}

// Route plans a read at time now. The request is checked already (the
// engine normalises every request once, query.Request): a non-empty span,
// a window of at least MinWindow, MaxPoints only with Auto and within
// query's bound. The error is for a request that breaks them: a bug.
func Route(req Request, now int64, p tiers.Pyramid, wm tiers.Watermarks) (Plan, error) {
	span := req.Span
	var plan Plan
	switch req.Resolution.Kind {
	case RawPoints:
		plan = Plan{Tier: tiers.LevelRaw, Reason: "resolution raw: raw points"}
	case Window:
		w := req.Resolution.Window
		level := servingTier(p, w)
		plan = Plan{Tier: level, Step: w}
		if level == tiers.LevelRaw {
			plan.Reason = fmt.Sprintf("resolution %s: no rollup step divides it, raw points aggregated", fmtDur(w))
		} else {
			plan.Reason = fmt.Sprintf("resolution %s: %s tier (step %s divides it)", fmtDur(w), p[level].Name, fmtDur(p[level].Step))
		}
	case Auto:
		if req.MaxPoints > 0 {
			plan = routeMaxPoints(req, now, p)
		} else {
			plan = routeAuto(req, now, p)
		}
	default:
		return Plan{}, fmt.Errorf("router: unknown resolution kind %d", req.Resolution.Kind)
	}
	if span.Empty() || (w(req) > 0 && w(req) < MinWindow) {
		return Plan{}, fmt.Errorf("router: an unchecked request %+v", req)
	}
	plan.TierName = p[plan.Tier].Name
	plan.Read = readSpan(span, plan.Step, req.WholeFirstWindow)
	if req.Resolution.Kind != Auto {
		plan.warnRetention(p, plan.Read.From, now)
	}
	plan.Segments = stitch(plan.Read, plan.Tier, p, wm)
	return plan, nil
}

// Resume rebuilds the plan of a paged read from the tier and step its first
// page chose, so that later pages cannot switch tiers as the clock moves;
// only the stitching follows the current watermarks.
func Resume(req Request, level tiers.Level, step int64, now int64, p tiers.Pyramid, wm tiers.Watermarks) Plan {
	plan := Plan{Tier: level, TierName: p[level].Name, Step: step, Reason: "continues the plan of the first page"}
	plan.Read = readSpan(req.Span, step, req.WholeFirstWindow)
	plan.warnRetention(p, plan.Read.From, now)
	plan.Segments = stitch(plan.Read, level, p, wm)
	return plan
}

// readSpan is the range whose rows make up an answer over span: span
// itself for raw points, whole windows otherwise.
func readSpan(span tiers.Span, step int64, wholeFirst bool) tiers.Span {
	if step == 0 {
		return span
	}
	from := tiers.AlignUp(span.From, step)
	if wholeFirst {
		from = tiers.AlignDown(span.From, step)
	}
	return tiers.Span{From: from, To: tiers.AlignUp(span.To, step)}
}

// servingTier is the coarsest tier whose step divides w, or raw when none
// does.
func servingTier(p tiers.Pyramid, w int64) tiers.Level {
	for l := p.Coarsest(); l > tiers.LevelRaw; l-- {
		if w%p[l].Step == 0 {
			return l
		}
	}
	return tiers.LevelRaw
}

// routeAuto applies the range thresholds, stepping up to a coarser tier
// while the chosen one no longer keeps the start of the range.
func routeAuto(req Request, now int64, p tiers.Pyramid) Plan {
	length := req.Span.To - req.Span.From
	level := p.Coarsest()
	reason := ""
	for l := range p.Levels() {
		if lv := tiers.Level(l); lv < p.Coarsest() && length <= p[lv].AutoMax {
			level = lv
			reason = fmt.Sprintf("range %s <= %s: %s", fmtDur(length), fmtDur(p[lv].AutoMax), tierPhrase(p, lv))
			break
		}
	}
	if reason == "" {
		reason = fmt.Sprintf("range %s: %s", fmtDur(length), tierPhrase(p, level))
		if level > 0 {
			reason = fmt.Sprintf("range %s > %s: %s", fmtDur(length), fmtDur(p[level-1].AutoMax), tierPhrase(p, level))
		}
	}
	for level < p.Coarsest() && !p[level].Covers(readSpan(req.Span, p[level].Step, req.WholeFirstWindow).From, now) {
		reason += fmt.Sprintf("; %s tier keeps %s, not back to the range start: %s", p[level].Name, fmtDur(p[level].Retention), tierPhrase(p, level+1))
		level++
	}
	return Plan{Tier: level, Step: p[level].Step, Reason: reason}
}

func tierPhrase(p tiers.Pyramid, l tiers.Level) string {
	if l == tiers.LevelRaw {
		return "raw points"
	}
	return p[l].Name + " tier"
}

// routeMaxPoints picks the window: need = max(range/maxPoints, MinWindow),
// rounded up to the ladder's next step, read from the coarsest tier whose
// step divides it. A tier that no longer keeps the range start gives way
// to the next coarser one, and the window to the smallest ladder step that
// is a multiple of that tier's step.
func routeMaxPoints(req Request, now int64, p tiers.Pyramid) Plan {
	span := req.Span
	length := span.To - span.From
	need := max((length+req.MaxPoints-1)/req.MaxPoints, req.MinWindow, 1) // ceil: windows >= need are few enough
	window := RoundStep(need, 1)
	level := servingTier(p, window)
	reason := fmt.Sprintf("max_points %d over %s: windows of at least %s", req.MaxPoints, fmtDur(length), fmtDur(need))
	if req.MinWindow > 0 && req.MinWindow >= need {
		reason = fmt.Sprintf("max_points %d over %s, interval %s: windows of at least %s", req.MaxPoints, fmtDur(length), fmtDur(req.MinWindow), fmtDur(need))
	}
	for level < p.Coarsest() && !p[level].Covers(readSpan(span, window, req.WholeFirstWindow).From, now) {
		reason += fmt.Sprintf("; %s tier keeps %s, not back to the range start", p[level].Name, fmtDur(p[level].Retention))
		level++
		window = RoundStep(need, p[level].Step)
		level = servingTier(p, window)
	}
	reason += fmt.Sprintf(": %s at %s", tierPhrase(p, level), fmtDur(window))
	return Plan{Tier: level, Step: window, Reason: reason}
}

// retentionSlack is how far before a tier's oldest row a range may start
// without a warning: a range like now-7d resolved a few milliseconds
// before the router's clock must not warn about the milliseconds between.
const retentionSlack = tiers.Minute

// warnRetention notes when an explicitly chosen tier no longer keeps the
// start of the range.
func (plan *Plan) warnRetention(p tiers.Pyramid, from, now int64) {
	t := p[plan.Tier]
	if t.Covers(from+retentionSlack, now) {
		return
	}
	plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s tier keeps %s; no points before %d",
		t.Name, fmtDur(t.Retention), t.OldestAvailable(now)))
}

// stitch splits read between the chosen tier and the finer tiers that hold
// the windows it has not rolled up yet: the chosen tier serves up to its
// watermark, the next finer tier up to its own, and raw points the rest.
func stitch(read tiers.Span, level tiers.Level, p tiers.Pyramid, wm tiers.Watermarks) []Segment {
	if read.Empty() {
		return nil
	}
	var segs []Segment
	from := read.From
	// A coarser tier is never more complete than a finer one: it is computed
	// from it.
	limit := tiers.MaxTime
	marks := make([]int64, level+1)
	for l := tiers.LevelRaw; l <= level; l++ {
		if l > tiers.LevelRaw && int(l) < len(wm) {
			limit = min(limit, wm[l])
		} else if l > tiers.LevelRaw {
			limit = tiers.MinTime
		}
		marks[l] = limit
	}
	for l := level; l >= tiers.LevelRaw && from < read.To; l-- {
		end := min(read.To, marks[l])
		if l == tiers.LevelRaw {
			end = read.To
		}
		if end > from {
			segs = append(segs, Segment{Span: tiers.Span{From: from, To: end}, Tier: l, TierName: p[l].Name})
			from = end
		}
	}
	return segs
}

func fmtDur(ms int64) string { return tiers.FormatDuration(ms) }

// ServingTier is the tier that serves windows of width w: the coarsest
// whose step divides it, raw points when none does. Front ends that fold
// windows themselves ask it which tier a width reads.
func ServingTier(p tiers.Pyramid, w int64) tiers.Level { return servingTier(p, w) }
