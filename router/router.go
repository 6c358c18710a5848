// Package router chooses how a read is answered: which tier of the pyramid
// serves it, the window the answer is re-aggregated to, the exact range to
// read, and — when a tier has not rolled up its most recent windows yet —
// which finer tier fills them in.
//
// Route is a pure function of the request, the clock, the tier
// configuration and the rollup watermarks: it does no I/O, so every
// threshold edge is a table test.
package router

import (
	"errors"
	"fmt"

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

// MinWindow is the narrowest window a client may ask for.
const MinWindow = tiers.Second

// Request is what the router needs to know of a read.
type Request struct {
	Span       tiers.Span // [from, to) as the client gave it
	Resolution Resolution
	// MaxPoints bounds the number of windows of an auto answer; 0 means no
	// bound.
	MaxPoints int64
}

// Config holds the auto thresholds: a range up to RawMax is answered with
// raw points, up to MinuteMax from the minute tier, up to HourMax from the
// hour tier, and anything longer from the day tier.
type Config struct {
	RawMax    int64
	MinuteMax int64
	HourMax   int64
}

// DefaultConfig returns the thresholds of the design: 6 h, 7 d, 90 d.
func DefaultConfig() Config {
	return Config{RawMax: 6 * tiers.Hour, MinuteMax: 7 * tiers.Day, HourMax: 90 * tiers.Day}
}

// Validate checks that the thresholds increase.
func (c Config) Validate() error {
	if c.RawMax <= 0 || c.MinuteMax <= c.RawMax || c.HourMax <= c.MinuteMax {
		return errors.New("auto thresholds must increase: raw < minute < hour")
	}
	return nil
}

// Watermarks holds, per tier, the time before which the tier holds every
// window: rollups have run for everything that starts earlier. The raw tier's
// watermark is ignored (raw points are always current).
type Watermarks [4]int64

// Segment is a part of the read range and the tier that serves it.
type Segment struct {
	Span tiers.Span
	Tier tiers.Level
}

// Plan is the router's answer.
type Plan struct {
	// Tier is the tier chosen for the answer; parts of Read may be served by
	// finer tiers (see Segments).
	Tier tiers.Level
	// Step is the width of the answer's windows, or 0 for raw points.
	Step int64
	// Read is the range whose rows make up the answer. For raw points it is
	// the request's range; for windows it is [from, to) widened to whole
	// windows: the windows whose start lies in [from, to), each whole.
	Read tiers.Span
	// Segments partition Read, in ascending time order.
	Segments []Segment
	// Reason explains the choice in a sentence fragment, for /plan.
	Reason string
	// Warnings are shown to the client with the answer.
	Warnings []string
}

// Error is a request the router cannot plan; Param names the parameter to
// fix.
type Error struct {
	Param, Message string
}

func (e *Error) Error() string { return e.Param + ": " + e.Message }

// Route plans a read at time now.
func Route(req Request, now int64, p *tiers.Pyramid, cfg Config, wm Watermarks) (Plan, error) {
	span := req.Span
	if span.Empty() {
		return Plan{}, &Error{Param: "from", Message: "from must be before to"}
	}
	if req.MaxPoints < 0 {
		return Plan{}, &Error{Param: "max_points", Message: "must be at least 1"}
	}
	if req.MaxPoints > 0 && req.Resolution.Kind != Auto {
		return Plan{}, &Error{Param: "max_points", Message: "applies only to resolution=auto"}
	}
	length := span.To - span.From
	var plan Plan
	switch req.Resolution.Kind {
	case RawPoints:
		plan = Plan{Tier: tiers.LevelRaw, Reason: "resolution raw: raw points"}
		plan.warnRetention(p, span.From, now)
	case Window:
		w := req.Resolution.Window
		if w < MinWindow {
			return Plan{}, &Error{Param: "resolution", Message: "a window must be at least 1s"}
		}
		level := tiers.LevelRaw
		for _, l := range []tiers.Level{tiers.LevelDay, tiers.LevelHour, tiers.LevelMinute} {
			if w%p.Tier(l).Step == 0 {
				level = l
				break
			}
		}
		plan = Plan{Tier: level, Step: w}
		if level == tiers.LevelRaw {
			plan.Reason = fmt.Sprintf("resolution %s: no rollup step divides it, raw points aggregated", fmtDur(w))
		} else {
			plan.Reason = fmt.Sprintf("resolution %s: %s tier (step %s divides it)", fmtDur(w), level, fmtDur(p.Tier(level).Step))
		}
		plan.Read = tiers.Span{From: tiers.AlignUp(span.From, w), To: tiers.AlignUp(span.To, w)}
		plan.warnRetention(p, plan.Read.From, now)
	case Auto:
		if req.MaxPoints > 0 {
			plan = routeMaxPoints(span, req.MaxPoints, now, p)
		} else {
			plan = routeAuto(span, length, now, p, cfg)
		}
	default:
		return Plan{}, &Error{Param: "resolution", Message: "unknown resolution"}
	}
	if plan.Step == 0 {
		plan.Read = span
	}
	plan.Segments = stitch(plan.Read, plan.Tier, p, wm)
	return plan, nil
}

// Resume rebuilds the plan of a paged read from the tier and step its first
// page chose, so that later pages cannot switch tiers as the clock moves;
// only the stitching follows the current watermarks.
func Resume(span tiers.Span, level tiers.Level, step int64, now int64, p *tiers.Pyramid, wm Watermarks) Plan {
	plan := Plan{Tier: level, Step: step, Read: span, Reason: "continues the plan of the first page"}
	if step > 0 {
		plan.Read = tiers.Span{From: tiers.AlignUp(span.From, step), To: tiers.AlignUp(span.To, step)}
	}
	plan.warnRetention(p, plan.Read.From, now)
	plan.Segments = stitch(plan.Read, level, p, wm)
	return plan
}

// routeAuto applies the range thresholds, stepping up to a coarser tier
// while the chosen one no longer keeps the start of the range.
func routeAuto(span tiers.Span, length, now int64, p *tiers.Pyramid, cfg Config) Plan {
	var level tiers.Level
	var reason string
	switch {
	case length <= cfg.RawMax:
		level, reason = tiers.LevelRaw, fmt.Sprintf("range %s <= %s: raw points", fmtDur(length), fmtDur(cfg.RawMax))
	case length <= cfg.MinuteMax:
		level, reason = tiers.LevelMinute, fmt.Sprintf("range %s <= %s: minute tier", fmtDur(length), fmtDur(cfg.MinuteMax))
	case length <= cfg.HourMax:
		level, reason = tiers.LevelHour, fmt.Sprintf("range %s <= %s: hour tier", fmtDur(length), fmtDur(cfg.HourMax))
	default:
		level, reason = tiers.LevelDay, fmt.Sprintf("range %s > %s: day tier", fmtDur(length), fmtDur(cfg.HourMax))
	}
	step := p.Tier(level).Step
	for level < tiers.LevelDay {
		t := p.Tier(level)
		from := span.From
		if t.Step > 0 {
			from = tiers.AlignUp(span.From, t.Step)
		}
		if t.Covers(from, now) {
			break
		}
		next := p.Tier(level + 1)
		reason += fmt.Sprintf("; %s tier keeps %s, not back to the range start: %s tier", level, fmtDur(t.Retention), next.Level)
		level, step = next.Level, next.Step
	}
	plan := Plan{Tier: level, Step: step, Reason: reason}
	if step > 0 {
		plan.Read = tiers.Span{From: tiers.AlignUp(span.From, step), To: tiers.AlignUp(span.To, step)}
	}
	return plan
}

// routeMaxPoints picks the coarsest tier whose step is at most
// need = range/maxPoints, and the smallest window >= need that is a whole
// number of that step (of 1s for raw), so that at most maxPoints windows
// start in the range. A tier that no longer keeps the range start gives way
// to the next coarser one.
func routeMaxPoints(span tiers.Span, maxPoints, now int64, p *tiers.Pyramid) Plan {
	length := span.To - span.From
	need := (length + maxPoints - 1) / maxPoints // ceil: windows >= need are few enough
	level := tiers.LevelRaw
	for _, l := range []tiers.Level{tiers.LevelDay, tiers.LevelHour, tiers.LevelMinute} {
		if p.Tier(l).Step <= need {
			level = l
			break
		}
	}
	reason := fmt.Sprintf("max_points %d over %s: windows of at least %s", maxPoints, fmtDur(length), fmtDur(need))
	var window int64
	for {
		unit := p.Tier(level).Step
		if level == tiers.LevelRaw {
			unit = tiers.Second
		}
		window = max(unit, (need+unit-1)/unit*unit)
		from := tiers.AlignUp(span.From, window)
		if level == tiers.LevelDay || p.Tier(level).Covers(from, now) {
			break
		}
		reason += fmt.Sprintf("; %s tier keeps %s, not back to the range start", level, fmtDur(p.Tier(level).Retention))
		level++
	}
	reason += fmt.Sprintf(": %s tier at %s", level, fmtDur(window))
	return Plan{
		Tier: level, Step: window, Reason: reason,
		Read: tiers.Span{From: tiers.AlignUp(span.From, window), To: tiers.AlignUp(span.To, window)},
	}
}

// warnRetention notes when an explicitly chosen tier no longer keeps the
// start of the range.
func (plan *Plan) warnRetention(p *tiers.Pyramid, from, now int64) {
	t := p.Tier(plan.Tier)
	if t.Covers(from, now) {
		return
	}
	plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s tier keeps %s; no points before %d",
		t.Level, fmtDur(t.Retention), t.OldestAvailable(now)))
}

// stitch splits read between the chosen tier and the finer tiers that hold
// the windows it has not rolled up yet: the chosen tier serves up to its
// watermark, the next finer tier up to its own, and raw points the rest.
func stitch(read tiers.Span, level tiers.Level, p *tiers.Pyramid, wm Watermarks) []Segment {
	if read.Empty() {
		return nil
	}
	var segs []Segment
	from := read.From
	// A coarser tier is never more complete than a finer one: it is computed
	// from it.
	limit := int64(tiers.MaxTime)
	marks := make([]int64, level+1)
	for l := tiers.LevelRaw; l <= level; l++ {
		if l > tiers.LevelRaw {
			limit = min(limit, wm[l])
		}
		marks[l] = limit
	}
	for l := level; l >= tiers.LevelRaw && from < read.To; l-- {
		end := min(read.To, marks[l])
		if l == tiers.LevelRaw {
			end = read.To
		}
		if end > from {
			segs = append(segs, Segment{Span: tiers.Span{From: from, To: end}, Tier: l})
			from = end
		}
	}
	return segs
}

func fmtDur(ms int64) string { return tiers.FormatDuration(ms) }
